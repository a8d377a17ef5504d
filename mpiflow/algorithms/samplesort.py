"""Sorting along a distributed axis: a sample sort whose output has the layout asked for.

For each line of the axis (a 1-D array; a few columns are sorted one after the other):

1. every rank draws a sample of its rows (at most ``oversample * p``, at random positions),
   and one all-gather gives every rank all samples with their global row numbers;
2. every rank picks the same ``p - 1`` splitters: the samples at the target layout's part
   boundaries, each sample weighing the rows it stands for. Keys are (value, global row), so
   that equal values are split like any others (an array of zeros spreads evenly);
3. each rank puts its rows in buckets by splitter (a stable counting sort of small bucket
   numbers), and one ``all_to_all_v`` sends bucket ``r`` to rank ``r``;
4. each rank sorts what it received: one local sort, stable where indices are asked for (the
   sources' blocks arrive in global order, so ties keep their original order);
5. the buckets are close to the target counts but not exactly: the few rows across the
   boundaries move once more. Every rank knows every bucket's size before the exchange (the
   send counts are all-gathered), so where values alone are sorted each bucket arrives in a
   buffer that already spans its rank's final rows, and only the crossing rows are copied.

Each row moves once (plus the few of step 5), each rank sorts about ``n / p`` rows once. A
descending sort runs the same steps on the reversed axis (ties keep their order) and reverses
the result in step 5, at no extra cost. NaN sorts last (first when descending), as numpy and
torch do.

Examples:
    >>> from mpiflow.communication.mpi.group import world_comm as comm
    >>> local = numpy.array([3.0, 1.0]) + comm.rank
    >>> values, rows = sort(local, comm, 0, [2] * comm.size, indices=True)
    >>> values.shape == (2,) and rows.dtype == numpy.int64
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy

from ..communication import Communicator
from ..core.array_module import array_module, to_host
from .exchange import fetch, front, unfront
from .ranges import Range, fetch_plan, offsets, reversed_range

__all__ = ["OVERSAMPLE", "sort"]

OVERSAMPLE = 64  # samples per rank and part: buckets within a few percent of their targets


def sort(local: Any, comm: Communicator, axis: int, counts: Sequence[int], *,
         out_counts: Sequence[int] | None = None, descending: bool = False,
         indices: bool = False, oversample: int = OVERSAMPLE) -> tuple[Any, Any]:
    """Sort a distributed axis (collective over ``comm``).

    Args:
        local: this rank's rows along ``axis``; every column (the other axes) is sorted on
            its own.
        comm: the ranks that hold the axis, in its order.
        axis: the distributed axis of ``local``.
        counts: rows each rank holds.
        out_counts: rows each rank holds of the result (default ``counts``).
        descending: largest first.
        indices: also return, for each sorted row, its global row number in the input.
        oversample: samples per rank and part (more: buckets nearer their targets).

    Returns:
        ``(values, rows)``: this rank's ``out_counts[rank]`` rows of the sorted axis, and
        their int64 global row numbers (None unless ``indices``). The sort is stable.
    """
    xp = array_module(local)
    out_counts = list(counts) if out_counts is None else list(out_counts)
    if sum(out_counts) != sum(counts) or len(out_counts) != comm.size:
        raise ValueError(f"out_counts {out_counts} must give each of the {comm.size} ranks a "
                         f"part of the {sum(counts)} rows")
    rows = front(xp, local, axis)
    inner = rows.shape[1:]
    width = math.prod(inner)
    columns = rows.reshape(rows.shape[0], width)
    mine = out_counts[comm.rank]
    if width == 1:  # one line: no copy into a matrix of columns
        v, g = _sort_line(xp, columns[:, 0], comm, list(counts), out_counts, descending,
                          indices, oversample)
        shape = (mine, *inner)
        return (unfront(xp, v.reshape(shape), axis),
                None if g is None else unfront(xp, g.reshape(shape), axis))
    values = xp.empty((mine, width), dtype=local.dtype)
    where = xp.empty((mine, width), dtype=numpy.int64) if indices else None
    for j in range(width):
        v, g = _sort_line(xp, columns[:, j], comm, list(counts), out_counts, descending,
                          indices, oversample)
        values[:, j] = v
        if where is not None:
            where[:, j] = g
    values = unfront(xp, values.reshape(mine, *inner), axis)
    if where is not None:
        where = unfront(xp, where.reshape(mine, *inner), axis)
    return values, where


def _sort_line(xp: Any, a: Any, comm: Communicator, counts: list[int], out_counts: list[int],
               descending: bool, indices: bool, oversample: int) -> tuple[Any, Any]:
    """One column: ``(values, global rows or None)`` of this rank's part of the result."""
    p, me, n = comm.size, comm.rank, sum(counts)
    starts = offsets(counts)
    if descending:  # sort the reversed axis; row i of it is row n - 1 - i of the input
        a = a[::-1]
        base = n - starts[me + 1]
    else:
        base = starts[me]
    if p == 1 or n == 0:
        if indices:
            order = xp.argsort(a, kind="stable")
            v, g = a[order], base + order.astype(numpy.int64)
        else:
            v, g = xp.sort(a), None
        return _finish(xp, v, g, n, descending)
    splitters = _splitters(xp, a, base, comm, counts, out_counts, oversample)
    if indices:
        bucket = _buckets(xp, a, base, splitters)
        order = xp.argsort(bucket, kind="stable")  # small unsigned ints: numpy's radix sort
        sc = [int(c) for c in to_host(xp.bincount(bucket, minlength=p))]
        send, g = a[order], base + order.astype(numpy.int64)
    else:
        # Values alone: equal values are interchangeable, so a selection (introselect, no
        # stable grouping) cuts the buckets, at each splitter's count of rows below it.
        below = _below(xp, a, base, splitters)
        send, g = _partitioned(xp, a, below), None
        sc = [int(c) for c in numpy.diff([0, *below, a.shape[0]])]
    # Every rank's send counts (one all-gather): the buckets' sizes, hence the rebalance's
    # plan, are known before anything moves.
    table = xp.empty((p, p), dtype=numpy.int64)
    comm.all_gather(xp.asarray(sc, dtype=numpy.int64), table)
    table = to_host(table)
    rc = [int(c) for c in table[:, me]]
    held = [int(c) for c in table.sum(axis=0)]
    # Rank r wants rows [T_r, T_r + out_r) of the result, which are rows of the ascending
    # (reversed-axis) order read backwards when descending.
    starts_out = offsets(out_counts)
    wants: list[list[Range]] = []
    for r in range(p):
        lo, hi = starts_out[r], starts_out[r + 1]
        wants.append([reversed_range(n, lo, hi) if descending else (lo, hi)])
    if g is None:
        # The bucket arrives inside a buffer that also spans this rank's final rows, is sorted
        # there, and only the rows that cross part boundaries move again: no copy of the rest.
        store, at = _store(xp, a.dtype, held, wants[me][0], me)
        got = store[at:at + held[me]]
        comm.all_to_all_v(xp.ascontiguousarray(send), sc, got, rc)
        got.sort()
        return _finish(xp, _settle(xp, comm, store, at, held, wants), None, n, descending)
    got = _exchange(xp, comm, send, sc, rc)
    g = _exchange(xp, comm, g, sc, rc)
    if descending:
        # The sources' blocks hold reversed rows n - stop(s) .. n - start(s): later ranks
        # hold earlier rows of the reversed axis. Put the blocks in that order, so that a
        # stable sort keeps equal values in reversed-row order.
        got, g = _reverse_blocks(xp, got, rc), _reverse_blocks(xp, g, rc)
    order = xp.argsort(got, kind="stable")
    got, g = got[order], g[order]
    got = fetch(got, comm, 0, held, wants)
    g = fetch(g, comm, 0, held, wants)
    return _finish(xp, got, g, n, descending)


