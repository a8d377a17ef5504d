"""An axis made of pieces of another: rotations, paddings and their adjoints (one fetch each).

A *segment list* describes a new axis as the concatenation of segments of a distributed input
axis of ``n`` rows:

- ``("rows", a, b)``: the input rows ``a .. b-1``, in order;
- ``("reversed", a, b)``: the input rows ``b-1`` down to ``a``;
- ``("repeat", r, k)``: the input row ``r``, ``k`` times;
- ``("fill", 0, k)``: ``k`` rows of a constant.

``roll`` is ``[("rows", n - s, n), ("rows", 0, n - s)]``; a reflecting pad of 2 rows before is
``[("reversed", 1, 3), ("rows", 0, n)]``. :func:`assemble` builds this rank's part of the new
axis (laid out as ``out_counts``): every rank knows which input rows each rank's part needs (pure
bookkeeping), and one :func:`.exchange.fetch` moves them. :func:`scatter_sum` is the adjoint (the
gradient): each input row gets the sum of the new axis' rows that copied it, again in one fetch.
Without a communicator both run on a whole local axis.

Examples:
    >>> segment_pieces([("rows", 3, 5), ("rows", 0, 3)], 1, 4)
    [('rows', 4, 5), ('rows', 0, 2)]
    >>> assemble(numpy.arange(4), None, 0, [4], [("reversed", 1, 3), ("rows", 0, 4)],
    ...          [6]).tolist()
    [2, 1, 0, 1, 2, 3]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..communication import Communicator
from ..core.array_module import array_module
from .exchange import fetch, front, unfront
from .ranges import Range, offsets

__all__ = ["Segment", "assemble", "check_segments", "scatter_sum", "segment_length",
           "segment_pieces"]

Segment = tuple[str, int, int]
_KINDS = ("rows", "reversed", "repeat", "fill")


def segment_length(segment: Segment) -> int:
    """How many rows of the new axis ``segment`` makes."""
    kind, a, b = segment
    return b - a if kind in ("rows", "reversed") else b


def check_segments(segments: Sequence[Segment], n: int) -> None:
    """Raise ``ValueError`` unless every segment is well formed and inside ``n`` input rows."""
    for kind, a, b in segments:
        if kind not in _KINDS:
            raise ValueError(f"unknown segment kind {kind!r}; expected one of {_KINDS}")
        if kind in ("rows", "reversed") and not 0 <= a <= b <= n:
            raise ValueError(f"segment {(kind, a, b)} outside an axis of {n} rows")
        if kind == "repeat" and (not 0 <= a < n or b < 0):
            raise ValueError(f"segment {(kind, a, b)} outside an axis of {n} rows")
        if kind == "fill" and b < 0:
            raise ValueError(f"segment {(kind, a, b)} has a negative length")


def segment_pieces(segments: Sequence[Segment], lo: int, hi: int) -> list[Segment]:
    """The rows ``[lo, hi)`` of the new axis, as segments of their own (empty ones left out)."""
    out: list[Segment] = []
    at = 0
    for kind, a, b in segments:
        length = segment_length((kind, a, b))
        s, e = max(lo, at), min(hi, at + length)
        if s < e:
            u, v = s - at, e - at
            if kind == "rows":
                out.append(("rows", a + u, a + v))
            elif kind == "reversed":
                out.append(("reversed", b - v, b - u))
            else:
                out.append((kind, a, v - u))
        at += length
    return out


def _source(piece: Segment) -> Range:
    kind, a, b = piece
    return (a, a + 1) if kind == "repeat" else (a, b)


def assemble(local: Any, comm: Communicator | None, axis: int, counts: Sequence[int],
             segments: Sequence[Segment], out_counts: Sequence[int], fill: Any = 0) -> Any:
    """This rank's part of the axis ``segments`` make of a distributed axis (collective).

    Args:
        local: this rank's rows of the input along ``axis``.
        comm: the ranks that hold the axis, in its order (None: ``local`` is the whole axis).
        axis: the axis.
        counts: input rows each rank holds.
        segments: the new axis (see the module).
        out_counts: rows of the new axis each rank holds (their sum is the segments' length).
        fill: the value of ``fill`` segments.

    Returns:
        ``out_counts[rank]`` rows along ``axis``; the other axes as ``local``'s.
    """
    xp = array_module(local)
    p, me = (1, 0) if comm is None else (comm.size, comm.rank)
    if sum(out_counts) != sum(segment_length(s) for s in segments) or len(out_counts) != p:
        raise ValueError(f"out_counts {list(out_counts)} do not lay out the "
                         f"{sum(segment_length(s) for s in segments)} rows of the segments")
    starts = offsets(out_counts)
    plans = [segment_pieces(segments, starts[r], starts[r + 1]) for r in range(p)]
    rows = front(xp, local, axis)
    if comm is None:
        source, base = rows, None
    else:
        wants = [[_source(piece) for piece in plan if piece[0] != "fill"] for plan in plans]
        source, base = front(xp, fetch(local, comm, axis, counts, wants), axis), 0
    out = xp.empty((out_counts[me], *rows.shape[1:]), dtype=local.dtype)
    at = 0
    for kind, a, b in plans[me]:
        length = segment_length((kind, a, b))
        if kind != "fill":
            lo, hi = _source((kind, a, b))
            if base is not None:  # the fetched rows come in the plan's order
                lo, hi, base = base, base + hi - lo, base + hi - lo
            block = source[lo:hi]
        if kind == "rows":
            out[at:at + length] = block
        elif kind == "reversed":
            out[at:at + length] = block[::-1]
        elif kind == "repeat":
            out[at:at + length] = block
        else:
            out[at:at + length] = fill
        at += length
    return unfront(xp, out, axis)


def scatter_sum(local: Any, comm: Communicator | None, axis: int, counts: Sequence[int],
                segments: Sequence[Segment], out_counts: Sequence[int]) -> Any:
    """The adjoint of :func:`assemble`: each input row gets the sum of the rows copied from it.

    Args:
        local: this rank's rows of the new axis (laid out as ``counts``) along ``axis``.
        comm: the ranks, in the axis' order (None: ``local`` is the whole axis).
        axis: the axis.
        counts: rows of the new axis each rank holds.
        segments: the new axis, as given to :func:`assemble`.
        out_counts: input rows each rank holds (the result's layout).

    Returns:
        ``out_counts[rank]`` rows along ``axis``: the sums (``fill`` rows add nothing).
    """
    xp = array_module(local)
    p, me = (1, 0) if comm is None else (comm.size, comm.rank)
    starts = offsets(out_counts)
    plans: list[list[tuple[int, int, int, str]]] = []  # (g start, g stop, dest row, how)
    for r in range(p):
        lo, hi = starts[r], starts[r + 1]
        plan = []
        at = 0
        for kind, a, b in segments:
            if kind in ("rows", "reversed"):
                s, e = max(a, lo), min(b, hi)
                if s < e:
                    g = (at + s - a, at + e - a) if kind == "rows" else (at + b - e, at + b - s)
                    plan.append((*g, s - lo, kind))
            elif kind == "repeat" and lo <= a < hi and b:
                plan.append((at, at + b, a - lo, kind))
            at += segment_length((kind, a, b))
        plans.append(plan)
    rows = front(xp, local, axis)
    if comm is None:
        source, base = rows, None
    else:
        wants = [[(g0, g1) for g0, g1, _, _ in plan] for plan in plans]
        source, base = front(xp, fetch(local, comm, axis, counts, wants), axis), 0
    out = xp.zeros((out_counts[me], *rows.shape[1:]), dtype=local.dtype)
    for g0, g1, dest, kind in plans[me]:
        if base is not None:
            g0, g1, base = base, base + g1 - g0, base + g1 - g0
        block = source[g0:g1]
        if kind == "rows":
            out[dest:dest + g1 - g0] += block
        elif kind == "reversed":
            out[dest:dest + g1 - g0] += block[::-1]
        else:
            out[dest] += block.sum(axis=0)
    return unfront(xp, out, axis)


def differences(local: Any, comm: Communicator | None, axis: int, counts: Sequence[int],
                n: int, before: Any, after: Any, out_counts: Sequence[int], start: int = 0
                ) -> Any:
    """This rank's rows of the ``n``-th differences along a distributed axis (collective).

    The axis differenced is ``before ++ axis ++ after`` (``before`` and ``after`` are whole
    arrays every rank holds, e.g. ``diff``'s ``prepend``/``append`` or zeros); the result's
    rows ``[start + T_r, start + T_r + out_counts[r])`` go to rank ``r`` (``T``: the offsets of
    ``out_counts``). Each rank needs its rows and the ``n`` after them: one fetch, which is the
    halo and the rebalance to the result's layout at once.

    Args:
        local: this rank's rows along ``axis``.
        comm: the ranks, in the axis' order (None: ``local`` is the whole axis).
        axis: the axis.
        counts: rows each rank holds.
        n: how many times to difference.
        before: rows before the axis (an array of ``local``'s other extents, or None).
        after: rows after the axis (or None).
        out_counts: result rows each rank gets.
        start: the first row of the differences that rank 0 gets (a crop).

    Returns:
        ``out_counts[rank]`` rows along ``axis``.
    """
    xp = array_module(local)
    p, me = (1, 0) if comm is None else (comm.size, comm.rank)
    m = sum(counts)
    head = 0 if before is None else before.shape[axis]
    tail = 0 if after is None else after.shape[axis]
    if start + sum(out_counts) > max(head + m + tail - n, 0) or len(out_counts) != p:
        raise ValueError(f"out_counts {list(out_counts)} from row {start} lie outside the "
                         f"{max(head + m + tail - n, 0)} differences")
    starts = offsets(out_counts)
    need: list[Range] = []  # per rank: the rows of the extended axis it differences
    wants: list[list[Range]] = []
    for r in range(p):
        lo, hi = start + starts[r], start + starts[r + 1]
        need.append((lo, hi + n) if hi > lo else (lo, lo))
        a, b = max(need[r][0], head) - head, min(need[r][1], head + m) - head
        wants.append([(a, b)] if a < b else [])
    if comm is None:
        got = local if not wants[0] else xp.take(local, xp.arange(*wants[0][0]), axis=axis)
    else:
        got = fetch(local, comm, axis, counts, wants)
    lo, hi = need[me]
    parts = []
    if before is not None and lo < head:
        parts.append(xp.take(before, xp.arange(lo, min(hi, head)), axis=axis))
    if wants[me]:
        parts.append(got)
    if after is not None and hi > head + m:
        parts.append(xp.take(after, xp.arange(max(lo, head + m) - head - m, hi - head - m),
                             axis=axis))
    if not parts:
        shape = list(local.shape)
        shape[axis] = 0
        return xp.empty(shape, dtype=local.dtype)
    rows = parts[0] if len(parts) == 1 else xp.concatenate(parts, axis=axis)
    return xp.diff(rows, n=n, axis=axis) if n else rows
