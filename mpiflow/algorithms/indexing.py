"""Reading and writing rows of a distributed axis by global row number.

:func:`take` reads rows wherever they lie: each rank asks the owners of the rows it wants
(one ``all_to_all_v`` of row numbers) and they answer (one ``all_to_all_v`` of rows).
:func:`put` writes rows to global row numbers of an axis laid out as asked: each rank sends
each row to the owner of its destination (one ``all_to_all_v`` of row numbers, one of rows),
which adds or stores them. Both move only the rows asked for; no rank ever holds the whole axis.
:func:`take_along` and :func:`put_along` do the same for single elements (``take_along_dim``
and its gradient, the gradient of ``cummax``): each column has its own row numbers. They serve
fancy indexing, ``take_along_dim``, scatters, the gradient of a sort and the inverse
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

__all__ = ["owners", "put", "put_along", "take", "take_along"]


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
    small = numpy.uint8 if p <= 256 else numpy.uint16 if p <= 1 << 16 else numpy.int64
    order = xp.argsort(dest.astype(small), kind="stable")  # small ints: numpy's radix sort
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


def _columns(xp: Any, array: Any, axis: int) -> Any:
    """``array`` with ``axis`` first and the other axes flattened: ``(rows, columns)``."""
    rows = front(xp, array, axis)
    return rows.reshape(rows.shape[0], math.prod(rows.shape[1:]))  # (-1 fails on 0 rows)


def take_along(local: Any, comm: Communicator | None, axis: int, counts: Sequence[int],
               indices: Any) -> Any:
    """``take_along_axis`` of a distributed axis: element ``(i, c)`` of the result is element
    ``(indices[i, c], c)`` of the axis (collective).

    Args:
        local: this rank's rows along ``axis``.
        comm: the ranks that hold the axis, in its order (None: ``local`` is all of it).
        axis: the axis.
        counts: rows each rank holds.
        indices: int64 global row numbers, ``local``'s shape but for the extent along
            ``axis`` (any number of rows, each rank its own).

    Returns:
        An array of ``indices``' shape and ``local``'s dtype.

    Examples:
        >>> take_along(numpy.arange(6).reshape(3, 2), None, 0, [3],
        ...            numpy.array([[2, 0]])).tolist()
        [[4, 1]]
    """
    xp = array_module(local)
    data = _columns(xp, local, axis)
    rows = _columns(xp, xp.asarray(indices, dtype=numpy.int64), axis)
    width = data.shape[1]
    if rows.shape[1] != width:
        raise ValueError(f"take_along: indices of shape {tuple(indices.shape)} for an array of "
                         f"shape {tuple(local.shape)} (they differ beside axis {axis})")
    # Element (r, c) of the axis is element r * width + c of its row-major flattening, which
    # is held as counts * width elements per rank: a take of single elements.
    flat = rows * width + xp.arange(width, dtype=numpy.int64)
    if comm is None:
        _check_rows(xp, rows, sum(counts), "take_along")
        got = data.reshape(-1)[flat]
    else:
        got = take(data.reshape(-1), comm, 0, [c * width for c in counts], flat)
    shape = front(xp, indices, axis).shape
    return unfront(xp, got.reshape(shape), axis)


def put_along(values: Any, comm: Communicator | None, axis: int, indices: Any,
              out_counts: Sequence[int], out_width_shape: Sequence[int]) -> Any:
    """The adjoint of :func:`take_along`: zeros laid out as ``out_counts`` along ``axis``, with
    each element of ``values`` added at row ``indices`` of its column (collective).

    Args:
        values: this rank's elements; ``indices`` has their shape.
        comm: the ranks of the destination axis, in its order (None: all local).
        axis: the axis.
        indices: int64 global destination rows.
        out_counts: destination rows each rank holds.
        out_width_shape: the destination's shape with ``axis`` left out (the columns').

    Returns:
        This rank's part of the destination: ``out_counts[rank]`` rows along ``axis``.
    """
    xp = array_module(values)
    data = _columns(xp, values, axis)
    rows = _columns(xp, xp.asarray(indices, dtype=numpy.int64), axis)
    width = data.shape[1]
    flat = (rows * width + xp.arange(width, dtype=numpy.int64)).reshape(-1)
    me = 0 if comm is None else comm.rank
    if comm is None:
        _check_rows(xp, rows, sum(out_counts), "put_along")
        got = xp.zeros(out_counts[0] * width, dtype=values.dtype)
        xp.add.at(got, flat, data.reshape(-1))
    else:
        got = put(data.reshape(-1), comm, 0, flat, [c * width for c in out_counts])
    return unfront(xp, got.reshape(out_counts[me], *out_width_shape), axis)
