"""Order statistics of a distributed axis by selection, not by sorting it.

:func:`order_statistics` finds the values at given positions of the sorted union of the
ranks' parts of some sets (without NaN), by *sample-based bracketing*:

1. each rank draws a sample of its candidates in proportion to how many it holds, and one
   ``all_gather_v`` gives every rank all samples (of every set and target at once);
2. every rank picks the same two pivots around the target's position in the sample (a few
   standard deviations of a sample quantile either side), counts its candidates below and at
   each, and one ``all_gather`` of these counts tells every rank where the target lies: in a
   run of values equal to a pivot (found), or between pivots, whose candidates alone stay;
3. after a round or two a target has at most :data:`EXACT` candidates: they come along in the
   next ``all_gather_v`` and every rank picks the target from them.

Each round shrinks a target's candidates about ``sqrt(samples) / 3`` times (30x with
:data:`SAMPLE`); a round reads each candidate a few times and moves only samples and counts.
Ties cannot stall it: a pivot is one of the candidates, so every round removes it or finds the
target at it.

On this: :func:`kth_values` (``kthvalue``, ``median``: the value and its row, NaN last),
:func:`quantiles` (torch's interpolations) and :func:`topk` (local top k, a selection across
ranks, a distributed sort of the k selected).

Examples:
    >>> from mpiflow.communication.mpi.group import world_comm as comm
    >>> local = numpy.arange(3.0) + 3 * comm.rank  # 0, 1, ..., 3p-1 along the axis
    >>> values, rows = kth_values(local, comm, 0, numpy.array([2]))
    >>> values.tolist(), rows.tolist()
    ([1.0], [1])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy

from ..communication import Communicator, ReduceOp
from ..core.array_module import array_module, to_host
from .exchange import front
from .indexing import take
from .ranges import balanced, offsets
from .samplesort import sort

__all__ = ["EXACT", "SAMPLE", "kth_values", "lines", "locate", "order_statistics", "quantiles",
           "same", "topk", "valid_sizes"]

SAMPLE = 8192  # at most this many samples per target and round, over all ranks
EXACT = 32768  # a target with at most this many candidates is finished by gathering them
_Z = 3.0  # how many standard deviations of a sample quantile the pivots stay off the target


def lines(local: Any, axis: int) -> Any:
    """``local`` as a matrix: the axis' rows, one column per element of the other axes."""
    xp = array_module(local)
    rows = front(xp, local, axis)
    return rows.reshape(rows.shape[0], math.prod(rows.shape[1:]))


def same(xp: Any, x: Any, value: Any) -> Any:
    """``x == value``, with NaN equal to NaN (sorting puts all NaNs together, last)."""
    if x.dtype.kind in "fc" and bool(numpy.isnan(value)):
        return xp.isnan(x)
    return x == value


def valid_sizes(xp: Any, matrix: Any, comm: Communicator) -> numpy.ndarray:
    """Every rank's rows and non-NaN elements per column: an int64 ``(p, 1 + width)`` array
    (one ``all_gather``)."""
    mine = numpy.empty(1 + matrix.shape[1], dtype=numpy.int64)
    mine[0] = matrix.shape[0]
    if matrix.dtype.kind == "f":
        mine[1:] = matrix.shape[0] - to_host(xp.count_nonzero(xp.isnan(matrix), axis=0))
    else:
        mine[1:] = matrix.shape[0]
    out = numpy.empty((comm.size, mine.shape[0]), dtype=numpy.int64)
    comm.all_gather(mine, out)
    return out


def _without_nan(xp: Any, column: Any, valid: int) -> Any:
    return column if valid == column.shape[0] else column[~xp.isnan(column)]


@dataclass
class _Target:
    """Positions ``lo..hi`` of a set, with the candidates that still hold them."""

    key: int  # the request it answers
    origin: int  # the request's first position
    lo: int
    hi: int
    below: int  # elements of the set below every candidate
    cand: Any  # this rank's candidates
    sizes: numpy.ndarray  # every rank's number of candidates
    pivots: list[Any] = field(default_factory=list)

    @property
    def total(self) -> int:
        return int(self.sizes.sum())


