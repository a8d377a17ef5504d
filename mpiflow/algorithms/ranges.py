"""Which rank holds which rows of a distributed axis, and who sends what to whom: pure.

A distributed array's axis of ``n`` rows is held in rank order: rank ``r`` of a communicator of
``p`` ranks holds ``counts[r]`` consecutive rows, starting at ``offsets(counts)[r]``. Every
algorithm of this package moves rows by saying which global row ranges each rank wants
(:class:`FetchPlan`): one ``all_to_all_v`` then serves them all, whether the wants are a
rebalance (a rank's new part of the axis), a halo (a few rows of the neighbours), a rotation
(``roll``) or a reversal (``flip``). Everything here is bookkeeping on integers, the same on
every rank, with no MPI: it is tested without a job.

Examples:
    >>> offsets([3, 0, 2])
    [0, 3, 3, 5]
    >>> pieces([3, 0, 2], 2, 5)
    [(0, 2, 3), (2, 0, 2)]
    >>> balanced(5, 2)
    [3, 2]
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["FetchPlan", "Range", "balanced", "fetch_plan", "offsets", "pieces", "reversed_range"]

Range = tuple[int, int]  # [start, stop) of global rows; start > stop is never made


def offsets(counts: Sequence[int]) -> list[int]:
    """The global row each rank's part starts at, and the total last (``len(counts) + 1``)."""
    out = [0]
    for c in counts:
        if c < 0:
            raise ValueError(f"row counts are non-negative, got {list(counts)}")
        out.append(out[-1] + int(c))
    return out


def balanced(n: int, p: int) -> list[int]:
    """``n`` rows in ``p`` balanced parts, the first ``n % p`` one longer (as ``S(d)`` splits)."""
    base, extra = divmod(n, p)
    return [base + (1 if r < extra else 0) for r in range(p)]


def pieces(counts: Sequence[int], start: int, stop: int) -> list[tuple[int, int, int]]:
    """The parts of the global rows ``[start, stop)``: ``(owner, local start, local stop)``.

    Raises:
        IndexError: the range reaches outside ``[0, sum(counts))``.
    """
    offs = offsets(counts)
    if not 0 <= start <= stop <= offs[-1]:
        raise IndexError(f"rows [{start}, {stop}) outside the axis of {offs[-1]} rows")
    out = []
    at = start
    while at < stop:
        owner = bisect.bisect_right(offs, at) - 1
        while counts[owner] == 0:  # an empty part starts where the next one does
            owner += 1
        end = min(stop, offs[owner + 1])
        out.append((owner, at - offs[owner], end - offs[owner]))
        at = end
    return out


def reversed_range(n: int, start: int, stop: int) -> Range:
    """The rows whose reversal (row ``i`` -> ``n - 1 - i``) is ``[start, stop)``."""
    return n - stop, n - start


@dataclass(frozen=True)
class FetchPlan:
    """One rank's part of an exchange in which every rank wants some global row ranges.

    Attributes:
        sends: per destination rank, the local ``(start, stop)`` slices to send it, in order.
        send_counts: rows sent to each rank.
        recv_counts: rows received from each rank.
        mine: this rank's wanted rows as ``(owner, start, stop)`` pieces of the owners' local
            rows, in the wanted order.
        remote: rows that change rank in the whole exchange, over all ranks (0: no rank
            sends another anything, which every rank knows, so all of them skip the
            collective).
    """

    sends: tuple[tuple[Range, ...], ...]
    send_counts: tuple[int, ...]
    recv_counts: tuple[int, ...]
    mine: tuple[tuple[int, int, int], ...]
    remote: int


def fetch_plan(counts: Sequence[int], wants: Sequence[Sequence[Range]], rank: int) -> FetchPlan:
    """Plan ``rank``'s sends and receives for an exchange in which rank ``r`` wants the global
    rows ``wants[r]`` (ranges, concatenated in that order).

    Args:
        counts: rows each rank holds (their parts concatenated in rank order are the axis).
        wants: per rank, the global row ranges it wants, in the order it wants them.
        rank: the rank to plan for.

    Returns:
        The plan (the same ``remote`` on every rank).

    Examples:
        >>> plan = fetch_plan([2, 2], [[(0, 1), (3, 4)], [(1, 3)]], 0)
        >>> plan.sends, plan.send_counts, plan.recv_counts, plan.mine
        ((((0, 1),), ((1, 2),)), (1, 1), (1, 1), ((0, 0, 1), (1, 1, 2)))
    """
    p = len(counts)
    if len(wants) != p:
        raise ValueError(f"one list of wanted ranges per rank: {p} ranks, {len(wants)} lists")
    sends: list[list[Range]] = [[] for _ in range(p)]
    remote = 0
    mine: list[tuple[int, int, int]] = []
    for r, ranges in enumerate(wants):
        for start, stop in ranges:
            for owner, lo, hi in pieces(counts, start, stop):
                if owner != r:
                    remote += hi - lo
                if owner == rank:
                    sends[r].append((lo, hi))
                if r == rank:
                    mine.append((owner, lo, hi))
    recv_counts = [0] * p
    for owner, lo, hi in mine:
        recv_counts[owner] += hi - lo
    return FetchPlan(tuple(tuple(s) for s in sends),
                     tuple(sum(b - a for a, b in s) for s in sends), tuple(recv_counts),
                     tuple(mine), remote)
