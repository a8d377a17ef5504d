"""Selecting rows of a distributed axis by a mask, and putting rows back where a mask says.

:func:`compress` keeps the rows a mask marks (``x[mask]``, ``masked_select``, ``nonzero``):
each rank keeps its own (no communication), the ranks exchange how many they kept (one
all-gather of one integer each), and a rebalance moves the rows that cross the balanced parts'
boundaries (one ``all_to_all_v``). The selection stays distributed, in the axis' order.
:func:`expand` is its adjoint (the gradient of a selection, ``x[mask] = values``): each rank
counts its marked rows, and fetches the selection's rows that belong there.
:func:`concatenate` joins the ranks' parts of an axis in rank order, balanced.

Examples:
    >>> from mpiflow.communication.mpi.group import world_comm as comm
    >>> local = numpy.arange(4) + 4 * comm.rank
    >>> kept = compress(local, local % 2 == 0, comm, 0)
    >>> kept.shape[0] == (2 * comm.size) // comm.size
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..communication import Communicator
from ..core.array_module import array_module
from .exchange import fetch, gather_counts, rebalance
from .ranges import balanced, offsets

__all__ = ["compress", "concatenate", "expand"]


def concatenate(local: Any, comm: Communicator, axis: int,
                out_counts: Sequence[int] | None = None) -> Any:
    """The ranks' parts (any lengths along ``axis``) joined in rank order, laid out as
    ``out_counts`` (default balanced): one all-gather of the lengths, one rebalance.

    Examples:
        >>> from mpiflow.communication.mpi.group import world_comm as comm
        >>> concatenate(numpy.arange(comm.rank % 2 * 2), comm, 0).shape[0] <= 2
        True
    """
    counts = gather_counts(comm, int(local.shape[axis]))
    if out_counts is None:
        out_counts = balanced(sum(counts), comm.size)
    return rebalance(local, comm, axis, counts, out_counts)


def compress(local: Any, keep: Any, comm: Communicator | None, axis: int,
             out_counts: Sequence[int] | None = None) -> Any:
    """The rows of a distributed axis that ``keep`` marks, in order, balanced (collective).

    Args:
        local: this rank's rows along ``axis``.
        keep: a 1-D bool array, one entry per local row.
        comm: the ranks that hold the axis, in its order (None: ``local`` is all of it).
        axis: the axis.
        out_counts: rows of the selection each rank gets (default balanced).

    Returns:
        This rank's part of the selection along ``axis``.
    """
    xp = array_module(local)
    if keep.shape != (local.shape[axis],):
        raise ValueError(f"compress: a mask of shape {tuple(keep.shape)} for "
                         f"{local.shape[axis]} rows")
    mine = xp.compress(keep, local, axis=axis)
    if comm is None or comm.size == 1:
        return mine
    return concatenate(mine, comm, axis, out_counts)


def expand(values: Any, keep: Any, comm: Communicator | None, axis: int,
           counts: Sequence[int], fill: Any = 0, out: Any = None) -> Any:
    """The rows of a selection put back at the rows ``keep`` marks (collective).

    Args:
        values: this rank's rows of the selection (``counts[rank]`` rows along ``axis``),
            ordered as the marked rows of the whole axis.
        keep: a 1-D bool array, this rank's rows of the destination axis.
        comm: the ranks, in the axis' order (None: everything is local).
        axis: the axis.
        counts: rows of the selection each rank holds.
        fill: the value of the rows not marked (when ``out`` is None).
        out: this rank's rows of the destination, written in place at the marked rows.

    Returns:
        This rank's rows of the destination.
    """
    xp = array_module(values)
    mine = int(xp.count_nonzero(keep))
    if comm is None or comm.size == 1:
        got = values
    else:
        marked = gather_counts(comm, mine)  # where my marked rows start in the selection
        starts = offsets(marked)
        wants = [[(starts[r], starts[r + 1])] for r in range(comm.size)]
        got = fetch(values, comm, axis, counts, wants)
    if got.shape[axis] != mine:
        raise ValueError(f"expand: {got.shape[axis]} rows for {mine} marked rows")
    if out is None:
        shape = list(values.shape)
        shape[axis] = keep.shape[0]
        out = xp.full(shape, fill, dtype=values.dtype)
    where = xp.nonzero(keep)[0]
    index = [slice(None)] * out.ndim
    index[axis] = where
    out[tuple(index)] = got
    return out
