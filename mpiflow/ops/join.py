"""Ops that join and cut tensors along a dim: cat, stack, split, chunk (narrow).

Layout rules, per mesh axis: a split on any dim but the one concatenated or cut is kept
(``stack``'s renumbered); ``cat`` of inputs split along its dim stays split (each rank fetches
its part of the result, no gather); other splits of that dim are gathered first; partial
layouts stay partial
(``P -> P``). ``cat`` and ``stack`` copy; each piece of ``split``/``chunk`` is one ``narrow`` op,
a view where the array module allows it. Gradients: ``cat`` and ``stack`` hand each input its
slice of the gradient, and each ``narrow`` puts its gradient into its slice of zeros.

Examples:
    >>> import mpiflow as flow
    >>> x = flow.tensor([[1, 2, 3], [4, 5, 6]])
    >>> flow.cat([x, x], dim=1).shape, [p.shape for p in x.split(2, dim=1)]
    (mpiflow.Size([2, 6]), [mpiflow.Size([2, 2]), mpiflow.Size([2, 1])])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy

from ..layouts.sbp import Split
from ..tensors.tensor import Tensor, bind
from .engine import B, Context, OpDef, Signature, apply
from .layout_rules import keep_partial, wrap_dim
from .shape import SQUEEZE

__all__ = ["cat", "concat", "stack", "split", "chunk"]

Shape = tuple[int, ...]


# -- cat / stack -------------------------------------------------------------------------------
def _cat_shape(*shapes: Shape, dim: int) -> Shape:
    first = shapes[0]
    for s in shapes[1:]:
        if len(s) != len(first) or any(a != b for i, (a, b) in enumerate(zip(s, first,
                                                                              strict=True))
                                       if i != dim):
            raise RuntimeError(f"cat: sizes of tensors must match except in dimension {dim}, "
                               f"got shapes {', '.join(map(str, shapes))}")
    return (*first[:dim], sum(s[dim] for s in shapes), *first[dim + 1:])


def _cat_layouts(*shapes: Shape, dim: int) -> list[Signature]:
    sigs: list[Signature] = [((Split(d),) * len(shapes), Split(d))
                             for d in range(len(shapes[0])) if d != dim]
    return sigs + keep_partial(len(shapes))


def _cat_kernel(ctx: Context, *arrays: Any, dim: int) -> Any:
    if ctx.comm is not None:
        return _cat_split(ctx, arrays, dim)
    return ctx.xp.concatenate([a.astype(ctx.out_dtype, copy=False) for a in arrays], axis=dim)


def _cat_along(*shapes: Shape, dim: int) -> list[Signature]:
    return [((Split(dim),) * len(shapes), Split(dim))]


def _cat_split(ctx: Context, arrays: Sequence[Any], dim: int) -> Any:
    """``cat`` along a split dim: each rank fetches its balanced part of the result from the
    inputs' parts that overlap it (one ``all_to_all_v`` per input that has rows, after one
    all-gather of every input's row count)."""
    from ..algorithms import fetch, offsets

    assert ctx.out_sbp is not None and ctx.comm is not None
    xp, comm = ctx.xp, ctx.comm
    mine = numpy.array([a.shape[dim] for a in arrays], dtype=numpy.int64)
    everyone = numpy.empty((comm.size, len(arrays)), dtype=numpy.int64)
    comm.all_gather(mine, everyone.reshape(-1))
    bounds = offsets(ctx.extents(ctx.global_shape, ctx.out_sbp, dim))
    pieces, first = [], 0
    for i, a in enumerate(arrays):
        counts = [int(c) for c in everyone[:, i]]
        last = first + sum(counts)
        wants = [[(max(bounds[r], first) - first, min(bounds[r + 1], last) - first)]
                 if max(bounds[r], first) < min(bounds[r + 1], last) else []
                 for r in range(comm.size)]
        if last > first:
            pieces.append(fetch(a.astype(ctx.out_dtype, copy=False), comm, dim, counts, wants))
        first = last
    if not pieces:
        return xp.empty(ctx.out_shape, dtype=ctx.out_dtype)
    return xp.concatenate(pieces, axis=dim) if len(pieces) > 1 else pieces[0]


def _cat_grad(g: Tensor, operands: Any, out: Tensor, *, dim: int) -> tuple[Tensor, ...]:
    """Each input gets its slice of the gradient along ``dim``."""
    grads, start = [], 0
    for x in operands:
        stop = start + x.shape[dim]
        grads.append(apply(NARROW, g, dim=dim, start=start, stop=stop))
        start = stop
    return tuple(grads)


CAT = OpDef("cat", _cat_kernel, _cat_shape, _cat_layouts, grad=_cat_grad,
            collective=_cat_along)


def _tensor_list(tensors: Sequence[Tensor], name: str) -> list[Tensor]:
    items = list(tensors)
    if not items:
        raise ValueError(f"{name}() expects a non-empty sequence of tensors")
    for item in items:
        if not isinstance(item, Tensor):
            raise TypeError(f"{name}() expects tensors, got {type(item).__name__}")
    return items


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """The tensors joined along the existing dim ``dim`` (dtypes promote).

    Args:
        tensors: tensors of the same shape except along ``dim``, all local or all global on
            one placement.
        dim: the dim to join along.

    Returns:
        A new tensor.

    Examples:
        >>> flow.cat([flow.zeros(2, 3), flow.ones(1, 3)]).shape
        mpiflow.Size([3, 3])
    """
    items = _tensor_list(tensors, "cat")
    return apply(CAT, *items, dim=wrap_dim(dim, items[0].ndim))


