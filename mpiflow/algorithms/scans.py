"""Scans (cumulative sums, products, extrema, log-sum-exp) along a distributed axis.

Each rank scans its own rows, the ranks exchange their parts' totals (one all-gather of one
slice each: a number per rank for a 1-D array), and each rank combines the totals of the ranks
before it into its rows. The layout does not change and no row moves. Floating sums round
differently from a sequential scan (the prefix is added to local running sums), as in any
parallel scan.

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

__all__ = ["SCANS", "identity", "local_scan", "scan"]

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
