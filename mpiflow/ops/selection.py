"""Selections by a mask: ``masked_select``, ``nonzero`` and ``x[mask]``, results split.

A selection's length depends on the data: the public functions first count the marked
elements (one all-reduce of one integer: every rank learns the result's shape), then run the op:

- ``masked_rows`` (``x[mask]``, ``masked_select``): the rows of ``x`` (its leading
  ``mask.ndim`` dims flattened) that ``mask`` marks. Layout rule, per mesh axis: a split of a
  dim after the mask's with a whole mask stays a split (each rank selects the same rows of its
  columns); a partial ``x`` with a whole mask stays partial; and ``x`` and ``mask`` split along
  dim 0 give a result split along dim 0, balanced, a collective signature: each rank selects
  its own rows, and :func:`mpiflow.algorithms.compress` exchanges the counts (one all-gather)
  and moves the rows that cross the balanced parts' boundaries (one ``all_to_all_v``);
- ``masked_place``, its gradient: the selection's rows put back where the mask is true (zeros
  elsewhere), by :func:`mpiflow.algorithms.expand`;
- ``nonzero``: the indices of the non-zero elements, rows in row-major order, split along dim
  0 like ``masked_rows`` (each rank's indices, shifted by its first row, then balanced).

A split of another dim is converted to a split of dim 0 first (one all-to-all): the selection's
order is the row-major order of the whole tensor.

Examples:
    >>> x = flow.tensor([[1, -2], [-3, 4]])
    >>> flow.masked_select(x, x > 0).tolist(), flow.nonzero(x < 0).tolist()
    ([1, 4], [[0, 1], [1, 0]])
"""

from __future__ import annotations

import math
from typing import Any

import numpy

from ..algorithms import compress, concatenate, expand
from ..algorithms.ranges import offsets
from ..layouts.sbp import Split, partial_max, partial_min, partial_sum
from ..tensors.tensor import Tensor, bind
from . import pointwise as pw
from .engine import B, Context, OpDef, Signature, apply
from .gathers import split_on_comm
from .reduction import sum as reduce_sum

__all__ = ["masked_select", "nonzero"]

Shape = tuple[int, ...]
_PARTIALS = (partial_sum, partial_max, partial_min)


def _rows_shape(x: Shape, mask: Shape, *, total: int) -> Shape:
    return (total, *x[len(mask):])


def _rows_layouts(x: Shape, mask: Shape, *, total: int) -> list[Signature]:
    k = len(mask)
    sigs: list[Signature] = [((Split(j), B), Split(j - k + 1)) for j in range(k, len(x))]
    return sigs + [((p, B), p) for p in _PARTIALS]


def _dim0_split(x: Shape, mask: Shape, **_: Any) -> list[Signature]:
    return [((Split(0), Split(0)), Split(0))] if mask else []


def _rows_kernel(ctx: Context, a: Any, mask: Any, *, total: int) -> Any:
    k = mask.ndim
    rows = a.reshape(math.prod(a.shape[:k]), *a.shape[k:])  # (-1 fails for empty columns)
    keep = mask.reshape(-1)
    if ctx.comm is None:
        return rows[keep]
    assert ctx.out_sbp is not None
    return compress(rows, keep, ctx.comm, 0, ctx.extents(ctx.global_shape, ctx.out_sbp, 0))


def _rows_grad(g: Tensor, operands: Any, out: Tensor, *, total: int) -> tuple[Tensor, None]:
    x, mask = operands
    return apply(MASKED_PLACE, g, mask, size=tuple(x.shape), total=total), None


MASKED_ROWS = OpDef("masked_rows", _rows_kernel, _rows_shape, _rows_layouts,
                    lambda x, mask, **_: x, _rows_grad, collective=_dim0_split)


def _place_layouts(g: Shape, mask: Shape, *, size: Shape, total: int) -> list[Signature]:
    k = len(mask)
    sigs: list[Signature] = [((Split(j - k + 1), B), Split(j)) for j in range(k, len(size))]
    return [*sigs, ((partial_sum, B), partial_sum)]


def _place_kernel(ctx: Context, g: Any, mask: Any, *, size: Shape, total: int) -> Any:
    k = mask.ndim
    keep = mask.reshape(-1)
    if ctx.comm is None:
        out = ctx.xp.zeros(ctx.out_shape, dtype=ctx.out_dtype)
        out[mask] = g
        return out
    counts = ctx.extents((total, *g.shape[1:]), split_on_comm(ctx, 0), 0)
    placed = expand(g, keep, ctx.comm, 0, counts)
    return placed.reshape(*mask.shape, *placed.shape[1:]) if k else placed


# Zeros of shape ``size`` with the rows of ``g`` where ``mask`` is true: the selection's adjoint.
MASKED_PLACE = OpDef("masked_place", _place_kernel, lambda g, mask, *, size, total: size,
                     _place_layouts, lambda g, mask, **_: g,
                     lambda g, operands, out, *, size, total: (
                         apply(MASKED_ROWS, g, operands[1], total=total), None),
                     collective=_dim0_split)


