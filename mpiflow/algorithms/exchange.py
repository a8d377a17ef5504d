"""Moving rows of a distributed axis: every rank fetches the global row ranges it wants.

:func:`fetch` is the one data movement of this package's algorithms that is not a reduction:
rank ``r`` wants some global row ranges (:mod:`.ranges` plans who sends what), and one
``all_to_all_v`` delivers them all. :func:`rebalance` (a rank's new part of the axis),
:func:`halo` (rows of the neighbours, however many ranks away they are) and the reversal and
rotation of an axis are fetches with particular wants. Arrays are numpy or CuPy arrays (the
communicator's module); the axis is any axis of the local array, the other axes travel with it.

Examples:
    >>> from mpiflow.communication.mpi.group import world_comm as comm
    >>> counts = gather_counts(comm, 2)
    >>> local = numpy.arange(2) + 2 * comm.rank
    >>> rebalance(local, comm, 0, counts, [sum(counts)] + [0] * (comm.size - 1)).shape[0] \\
    ...     == (2 * comm.size if comm.rank == 0 else 0)
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy

from ..communication import Communicator
from ..core.array_module import array_module
from .ranges import Range, fetch_plan, offsets

__all__ = ["fetch", "front", "gather_counts", "halo", "rebalance", "unfront"]


def front(xp: Any, array: Any, axis: int) -> Any:
    """``array`` with ``axis`` first, C-contiguous (rows along it are contiguous)."""
    if axis == 0 and array.flags.c_contiguous:
        return array
    return xp.ascontiguousarray(xp.moveaxis(array, axis, 0))


def unfront(xp: Any, array: Any, axis: int) -> Any:
    """Undo :func:`front`: the first axis back at ``axis``."""
    return array if axis == 0 else xp.moveaxis(array, 0, axis)


def gather_counts(comm: Communicator, count: int) -> list[int]:
    """Every rank's ``count``, in rank order (one all-gather of one integer each).

    Examples:
        >>> from mpiflow.communication.mpi.group import world_comm as comm
        >>> gather_counts(comm, 3) == [3] * comm.size
        True
    """
    if comm.size == 1:
        return [int(count)]
    mine = numpy.array([count], dtype=numpy.int64)
    out = numpy.empty(comm.size, dtype=numpy.int64)
    comm.all_gather(mine, out)
    return [int(c) for c in out]


def fetch(local: Any, comm: Communicator, axis: int, counts: Sequence[int],
          wants: Sequence[Sequence[Range]]) -> Any:
    """The global rows ``wants[comm.rank]`` of a distributed axis, concatenated (collective).

    Args:
        local: this rank's rows (``counts[comm.rank]`` along ``axis``).
        comm: the ranks that hold the axis, in its order.
        axis: the distributed axis of ``local``.
        counts: rows each rank holds.
        wants: per rank, the global row ranges it wants (the same list on every rank).

    Returns:
        An array of ``local``'s dtype and module with the wanted rows along ``axis`` (a view
        of ``local`` where they are one range of its own rows).

    Examples:
        >>> from mpiflow.communication.mpi.group import world_comm as comm
        >>> local = numpy.arange(2) + 2 * comm.rank  # the axis 0, 1, ..., 2p-1
        >>> n = 2 * comm.size
        >>> fetch(local, comm, 0, [2] * comm.size, [[(n - 1, n)]] * comm.size).tolist() == [n - 1]
        True
    """
    xp = array_module(local)
    me = comm.rank
    if local.shape[axis] != counts[me]:
        raise ValueError(f"this rank holds {local.shape[axis]} rows along axis {axis}, the "
                         f"counts say {counts[me]}")
    rows = front(xp, local, axis)
    inner = rows.shape[1:]
    plan = fetch_plan(counts, wants, me)
    if len(plan.mine) == 1 and plan.mine[0][0] == me:  # one piece of my own rows: a view
        _, lo, hi = plan.mine[0]
        if plan.remote == 0:
            return unfront(xp, rows[lo:hi], axis)
    width = math.prod(inner)
    recv = None
    if plan.remote and width and comm.size > 1:
        # Rows a rank keeps do not go through MPI: they are copied once, into the result.
        send_counts = [0 if r == me else c for r, c in enumerate(plan.send_counts)]
        recv_counts = [0 if r == me else c for r, c in enumerate(plan.recv_counts)]
        parts = [rows[a:b] for r, ranges in enumerate(plan.sends) if r != me
                 for a, b in ranges]
        send = (parts[0] if len(parts) == 1 else xp.concatenate(parts) if parts
                else xp.empty((0, *inner), dtype=local.dtype))
        recv = xp.empty((sum(recv_counts), *inner), dtype=local.dtype)
        comm.all_to_all_v(xp.ascontiguousarray(send).reshape(-1),
                          [c * width for c in send_counts], recv.reshape(-1),
                          [c * width for c in recv_counts])
        block = offsets(recv_counts)
    out = xp.empty((sum(hi - lo for _, lo, hi in plan.mine), *inner), dtype=local.dtype)
    at = 0
    for owner, lo, hi in plan.mine:
        if owner == me:
            out[at:at + hi - lo] = rows[lo:hi]
        elif recv is not None:
            out[at:at + hi - lo] = recv[block[owner]:block[owner] + hi - lo]
            block[owner] += hi - lo
        at += hi - lo
    return unfront(xp, out, axis)


def rebalance(local: Any, comm: Communicator, axis: int, counts: Sequence[int],
              new_counts: Sequence[int]) -> Any:
    """The axis held as ``new_counts`` rows per rank instead of ``counts`` (collective).

    Rows keep their global order; only rows whose owner changes move.

    Raises:
        ValueError: the two counts do not add up to the same number of rows.
    """
    if sum(counts) != sum(new_counts):
        raise ValueError(f"a rebalance keeps the {sum(counts)} rows, not {sum(new_counts)}")
    if list(counts) == list(new_counts):
        return local
    starts = offsets(new_counts)
    wants = [[(starts[r], starts[r + 1])] for r in range(len(new_counts))]
    return fetch(local, comm, axis, counts, wants)


def halo(local: Any, comm: Communicator, axis: int, counts: Sequence[int], before: int,
         after: int, *, periodic: bool = False) -> tuple[Any, Any]:
    """The ``before`` rows preceding this rank's part and the ``after`` rows following it.

    Near the ends of the axis fewer rows exist (none before row 0), unless ``periodic``,
    where the axis wraps around. Empty parts of other ranks are skipped over: the rows come
    from whichever ranks hold them.

    Returns:
        ``(rows before, rows after)``, each with up to ``before``/``after`` rows along ``axis``.
    """
    n = sum(counts)
    starts = offsets(counts)
    wants: list[list[Range]] = []
    for r in range(len(counts)):
        lo, hi = starts[r], starts[r + 1]
        ranges: list[Range] = []
        if periodic and n:
            k = min(before, n)
            ranges += _wrapped(lo - k, lo, n)
            k2 = min(after, n)
            ranges += _wrapped(hi, hi + k2, n)
        else:
            ranges += [(max(0, lo - before), lo), (hi, min(n, hi + after))]
        wants.append(ranges)
    got = fetch(local, comm, axis, counts, wants)
    xp = array_module(local)
    lo, hi = starts[comm.rank], starts[comm.rank + 1]
    first = min(before, n) if periodic and n else lo - max(0, lo - before)
    return (xp.take(got, xp.arange(first), axis=axis),
            xp.take(got, xp.arange(first, got.shape[axis]), axis=axis))


def _wrapped(start: int, stop: int, n: int) -> list[Range]:
    """``[start, stop)`` of an axis of ``n`` rows that wraps around, as in-range ranges."""
    out: list[Range] = []
    while start < stop:
        a = start % n
        b = min(n, a + (stop - start))
        out.append((a, b))
        start += b - a
    return out
