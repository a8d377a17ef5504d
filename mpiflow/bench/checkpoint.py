"""Checkpoint bandwidth: parallel :func:`mpiflow.io.save`/:func:`~mpiflow.io.load` versus one
rank gathering the tensor and calling ``numpy.save`` (and ``numpy.load`` plus a scatter).

Run ``mpiexec -n 2 python -m mpiflow.bench.checkpoint`` (``--size 64MiB``, ``--dir PATH``,
``--repeat N``); only rank 0 prints. Both sides flush their files to disk before the clock
stops (``MPI_File_sync``, ``os.fsync``). The loads read files just written, usually from the
page cache: they measure MPI-IO and scatter overheads more than the disk.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy
from mpi4py import MPI

from ..boxing.execute import redistribute
from ..communication.mpi.group import world_comm
from ..io import load, save
from ..layouts.layout import Layout
from ..layouts.placement import Placement
from ..layouts.sbp import Broadcast, Split
from ..layouts.shards import local_shape
from ..tensors.tensor import Tensor
from .plan import format_bytes, parse_bytes

__all__ = ["format_result", "main", "run_checkpoint_bench"]

_DEFAULT_BYTES = 256 << 20


def _timed(call: Callable[[], Any], comm: Any, repeat: int) -> float:
    """The best over ``repeat`` runs of the slowest rank's seconds for ``call``."""
    best = float("inf")
    for _ in range(repeat):
        comm.Barrier()
        start = time.perf_counter()
        call()
        elapsed = numpy.array([time.perf_counter() - start])
        comm.Allreduce(MPI.IN_PLACE, elapsed, MPI.MAX)
        best = min(best, float(elapsed[0]))
    return best


def run_checkpoint_bench(size_bytes: int = _DEFAULT_BYTES, directory: str | None = None,
                         repeat: int = 3) -> dict[str, Any]:
    """Measure checkpoint bandwidths of a float32 global tensor of ``size_bytes`` (collective).

    The tensor is split by rows over every rank. ``parallel_save``/``parallel_load`` are
    :func:`mpiflow.io.save` and :func:`mpiflow.io.load` (back to ``S(0)``); ``gather_save``
    gathers it on rank 0, which calls ``numpy.save`` and fsyncs; ``load_scatter`` is
    ``numpy.load`` on rank 0 and a scatter back to ``S(0)``.

    Args:
        size_bytes: the tensor's size (rounded down to whole rows of 1024 floats).
        directory: where to write (the same path on every rank; default: a new temporary
            directory on rank 0's local disk, removed afterwards).
        repeat: timed runs per side; the best is reported.

    Returns:
        ``{"ranks", "bytes", "seconds": {side: s}, "GBps": {side: GB/s}, "speedup": {"save",
        "load"}}`` (GB = 1e9 bytes), the same on every rank.

    Examples:
        >>> result = run_checkpoint_bench(1 << 20, repeat=1)    # 1 MiB; the default is larger
        >>> sorted(result["GBps"]), result["GBps"]["parallel_save"] > 0
        (['gather_save', 'load_scatter', 'parallel_load', 'parallel_save'], True)
    """
    comm = world_comm.mpi_comm
    rank, nranks = comm.Get_rank(), comm.Get_size()
    cols = 1024
    rows = max(1, size_bytes // (4 * cols))
    made = directory is None
    where = comm.bcast(tempfile.mkdtemp(prefix="mpiflow-bench-") if made and rank == 0
                       else directory, root=0)
    everyone = Placement("cpu", list(range(nranks)))
    root = Placement("cpu", [0])
    split = Layout(everyone, (Split(0),))
    on_root = Layout(root, (Broadcast(),))
    shape = (rows, cols)
    local = numpy.random.default_rng(rank).random(local_shape(shape, everyone, (Split(0),),
                                                              rank), dtype=numpy.float32)
    tensor = Tensor(local, everyone, (Split(0),), shape)
    ours, theirs = os.path.join(where, "parallel"), os.path.join(where, "numpy.npy")

    def gather_save() -> None:
        whole = redistribute(local, shape, split, on_root)
        if rank == 0:
            with open(theirs, "wb") as f:
                numpy.save(f, whole)
                f.flush()
                os.fsync(f.fileno())

    def load_scatter() -> None:
        whole = numpy.load(theirs) if rank == 0 else numpy.empty((0,), numpy.float32)
        redistribute(whole, shape, on_root, split)

    try:
        seconds = {"parallel_save": _timed(lambda: save(tensor, ours), comm, repeat),
                   "gather_save": _timed(gather_save, comm, repeat),
                   "parallel_load": _timed(lambda: load(ours, everyone, Split(0)), comm,
                                           repeat),
                   "load_scatter": _timed(load_scatter, comm, repeat)}
    finally:
        comm.Barrier()
        if rank == 0:
            if made:
                shutil.rmtree(where, ignore_errors=True)
            else:
                shutil.rmtree(ours, ignore_errors=True)
                with contextlib.suppress(FileNotFoundError):
                    os.remove(theirs)
    nbytes = rows * cols * 4
    return {"ranks": nranks, "bytes": nbytes, "seconds": seconds,
            "GBps": {k: nbytes / v / 1e9 for k, v in seconds.items()},
            "speedup": {"save": seconds["gather_save"] / seconds["parallel_save"],
                        "load": seconds["load_scatter"] / seconds["parallel_load"]}}


def format_result(result: dict[str, Any]) -> str:
    """The result as a small table, one line per side.

    Examples:
        >>> print(format_result(run_checkpoint_bench(1 << 20, repeat=1)).splitlines()[0])
        # checkpoint of a 1 MiB float32 tensor split by rows over 1 rank(s)
    """
    lines = [f"# checkpoint of a {format_bytes(result['bytes'])} float32 tensor split by rows "
             f"over {result['ranks']} rank(s)", f"{'side':<16}{'seconds':>10}{'GB/s':>10}"]
    for side, seconds in result["seconds"].items():
        lines.append(f"{side:<16}{seconds:>10.4f}{result['GBps'][side]:>10.3f}")
    lines.append(f"parallel/gathered: save x{result['speedup']['save']:.2f}, "
                 f"load x{result['speedup']['load']:.2f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (collective: every rank calls it with the same arguments)."""
    parser = argparse.ArgumentParser(
        prog="python -m mpiflow.bench.checkpoint",
        description="Bandwidth of mpiflow.io.save/load of a global tensor versus rank 0 "
                    "gathering it and calling numpy.save (numpy.load and a scatter).")
    parser.add_argument("--size", type=parse_bytes, default=_DEFAULT_BYTES,
                        help="the tensor's size, e.g. 64MiB (default 256MiB)")
    parser.add_argument("--dir", help="where to write (default: a temporary directory)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per side (best)")
    parser.add_argument("--json", metavar="PATH", help="also write the result as JSON")
    args = parser.parse_args(argv)
    result = run_checkpoint_bench(args.size, args.dir, args.repeat)
    if world_comm.rank == 0:
        print(format_result(result), flush=True)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
