"""torch.distributed on CUDA tensors: the ``"mpiflow"`` backend beside torch's own NCCL backend.

``python -m mpiflow.bench.torch_cuda`` (under mpiexec) times, in one job and on the same CUDA
tensors of float32 zeros, each collective three ways:

* ``mpiflow``: the torch call on the default group, whose backend is ``"mpiflow"``
  (:mod:`mpiflow.torch`): the tensor goes to CuPy zero-copy and travels over the transport
  mpiflow chose (NCCL through CuPy, CUDA-aware MPI or pinned staging);
* ``nccl``: the same torch call on a group of the same ranks on torch's ``"nccl"`` backend,
  what a PyTorch user runs on GPUs. NCCL refuses two ranks on one GPU, so this side is left out
  (saying why) when ranks share a device;
* ``staged``: raw mpi4py on pinned host copies made by hand (``copy_`` to a pinned tensor,
  the MPI call, ``copy_`` back): what a program does without either library on an MPI that is
  not CUDA-aware.

Every side ends with ``torch.cuda.synchronize()``, so each times a call whose result is in
place. Sides alternate within every round (:func:`.runner.measure_interleaved`); times are the
minimum over rounds of the slowest rank's batch average. Rank 0 prints a Markdown table; with
``--json PATH`` every number goes to PATH too.

Examples:
    >>> from mpiflow.bench.torch_cuda import sizes
    >>> sizes(8, 512, 4)
    [8, 32, 128, 512]
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy
from mpi4py import MPI

from ..communication.mpi.group import world_comm
from .metrics import (
    ALL_REDUCE_FACTOR,
    ONE_FACTOR,
    SPREAD_FACTOR,
    BusFactor,
    Layout,
    bandwidth,
    gather_layout,
    scatter_layout,
    whole_layout,
)

__all__ = ["OPS", "SIDES", "main", "sizes", "torch_cuda_problem"]

SIDES = ("mpiflow", "nccl", "staged")
OPS: dict[str, tuple[Callable[[int, int, int], Layout], BusFactor]] = {
    "all_reduce": (whole_layout, ALL_REDUCE_FACTOR),
    "all_gather": (gather_layout, SPREAD_FACTOR),
    "reduce_scatter": (scatter_layout, SPREAD_FACTOR),
    "broadcast": (whole_layout, ONE_FACTOR),
}


def sizes(lo: int, hi: int, factor: int) -> list[int]:
    """The sizes in bytes from ``lo`` to ``hi`` by ``factor`` (``hi`` always included)."""
    out, n = [], lo
    while n < hi:
        out.append(n)
        n *= factor
    return [*out, hi]


def torch_cuda_problem() -> str | None:
    """Why the suite cannot run here (no torch, no CUDA device, no mpiflow backend), or None."""
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


def _shares_gpu(comm: Any, index: int) -> bool:
    """True when two ranks of ``comm`` on one node use the same device (NCCL refuses that)."""
    mine = (MPI.Get_processor_name(), index)
    seen = comm.allgather(mine)
    return len(set(seen)) != len(seen)


def _init(dist: Any, comm: Any) -> None:
    """The default group on ``"mpiflow"`` with a TCP store that rank 0 opens (collective)."""
    address = None
    if comm.rank == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            address = ("127.0.0.1", s.getsockname()[1])
    host, port = comm.bcast(address, root=0)
    dist.init_process_group("mpiflow", init_method=f"tcp://{host}:{port}",
                            rank=comm.rank, world_size=comm.size)


def _sides(torch: Any, dist: Any, comm: Any, nccl: Any, op: str, layout: Layout
           ) -> dict[str, Callable[[], None]]:
    """The zero-argument calls of each side of ``op`` on fresh CUDA tensors of ``layout``."""
    dev = torch.device("cuda", torch.cuda.current_device())
    recv = torch.zeros(layout.recv, dtype=torch.float32, device=dev)
    send = torch.zeros(layout.send, dtype=torch.float32, device=dev) if layout.send else None
    hsend = torch.zeros(layout.send, dtype=torch.float32, pin_memory=True) if send is not None \
        else None
    hrecv = torch.zeros(layout.recv, dtype=torch.float32, pin_memory=True)
    sync = torch.cuda.synchronize

    def torch_call(group: Any) -> Callable[[], None]:
        kw = {} if group is None else {"group": group}
        if op == "all_reduce":
            call = partial(dist.all_reduce, recv, **kw)
        elif op == "broadcast":
            call = partial(dist.broadcast, recv, 0, **kw)
        elif op == "all_gather":
            call = partial(dist.all_gather_into_tensor, recv, send, **kw)
        else:
            call = partial(dist.reduce_scatter_tensor, recv, send, **kw)

        def run() -> None:
            call()
            sync()

        return run

    a_send = None if hsend is None else hsend.numpy()
    a_recv = hrecv.numpy()
    mpi_call: Callable[[], Any] = {
        "all_reduce": lambda: comm.Allreduce(MPI.IN_PLACE, a_recv, MPI.SUM),
        "broadcast": lambda: comm.Bcast(a_recv, 0),
        "all_gather": lambda: comm.Allgather(a_send, a_recv),
        "reduce_scatter": lambda: comm.Reduce_scatter_block(a_send, a_recv, MPI.SUM),
    }[op]

    def staged() -> None:
        if send is not None and hsend is not None:
            hsend.copy_(send)
        elif op == "all_reduce" or comm.rank == 0:
            hrecv.copy_(recv)
        mpi_call()
        recv.copy_(hrecv, non_blocking=True)
        sync()

    out = {"mpiflow": torch_call(None), "staged": staged}
    if nccl is not None:
        out["nccl"] = torch_call(nccl)
    return out


def _iters(nbytes: int) -> tuple[int, int]:
    """Timed calls per batch and warm-up calls at ``nbytes``: fewer for large messages."""
    iters = int(max(3, min(100, (4 << 20) // max(nbytes, 1))))
    return iters, max(2, iters // 4)


def run(ops: Sequence[str], byte_sizes: Sequence[int], rounds: int) -> dict[str, Any]:
    """Time every side of ``ops`` at ``byte_sizes`` (collective); the results as JSON data."""
    import torch
    import torch.distributed as dist

    import mpiflow.torch  # noqa: F401  (registers the "mpiflow" backend)

    from .runner import measure_interleaved

    comm = world_comm.mpi_comm
    torch.cuda.set_device(_local_device(torch, comm))
    if not dist.is_initialized():
        _init(dist, comm)
    nccl, why = None, ""
    if _shares_gpu(comm, torch.cuda.current_device()):
        why = "ranks share a GPU, which NCCL refuses"
    elif not dist.is_nccl_available():
        why = "this torch has no NCCL"
    else:
        nccl = dist.new_group(backend="nccl")
    sides = [s for s in SIDES if s != "nccl" or nccl is not None]
    timer = comm.Dup()
    result: dict[str, Any] = {
        "ranks": comm.size, "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
        "sides": sides, "nccl_left_out": why, "ops": {}}
    for op in ops:
        layout_of, factor = OPS[op]
        rows = []
        for size in byte_sizes:
            layout = layout_of(size, 4, comm.size)
            calls = _sides(torch, dist, comm, nccl, op, layout)
            iters, warm = _iters(layout.nbytes)
            times = measure_interleaved([[calls[s] for s in sides]], [iters], [warm], rounds,
                                        timer)[0]
            best = times.min(axis=0)
            rows.append({"bytes": layout.nbytes,
                         "us": {s: float(best[i] * 1e6) for i, s in enumerate(sides)},
                         "busbw_GBps": {s: bandwidth(layout.nbytes, float(best[i]))
                                        * factor(comm.size) for i, s in enumerate(sides)}})
        result["ops"][op] = rows
    timer.Free()
    if nccl is not None:
        dist.destroy_process_group(nccl)
    return result


def _local_device(torch: Any, comm: Any) -> int:
    """``local_rank % device_count``, as mpiflow's own CUDA layer picks it."""
    from .. import cuda

    return cuda.current_device() if cuda.is_available() else comm.rank % \
        torch.cuda.device_count()


