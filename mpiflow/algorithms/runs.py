"""Runs of equal values along a distributed axis: ``unique``, ``unique_consecutive``, ``mode``.

A run starts where a value differs from the one before it (NaN differs from everything, NaN
too, as torch counts each NaN on its own). Along a distributed 1-D axis:

- :func:`run_starts`: each rank compares its rows with the row before, which for its first
  row is the last row of the nearest non-empty rank before it (a halo of one row);
- :func:`compact_runs`: the first value of each run and its length, laid out as asked (a
  balanced split): the runs' first rows move to their new ranks in one ``fetch``, and each
  run's length is the distance to the next run's first row (a halo of one row again);
- :func:`run_ids`: each row's run number, a distributed scan of the starts;
- :func:`mode`: the most frequent value of each column (a distributed sort, then each rank's
  first, last and longest inner run, all-gathered and merged across rank boundaries).

``unique`` is a sort followed by these; its inverse goes back to the input's rows with
:func:`.indexing.put`.

Examples:
    >>> from mpiflow.communication.mpi.group import world_comm as comm
    >>> local = numpy.array([1, 1, 2])  # each rank: 1, 1, 2
    >>> counts = [3] * comm.size
    >>> starts = run_starts(local, comm, counts)
    >>> values, lengths = compact_runs(local, starts, comm, counts, [2 * comm.size] + [0] *
    ...                                (comm.size - 1))
    >>> values.tolist() == [1, 2] * comm.size if comm.rank == 0 else values.size == 0
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy

from ..communication import Communicator, ReduceOp
from ..core.array_module import array_module, to_host
from .exchange import fetch, gather_counts, halo
from .ranges import offsets
from .samplesort import sort
from .scans import scan
from .selection import lines, same

__all__ = ["compact_runs", "local_mode", "mode", "run_ids", "run_starts", "starts_of"]


def starts_of(xp: Any, flat: Any, previous: Any = None) -> Any:
    """Where runs start in a 1-D array whose preceding value is ``previous`` (None: the first
    element starts one)."""
    out = xp.empty(flat.shape[0], dtype=bool)
    if flat.shape[0]:
        out[1:] = flat[1:] != flat[:-1]
        out[0] = True if previous is None else bool(previous != flat[0])
    return out


def run_starts(local: Any, comm: Communicator, counts: Sequence[int]) -> Any:
    """Whether each element of a distributed 1-D axis starts a run (collective: a halo of one
    element).

    Args:
        local: this rank's elements (1-D).
        comm: the ranks that hold the axis, in its order.
        counts: elements each rank holds.

    Returns:
        A bool array of ``local``'s length.
    """
    xp = array_module(local)
    before, _ = halo(local, comm, 0, counts, 1, 0)
    return starts_of(xp, local, before[0] if before.shape[0] else None)


def run_ids(starts: Any, comm: Communicator) -> Any:
    """Each element's run number (0 for the first run), from the starts of a distributed 1-D
    axis (collective: a scan)."""
    return scan(starts.astype(numpy.int64), comm, 0, "sum") - 1


def compact_runs(local: Any, starts: Any, comm: Communicator, counts: Sequence[int],
                 out_counts: Sequence[int]) -> tuple[Any, Any]:
    """The first value of each run of a distributed 1-D axis and its length, laid out as
    ``out_counts`` (collective).

    Args:
        local: this rank's elements (1-D).
        starts: where runs start (:func:`run_starts`; any flags give the values at them and
            the distances to the next).
        comm: the ranks that hold the axis, in its order.
        counts: elements each rank holds.
        out_counts: runs each rank holds of the result (they add up to the number of runs).

    Returns:
        ``(values, lengths)``: this rank's ``out_counts[rank]`` runs; lengths are int64.
    """
    xp = array_module(local)
    n = sum(counts)
    kept = local[starts]
    first = offsets(counts)[comm.rank] + xp.nonzero(starts)[0].astype(numpy.int64)
    held = gather_counts(comm, int(kept.shape[0]))
    if sum(held) != sum(out_counts):
        raise ValueError(f"{sum(held)} runs, out_counts for {sum(out_counts)}")
    wants = [[(a, b)] for a, b in zip(offsets(out_counts)[:-1], offsets(out_counts)[1:])]
    values = fetch(kept, comm, 0, held, wants)
    first = fetch(first, comm, 0, held, wants)
    _, after = halo(first, comm, 0, out_counts, 0, 1)
    ends = xp.concatenate([first[1:], after if after.shape[0] else xp.asarray([n])])
    return values, (ends - first).astype(numpy.int64)


# -- mode ----------------------------------------------------------------------------------------
def _best(lengths: Any) -> int:
    """The longest of runs in ascending order of value: the first (smallest) of the longest."""
    return int(numpy.argmax(lengths))


def _column_runs(xp: Any, s: Any) -> tuple[numpy.ndarray, numpy.ndarray]:
    """A sorted column's runs: ``(first values, lengths)`` on the host."""
    if s.shape[0] == 0:
        return numpy.empty(0, dtype=s.dtype), numpy.empty(0, dtype=numpy.int64)
    at = xp.nonzero(starts_of(xp, s))[0]
    lengths = xp.diff(xp.concatenate([at, xp.asarray([s.shape[0]])]))
    return to_host(s[at]), to_host(lengths).astype(numpy.int64)


