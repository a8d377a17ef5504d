"""The short job of the ``collective_check`` suite: a tiny DDP training run, checks on and off.

pytorch/examples' ``ddp-tutorial-series/multinode.py`` as a loop (written here, not copied):
``torch.nn.Linear(20, 1)`` in ``DistributedDataParallel``, SGD (lr 1e-3), cross entropy, a
dataset of 2048 random ``(20,)``/``(1,)`` samples through a ``DataLoader`` of batch 32 with a
``DistributedSampler`` (shuffled, a new epoch every pass), for :data:`STEPS` optimizer steps:
one all-reduce of the 21 gradients a step (one bucket), about the 320 all-reduces of the
issue's run. Each side runs on a new group of every rank on the ``"mpiflow"`` backend made with
``MPIFLOW_CHECK`` set for it (``sampled``, the default, or ``off``; read when a group is made),
so that the sampled side pays its whole schedule from the group's first call, and the timed
span is what a user's job pays: the DDP wrapper's construction (its broadcasts) and the steps.

torch is imported only when it runs (:func:`torch_missing` says why it cannot).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from mpi4py import MPI

from ..communication.mpi.group import world_comm
from ..core import settings

__all__ = ["STEPS", "short_job", "torch_missing"]

STEPS = 300
SAMPLES, FEATURES, BATCH = 2048, 20, 32


def torch_missing() -> str | None:
    """Why the short job cannot run here (no usable PyTorch), or None."""
    try:
        import torch.distributed as dist

        import mpiflow.torch  # noqa: F401 - registers the "mpiflow" backend
    except Exception as exc:  # ImportError, or an old torch failing in mpiflow.torch
        return f"needs PyTorch with torch.distributed: {type(exc).__name__}: {exc}"
    return None if dist.is_available() else "this torch has no torch.distributed"


def _group(dist: Any, mode: str) -> Any:
    """A new group of every rank on "mpiflow" whose checks ``MPIFLOW_CHECK=mode`` asks for."""
    from ..communication.debug.sampled import SampledMPICommunicator

    with settings.scoped("MPIFLOW_CHECK", mode):  # read when the group's communicator is made
        group = dist.new_group(backend="mpiflow")
    backend = group if hasattr(group, "communicator") else group._get_backend(_cpu())
    sampled = isinstance(backend.communicator, SampledMPICommunicator)
    if sampled != (mode == "sampled"):
        raise RuntimeError(f"a group made under MPIFLOW_CHECK={mode} runs on "
                           f"{type(backend.communicator).__name__}")
    return group


def _cpu() -> Any:
    import torch

    return torch.device("cpu")


def _job(torch: Any, group: Any, data: Any, steps: int) -> Callable[[], None]:
    """The run on ``group``: wrap a fresh model in DDP and make ``steps`` steps."""
    from torch.nn.functional import cross_entropy
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    rank, size = world_comm.rank, world_comm.size
    sampler: Any = DistributedSampler(data, num_replicas=size, rank=rank)
    loader = DataLoader(data, batch_size=BATCH, sampler=sampler)
    torch.manual_seed(0)
    model = torch.nn.Linear(FEATURES, 1)

    def run() -> None:
        ddp = DistributedDataParallel(model, process_group=group)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=1e-3)
        done, epoch = 0, 0
        while done < steps:
            sampler.set_epoch(epoch)
            for source, targets in loader:
                optimizer.zero_grad()
                cross_entropy(ddp(source), targets).backward()
                optimizer.step()
                done += 1
                if done == steps:
                    break
            epoch += 1

    return run


def short_job(rounds: int, steps: int = STEPS) -> dict[str, Any]:
    """Time the tiny DDP job with the default checks and with ``MPIFLOW_CHECK=off`` (collective).

    Makes the default group on "mpiflow" if there is none (:func:`.torch_suite.init_groups`).
    Each round runs both sides, in alternating order, each on a new group.

    Args:
        rounds: runs per side.
        steps: optimizer steps per run.

    Returns:
        ``steps``, ``rounds``, ``sampled_ms`` and ``off_ms`` (per step, median of the rounds,
        slowest rank), ``ratios`` (each round's sampled / off) and ``ratio`` (their median).
    """
    import torch
    import torch.distributed as dist
    from torch.utils.data import TensorDataset

    from .torch_suite import init_groups

    torch.set_num_threads(1)
    gloo, made = init_groups(dist)
    timer = world_comm.mpi_comm.Dup()
    generator = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.rand(SAMPLES, FEATURES, generator=generator),
                         torch.rand(SAMPLES, 1, generator=generator))
    times: dict[str, list[float]] = {"sampled": [], "off": []}
    try:
        for r in range(rounds + 1):  # round 0 warms up (imports, first DataLoader)
            for mode in (("sampled", "off") if r % 2 else ("off", "sampled")):
                group = _group(dist, mode)
                run = _job(torch, group, data, steps)
                timer.Barrier()
                start = time.perf_counter()
                run()
                elapsed = timer.allreduce(time.perf_counter() - start, op=MPI.MAX)
                if r:
                    times[mode].append(elapsed / steps)
                dist.destroy_process_group(group)
    finally:
        timer.Free()
        dist.destroy_process_group(gloo)
        if made:
            dist.destroy_process_group()
    ratios = [s / o for s, o in zip(times["sampled"], times["off"], strict=True)]
    return {"steps": steps, "rounds": rounds, "ratios": ratios,
            "ratio": _median(ratios), "sampled_ms": 1e3 * _median(times["sampled"]),
            "off_ms": 1e3 * _median(times["off"])}


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    return (ordered[n // 2] + ordered[(n - 1) // 2]) / 2 if n else float("nan")
