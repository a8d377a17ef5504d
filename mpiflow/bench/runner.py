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
from ..communication.mpi.group import world_comm
from . import cuda_cases
from .cases import BenchCase, Context, select
from .metrics import Row, combine
from .plan import KNEE_BYTES, Settings

__all__ = ["describe_run", "make_context", "measure", "measure_interleaved", "measure_sizes", "run",
           "time_batch"]


def make_context(dtype: str = "float32", device: str = "cpu") -> Context:
    """The context of mpiflow's world: its mpi4py communicator, the array module and the dtype.

    Args:
        dtype: the buffers' numpy dtype name.
        device: ``"cpu"`` (numpy buffers) or ``"cuda"`` (CuPy buffers on this rank's device,
            see :mod:`.cuda_cases`).

    Raises:
        CudaUnavailableError: ``device="cuda"`` where CuPy or a CUDA device is missing (the
            message says which).
        ValueError: another device.
    """
    if device == "cuda":
        return cuda_cases.make_context(dtype)
    if device != "cpu":
        raise ValueError(f"device {device!r} is not supported (choose 'cpu' or 'cuda')")
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


def measure_interleaved(groups: Sequence[Sequence[Callable[[], Any]]], iters: Sequence[int],
                        warmup: Sequence[int], rounds: int, timer: Any) -> numpy.ndarray:
    """Time the sides of several groups in interleaved rounds; the max over ranks (collective).

    A group is the calls that do one job in different ways (mpiflow and raw mpi4py, or more
    sides). Every side first warms up (``warmup[g]`` calls). Then come ``rounds`` rounds; a round
    visits every group in turn and there runs one untimed call of each side (the other groups
    ran since and evicted its buffers from the caches), then times one batch of ``iters[g]``
    calls of each side back to back, rotating from round to round which side goes first (with
    two sides: alternating). The rounds of a group are so spread over the whole measurement: a
    burst of load from elsewhere on the machine spoils a few of them, which the minimum (times)
    and the median (paired ratios) then discard. After the last round one ``Allreduce(MAX)`` on
    ``timer`` turns every batch's per-rank average into its max over ranks (OSU's rule).

    Args:
        groups: per group, its sides' zero-argument calls (the same number in every group).
        iters: per group, timed calls per batch (>= 1).
        warmup: per group, warm-up calls per side.
        rounds: timed batches per side and group.
        timer: the mpi4py communicator for the barriers and the reduction.

    Returns:
        Seconds per call, shaped ``(groups, rounds, sides)``, identical on every rank.
    """
    nsides = len(groups[0]) if groups else 0
    if any(len(g) != nsides for g in groups):
        raise ValueError("every group needs the same number of sides")
    for calls, count in zip(groups, warmup, strict=True):
        for call in calls:
            _warm(call, count)
    times = numpy.zeros((len(groups), rounds, nsides))
    for r in range(rounds):
        order = [(r + k) % nsides for k in range(nsides)]
        for i, calls in enumerate(groups):
            for call in calls:
                call()
            for side in order:
                times[i, r, side] = time_batch(calls[side], iters[i], timer.Barrier)
    timer.Allreduce(MPI.IN_PLACE, times, MPI.MAX)
    return times


def measure_sizes(case: BenchCase, ctx: Context, sizes: Sequence[int], settings: Settings,
                  timer: Any) -> list[Row]:
    """Measure one case at several requested sizes, mpiflow and raw mpi4py interleaved.

    The buffers of every size are built first; :func:`measure_interleaved` then times the two
    sides at every size in ``settings.rounds`` rounds (each size is one group). A case with two
    raw forms (``raw_forms``) times three sides, and each size's row takes as its raw side the
    form with the lower time (``settings.stat``), keeping the other's batches beside it.

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
    sides: list[tuple[Callable[[], Any], ...]] = []
    for layout in layouts:
        prepared = case.build(ctx, layout)
        if case.raw_forms and prepared.raw_other is not None:
            sides.append((prepared.mpiflow, prepared.raw, prepared.raw_other))
        else:
            sides.append((prepared.mpiflow, prepared.raw))
    iters = [settings.timed_iterations(layout.nbytes) for layout in layouts]
    warmup = [settings.warmup_iterations(layout.nbytes) for layout in layouts]
    times = measure_interleaved(sides, iters, warmup, settings.rounds, timer)
    times /= case.ops_per_call
    factor = case.bus_factor(ctx.nranks)
    rows = []
    for i, (size, layout) in enumerate(zip(sizes, layouts, strict=True)):
        raw, form, other = tuple(times[i, :, 1].tolist()), "", ()
        if times.shape[2] == 3:  # two raw forms: the row compares with the faster one
            second = tuple(times[i, :, 2].tolist())
            faster = combine(second, settings.stat) < combine(raw, settings.stat)
            form = case.raw_forms[1 if faster else 0]
            raw, other = (second, raw) if faster else (raw, second)
        rows.append(Row(case.name, size, layout.nbytes, iters[i], warmup[i], ctx.nranks,
                        factor, tuple(times[i, :, 0].tolist()), raw, settings.stat, form,
                        other))
    return rows


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
    library = MPI.Get_library_version().replace("\0", "").strip().splitlines()[0]
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
        "suites": list(settings.suites),
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