def _store(xp: Any, dtype: Any, held: list[int], want: Range, me: int) -> tuple[Any, int]:
    """A buffer spanning this rank's bucket (the sorted rows ``[B0, B1)``) and its wanted
    rows ``[F0, F1)``, and where the bucket starts in it."""
    b0 = offsets(held)[me]
    base = min(b0, want[0])
    return xp.empty(max(b0 + held[me], want[1]) - base, dtype=dtype), b0 - base


def _settle(xp: Any, comm: Communicator, store: Any, at: int, held: list[int],
            wants: list[list[Range]]) -> Any:
    """Move the rows of each rank's bucket (``store[at:at + held[me]]``) that belong to other
    ranks' wanted rows, and receive its own wanted rows that lie in other buckets, into their
    places in ``store``: the wanted rows, as a view of ``store``."""
    me = comm.rank
    plan = fetch_plan(held, wants, me)
    f0, f1 = wants[me][0]
    start = at + f0 - offsets(held)[me]  # where row F0 lies in store
    if plan.remote:
        send_counts = [0 if r == me else c for r, c in enumerate(plan.send_counts)]
        recv_counts = [0 if r == me else c for r, c in enumerate(plan.recv_counts)]
        parts = [store[at + a:at + b] for r, ranges in enumerate(plan.sends) if r != me
                 for a, b in ranges]
        send = xp.concatenate(parts) if parts else xp.empty(0, dtype=store.dtype)
        recv = xp.empty(sum(recv_counts), dtype=store.dtype)
        comm.all_to_all_v(xp.ascontiguousarray(send), send_counts, recv, recv_counts)
        block = offsets(recv_counts)
        pos = start
        for owner, lo, hi in plan.mine:
            if owner != me:  # this rank's own rows are in place already
                store[pos:pos + hi - lo] = recv[block[owner]:block[owner] + hi - lo]
                block[owner] += hi - lo
            pos += hi - lo
    return store[start:start + f1 - f0]


