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

__all__ = ["describe_run", "make_context", "measure", "measure_sizes", "run", "time_batch"]


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


def measure_sizes(case: BenchCase, ctx: Context, sizes: Sequence[int], settings: Settings,
                  timer: Any) -> list[Row]:
    """Measure one case at several requested sizes, mpiflow and raw mpi4py interleaved.

    The buffers of every size are built first and both sides warm up at each size. Then come
    ``settings.rounds`` rounds; a round times, at every size in turn, one batch of each side
    back to back (after one untimed call of each, to warm the caches again), alternating which
    side goes first from round to round. The rounds of one size are so spread over the whole
    case: a burst of load from elsewhere on the machine spoils a few of them, which the minimum
    (times) and the median (ratio) then discard. Each batch's per-rank average is reduced to
    its max over ranks (OSU's rule) on ``timer`` after the last round.

    Args:
        case: the benchmark case.
        ctx: where it runs.
        sizes: the requested sizes in bytes.
        settings: iteration counts, rounds and the statistic.
        timer: the mpi4py communicator for barriers and the timing reduction.

    Returns:
        One row per size, identical on every rank.
    """
    layouts = [case.layout(size, ctx.dtype.itemsize, ctx.nranks) for size in sizes]
    sides = []
    for layout in layouts:
        prepared = case.build(ctx, layout)
        sides.append((prepared.mpiflow, prepared.raw))
    iters = [settings.timed_iterations(layout.nbytes) for layout in layouts]
    warmup = [settings.warmup_iterations(layout.nbytes) for layout in layouts]
    for pair, count in zip(sides, warmup, strict=True):
        for call in pair:
            _warm(call, count)
    times = numpy.zeros((len(sizes), settings.rounds, 2))
    for r in range(settings.rounds):
        order = (0, 1) if r % 2 == 0 else (1, 0)
        for i, pair in enumerate(sides):
            # The other sizes ran since this one's last batch and evicted its buffers from the
            # caches: one untimed call per side warms them again, so that the side that goes
            # first pays no more than the other.
            for call in pair:
                call()
            for side in order:
                times[i, r, side] = time_batch(pair[side], iters[i], timer.Barrier)
    times /= case.ops_per_call
    timer.Allreduce(MPI.IN_PLACE, times, MPI.MAX)
    factor = case.bus_factor(ctx.nranks)
    return [Row(case.name, size, layout.nbytes, iters[i], warmup[i], ctx.nranks, factor,
                tuple(times[i, :, 0].tolist()), tuple(times[i, :, 1].tolist()), settings.stat)
            for i, (size, layout) in enumerate(zip(sizes, layouts, strict=True))]


def measure(case: BenchCase, ctx: Context, size: int, settings: Settings,
            timer: Any) -> Row:
    """Measure one case at one requested size (see :func:`measure_sizes`)."""
    return measure_sizes(case, ctx, [size], settings, timer)[0]


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
                rows = measure_sizes(case, ctx, settings.sizes, settings, timer)
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
