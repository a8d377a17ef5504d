"""Scans (cumulative sums, products, extrema, log-sum-exp) along a distributed axis.

Each rank scans its own rows, the ranks exchange their parts' totals (one all-gather of one
slice each: a number per rank for a 1-D array), and each rank combines the totals of the ranks
before it into its rows. The layout does not change and no row moves. Floating sums round
differently from a sequential scan (the prefix is added to local running sums), as in any
parallel scan.

:func:`arg_scan` is the running maximum or minimum with the index where it was reached (torch's
``cummax``/``cummin``): the ranks exchange their parts' last value and index (one all-gather of
those bytes), and a later position wins ties (and NaN, which propagates), as torch's rule.

Examples:
    >>> from mpiflow.communication.mpi.group import world_comm as comm
    >>> local = numpy.ones(2)
    >>> scan(local, comm, 0, "sum").tolist() == [2.0 * comm.rank + 1, 2.0 * comm.rank + 2]
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy

from ..communication import Communicator
from ..core.array_module import array_module

__all__ = ["SCANS", "arg_scan", "identity", "local_arg_scan", "local_scan", "scan"]

# name -> the ufunc whose accumulate is the scan
SCANS: dict[str, Callable[[Any], Any]] = {
    "sum": lambda xp: xp.add,
    "prod": lambda xp: xp.multiply,
    "max": lambda xp: xp.maximum,
    "min": lambda xp: xp.minimum,
    "logsumexp": lambda xp: xp.logaddexp,
}


def identity(op: str, dtype: numpy.dtype) -> Any:
    """The value that leaves ``op``'s combination unchanged, in ``dtype``."""
    if op == "sum":
        return dtype.type(0)
    if op == "prod":
        return dtype.type(1)
    if op == "logsumexp":
        return dtype.type(-numpy.inf)
    if dtype.kind == "b":
        return op == "min"
    if dtype.kind == "f":
        return dtype.type(-numpy.inf if op == "max" else numpy.inf)
    info = numpy.iinfo(dtype)
    return dtype.type(info.min if op == "max" else info.max)


def _ufunc(op: str, xp: Any) -> Any:
    try:
        return SCANS[op](xp)
    except KeyError:
        raise ValueError(f"unknown scan {op!r}; expected one of {sorted(SCANS)}") from None


def local_scan(array: Any, axis: int, op: str, *, reverse: bool = False) -> Any:
    """The scan of one array along ``axis`` (from the end where ``reverse``)."""
    xp = array_module(array)
    ufunc = _ufunc(op, xp)
    if not reverse:
        return ufunc.accumulate(array, axis=axis, dtype=array.dtype)
    flipped = xp.flip(array, axis=axis)
    return xp.flip(ufunc.accumulate(flipped, axis=axis, dtype=array.dtype), axis=axis)


def scan(local: Any, comm: Communicator, axis: int, op: str, *, reverse: bool = False) -> Any:
    """The inclusive scan ``op`` along a distributed axis (collective).

    Args:
        local: this rank's rows along ``axis`` (the ranks' parts in rank order are the axis);
            its dtype is the one the scan is computed in.
        comm: the ranks that hold the axis, in its order.
        axis: the distributed axis.
        op: ``"sum"``, ``"prod"``, ``"max"``, ``"min"`` or ``"logsumexp"``.
        reverse: scan from the end of the axis.

    Returns:
        This rank's rows of the scan, ``local``'s shape and dtype.
    """
    xp = array_module(local)
    ufunc = _ufunc(op, xp)
    out = local_scan(local, axis, op, reverse=reverse)
    if comm.size == 1:
        return out
    inner = out.shape[:axis] + out.shape[axis + 1:]
    edge = (0 if reverse else -1) if local.shape[axis] else None
    total = (xp.take(out, edge, axis=axis) if edge is not None
             else xp.full(inner, identity(op, out.dtype), dtype=out.dtype))
    totals = xp.empty((comm.size, *inner), dtype=out.dtype)
    comm.all_gather(xp.ascontiguousarray(total), totals)
    before = totals[comm.rank + 1:][::-1] if reverse else totals[:comm.rank]
    if before.shape[0] == 0 or local.shape[axis] == 0:
        return out
    # Combine the totals in the axis' order (the nearest rank last), then into every row.
    prefix = ufunc.reduce(before, axis=0, dtype=out.dtype)
    return ufunc(xp.expand_dims(prefix, axis), out, dtype=out.dtype)


