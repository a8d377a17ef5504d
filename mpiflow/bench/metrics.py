"""What the timings mean: buffer layouts, bandwidths, bus factors, ratios and goals (pure).

Sizes follow nccl-tests: the size of an operation is its largest per-rank buffer (all_reduce
and broadcast: the buffer; all_gather: the output; reduce_scatter: the input; all_to_all: the
send buffer; send/recv: the message). ``algbw = size / time`` and ``busbw = algbw * factor``
with nccl-tests' bus factors, so that busbw is comparable across operations and rank counts.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any, NamedTuple

__all__ = [
    "ALL_REDUCE_FACTOR",
    "GOALS",
    "LARGE_BYTES",
    "ONE_FACTOR",
    "SPREAD_FACTOR",
    "BusFactor",
    "Goal",
    "GoalCheck",
    "Layout",
    "Row",
    "Summary",
    "Timings",
    "bandwidth",
    "chunked_layout",
    "combine",
    "gather_layout",
    "paired_ratio",
    "scatter_layout",
    "summarize",
    "time_per_call",
    "whole_layout",
]

# From this size on a message counts as large (the bandwidth goal); below it, as small.
LARGE_BYTES = 1 << 20


@dataclass(frozen=True)
class BusFactor:
    """nccl-tests' ratio of bus bandwidth to algorithm bandwidth, as a function of the ranks.

    Attributes:
        formula: the factor written with ``n`` ranks, for the reports.
        scale: the factor's value for a number of ranks.
    """

    formula: str
    scale: Callable[[int], float]

    def __call__(self, nranks: int) -> float:
        """The factor at ``nranks`` ranks."""
        return self.scale(nranks)


ALL_REDUCE_FACTOR = BusFactor("2(n-1)/n", lambda n: 2.0 * (n - 1) / n)
SPREAD_FACTOR = BusFactor("(n-1)/n", lambda n: (n - 1) / n)  # all_gather, reduce_scatter, a2a
ONE_FACTOR = BusFactor("1", lambda n: 1.0)  # broadcast, send/recv


class Layout(NamedTuple):
    """The buffers of one operation at one size.

    Attributes:
        send: elements of the send buffer (0 when the operation works in place).
        recv: elements of the receive (or in-place) buffer.
        nbytes: the operation's size in bytes by the nccl-tests convention.
    """

    send: int
    recv: int
    nbytes: int


def whole_layout(nbytes: int, itemsize: int, nranks: int) -> Layout:
    """One in-place buffer of ``nbytes`` (all_reduce, broadcast, send/recv); at least 1 element."""
    count = max(1, nbytes // itemsize)
    return Layout(0, count, count * itemsize)


def _chunk(nbytes: int, itemsize: int, nranks: int) -> int:
    return max(1, nbytes // (itemsize * nranks))


def gather_layout(nbytes: int, itemsize: int, nranks: int) -> Layout:
    """all_gather: a chunk in, ``nranks`` chunks out; the output is about ``nbytes``."""
    chunk = _chunk(nbytes, itemsize, nranks)
    return Layout(chunk, chunk * nranks, chunk * nranks * itemsize)


def scatter_layout(nbytes: int, itemsize: int, nranks: int) -> Layout:
    """reduce_scatter: ``nranks`` chunks in, one chunk out; the input is about ``nbytes``."""
    chunk = _chunk(nbytes, itemsize, nranks)
    return Layout(chunk * nranks, chunk, chunk * nranks * itemsize)


def chunked_layout(nbytes: int, itemsize: int, nranks: int) -> Layout:
    """all_to_all: ``nranks`` chunks in and out; each buffer is about ``nbytes``."""
    chunk = _chunk(nbytes, itemsize, nranks)
    return Layout(chunk * nranks, chunk * nranks, chunk * nranks * itemsize)


def bandwidth(nbytes: int, seconds: float) -> float:
    """Bytes per second in GB/s (10**9, as nccl-tests and OSU); 0 for a zero time."""
    return nbytes / seconds / 1e9 if seconds > 0 else 0.0


def combine(times: Sequence[float], stat: str) -> float:
    """Summarize the batch times of one side: their ``"min"`` or ``"median"``.

    Raises:
        ValueError: an unknown ``stat`` or no times.
    """
    if not times:
        raise ValueError("no times to combine")
    if stat == "min":
        return min(times)
    if stat == "median":
        return float(statistics.median(times))
    raise ValueError(f"stat must be 'min' or 'median', got {stat!r}")


@dataclass(frozen=True)
class Row:
    """The result of one operation at one size: both sides' batch times and what follows.

    Attributes:
        op: the benchmark case's name.
        size: the requested size in bytes (the goals use it).
        nbytes: the measured size by the nccl-tests convention (the bandwidths use it).
        iters: timed iterations per batch.
        warmup: warm-up iterations per side.
        nranks: the number of ranks.
        factor: the bus factor at ``nranks``.
        mpiflow_s: per round, the max over ranks of the average seconds per call, mpiflow.
        raw_s: the same for raw mpi4py, timed in the same rounds.
        stat: how the batches are summarized (``"min"`` or ``"median"``).
        raw_form: for a case timing two raw forms of the operation (``all_reduce_best``),
            the faster one, whose batches ``raw_s`` holds; empty for the other cases.
        other_raw_s: the other raw form's batches, timed in the same rounds (or empty).
    """

    op: str
    size: int
    nbytes: int
    iters: int
    warmup: int
    nranks: int
    factor: float
    mpiflow_s: tuple[float, ...]
    raw_s: tuple[float, ...]
    stat: str = "min"
    raw_form: str = ""
    other_raw_s: tuple[float, ...] = ()

    @property
    def mpiflow_time(self) -> float:
        """Seconds per operation through mpiflow."""
        return combine(self.mpiflow_s, self.stat)

    @property
    def raw_time(self) -> float:
        """Seconds per operation through raw mpi4py."""
        return combine(self.raw_s, self.stat)

    @property
    def ratio(self) -> float:
        """mpiflow's time over raw mpi4py's (1.0: no overhead), paired by round.

        Round ``r`` times both sides back to back, so each round gives one ratio
        ``mpiflow_s[r] / raw_s[r]`` in which slow drifts of the machine (other load, memory
        bandwidth) cancel; the result is the median of those ratios.
        """
        pairs = [m / r if r > 0 else float("inf")
                 for m, r in zip(self.mpiflow_s, self.raw_s, strict=True)]
        return float(statistics.median(pairs))

    @property
    def time_ratio(self) -> float:
        """The ratio of the two summarized times (``stat`` of each side), unpaired."""
        raw = self.raw_time
        return self.mpiflow_time / raw if raw > 0 else float("inf")

    def algbw(self, side: str) -> float:
        """Algorithm bandwidth in GB/s of ``side`` (``"mpiflow"`` or ``"raw"``)."""
        return bandwidth(self.nbytes, self.mpiflow_time if side == "mpiflow" else self.raw_time)

    def busbw(self, side: str) -> float:
        """Bus bandwidth in GB/s of ``side``: algbw times the bus factor."""
        return self.algbw(side) * self.factor


@dataclass(frozen=True)
class Goal:
    """A target for the ratio mpiflow/raw over a range of requested sizes.

    Attributes:
        label: the sizes it covers, for the reports.
        max_ratio: the largest acceptable ratio.
        min_bytes: the least size it covers.
        max_bytes: the largest size it covers (None: no limit).
    """

    label: str
    max_ratio: float
    min_bytes: int = 0
    max_bytes: int | None = None

    def applies(self, size: int) -> bool:
        """Whether the goal covers a requested size."""
        return size >= self.min_bytes and (self.max_bytes is None or size <= self.max_bytes)


GOALS = (Goal("8 B", 1.3, 0, 8), Goal(">= 1 MiB", 1.05, LARGE_BYTES))


class GoalCheck(NamedTuple):
    """A goal and how an operation fares: its worst covered row (None: no size covered)."""

    goal: Goal
    worst: Row | None

    @property
    def met(self) -> bool | None:
        """True or False, or None when no measured size is covered."""
        return None if self.worst is None else self.worst.ratio <= self.goal.max_ratio


@dataclass(frozen=True)
class Summary:
    """One operation's worst ratios at small (< 1 MiB) and large sizes, and its goals."""

    op: str
    small: Row | None
    large: Row | None
    goals: tuple[GoalCheck, ...]


