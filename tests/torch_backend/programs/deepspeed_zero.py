"""A DeepSpeed ZeRO program (stage 1 or 2) on the CPU; writes what it learned. Not run in CI.

    mpiexec -n 2 python deepspeed_zero.py OUT mpiflow 2    # ZeRO-2 on the "mpiflow" backend
    mpiexec -n 2 python deepspeed_zero.py OUT mpi 1        # ZeRO-1 on "mpi" (mpiflow's)
    torchrun --standalone --nproc-per-node 2 deepspeed_zero.py OUT gloo 2

DeepSpeed compiles a C++ op the first time it initializes on the CPU (gcc and ninja,
minutes), so this program runs outside CI (docs/torch.md, "Frameworks"). Rank 0 writes
``OUT/result.json``: the loss at each step and the weights after the last.
"""

from __future__ import annotations

import json
import os
import sys

import deepspeed
import torch


def main(out: str, backend: str, stage: str) -> None:
    under_mpi = backend != "gloo"
    deepspeed.init_distributed(dist_backend=backend, auto_mpi_discovery=under_mpi)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    config = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1,
              "zero_optimization": {"stage": int(stage)},
              "zero_allow_untested_optimizer": True,  # torch's SGD: no compiled optimizer
              "optimizer": {"type": "SGD", "params": {"lr": 0.05}}}
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                           config=config)
    rank = torch.distributed.get_rank()
    g = torch.Generator().manual_seed(rank)
    losses = []
    for _ in range(10):
        x = torch.randn(4, 8, generator=g)
        loss = (engine(x) - x.sum(1, keepdim=True)).pow(2).mean()
        engine.backward(loss)
        engine.step()
        total = loss.detach().clone()
        torch.distributed.all_reduce(total)
        losses.append(total.item())
    weights = [p.detach().flatten().tolist() for p in engine.module.parameters()]
    if rank == 0:
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump({"backend": torch.distributed.get_backend(), "losses": losses,
                       "weights": weights}, f)


if __name__ == "__main__":
    main(*sys.argv[1:4])
