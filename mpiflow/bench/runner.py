"""Running the benchmark cases under MPI: warm-up, interleaved timed batches, max over ranks.

Every function here is collective over the world: every rank must call it with the same
settings. The timings are combined with raw mpi4py on a communicator of their own (a duplicate
of ``COMM_WORLD``), which also carries the barrier before each batch, so that nothing the
measurement itself sends can mix with the traffic being measured.
"""

from __future__ import annotations

import datetime
import platform
import time
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import Any

import numpy
from mpi4py import MPI

from .._version import __version__
from ..communication.group import world_comm
from .cases import BenchCase, Context, select
from .metrics import Row
from .plan import KNEE_BYTES, Settings

__all__ = ["describe_run", "make_context", "measure", "run", "time_batch"]


def make_context(dtype: str = "float32", device: str = "cpu") -> Context:
    """The context of mpiflow's world: its mpi4py communicator, numpy and the dtype.

    Raises:
        ValueError: a device other than ``"cpu"``.
    """
    if device != "cpu":
        raise ValueError(f"device {device!r} is not supported yet (only 'cpu')")
    return Context(world_comm.mpi_comm, world_comm.rank, world_comm.size, numpy,
                   numpy.dtype(dtype), device)


def time_batch(call: Callable[[], Any], iters: int, barrier: Callable[[], Any],
               clock: Callable[[], float] = time.perf_counter) -> float:
    """Time ``iters`` back-to-back calls after a barrier.

    Args:
        call: the operation.
        iters: how many times to run it (>= 1).
        barrier: synchronizes the ranks before the clock starts.
        clock: the clock, in seconds.

    Returns:
        The average seconds per call on this rank.
    """
    barrier()
    start = clock()
    for _ in repeat(None, iters):
        call()
    return (clock() - start) / iters


def _warm(call: Callable[[], Any], iters: int) -> None:
    for _ in repeat(None, iters):
        call()


def measure(case: BenchCase, ctx: Context, size: int, settings: Settings,
            timer: Any) -> Row:
    """Measure one case at one requested size, mpiflow and raw mpi4py interleaved.

    Both sides warm up, then ``settings.rounds`` timed batches run per side, alternating which
    side goes first. Each batch's per-rank average is reduced to its max over ranks (OSU's
    rule) on ``timer`` after the last batch.

    Args:
        case: the benchmark case.
        ctx: where it runs.
        size: the requested size in bytes.
        settings: iteration counts, rounds and the statistic.
        timer: the mpi4py communicator for barriers and the timing reduction.

    Returns:
        The row of results, identical on every rank.
    """
    layout = case.layout(size, ctx.dtype.itemsize, ctx.nranks)
    prepared = case.build(ctx, layout)
    iters = settings.timed_iterations(layout.nbytes)
    warmup = settings.warmup_iterations(layout.nbytes)
    sides = (prepared.mpiflow, prepared.raw)
    for call in sides:
        _warm(call, warmup)
    times = numpy.zeros((settings.rounds, 2))
    for r in range(settings.rounds):
        for side in ((0, 1) if r % 2 == 0 else (1, 0)):
            times[r, side] = time_batch(sides[side], iters, timer.Barrier) / case.ops_per_call
    timer.Allreduce(MPI.IN_PLACE, times, MPI.MAX)
    return Row(case.name, size, layout.nbytes, iters, warmup, ctx.nranks,
               case.bus_factor(ctx.nranks), tuple(times[:, 0].tolist()),
               tuple(times[:, 1].tolist()), settings.stat)


def run(settings: Settings,
        on_case: Callable[[BenchCase, Sequence[Row]], None] | None = None,
        ) -> dict[str, list[Row]]:
    """Run the selected cases at every size (collective); skip those that need more ranks.

    Args:
        settings: what to run.
        on_case: called with each case and its rows as soon as the case is done (e.g. to print
            its table); a skipped case is reported with no rows.

    Returns:
        The rows by case name, in the order run (identical on every rank).
    """
    ctx = make_context(settings.dtype, settings.device)
    cases = select(settings.ops, settings.device)
    results: dict[str, list[Row]] = {}
    timer = MPI.COMM_WORLD.Dup()
    try:
        for case in cases:
            rows: list[Row] = []
            if ctx.nranks >= case.min_ranks:
                rows = [measure(case, ctx, size, settings, timer) for size in settings.sizes]
                results[case.name] = rows
            if on_case is not None:
                on_case(case, rows)
    finally:
        timer.Free()
    return results


def describe_run(settings: Settings) -> dict[str, Any]:
    """What the run ran on and how it timed, for the report header and the JSON file."""
    library = MPI.Get_library_version().strip().splitlines()[0]
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host": platform.node(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "mpiflow": __version__,
        "mpi4py": _mpi4py_version(),
        "numpy": numpy.__version__,
        "mpi_library": " ".join(library.split()),
        "ranks": world_comm.size,
        "dtype": settings.dtype,
        "device": settings.device,
        "ops": list(settings.ops),
        "sizes": list(settings.sizes),
        "iters": settings.iters,
        "min_iters": settings.min_iters,
        "warmup": settings.warmup,
        "rounds": settings.rounds,
        "stat": settings.stat,
        "knee_bytes": KNEE_BYTES,
    }


def _mpi4py_version() -> str:
    import mpi4py

    return str(mpi4py.__version__)