def order_statistics(sets: Sequence[Any], comm: Communicator, sizes: numpy.ndarray,
                     targets: Sequence[tuple[int, int, int]], *, sample: int = SAMPLE,
                     exact: int = EXACT) -> list[numpy.ndarray]:
    """The values at positions of the sorted union of sets held in parts (collective).

    Args:
        sets: this rank's part of each set, 1-D arrays of one dtype without NaN.
        comm: the ranks holding the parts.
        sizes: int ``(p, len(sets))``: every rank's part sizes (the same on every rank).
        targets: ``(set, lo, hi)``: the positions ``lo..hi`` (0-based, inclusive, within the
            set's size) of the set's ascending order.
        sample: samples per target and round, over all ranks.
        exact: finish a target by gathering its candidates once they are this few.

    Returns:
        Per target, the values at ``lo..hi`` (a host array of the sets' dtype), the same on
        every rank.
    """
    xp = array_module(sets[0]) if sets else numpy
    dtype = sets[0].dtype if sets else numpy.dtype(numpy.float64)
    found: list[numpy.ndarray] = [numpy.empty(hi - lo + 1, dtype=dtype) for _, lo, hi in targets]
    active = [_Target(i, lo, lo, hi, 0, sets[s],
                      numpy.asarray(sizes)[:, s].astype(numpy.int64))
              for i, (s, lo, hi) in enumerate(targets) if hi >= lo]
    rng = numpy.random.default_rng(7919 * comm.rank + 17)
    while active:
        finish = [t for t in active if t.total <= max(exact, 1)]
        bracket = [t for t in active if t.total > max(exact, 1)]
        draws = [_draws(t.sizes, sample) for t in bracket]
        counts = [int(sum(t.sizes[r] for t in finish) + sum(d[r] for d in draws))
                  for r in range(comm.size)]
        parts = [t.cand for t in finish]
        for t, d in zip(bracket, draws):
            n = int(t.cand.shape[0])
            at = rng.integers(0, n, size=int(d[comm.rank])) if n else numpy.empty(0, int)
            parts.append(t.cand[xp.asarray(at)])
        got = to_host(_all_gather_v(xp, comm, parts, dtype, counts))
        pieces = _split(got, counts, [[int(t.sizes[r]) for t in finish] + [int(d[r])
                                                                             for d in draws]
                                      for r in range(comm.size)])
        for j, t in enumerate(finish):
            values = numpy.sort(numpy.concatenate([p[j] for p in pieces]))
            _store(found, t, t.lo, t.hi, values[t.lo - t.below:t.hi - t.below + 1])
        for j, t in enumerate(bracket):
            values = numpy.sort(numpy.concatenate([p[len(finish) + j] for p in pieces]))
            t.pivots = _pivots(values, t)
        active = _narrow(xp, comm, bracket, found) if bracket else []
    return found


