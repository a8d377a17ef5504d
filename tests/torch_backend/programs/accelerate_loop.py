"""A plain Accelerate training loop on the CPU; writes what it learned.

    mpiexec -n 2 python accelerate_loop.py OUT mpi       # Accelerate's own choice: "mpi"
    mpiexec -n 2 python accelerate_loop.py OUT mpiflow   # a "mpiflow" group made first
    torchrun --standalone --nproc-per-node 2 accelerate_loop.py OUT gloo

Imports neither mpiflow nor mpi4py. Under an MPI launcher ``Accelerator(cpu=True)`` takes
"mpi" where ``torch.distributed.is_mpi_available()`` (mpiflow's, on stock wheels); it accepts
only "mpi" or "gloo" by name, and uses a process group that already exists. Rank 0 writes
``OUT/result.json``: the backend Accelerate reports, the loss per step, the weights.
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset


def main(out: str, backend: str) -> None:
    if backend == "mpiflow":
        dist.init_process_group("mpiflow")
    accelerator = Accelerator(cpu=True)
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(48, 4), torch.randn(48, 1))
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer, loader = accelerator.prepare(model, optimizer,
                                                   DataLoader(data, batch_size=4))
    losses = []
    for _ in range(2):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            accelerator.backward(loss)
            optimizer.step()
            losses.append(accelerator.reduce(loss.detach(), "mean").item())
    weights = accelerator.unwrap_model(model).weight.detach().flatten().tolist()
    if accelerator.is_main_process:
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump({"state": [accelerator.state.backend, dist.get_backend(),
                                 type(dist.group.WORLD).__name__,
                                 accelerator.num_processes],
                       "losses": losses, "weights": weights}, f)
    accelerator.end_training()


if __name__ == "__main__":
    main(*sys.argv[1:3])