def _worst(rows: Sequence[Row]) -> Row | None:
    return max(rows, key=lambda r: r.ratio) if rows else None


def summarize(op: str, rows: Sequence[Row], goals: Sequence[Goal] = GOALS) -> Summary:
    """Find an operation's worst ratio among small and among large sizes, and check the goals.

    Args:
        op: the operation's name.
        rows: its results, one per size.
        goals: the goals to check.

    Returns:
        The summary.
    """
    small = _worst([r for r in rows if r.size < LARGE_BYTES])
    large = _worst([r for r in rows if r.size >= LARGE_BYTES])
    checks = tuple(GoalCheck(g, _worst([r for r in rows if g.applies(r.size)])) for g in goals)
    return Summary(op, small, large, checks)


def time_per_call(call: Callable[[], Any], iters: int, barrier: Callable[[], Any]) -> float:
    """Seconds per call of ``iters`` calls of ``call``, started together after ``barrier()``.

    Args:
        call: what is timed, with no arguments.
        iters: how many calls.
        barrier: lines the ranks up first (e.g. a communicator's ``Barrier``).

    Returns:
        The average seconds per call on this rank.

    Example:
        >>> time_per_call(lambda: None, 10, lambda: None) >= 0
        True
    """
    barrier()
    start = time.perf_counter()
    for _ in repeat(None, iters):
        call()
    return (time.perf_counter() - start) / iters