def markdown(result: dict[str, Any]) -> str:
    """The results as Markdown: per operation, time per call and each side over mpiflow."""
    sides = result["sides"]
    lines = [f"torch.distributed on CUDA tensors, {result['ranks']} rank(s), {result['gpu']}, "
             f"torch {result['torch']}"]
    if result["nccl_left_out"]:
        lines.append(f"(nccl side left out: {result['nccl_left_out']})")
    others = [s for s in sides if s != "mpiflow"]
    for op, rows in result["ops"].items():
        lines += ["", f"### {op}", "",
                  "| bytes | " + " | ".join(f"{s} us" for s in sides) + " | "
                  + " | ".join(f"mpiflow/{s}" for s in others) + " | mpiflow busbw GB/s |",
                  "|" + "---:|" * (2 + len(sides) + len(others))]
        for row in rows:
            us = row["us"]
            lines.append(f"| {row['bytes']} | " + " | ".join(f"{us[s]:.1f}" for s in sides)
                         + " | " + " | ".join(f"{us['mpiflow'] / us[s]:.2f}" for s in others)
                         + f" | {row['busbw_GBps']['mpiflow']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """The command line: ``--ops``, ``--min-bytes``, ``--max-bytes``, ``--factor``, ``--rounds``,
    ``--json``. Returns 0, or 2 when torch or a CUDA device is missing."""
    p = argparse.ArgumentParser(prog="python -m mpiflow.bench.torch_cuda",
                                description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--ops", default=",".join(OPS), help="comma-separated: " + ", ".join(OPS))
    p.add_argument("--min-bytes", type=int, default=8)
    p.add_argument("--max-bytes", type=int, default=64 << 20)
    p.add_argument("--factor", type=int, default=4)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json", metavar="PATH")
    args = p.parse_args(argv)
    ops = [o for o in args.ops.split(",") if o]
    bad = [o for o in ops if o not in OPS]
    if bad:
        p.error(f"unknown operation {bad[0]!r}; choose from {', '.join(OPS)}")
    problem = torch_cuda_problem()
    if problem is not None:
        if world_comm.rank == 0:
            print(f"torch_cuda: cannot run: {problem}", file=sys.stderr)
        return 2
    result = run(ops, sizes(args.min_bytes, args.max_bytes, args.factor), args.rounds)
    if world_comm.rank == 0:
        print(markdown(result), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    numpy.seterr(all="ignore")
    sys.exit(main())
