"""Run a torch program as its own ``__main__``, recording what each optimizer step produced.

Used by ``tests/torch_backend/test_pytorch_examples.py`` to compare one program on two
backends. It does not change the program: it seeds torch's generator (``1000 + RANK``, so a
run repeats and ranks draw different data), registers torch's global optimizer step hook and
runs the file with :func:`runpy.run_path`. After every ``optimizer.step()`` the hook records,
for each parameter (a DTensor's local shard), its float64 sum and a digest of its bytes. At
exit, ``OUT/steps.RANK.json`` holds the list. It imports neither mpiflow nor mpi4py::

    mpiexec -n 2 python observe.py OUT program.py [program arguments...]
"""

from __future__ import annotations

import hashlib
import json
import os
import runpy
import sys
from typing import Any

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook


def _record(steps: list[list[list[Any]]], optimizer: torch.optim.Optimizer) -> None:
    params = []
    for group in optimizer.param_groups:
        for param in group["params"]:
            local = param.detach()
            to_local = getattr(local, "to_local", None)
            if to_local is not None:  # a DTensor: this rank's shard, no communication
                local = to_local()
            data = local.contiguous().cpu()
            digest = hashlib.sha1(data.view(torch.uint8).numpy().tobytes()).hexdigest()[:16]
            params.append([float(data.double().sum()), digest])
    steps.append(params)


def main(argv: list[str]) -> None:
    out, program, *args = argv
    rank = int(os.environ.get("RANK", "0"))  # torchrun's, set from the MPI launcher's
    torch.manual_seed(1000 + rank)
    steps: list[list[list[Any]]] = []
    register_optimizer_step_post_hook(lambda opt, _args, _kwargs: _record(steps, opt))
    sys.argv = [program, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(program)))
    try:
        runpy.run_path(program, run_name="__main__")
    finally:
        with open(os.path.join(out, f"steps.{rank}.json"), "w") as f:
            json.dump(steps, f)


if __name__ == "__main__":
    main(sys.argv[1:])
