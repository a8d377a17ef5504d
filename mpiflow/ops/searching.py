"""Searching a sorted sequence: ``searchsorted``.

Layout rule, per mesh axis, for a 1-D sorted sequence:

- values split, sequence broadcast: each rank searches its values (``(B, S(d)) -> S(d)``);
- sequence split, values broadcast: each rank counts its part's elements below each value,
  and the counts add up (``(S(0), B) -> P``): no communication until the result is read;
- both split: a collective signature, ``(S(0), S(d)) -> S(d)``: each value goes to the one rank
  whose part decides it and comes back with its position
  (:func:`mpiflow.algorithms.searchsorted`); neither is gathered. Except for a short sequence
  (:func:`~.layout_rules.short_table`: a few thousand elements, fewer than the values; class
  labels, bin edges): it is made whole (``B``) and each rank searches its values where they
  lie, rather than routing every value to the few ranks holding the sequence.

A batch of sequences (``(..., m)`` with values ``(..., k)``) is searched row by row: a split of
a batch dim of both stays a split, a split of the sequences' last dim gives partial counts.
With a ``sorter`` the sequence must be whole (broadcast) where it is read.
"""

from __future__ import annotations

import math
from typing import Any

import numpy

from ..algorithms import gather_counts
from ..algorithms import searchsorted as distributed_searchsorted
from ..layouts.sbp import Split
from ..tensors.tensor import Tensor
from .engine import B, Context, OpDef, Signature, apply
from .layout_rules import short_table
from .reduction_rules import P_SUM

__all__ = ["searchsorted"]

Shape = tuple[int, ...]


def _search_rows(xp: Any, seq: Any, values: Any, side: str, sorter: Any) -> Any:
    if seq.ndim == 1:
        if sorter is not None:
            return xp.searchsorted(seq, values, side=side, sorter=sorter)
        return xp.searchsorted(seq, values, side=side)
    out = xp.empty(values.shape, dtype=numpy.int64)
    rows, cols = seq.reshape(-1, seq.shape[-1]), values.reshape(-1, values.shape[-1])
    flat = out.reshape(-1, values.shape[-1])
    order = None if sorter is None else sorter.reshape(-1, seq.shape[-1])
    for i in range(rows.shape[0]):
        flat[i] = (xp.searchsorted(rows[i], cols[i], side=side) if order is None
                   else xp.searchsorted(rows[i], cols[i], side=side, sorter=order[i]))
    return out


def _kernel(ctx: Context, seq: Any, values: Any, *sorter: Any, right: bool, **_: Any) -> Any:
    xp = ctx.xp
    values = xp.asarray(values, dtype=numpy.result_type(seq.dtype, values.dtype))
    seq = seq.astype(values.dtype, copy=False)
    if ctx.comm is not None:
        counts = gather_counts(ctx.comm, int(seq.shape[0]))
        return distributed_searchsorted(seq, ctx.comm, counts, values, right=right)
    return _search_rows(xp, seq, values, "right" if right else "left",
                        sorter[0] if sorter else None)


def _layouts(seq: Shape, values: Shape, *sorter: Shape, **_: Any) -> list[Signature]:
    if sorter:
        return [((B, Split(d), B), Split(d)) for d in range(len(values))] if len(seq) == 1 \
            else []
    if len(seq) == 1:
        return [*[((B, Split(d)), Split(d)) for d in range(len(values))], ((Split(0), B), P_SUM)]
    last = len(seq) - 1
    return [*[((Split(d), Split(d)), Split(d)) for d in range(last)],
            ((B, Split(last)), Split(last)), ((Split(last), B), P_SUM)]


def _collective(seq: Shape, values: Shape, *sorter: Shape, **_: Any) -> list[Signature]:
    if sorter or len(seq) != 1:
        return []
    if short_table(seq, math.prod(values)):
        return []  # (B, S(d)): fewer bytes, and the work spread as the values lie
    return [((Split(0), Split(d)), Split(d)) for d in range(len(values))]


SEARCHSORTED = OpDef("searchsorted", _kernel, lambda seq, values, *_, **__: values, _layouts,
                     lambda *dtypes, out_int32, **_: numpy.dtype(
                         numpy.int32 if out_int32 else numpy.int64),
                     collective=_collective)


def searchsorted(sorted_sequence: Tensor, input: Any, *, out_int32: bool = False,
                 right: bool = False, side: str | None = None, sorter: Tensor | None = None
                 ) -> Tensor:
    """Where each of ``input`` would go in ``sorted_sequence`` to keep it sorted (torch's
    ``searchsorted``).

    Args:
        sorted_sequence: ascending along its last dim (1-D, or a batch of rows whose leading
            dims match ``input``'s).
        input: the values (a tensor or a number).
        out_int32: return int32 instead of int64.
        right: the position after equal elements (``side="right"``).
        side: ``"left"`` or ``"right"``; overrides ``right`` when given.
        sorter: indices that sort an unsorted ``sorted_sequence``.

    Returns:
        The positions, of ``input``'s shape. Where the sequence is split and ``input``
        broadcast, a partial sum (the ranks' counts add up); where both are split, split as
        ``input`` (each value routed to the rank that decides it).

    Raises:
        RuntimeError: shapes or a side that torch refuses (before anything moves).

    Examples:
        >>> flow.searchsorted(flow.tensor([1, 3, 5]), flow.tensor([3, 6])).tolist()
        [1, 3]
    """
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but "
                               f"got {side!r}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites")
        right = side == "right"
    if sorted_sequence.ndim == 0:
        raise RuntimeError("torch.searchsorted(): boundaries tensor should have 1 dimension or "
                           "the same number of dimensions as input")
    values = input if isinstance(input, Tensor) else number_like(sorted_sequence, input)
    if sorted_sequence.ndim > 1 and (values.ndim != sorted_sequence.ndim or tuple(
            values.shape[:-1]) != tuple(sorted_sequence.shape[:-1])):
        raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or "
                           "the first N-1 dimensions of boundaries tensor and input value "
                           f"tensor must match, got {tuple(sorted_sequence.shape)} and "
                           f"{tuple(values.shape)}")
    if sorter is not None and tuple(sorter.shape) != tuple(sorted_sequence.shape):
        raise RuntimeError("torch.searchsorted(): boundary and sorter must have the same size")
    operands = [sorted_sequence.detach(), values.detach()]
    if sorter is not None:
        operands.append(sorter)
    return apply(SEARCHSORTED, *operands, right=bool(right), out_int32=bool(out_int32))


def number_like(like: Tensor, value: Any) -> Tensor:
    """A Python number as a 0-d tensor beside ``like`` (broadcast where it is global): the
    tensor operand of a torch function that takes a number."""
    from ..tensors.creation import tensor

    data = numpy.asarray(value)
    if not like.is_global:
        return tensor(data)
    return tensor(data.reshape(1), placement=like.placement,
                  sbp=(B,) * like.placement.ndim).reshape(())