def _marked(mask: Tensor) -> int:
    """How many elements of ``mask`` are true (non-zero), agreed by every rank."""
    if mask.numel() == 0:
        return 0
    return int(reduce_sum(pw.ne(mask, 0) if mask.dtype.numpy.kind != "b" else mask).item())


def masked_rows(input: Tensor, mask: Any) -> Tensor:
    """``input[mask]`` for a boolean ``mask`` of ``input``'s leading dims (a tensor, array or
    list; split where ``input`` is): the marked rows, split along dim 0 where ``input`` was
    split, balanced."""
    from ..tensors.creation import tensor

    if not isinstance(mask, Tensor):
        array = numpy.asarray(mask)
        mask = (tensor(array, placement=input.placement, sbp=(B,) * input.placement.ndim)
                if input.is_global else tensor(array))
    elif input.is_global and not mask.is_global:
        mask = mask.to_global(input.placement, (B,) * input.placement.ndim)
    k = mask.ndim
    if tuple(mask.shape) != tuple(input.shape[:k]):
        for d, (m, n) in enumerate(zip(mask.shape, input.shape)):
            if m != n:
                raise IndexError(f"The shape of the mask {list(mask.shape)} at index {d} does "
                                 f"not match the shape of the indexed tensor "
                                 f"{list(input.shape)} at index {d}")
        raise IndexError(f"too many indices for tensor of dimension {input.ndim}")
    return apply(MASKED_ROWS, input, mask, total=_marked(mask))


def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    """The elements of ``input`` where ``mask`` is true, as a 1-D tensor (torch's
    ``masked_select``; the two broadcast together).

    Args:
        input: a tensor.
        mask: a bool tensor broadcastable with ``input``.

    Returns:
        A 1-D tensor in row-major order. A global input split along its first dim gives a
        result split along dim 0, balanced (local selection, one all-gather of the counts, one
        all-to-all of the rows that cross the parts' boundaries); nothing is gathered.

    Examples:
        >>> flow.masked_select(flow.tensor([1.0, 2.0, 3.0]), flow.tensor([True, False, True]))
        tensor([1., 3.])
    """
    if not isinstance(mask, Tensor) or mask.dtype.numpy.kind != "b":
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    try:
        shape = numpy.broadcast_shapes(tuple(input.shape), tuple(mask.shape)) or (1,)
    except ValueError:
        raise RuntimeError(f"masked_select: the shapes {tuple(input.shape)} of the input and "
                           f"{tuple(mask.shape)} of the mask do not broadcast") from None
    input, mask = pw.expand(input, shape), pw.expand(mask, shape)
    if input.ndim != len(shape):  # 0-d operands: one element
        from .shape import reshape

        input, mask = reshape(input, shape), reshape(mask, shape)
    return masked_rows(input, mask)


# -- nonzero ---------------------------------------------------------------------------------
def _nonzero_kernel(ctx: Context, a: Any, *, total: int, size: Shape) -> Any:
    xp = ctx.xp
    found = xp.argwhere(a).astype(numpy.int64, copy=False)
    if ctx.comm is None:
        return found
    rows = ctx.extents(size, split_on_comm(ctx, 0), 0)
    found[:, 0] += offsets(rows)[ctx.comm.rank]
    assert ctx.out_sbp is not None
    return concatenate(found, ctx.comm, 0, ctx.extents(ctx.global_shape, ctx.out_sbp, 0))


NONZERO = OpDef("nonzero", _nonzero_kernel,
                lambda shape, *, total, **_: (total, len(shape)), lambda shape, **_: [],
                lambda dtype, **_: numpy.dtype(numpy.int64),
                collective=lambda shape, **_: [((Split(0),), Split(0))] if shape else [])


def nonzero(input: Tensor, *, as_tuple: bool = False) -> Any:
    """The indices of the non-zero elements of ``input`` (torch's ``nonzero``).

    Args:
        input: a tensor.
        as_tuple: return one 1-D tensor per dim instead of one ``(count, ndim)`` tensor.

    Returns:
        An int64 ``(count, input.ndim)`` tensor, rows in row-major order (or its columns). A
        global input gives a result split along dim 0, balanced (each rank's own indices,
        shifted by its first row, then one rebalance); nothing is gathered.

    Examples:
        >>> flow.nonzero(flow.tensor([0, 3, 0, 4]), as_tuple=True)[0].tolist()
        [1, 3]
    """
    from .indexing import getitem

    x = input
    if as_tuple and input.ndim == 0:
        from .shape import reshape

        x = reshape(input, 1)
    out = apply(NONZERO, x, total=_marked(x), size=tuple(x.shape))
    if not as_tuple:
        return out
    return tuple(getitem(out, (slice(None), k)) for k in range(x.ndim))


bind({"masked_select": masked_select, "nonzero": nonzero})
