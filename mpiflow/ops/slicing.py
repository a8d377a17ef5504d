"""A strided slice of one dim, distributed where that dim is split: ``x[a:b:c]`` of a split
array without gathering it.

``slice_dim`` keeps the split: each rank's part of the result is the rows of the input that
fall in its balanced part of the selection, fetched from the ranks that hold them (one
``all_to_all_v`` for a step of 1, a take of the rows by global number otherwise). ``getitem``
runs it first for every split dim that a basic index does not take whole; an int index is a
slice of one row, so ``x[i]`` moves that row alone.

Examples:
    >>> x = flow.arange(10)
    >>> slice_dim(x, 0, slice(8, 1, -3)).tolist()
    [8, 5, 2]
"""

from __future__ import annotations

from typing import Any

from ..algorithms import fetch, offsets, put, take
from ..layouts.sbp import Split
from ..tensors.tensor import Tensor
from .engine import Context, OpDef, Signature, apply
from .layout_rules import keep_partial

__all__ = ["SLICE", "SLICE_GRAD", "slice_dim"]

Shape = tuple[int, ...]


def _slice_shape(shape: Shape, *, dim: int, start: int, stop: int, step: int, **_: Any
                 ) -> Shape:
    out = list(shape)
    out[dim] = len(range(start, stop, step))
    return tuple(out)


def _others(shape: Shape, *, dim: int, **_: Any) -> list[Signature]:
    return [((Split(e),), Split(e)) for e in range(len(shape)) if e != dim] + keep_partial()


def _along(shape: Shape, *, dim: int, **_: Any) -> list[Signature]:
    return [((Split(dim),), Split(dim))]


def _local(dim: int, start: int, stop: int, step: int) -> tuple[slice, ...]:
    # stop is -1 for a negative step that runs through row 0 (range's, not a slice's, -1)
    return (slice(None),) * dim + (slice(start, None if stop < 0 else stop, step),)


def _parts(ctx: Context, n: int, dim: int) -> tuple[list[int], list[int]]:
    """Rows per rank of the communicator: of the input (``n`` rows) and of the result."""
    assert ctx.out_sbp is not None
    whole = list(ctx.global_shape)
    out_counts = ctx.extents(whole, ctx.out_sbp, dim)
    whole[dim] = n
    return ctx.extents(whole, ctx.out_sbp, dim), out_counts


def _slice_kernel(ctx: Context, a: Any, *, dim: int, start: int, stop: int, step: int,
                  n: int) -> Any:
    if ctx.comm is None:
        return a[_local(dim, start, stop, step)].copy()
    counts, out_counts = _parts(ctx, n, dim)
    bounds = offsets(out_counts)
    if step == 1:
        wants = [[(start + bounds[r], start + bounds[r + 1])] for r in range(len(counts))]
        return fetch(a, ctx.comm, dim, counts, wants)
    me = ctx.comm.rank
    rows = start + step * ctx.xp.arange(bounds[me], bounds[me + 1], dtype="int64")
    return take(a, ctx.comm, dim, counts, rows)


def _slice_grad(g: Tensor, operands: Any, out: Tensor, **attrs: Any) -> tuple[Tensor]:
    return (apply(SLICE_GRAD, g, **attrs),)


SLICE = OpDef("slice", _slice_kernel, _slice_shape, _others, grad=_slice_grad,
              collective=_along)


def _grad_shape(shape: Shape, *, dim: int, n: int, **_: Any) -> Shape:
    out = list(shape)
    out[dim] = n
    return tuple(out)


def _grad_kernel(ctx: Context, g: Any, *, dim: int, start: int, stop: int, step: int,
                 n: int) -> Any:
    """Zeros of the input's shape with ``g`` at the slice (each rank writes the rows it
    got to the ranks that hold them)."""
    if ctx.comm is None:
        out = ctx.xp.zeros(ctx.out_shape, dtype=ctx.out_dtype)
        out[_local(dim, start, stop, step)] = g
        return out
    assert ctx.out_sbp is not None
    whole = list(ctx.global_shape)
    counts = ctx.extents(whole, ctx.out_sbp, dim)
    whole[dim] = len(range(start, stop, step))
    g_counts = ctx.extents(whole, ctx.out_sbp, dim)
    first = offsets(g_counts)[ctx.comm.rank]
    rows = start + step * ctx.xp.arange(first, first + g.shape[dim], dtype="int64")
    return put(g, ctx.comm, dim, rows, counts, accumulate=False)


# The gradient of SLICE: zeros of the input's shape with the gradient at the slice.
SLICE_GRAD = OpDef("slice_grad", _grad_kernel, _grad_shape, _others, collective=_along)


def slice_dim(input: Tensor, dim: int, index: slice) -> Tensor:
    """``input`` sliced by ``index`` along ``dim`` (a new tensor; split along ``dim`` where
    the input was).

    Examples:
        >>> slice_dim(flow.arange(6).reshape(2, 3), 1, slice(1, None)).tolist()
        [[1, 2], [4, 5]]
    """
    n = input.shape[dim]
    start, stop, step = index.indices(n)
    return apply(SLICE, input, dim=dim, start=start, stop=stop, step=step, n=n)
