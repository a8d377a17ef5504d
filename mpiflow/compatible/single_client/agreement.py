"""The consistent view's check that every rank feeds a job the same placeholder values.

In the consistent view each rank passes the whole logical batch and keeps its shard of it
(``S(0)``): ranks that pass different arrays would have their rows mixed into one batch
without a word. On the calls that ``MPIFLOW_CHECK``'s schedule picks (the one the
collectives' argument checks follow, :mod:`mpiflow.communication.debug.sampled`), the job
compares a digest of each placeholder's bytes over the ranks with one small all-reduce (the
maximum of the digests and of their negations), and on a difference raises
:class:`PlaceholderMismatchError` on every rank, naming the placeholder and the ranks that fed
each value (a second exchange, made only then).

Examples:
    >>> import numpy
    >>> schedule = CheckSchedule()
    >>> schedule.due() == (check_mode() != "off")  # a job's first call is checked
    True
    >>> agree_on_inputs("job", [("x", numpy.ones(3))])  # one rank: nothing to compare
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy

from ...communication.debug.sampled import check_mode, next_checked
from ...communication.mpi.group import world_comm
from ...core.reduce_op import ReduceOp

__all__ = ["CheckSchedule", "PlaceholderMismatchError", "agree_on_inputs"]


class PlaceholderMismatchError(ValueError):
    """Ranks fed different values to a consistent-view placeholder (raised on every rank)."""


class CheckSchedule:
    """Which calls of a job compare their inputs: those ``MPIFLOW_CHECK`` checks.

    ``off``: none; ``all``: every call; ``sampled`` (the default): the calls whose numbers
    the collectives' schedule (:func:`~mpiflow.communication.debug.sampled.next_checked`)
    picks, counted per job (every rank calls a job the same number of times).
    """

    def __init__(self) -> None:
        self.calls = 0
        self.next = 1

    def due(self) -> bool:
        """Count a call; whether its inputs are compared."""
        self.calls += 1
        mode = check_mode()
        if mode != "sampled":
            return mode == "all"
        if self.calls < self.next:
            return False
        self.next = next_checked(self.calls)
        return True


def _digest(array: numpy.ndarray) -> int:
    data = numpy.ascontiguousarray(array)
    head = zlib.crc32(repr((data.dtype.str, array.shape)).encode())
    return zlib.crc32(data.reshape(-1).view(numpy.uint8).data, head) if data.size else head


def agree_on_inputs(job: str, arrays: Sequence[tuple[str, numpy.ndarray]]) -> None:
    """Raise on every rank where the ranks' ``arrays`` (placeholder name, value) differ.

    Args:
        job: the job's name, for the error.
        arrays: this rank's value of each placeholder, in the job's order.

    Raises:
        PlaceholderMismatchError: a placeholder's bytes (or shape, or dtype) differ between
            ranks; the message names it and the ranks that fed each value.
    """
    if world_comm.size == 1 or not arrays:
        return
    digests = numpy.array([_digest(a) for _, a in arrays], dtype=numpy.int64)
    extremes = numpy.concatenate([digests, -digests])
    world_comm.all_reduce(extremes, ReduceOp.MAX)
    k = len(arrays)
    differ = [i for i in range(k) if extremes[i] != -extremes[k + i]]
    if not differ:
        return
    table = numpy.empty((world_comm.size, k), dtype=numpy.int64)
    world_comm.all_gather(digests, table)
    i = differ[0]
    groups: dict[int, list[int]] = {}
    for rank, value in enumerate(table[:, i]):
        groups.setdefault(int(value), []).append(rank)
    first, *rest = sorted(groups.values())
    fed = ", ".join([f"ranks {first} fed one value", *(f"{r} another" for r in rest)])
    others = "" if len(differ) == 1 else (
        f" (and {', '.join(repr(arrays[j][0]) for j in differ[1:])})")
    raise PlaceholderMismatchError(
        f"job {job!r}: placeholder {arrays[i][0]!r}{others} differs across ranks: {fed}. In "
        "the consistent view every rank passes the whole logical batch, the same on every "
        "rank, and keeps its shard of it; pass the same arrays everywhere, or use "
        "flow.scope.mirrored_view() to feed each rank its own batch")