def _last_row(xp: Any, column: Any, v: Any, start: int) -> int:
    """The global row of the last element equal to ``v`` (of the first where ``v`` is NaN, as
    a negative number so that a maximum finds the first), or the smallest int64."""
    hit = xp.nonzero(same(xp, column, v))[0]
    if hit.shape[0] == 0:
        return int(numpy.iinfo(numpy.int64).min)
    if column.dtype.kind == "f" and numpy.isnan(v):
        return -(start + int(hit[0]))
    return start + int(hit[-1])


def local_mode(xp: Any, matrix: Any) -> tuple[numpy.ndarray, numpy.ndarray]:
    """torch's ``mode`` of each column of a local matrix: the most frequent value (the
    smallest of those; each NaN counts once) and the row of its last occurrence (of the first
    where it is NaN)."""
    width = matrix.shape[1]
    values = numpy.empty(width, dtype=matrix.dtype)
    rows = numpy.empty(width, dtype=numpy.int64)
    for j in range(width):
        v, lengths = _column_runs(xp, xp.sort(matrix[:, j]))
        values[j] = v[_best(lengths)]
        rows[j] = abs(_last_row(xp, matrix[:, j], values[j], 0))
    return values, rows


def mode(local: Any, comm: Communicator, axis: int) -> tuple[numpy.ndarray, numpy.ndarray]:
    """torch's ``mode`` of each column of a distributed axis (collective).

    Each column is sorted (the distributed sample sort, values only); every rank then sends
    its first run, its last run and its longest run in between (one ``all_gather`` of values,
    one of lengths), every rank merges the runs that continue across rank boundaries and picks
    the same winner; one ``all_reduce`` finds the row of its last occurrence.

    Returns:
        ``(values, rows)``: host arrays with one entry per column, the same on every rank.
    """
    xp = array_module(local)
    matrix = lines(local, axis)
    width = matrix.shape[1]
    counts = gather_counts(comm, matrix.shape[0])
    vals = numpy.zeros((width, 3), dtype=matrix.dtype)
    lens = numpy.zeros((width, 4), dtype=numpy.int64)  # first, last, inner, runs
    for j in range(width):
        s, _ = sort(xp.ascontiguousarray(matrix[:, j]), comm, 0, counts)
        v, lengths = _column_runs(xp, s)
        if v.shape[0]:
            vals[j, 0], lens[j, 0] = v[0], lengths[0]
            vals[j, 1], lens[j, 1] = v[-1], lengths[-1]
            lens[j, 3] = v.shape[0]
        if v.shape[0] > 2:
            b = 1 + _best(lengths[1:-1])
            vals[j, 2], lens[j, 2] = v[b], lengths[b]
    every_v = numpy.empty((comm.size, width, 3), dtype=matrix.dtype)
    every_l = numpy.empty((comm.size, width, 4), dtype=numpy.int64)
    comm.all_gather(vals, every_v)
    comm.all_gather(lens, every_l)
    values = numpy.array([_merge(every_v[:, j], every_l[:, j]) for j in range(width)],
                         dtype=matrix.dtype).reshape(width)
    start = offsets(counts)[comm.rank]
    rows = numpy.array([_last_row(xp, matrix[:, j], values[j], start) for j in range(width)],
                       dtype=numpy.int64)
    comm.all_reduce(rows, ReduceOp.MAX)
    return values, numpy.abs(rows)


def _merge(vals: numpy.ndarray, lens: numpy.ndarray) -> Any:
    """The winning value from the ranks' first, last and inner runs (in rank order)."""
    runs: list[tuple[Any, int]] = []
    open_v: Any = None
    open_n = 0
    for r in range(vals.shape[0]):
        if lens[r, 3] == 0:
            continue
        if open_n and _equal(open_v, vals[r, 0]):
            open_n += int(lens[r, 0])
        else:
            if open_n:
                runs.append((open_v, open_n))
            open_v, open_n = vals[r, 0], int(lens[r, 0])
        if lens[r, 3] > 1:
            runs.append((open_v, open_n))
            if lens[r, 2]:
                runs.append((vals[r, 2], int(lens[r, 2])))
            open_v, open_n = vals[r, 1], int(lens[r, 1])
    if open_n:
        runs.append((open_v, open_n))
    longest = max(n for _, n in runs)
    return min((v for v, n in runs if n == longest),
               key=lambda v: (bool(numpy.isnan(v)) if numpy.asarray(v).dtype.kind == "f"
                              else False, v))


def _equal(a: Any, b: Any) -> bool:
    return bool(a == b)  # NaN never continues a run