def _draws(sizes: numpy.ndarray, sample: int) -> numpy.ndarray:
    """Samples each rank draws: in proportion to its candidates, at least one if it has any.

    Of ``n`` candidates, ``s`` samples leave at most about ``3 n / sqrt(s)`` between the
    pivots; the two are equal at ``s = (3 n)^(2/3)``, so no more are drawn (few candidates,
    few samples).
    """
    total = int(sizes.sum())
    sample = min(sample, math.ceil((3 * total) ** (2 / 3)))
    return numpy.where(sizes > 0, -(-sample * sizes // max(total, 1)), 0).astype(numpy.int64)


def _all_gather_v(xp: Any, comm: Communicator, parts: list[Any], dtype: Any,
                  counts: list[int]) -> Any:
    send = xp.concatenate(parts) if parts else xp.empty(0, dtype=dtype)
    recv = xp.empty(sum(counts), dtype=dtype)
    comm.all_gather_v(xp.ascontiguousarray(send, dtype=dtype), recv, counts)
    return recv


def _split(got: numpy.ndarray, counts: list[int], blocks: list[list[int]]
           ) -> list[list[numpy.ndarray]]:
    """Rank-major blocks of a gathered array: per rank, its pieces in order."""
    out = []
    at = 0
    for sizes in blocks:
        row = []
        for s in sizes:
            row.append(got[at:at + s])
            at += s
        out.append(row)
    return out


def _pivots(sample: numpy.ndarray, t: _Target) -> list[Any]:
    """Up to two distinct values of the sorted sample that bracket the target's positions."""
    n, total = sample.shape[0], t.total
    f_lo, f_hi = (t.lo - t.below) / total, (t.hi - t.below + 1) / total
    ia = math.floor(f_lo * n - _Z * math.sqrt(n * f_lo * (1 - f_lo))) - 1
    ib = math.ceil(f_hi * n + _Z * math.sqrt(n * max(f_hi * (1 - f_hi), 0.0)))
    out = []
    if ia >= 0:
        out.append(sample[ia])
    if ib < n and (not out or sample[ib] != out[0]):
        out.append(sample[ib])
    if not out:  # the sample's middle: a candidate, so the round removes it or finds it
        out.append(sample[min(n - 1, int(f_lo * n))])
    return out


def _narrow(xp: Any, comm: Communicator, bracket: list[_Target], found: list[numpy.ndarray]
            ) -> list[_Target]:
    """One round's counts (one ``all_gather``) and what each target keeps."""
    mine = numpy.zeros((len(bracket), 4), dtype=numpy.int64)
    for i, t in enumerate(bracket):
        for j, v in enumerate(t.pivots):
            mine[i, 2 * j] = int(xp.count_nonzero(t.cand < v))
            mine[i, 2 * j + 1] = int(xp.count_nonzero(t.cand <= v))
    every = numpy.empty((comm.size, *mine.shape), dtype=numpy.int64)
    comm.all_gather(mine, every)
    out: list[_Target] = []
    for i, t in enumerate(bracket):
        k = len(t.pivots)
        # per rank: 0, lt(p0), le(p0), [lt(p1), le(p1)], size: segment 2j+1 holds pivot j
        bounds = numpy.concatenate([numpy.zeros((comm.size, 1), dtype=numpy.int64),
                                    every[:, i, :2 * k], t.sizes[:, None]], axis=1)
        total = bounds.sum(axis=0)
        lo = t.lo
        while lo <= t.hi:
            seg = int(numpy.searchsorted(total, lo - t.below, side="right")) - 1
            hi = min(t.hi, t.below + int(total[seg + 1]) - 1)
            if seg % 2:  # a run of values equal to a pivot
                _store(found, t, lo, hi, t.pivots[seg // 2])
            else:
                keep = xp.ones(t.cand.shape[0], dtype=bool)
                if seg > 0:
                    keep &= t.cand > t.pivots[seg // 2 - 1]
                if seg < 2 * k:
                    keep &= t.cand < t.pivots[seg // 2]
                out.append(_Target(t.key, t.origin, lo, hi, t.below + int(total[seg]), t.cand[keep],
                                   bounds[:, seg + 1] - bounds[:, seg]))
            lo = hi + 1
    return out


def _store(found: list[numpy.ndarray], t: _Target, lo: int, hi: int, value: Any) -> None:
    """Write the values of the positions ``lo..hi`` of target ``t``'s request."""
    found[t.key][lo - t.origin:hi - t.origin + 1] = value


# -- k-th values and their rows ------------------------------------------------------------------
def kth_values(local: Any, comm: Communicator, axis: int, ks: Any = None, *,
               rule: str = "k", rows: bool = True) -> tuple[numpy.ndarray, Any]:
    """Per column, the value at a position of the stable ascending order (NaN last) of a
    distributed axis, and its global row (collective).

    Args:
        local: this rank's rows along ``axis``; each column (the other axes) on its own.
        comm: the ranks that hold the axis, in its order.
        axis: the distributed axis.
        ks: with ``rule="k"``: the 1-based positions, per column (or one for all).
        rule: ``"k"``; ``"median"`` (the lower middle, or the first NaN where a column has
            one, as torch's ``median``); ``"nanmedian"`` (the lower middle of the non-NaN
            values; the first NaN where all are NaN).
        rows: also find the rows (else ``rows`` is None: two collectives fewer).

    Returns:
        ``(values, rows)``: host arrays of one entry per column (``local``'s dtype, int64):
        the value, and the row of the element the stable order puts there.
    """
    xp = array_module(local)
    matrix = lines(local, axis)
    sizes = valid_sizes(xp, matrix, comm)
    n, valid = int(sizes[:, 0].sum()), sizes[:, 1:].sum(axis=0)
    width = matrix.shape[1]
    if rule == "k":
        positions = numpy.broadcast_to(numpy.asarray(ks, dtype=numpy.int64), (width,)) - 1
    elif rule == "median":
        positions = numpy.where(valid < n, valid, (n - 1) // 2)
    elif rule == "nanmedian":
        positions = numpy.where(valid > 0, (valid - 1) // 2, 0)
    else:
        raise ValueError(f"unknown rule {rule!r}")
    values = numpy.full(width, numpy.nan if matrix.dtype.kind == "f" else 0, matrix.dtype)
    columns = [j for j in range(width) if positions[j] < valid[j]]
    sets = [_without_nan(xp, matrix[:, j], int(sizes[comm.rank, 1 + j])) for j in range(width)]
    got = order_statistics(sets, comm, sizes[:, 1:], [(j, int(positions[j]),
                                                         int(positions[j])) for j in columns])
    for j, v in zip(columns, got):
        values[j] = v[0]
    if not rows:
        return values, None
    return values, locate(matrix, comm, [int(c) for c in sizes[:, 0]], values, positions)


def locate(matrix: Any, comm: Communicator, counts: Sequence[int], values: numpy.ndarray,
           positions: numpy.ndarray) -> numpy.ndarray:
    """Per column, the global row of the element at ``positions`` of the stable ascending
    order (NaN last), given that its value is ``values`` (an ``all_gather`` of two counts per
    column and an ``all_reduce``)."""
    xp = array_module(matrix)
    width = matrix.shape[1]
    mine = numpy.zeros((width, 2), dtype=numpy.int64)
    hits = []
    for j in range(width):
        column, v = matrix[:, j], values[j]
        hit = same(xp, column, v)
        below = (~xp.isnan(column)) if column.dtype.kind == "f" and numpy.isnan(v) else column < v
        mine[j] = int(xp.count_nonzero(below)), int(xp.count_nonzero(hit))
        hits.append(hit)
    every = numpy.empty((comm.size, width, 2), dtype=numpy.int64)
    comm.all_gather(mine, every)
    occurrence = positions - every[:, :, 0].sum(axis=0)
    before = numpy.cumsum(every[:, :, 1], axis=0) - every[:, :, 1]
    start = offsets(counts)[comm.rank]
    rows = numpy.full(width, -1, dtype=numpy.int64)
    for j in range(width):
        k = int(occurrence[j] - before[comm.rank, j])
        if 0 <= k < mine[j, 1]:
            rows[j] = start + int(to_host(xp.nonzero(hits[j])[0][k]))
    comm.all_reduce(rows, ReduceOp.MAX)
    return rows


# -- quantiles -----------------------------------------------------------------------------------
INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def quantile_ranks(q: numpy.ndarray, n: Any, interpolation: str, dtype: Any
                   ) -> tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    """torch's positions of quantiles ``q`` among ``n`` sorted values (per column):
    ``(below, above, weight)``, computed in ``dtype`` as torch does."""
    dtype = numpy.dtype(dtype)
    last = numpy.maximum(numpy.asarray(n, dtype=numpy.int64) - 1, 0)
    ranks = (numpy.asarray(q, dtype=dtype)[:, None] * last[None, :].astype(dtype)).astype(dtype)
    if interpolation == "lower":
        ranks = numpy.floor(ranks)
    elif interpolation == "higher":
        ranks = numpy.ceil(ranks)
    elif interpolation == "nearest":
        ranks = numpy.round(ranks)
    below = ranks.astype(numpy.int64)
    if interpolation in ("linear", "midpoint"):
        above = numpy.ceil(ranks).astype(numpy.int64)
        weight = (numpy.full_like(ranks, 0.5) if interpolation == "midpoint"
                  else (ranks - below.astype(dtype)).astype(dtype))
    else:
        above, weight = below, numpy.zeros_like(ranks)
    return below, above, weight


def lerp(xp: Any, low: Any, high: Any, weight: Any) -> Any:
    """torch's ``lerp``: exact at both ends (``weight`` below 0.5 from ``low``, else from
    ``high``)."""
    small = xp.abs(weight) < 0.5
    return xp.where(small, low + weight * (high - low), high - (high - low) * (1 - weight))


def quantiles(local: Any, comm: Communicator, axis: int, q: numpy.ndarray,
              interpolation: str = "linear", *, ignore_nan: bool = False) -> numpy.ndarray:
    """torch's ``quantile`` (``nanquantile`` where ``ignore_nan``) of each column of a
    distributed axis, by selection of the two values around each (collective).

    Args:
        local: this rank's rows along ``axis`` (floating point).
        comm: the ranks that hold the axis.
        axis: the distributed axis.
        q: the quantiles, a 1-D host array in ``[0, 1]``.
        interpolation: one of :data:`INTERPOLATIONS`.
        ignore_nan: leave NaN out (else a column with a NaN gives NaN).

    Returns:
        A host array ``(len(q), columns)`` of ``local``'s dtype, the same on every rank.
    """
    xp = array_module(local)
    matrix = lines(local, axis)
    sizes = valid_sizes(xp, matrix, comm)
    n, valid = int(sizes[:, 0].sum()), sizes[:, 1:].sum(axis=0)
    width = matrix.shape[1]
    below, above, weight = quantile_ranks(q, valid if ignore_nan else numpy.full(width, n),
                                          interpolation, matrix.dtype)
    usable = (valid > 0) & (ignore_nan | (valid == n))
    targets = [(j, int(below[i, j]), int(above[i, j])) for i in range(len(q))
               for j in range(width) if usable[j]]
    sets = [_without_nan(xp, matrix[:, j], int(sizes[comm.rank, 1 + j])) for j in range(width)]
    got = iter(order_statistics(sets, comm, sizes[:, 1:], targets))
    low = numpy.full((len(q), width), numpy.nan, dtype=matrix.dtype)
    high = low.copy()
    for i in range(len(q)):
        for j in range(width):
            if usable[j]:
                v = next(got)
                low[i, j], high[i, j] = v[0], v[-1]
    return lerp(numpy, low, high, weight.astype(matrix.dtype)).astype(matrix.dtype)


# -- top k ---------------------------------------------------------------------------------------
def topk(local: Any, comm: Communicator, axis: int, k: int, *, largest: bool = True,
         out_counts: Sequence[int] | None = None) -> tuple[Any, Any]:
    """The ``k`` largest (or smallest) rows of each column of a distributed axis, in order,
    with their global rows: torch's ``topk`` (NaN largest; equal values in row order), the
    result laid out as ``out_counts`` (default balanced) along ``axis`` (collective).

    Each rank keeps its own top ``k`` (and the values equal to its k-th); a selection across
    ranks finds the k-th value; the rows beyond it and the first of those equal to it are
    sorted by a distributed sort of just those ``k`` rows.

    Returns:
        ``(values, rows)``: this rank's rows of the result along ``axis``.
    """
    xp = array_module(local)
    matrix = lines(local, axis)
    n_me, width = matrix.shape
    inner = front(xp, local, axis).shape[1:]
    if k == 0:  # every rank knows: nothing to select
        empty = xp.empty((0, *inner), dtype=local.dtype)
        return xp.moveaxis(empty, 0, axis), xp.moveaxis(empty.astype(numpy.int64), 0, axis)
    cands = [_candidates(xp, matrix[:, j], k, largest) for j in range(width)]
    mine = numpy.empty(1 + 2 * width, dtype=numpy.int64)
    mine[0] = n_me
    valid_cands = []
    for j, (_, vals) in enumerate(cands):
        nan = xp.isnan(vals) if vals.dtype.kind == "f" else None
        valid_cands.append(vals if nan is None else vals[~nan])
        col = matrix[:, j]
        mine[1 + j] = int(xp.count_nonzero(xp.isnan(col))) if col.dtype.kind == "f" else 0
        mine[1 + width + j] = valid_cands[j].shape[0]
    sizes = numpy.empty((comm.size, mine.shape[0]), dtype=numpy.int64)
    comm.all_gather(mine, sizes)
    counts = sizes[:, 0]
    n = int(counts.sum())
    nans, vsizes = sizes[:, 1:1 + width].sum(axis=0), sizes[:, 1 + width:]
    thresholds = numpy.full(width, numpy.nan if matrix.dtype.kind == "f" else 0, matrix.dtype)
    targets = []
    for j in range(width):
        if largest and k > nans[j]:
            targets.append((j, int(vsizes[:, j].sum()) - (k - int(nans[j]))))
        elif not largest and k <= n - nans[j]:
            targets.append((j, k - 1))
    got = order_statistics(valid_cands, comm, vsizes, [(j, p, p) for j, p in targets])
    for (j, _), v in zip(targets, got):
        thresholds[j] = v[0]
    return _take_top(xp, comm, cands, thresholds, counts, k, largest, out_counts, inner, axis)


def _candidates(xp: Any, column: Any, k: int, largest: bool) -> tuple[Any, Any]:
    """This rank's rows that may be in the top ``k`` (its own top k and those equal to its
    k-th), ascending, and their values."""
    n = column.shape[0]
    if k >= n:
        rows = xp.arange(n)
    else:
        u = xp.partition(column, n - k if largest else k - 1)[n - k if largest else k - 1]
        nan = column.dtype.kind == "f" and bool(xp.isnan(u))
        if largest:
            keep = xp.isnan(column) if nan else column >= u
            if column.dtype.kind == "f" and not nan:
                keep |= xp.isnan(column)
        else:
            keep = xp.ones(n, dtype=bool) if nan else column <= u
        rows = xp.nonzero(keep)[0]
    return rows, column[rows]


def _take_top(xp: Any, comm: Communicator, cands: list[tuple[Any, Any]],
              thresholds: numpy.ndarray, counts: numpy.ndarray, k: int, largest: bool,
              out_counts: Sequence[int] | None, inner: tuple[int, ...], axis: int
              ) -> tuple[Any, Any]:
    """The rows beyond each column's threshold and the first ones equal to it, sorted."""
    width = len(cands)
    mine = numpy.zeros((width, 2), dtype=numpy.int64)
    masks = []
    for j, (_, vals) in enumerate(cands):
        v = thresholds[j]
        floating = vals.dtype.kind == "f"
        if floating and numpy.isnan(v):
            beyond = (xp.zeros(vals.shape[0], dtype=bool) if largest else ~xp.isnan(vals))
        elif largest:
            beyond = (vals > v) | xp.isnan(vals) if floating else vals > v
        else:
            beyond = vals < v
        ties = same(xp, vals, v)
        mine[j] = int(xp.count_nonzero(beyond)), int(xp.count_nonzero(ties))
        masks.append((beyond, ties))
    every = numpy.empty((comm.size, width, 2), dtype=numpy.int64)
    comm.all_gather(mine, every)
    need = k - every[:, :, 0].sum(axis=0)
    before = numpy.cumsum(every[:, :, 1], axis=0) - every[:, :, 1]
    takes = numpy.clip(need[None, :] - before, 0, every[:, :, 1])
    start = offsets([int(c) for c in counts])[comm.rank]
    out_counts = balanced(k, comm.size) if out_counts is None else list(out_counts)
    dtype = cands[0][1].dtype if cands else numpy.dtype(numpy.float64)
    mine_out = out_counts[comm.rank]
    values = xp.empty((mine_out, width), dtype=dtype)
    rows_out = xp.empty((mine_out, width), dtype=numpy.int64)
    for j, (rows, vals) in enumerate(cands):
        beyond, ties = masks[j]
        keep = beyond | (ties & (xp.cumsum(ties) <= takes[comm.rank, j]))
        sel_counts = [int(c) for c in every[:, j, 0] + takes[:, j]]
        sel_rows = start + rows[keep].astype(numpy.int64)
        v, at = sort(vals[keep], comm, 0, sel_counts, out_counts=out_counts,
                     descending=largest, indices=True)
        values[:, j] = v
        rows_out[:, j] = take(sel_rows, comm, 0, sel_counts, at)
    shape = (mine_out, *inner)
    return (xp.moveaxis(values.reshape(shape), 0, axis),
            xp.moveaxis(rows_out.reshape(shape), 0, axis))
