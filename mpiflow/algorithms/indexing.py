"""Reading and writing rows of a distributed axis by global row number.

:func:`take` reads rows wherever they lie: each rank asks the owners of the rows it wants
(one ``all_to_all_v`` of row numbers) and they answer (one ``all_to_all_v`` of rows).
:func:`put` writes rows to global row numbers of an axis laid out as asked: each rank sends
each row to the owner of its destination (one ``all_to_all_v`` of row numbers, one of rows),
which adds or stores them. Both move only the rows asked for; no rank ever holds the whole axis.
They serve fancy indexing, ``take_along_dim``, scatters, the gradient of a sort and the inverse
of ``unique``.

Examples:
    >>> from mpiflow.communication.mpi.group import world_comm as comm
    >>> local = numpy.arange(2) + 2 * comm.rank  # the axis 0, 1, ..., 2p-1
    >>> take(local, comm, 0, [2] * comm.size, numpy.array([0, 0])).tolist()
    [0, 0]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy

from ..communication import Communicator
from ..core.array_module import array_module, to_host
from .exchange import front, unfront
from .ranges import offsets

__all__ = ["owners", "put", "take"]


def owners(xp: Any, rows: Any, counts: Sequence[int]) -> Any:
    """The rank holding each global row number of ``rows`` (int64 array of their shape)."""
    starts = xp.asarray(offsets(counts)[1:], dtype=numpy.int64)
    return xp.searchsorted(starts, rows, side="right").astype(numpy.int64)


def _check_rows(xp: Any, rows: Any, n: int, what: str) -> None:
    if rows.size and (bool((rows < 0).any()) or bool((rows >= n).any())):
        bad = to_host(rows)[(to_host(rows) < 0) | (to_host(rows) >= n)][0]
        raise IndexError(f"{what}: row {int(bad)} is out of bounds for an axis of {n} rows")


def _route(xp: Any, comm: Communicator, dest: Any) -> tuple[Any, list[int], list[int]]:
    """Order the items by destination rank: ``(order, send counts, receive counts)``."""
    p = comm.size
    order = xp.argsort(dest, kind="stable")
    send = [int(c) for c in to_host(xp.bincount(dest, minlength=p))] if dest.size else [0] * p
    recv = xp.empty(p, dtype=numpy.int64)
    comm.all_to_all(xp.asarray(send, dtype=numpy.int64), recv)
    return order, send, [int(c) for c in to_host(recv)]


def _swap(xp: Any, comm: Communicator, send: Any, send_counts: list[int],
          recv_counts: list[int]) -> Any:
    """One ``all_to_all_v`` of rows (the first axis of ``send``; the others travel along)."""
    width = math.prod(send.shape[1:])
    recv = xp.empty((sum(recv_counts), *send.shape[1:]), dtype=send.dtype)
    if width:
        comm.all_to_all_v(xp.ascontiguousarray(send).reshape(-1),
                          [c * width for c in send_counts], recv.reshape(-1),
                          [c * width for c in recv_counts])
    return recv


def take(local: Any, comm: Communicator, axis: int, counts: Sequence[int], rows: Any) -> Any:
    """The rows ``rows`` (global row numbers, any shape) of a distributed axis (collective).

    Args:
        local: this rank's rows along ``axis``.
        comm: the ranks that hold the axis, in its order.
        axis: the distributed axis.
        counts: rows each rank holds.
        rows: int64 global row numbers this rank wants (each rank its own, any number).

    Returns:
        ``local`` indexed by ``rows`` along ``axis``: ``local.shape[:axis] + rows.shape +
        local.shape[axis + 1:]``.

    Raises:
        IndexError: a row number outside the axis (on the rank that asked for it; every rank
            checks its own before anything moves, so check agreement above where a clean
            error on every rank matters).
    """
    xp = array_module(local)
    n = sum(counts)
    rows = xp.asarray(rows, dtype=numpy.int64)
    _check_rows(xp, rows, n, "take")
    data = front(xp, local, axis)
    inner = data.shape[1:]
    flat = rows.reshape(-1)
    if comm.size == 1:
        got = data[flat]
    else:
        dest = owners(xp, flat, counts)
        order, send, recv = _route(xp, comm, dest)
        asked = _swap(xp, comm, flat[order], send, recv)
        answer = data[asked - offsets(counts)[comm.rank]]
        back = _swap(xp, comm, answer, recv, send)
        got = xp.empty((flat.shape[0], *inner), dtype=local.dtype)
        got[order] = back
    got = got.reshape(*rows.shape, *inner)
    if axis == 0:
        return got
    # rows' dims take the axis' place
    k = rows.ndim
    perm = list(range(k, k + axis)) + list(range(k)) + list(range(k + axis, got.ndim))
    return xp.transpose(got, perm)


def put(values: Any, comm: Communicator, axis: int, rows: Any, out_counts: Sequence[int],
        *, accumulate: bool = True, out: Any = None) -> Any:
    """Write rows to global row numbers of a distributed axis laid out as ``out_counts``.

    Args:
        values: this rank's rows to write, along ``axis`` (one per entry of ``rows``).
        comm: the ranks of the destination axis, in its order.
        axis: the axis of ``values`` (and of the result) the rows are along.
        rows: int64 global destination row of each of ``values``' rows (1-D).
        out_counts: rows each rank holds of the destination axis.
        accumulate: add rows that land on one row (and onto ``out``); else the last one
            written wins (in rank order, then in order).
        out: this rank's part of the destination (``out_counts[rank]`` rows), updated in
            place; default zeros.

    Returns:
        This rank's part of the destination.

    Raises:
        IndexError: a row number outside the destination axis.
    """
    xp = array_module(values)
    n = sum(out_counts)
    rows = xp.asarray(rows, dtype=numpy.int64).reshape(-1)
    _check_rows(xp, rows, n, "put")
    data = front(xp, values, axis)
    if data.shape[0] != rows.shape[0]:
        raise ValueError(f"put: {data.shape[0]} rows to write, {rows.shape[0]} row numbers")
    inner = data.shape[1:]
    mine = out_counts[comm.rank]
    target = (xp.zeros((mine, *inner), dtype=values.dtype) if out is None
              else front(xp, out, axis))
    if comm.size == 1:
        where, got = rows, data
    else:
        dest = owners(xp, rows, out_counts)
        order, send, recv = _route(xp, comm, dest)
        where = _swap(xp, comm, rows[order], send, recv) - offsets(out_counts)[comm.rank]
        got = _swap(xp, comm, data[order], send, recv)
    if accumulate:
        xp.add.at(target, where, got)
    else:
        target[where] = got
    if out is None:
        return unfront(xp, target, axis)
    if target is not out:  # front() made a copy: write it back
        out[...] = unfront(xp, target, axis)
    return out