def paired_ratio(num: Sequence[float], den: Sequence[float]) -> float:
    """The median over rounds of ``num[r] / den[r]``: two sides timed back to back in each round.

    Raises:
        ValueError: no rounds, or a different number of rounds on the two sides.
    """
    if not num or len(num) != len(den):
        raise ValueError(f"need the same number (> 0) of rounds, got {len(num)} and {len(den)}")
    pairs = [n / d if d > 0 else float("inf") for n, d in zip(num, den, strict=True)]
    return float(statistics.median(pairs))


@dataclass(frozen=True)
class Timings:
    """Several sides of one comparison, timed in the same rounds (the suites beyond OSU's).

    Attributes:
        sides: the sides' names, e.g. ``("mpiflow", "raw")``.
        batches: per side (in the order of ``sides``), per round, the max over ranks of the
            average seconds per call of that round's batch.
        stat: how a side's rounds give its time (``"min"`` or ``"median"``).
    """

    sides: tuple[str, ...]
    batches: tuple[tuple[float, ...], ...]
    stat: str = "min"

    def __post_init__(self) -> None:
        if len(self.sides) != len(self.batches):
            raise ValueError(f"{len(self.sides)} sides but {len(self.batches)} series of times")

    def of(self, side: str) -> tuple[float, ...]:
        """The per-round times of ``side``."""
        return self.batches[self.sides.index(side)]

    def time(self, side: str) -> float:
        """Seconds per call of ``side``: the ``stat`` of its rounds."""
        return combine(self.of(side), self.stat)

    def ratio(self, side: str, base: str) -> float:
        """``side``'s time over ``base``'s, paired by round (see :func:`paired_ratio`)."""
        return paired_ratio(self.of(side), self.of(base))

    def to_json(self) -> dict[str, Any]:
        """Each side's time and its batches, in microseconds."""
        return {side: {"time_us": self.time(side) * 1e6,
                       "batches_us": [t * 1e6 for t in self.of(side)]} for side in self.sides}