def _finish(xp: Any, v: Any, g: Any, n: int, descending: bool) -> tuple[Any, Any]:
    """Values and rows of the sorted reversed axis as those of the descending sort."""
    if not descending:
        return v, g
    return v[::-1], None if g is None else (n - 1) - g[::-1]


def _exchange(xp: Any, comm: Communicator, send: Any, sc: list[int], rc: list[int]) -> Any:
    recv = xp.empty(sum(rc), dtype=send.dtype)
    comm.all_to_all_v(xp.ascontiguousarray(send), sc, recv, rc)
    return recv


def _reverse_blocks(xp: Any, array: Any, counts: list[int]) -> Any:
    starts = offsets(counts)
    blocks = [array[starts[s]:starts[s + 1]] for s in reversed(range(len(counts)))]
    return xp.concatenate(blocks) if blocks else array


def _splitters(xp: Any, a: Any, base: int, comm: Communicator, counts: list[int],
               out_counts: list[int], oversample: int) -> tuple[Any, Any]:
    """The ``p - 1`` splitter keys ``(values, global rows)``, the same on every rank."""
    p, me = comm.size, comm.rank
    drawn = [min(c, oversample * p) for c in counts]
    rng = numpy.random.default_rng(7919 * me + 1)
    positions = numpy.sort(rng.integers(0, max(a.shape[0], 1), size=drawn[me]))
    at = xp.asarray(positions)
    values = xp.empty(sum(drawn), dtype=a.dtype)
    rows = xp.empty(sum(drawn), dtype=numpy.int64)
    comm.all_gather_v(xp.ascontiguousarray(a[at]), values, drawn)
    comm.all_gather_v(base + at.astype(numpy.int64), rows, drawn)
    values, rows = to_host(values), to_host(rows)
    weights = numpy.repeat([c / d if d else 0.0 for c, d in zip(counts, drawn)], drawn)
    order = numpy.lexsort((rows, values))  # by value, then by row
    reach = numpy.cumsum(weights[order])
    targets = offsets(out_counts)[1:-1]
    picked = order[numpy.minimum(numpy.searchsorted(reach, targets, side="left"),
                                 len(order) - 1)]
    return xp.asarray(values[picked]), xp.asarray(rows[picked])


def _below(xp: Any, a: Any, base: int, splitters: tuple[Any, Any]) -> list[int]:
    """For each splitter key, how many of this rank's rows are below it (in key order)."""
    sv, sg = to_host(splitters[0]), to_host(splitters[1])
    out = []
    for s, g in zip(sv, sg):
        if a.dtype.kind == "f" and numpy.isnan(s):
            less = int(a.shape[0] - xp.count_nonzero(xp.isnan(a)))
        else:
            less = int(xp.count_nonzero(a < s))
        # equal values of earlier global rows than the splitter's are below it too
        first = int(min(max(g - base, 0), a.shape[0]))
        less += int(xp.count_nonzero(_same(xp, a[:first], s)))
        out.append(less)
    return out


def _partitioned(xp: Any, a: Any, below: list[int]) -> Any:
    """A copy of ``a`` with the rows of each bucket (cut at ``below``) together, in order."""
    out = a.copy()
    _select(xp, out, sorted(set(k for k in below if 0 < k < a.shape[0])))
    return out


def _select(xp: Any, part: Any, cuts: list[int]) -> None:
    """Partition ``part`` in place at every cut, the middle cut first (one pass a level)."""
    if not cuts:
        return
    mid = len(cuts) // 2
    k = cuts[mid]
    part.partition(k)
    _select(xp, part[:k], cuts[:mid])
    _select(xp, part[k:], [c - k for c in cuts[mid + 1:]])


def _same(xp: Any, x: Any, s: Any) -> Any:
    """``x == s``, with NaN equal to NaN (sorting puts all NaNs together, last)."""
    if x.dtype.kind in "fc" and bool(xp.isnan(s)):
        return xp.isnan(x)
    return x == s


def _buckets(xp: Any, a: Any, base: int, splitters: tuple[Any, Any]) -> Any:
    """Each row's bucket: how many splitter keys are at or below its (value, global row)."""
    sv, sg = splitters
    left = xp.searchsorted(sv, a, side="left")
    right = xp.searchsorted(sv, a, side="right")
    bucket = left.astype(numpy.int64)
    tied = xp.nonzero(right > left)[0]
    if tied.shape[0]:
        v, g = a[tied], base + tied.astype(numpy.int64)
        extra = xp.zeros(tied.shape[0], dtype=numpy.int64)
        for j in range(sv.shape[0]):
            extra += _same(xp, v, sv[j]) & (sg[j] <= g)
        bucket[tied] += extra
    small = numpy.uint8 if sv.shape[0] < 256 else numpy.uint16
    return bucket.astype(small)
