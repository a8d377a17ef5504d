"""Searching a sorted sequence that is split across ranks: ``searchsorted`` and ``isin``.

A sorted sequence split in rank order is searched where it lies: one ``all_gather`` gives
every rank every part's first element, which tells it the one rank whose part decides each
value (the last non-empty part starting below the value, or at it for a right-side search);
each value goes to that rank (an ``all_to_all`` of counts and an ``all_to_all_v`` of values),
which searches its own part and adds its part's offset, and the answers come back (one more
``all_to_all_v``). Only the values move, once each way; the sequence never does.

:func:`isin` sorts the test elements first (the distributed sample sort, values only, to
balanced parts) and asks the same owner whether it holds the value.

Examples:
    >>> from mpiflow.communication.mpi.group import world_comm as comm
    >>> sequence = numpy.array([0.0, 1.0]) + 2 * comm.rank  # 0, 1, ..., 2p-1
    >>> searchsorted(sequence, comm, [2] * comm.size, numpy.array([1.5])).tolist()
    [2]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy

from ..communication import Communicator
from ..core.array_module import array_module, to_host
from .exchange import gather_counts
from .ranges import balanced, offsets
from .samplesort import sort

__all__ = ["isin", "searchsorted"]


def _owners(xp: Any, local: Any, comm: Communicator, counts: Sequence[int], values: Any,
            right: bool) -> Any:
    """The rank whose part of the sorted sequence decides each value (one ``all_gather``)."""
    firsts = xp.empty(comm.size, dtype=local.dtype)
    mine = local[:1] if local.shape[0] else xp.zeros(1, dtype=local.dtype)
    comm.all_gather(xp.ascontiguousarray(mine), firsts)
    full = [r for r, c in enumerate(counts) if c]
    if not full:
        return xp.zeros(values.shape[0], dtype=numpy.int64)
    keep = xp.asarray(full, dtype=numpy.int64)
    at = xp.searchsorted(firsts[keep], values, side="right" if right else "left") - 1
    return keep[xp.maximum(at, 0)]


def _ask(xp: Any, comm: Communicator, dest: Any, values: Any, answer: Any) -> Any:
    """Send each value to its rank, which answers with ``answer(values it got)``; the answers
    in the values' order (an ``all_to_all`` and two ``all_to_all_v``)."""
    p = comm.size
    order = xp.argsort(dest, kind="stable")
    send = [int(c) for c in to_host(xp.bincount(dest, minlength=p))] if dest.size else [0] * p
    got = xp.empty(p, dtype=numpy.int64)
    comm.all_to_all(xp.asarray(send, dtype=numpy.int64), got)
    recv = [int(c) for c in to_host(got)]
    asked = xp.empty(sum(recv), dtype=values.dtype)
    comm.all_to_all_v(xp.ascontiguousarray(values[order]), send, asked, recv)
    replies = xp.ascontiguousarray(answer(asked))
    back = xp.empty(values.shape[0], dtype=replies.dtype)
    comm.all_to_all_v(replies, recv, back, send)
    out = xp.empty_like(back)
    out[order] = back
    return out


def searchsorted(local: Any, comm: Communicator, counts: Sequence[int], values: Any, *,
                 right: bool = False) -> Any:
    """Where ``values`` would be inserted in a sorted sequence held in parts (collective).

    Args:
        local: this rank's part of the ascending sequence (1-D; NaN last, as sorts put it).
        comm: the ranks that hold the sequence, in its order.
        counts: elements each rank holds.
        values: this rank's values to look up (any shape, any number; each rank its own),
            of the sequence's dtype.
        right: the position after equal elements, instead of before them.

    Returns:
        int64 positions in the whole sequence, of ``values``' shape.
    """
    xp = array_module(local)
    flat = values.reshape(-1)
    start = offsets(counts)[comm.rank]

    def answer(asked: Any) -> Any:
        side = "right" if right else "left"
        return start + xp.searchsorted(local, asked, side=side).astype(numpy.int64)

    dest = _owners(xp, local, comm, counts, flat, right)
    return _ask(xp, comm, dest, flat, answer).reshape(values.shape)


def isin(elements: Any, test: Any, comm: Communicator, *, invert: bool = False) -> Any:
    """Whether each of this rank's ``elements`` is among the test elements that all ranks
    hold together (collective).

    Args:
        elements: this rank's elements (any shape).
        test: this rank's part of the test elements (any shape; each rank its own).
        comm: the ranks.
        invert: whether each is *not* among them.

    Returns:
        A bool array of ``elements``' shape.
    """
    xp = array_module(elements)
    dtype = numpy.result_type(elements.dtype, test.dtype)
    flat = xp.asarray(elements, dtype=dtype).reshape(-1)
    mine = xp.asarray(test, dtype=dtype).reshape(-1)
    counts = gather_counts(comm, int(mine.shape[0]))
    if sum(counts) == 0:
        return xp.full(elements.shape, invert, dtype=bool)
    out_counts = balanced(sum(counts), comm.size)
    part, _ = sort(mine, comm, 0, counts, out_counts=out_counts)

    def answer(asked: Any) -> Any:
        at = xp.minimum(xp.searchsorted(part, asked), max(part.shape[0] - 1, 0))
        hit = (part[at] == asked) if part.shape[0] else xp.zeros(asked.shape[0], dtype=bool)
        return hit.astype(numpy.uint8)

    dest = _owners(xp, part, comm, out_counts, flat, True)
    found = _ask(xp, comm, dest, flat, answer).astype(bool)
    return (found != invert).reshape(elements.shape)