def _wins(xp: Any, new: Any, old: Any, largest: bool) -> Any:
    """Where ``new`` (a later position) replaces ``old`` as the running extremum: at a tie, a
    better value, or a NaN (torch's ``cummax``/``cummin`` rule)."""
    better = new >= old if largest else new <= old
    if new.dtype.kind in "fc":
        better = better | xp.isnan(new)
    return better


def local_arg_scan(array: Any, axis: int, largest: bool, offset: int = 0) -> tuple[Any, Any]:
    """The running maximum (``largest``) or minimum of one array along ``axis`` and the int64
    index (plus ``offset``) where each was reached; later positions win ties."""
    xp = array_module(array)
    ufunc = xp.maximum if largest else xp.minimum
    values = ufunc.accumulate(array, axis=axis)
    hit = array == values  # where the running value was reached anew (NaN: where it is NaN)
    if array.dtype.kind in "fc":
        hit = hit | xp.isnan(array)
    shape = [1] * array.ndim
    shape[axis] = array.shape[axis]
    where = xp.arange(array.shape[axis], dtype=numpy.int64).reshape(shape)
    last = xp.maximum.accumulate(xp.where(hit, where, -1), axis=axis)
    return values, last + offset


def arg_scan(local: Any, comm: Communicator, axis: int, largest: bool, offset: int
             ) -> tuple[Any, Any]:
    """The running maximum or minimum along a distributed axis, with global indices
    (collective: one all-gather of each rank's last value and index).

    Args:
        local: this rank's rows along ``axis``.
        comm: the ranks that hold the axis, in its order.
        axis: the distributed axis.
        largest: maximum (else minimum).
        offset: the global row of this rank's first row.

    Returns:
        ``(values, indices)``: ``local``'s shape, ``local``'s dtype and int64.

    Examples:
        >>> from mpiflow.communication.mpi.group import world_comm as comm
        >>> v, i = arg_scan(numpy.array([1, 1]), comm, 0, True, 2 * comm.rank)
        >>> i.tolist() == [2 * comm.rank, 2 * comm.rank + 1]
        True
    """
    xp = array_module(local)
    values, indices = local_arg_scan(local, axis, largest, offset)
    if comm.size == 1:
        return values, indices
    inner = values.shape[:axis] + values.shape[axis + 1:]
    if local.shape[axis]:
        last_v, last_i = xp.take(values, -1, axis=axis), xp.take(indices, -1, axis=axis)
    else:  # an empty part: index -1 marks it, so that it never wins
        last_v = xp.zeros(inner, dtype=values.dtype)
        last_i = xp.full(inner, -1, dtype=numpy.int64)
    vbytes = xp.ascontiguousarray(last_v).reshape(-1).view(numpy.uint8)
    ibytes = xp.ascontiguousarray(last_i).reshape(-1).view(numpy.uint8)
    send = xp.concatenate([vbytes, ibytes])
    recv = xp.empty((comm.size, send.shape[0]), dtype=numpy.uint8)
    comm.all_gather(send, recv)  # one collective: values and indices side by side, as bytes
    if comm.rank == 0 or local.shape[axis] == 0:
        return values, indices
    k = vbytes.shape[0]
    all_v = xp.ascontiguousarray(recv[:, :k]).view(values.dtype).reshape(comm.size, *inner)
    all_i = xp.ascontiguousarray(recv[:, k:]).view(numpy.int64).reshape(comm.size, *inner)
    pv, pi = all_v[0], all_i[0]
    for r in range(1, comm.rank):  # the earlier ranks' extremum, in the axis' order
        take = (all_i[r] >= 0) & ((pi < 0) | _wins(xp, all_v[r], pv, largest))
        pv, pi = xp.where(take, all_v[r], pv), xp.where(take, all_i[r], pi)
    pv, pi = xp.expand_dims(pv, axis), xp.expand_dims(pi, axis)
    mine = (pi < 0) | _wins(xp, values, pv, largest)
    return xp.where(mine, values, pv), xp.where(mine, indices, pi)