concat = cat


def _stack_shape(*shapes: Shape, dim: int) -> Shape:
    if any(s != shapes[0] for s in shapes):
        raise RuntimeError(f"stack expects each tensor to be equal size, got shapes "
                           f"{', '.join(map(str, shapes))}")
    return (*shapes[0][:dim], len(shapes), *shapes[0][dim:])


def _stack_layouts(*shapes: Shape, dim: int) -> list[Signature]:
    sigs: list[Signature] = [((Split(d),) * len(shapes), Split(d if d < dim else d + 1))
                             for d in range(len(shapes[0]))]
    return sigs + keep_partial(len(shapes))


def _stack_kernel(ctx: Context, *arrays: Any, dim: int) -> Any:
    return ctx.xp.stack([a.astype(ctx.out_dtype, copy=False) for a in arrays], axis=dim)


def _stack_grad(g: Tensor, operands: Any, out: Tensor, *, dim: int) -> tuple[Tensor, ...]:
    """Input ``i`` gets the gradient's entry ``i`` along ``dim``."""
    return tuple(apply(SQUEEZE, apply(NARROW, g, dim=dim, start=i, stop=i + 1), dims=(dim,))
                 for i in range(len(operands)))


STACK = OpDef("stack", _stack_kernel, _stack_shape, _stack_layouts, grad=_stack_grad)


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """The tensors (all of one shape) joined along a new dim ``dim``.

    Examples:
        >>> flow.stack([flow.zeros(2, 3), flow.ones(2, 3)], dim=1).shape
        mpiflow.Size([2, 2, 3])
    """
    items = _tensor_list(tensors, "stack")
    return apply(STACK, *items, dim=wrap_dim(dim, items[0].ndim, extra=1))


# -- split / chunk -------------------------------------------------------------------------------
def _narrow_shape(shape: Shape, *, dim: int, start: int, stop: int) -> Shape:
    return (*shape[:dim], stop - start, *shape[dim + 1:])


def _narrow_layouts(shape: Shape, *, dim: int, start: int, stop: int) -> list[Signature]:
    sigs: list[Signature] = [((Split(d),), Split(d)) for d in range(len(shape)) if d != dim]
    return sigs + keep_partial()


def _narrow_kernel(ctx: Context, a: Any, *, dim: int, start: int, stop: int) -> Any:
    return a[(slice(None),) * dim + (slice(start, stop),)]


def _narrow_grad(g: Tensor, operands: Any, out: Tensor, *, dim: int, start: int, stop: int
                 ) -> tuple[Tensor]:
    """The piece's gradient in its slice of zeros of the input's shape."""
    from .indexing import GETITEM_GRAD

    shape = tuple(operands[0].shape)
    index = (slice(None),) * dim + (slice(start, stop),) + (slice(None),) * (len(shape) - dim - 1)
    return (apply(GETITEM_GRAD, g, index=index, size=shape),)


NARROW = OpDef("narrow", _narrow_kernel, _narrow_shape, _narrow_layouts, grad=_narrow_grad)


def _pieces(input: Tensor, dim: int, sizes: Sequence[int]) -> tuple[Tensor, ...]:
    if input.is_global and Split(dim) in input.sbp:  # gather that dim once, not per piece
        input = input.to_global(sbp=tuple(B if s == Split(dim) else s for s in input.sbp))
    out, start = [], 0
    for n in sizes:
        out.append(apply(NARROW, input, dim=dim, start=start, stop=start + n))
        start += n
    return tuple(out)


def split(tensor: Tensor, split_size_or_sections: int | Sequence[int], dim: int = 0
          ) -> tuple[Tensor, ...]:
    """``tensor`` cut along ``dim`` into pieces of one size (the last may be smaller) or of
    the given sizes, as ``torch.split``.

    Args:
        tensor: a tensor.
        split_size_or_sections: the size of each piece, or a list of sizes summing to the
            extent of ``dim``.
        dim: the dim to cut.

    Returns:
        A tuple of tensors (views for local tensors).

    Examples:
        >>> [p.shape[0] for p in flow.zeros(5, 2).split(2)]
        [2, 2, 1]
    """
    d = wrap_dim(dim, tensor.ndim)
    n = tensor.shape[d]
    if isinstance(split_size_or_sections, int):
        size = split_size_or_sections
        if size <= 0 and not (size == 0 and n == 0):
            raise ValueError(f"split expects a positive split size, got {size}")
        sizes = [min(size, n - s) for s in range(0, n, size)] if n else [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if sum(sizes) != n or any(s < 0 for s in sizes):
            raise ValueError(f"split: sections {sizes} do not sum to {n}, the size of dim {d}")
    return _pieces(tensor, d, sizes)


def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """``input`` cut along ``dim`` into at most ``chunks`` pieces of ``ceil(n / chunks)``
    (the last may be smaller, and fewer pieces may come back), as ``torch.chunk``.

    Examples:
        >>> [p.shape[0] for p in flow.zeros(5).chunk(3)]
        [2, 2, 1]
    """
    if chunks <= 0:
        raise ValueError(f"chunk expects `chunks` to be greater than 0, got {chunks}")
    d = wrap_dim(dim, input.ndim)
    n = input.shape[d]
    if n == 0:
        return _pieces(input, d, [0] * chunks)
    return split(input, -(-n // chunks), d)


bind({"split": split, "chunk": chunk})
