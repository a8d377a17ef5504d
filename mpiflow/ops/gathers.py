"""Gathers by index: ``take_along_dim``, fancy indexing ``x[idx]``, and their adjoints.

Four ops, two pairs:

- ``take_along`` (``take_along_dim``): element ``(i, c)`` is ``x[idx[i, c], c]`` along ``dim``;
  ``scatter_along`` (its gradient): zeros with each element added at its index.
- ``take`` (``x[idx]`` along ``dim``, an integer index of any shape): whole rows;
  ``take_grad`` (its gradient, ``index_add``): rows added at their indices.

Layout rules, per mesh axis: a split of a dim beside ``dim`` stays a split (both operands split
alike; each rank gathers within its columns); a split of the index (``take``: of any of its
dims) with a whole ``x`` stays a split; a partial ``x`` with a whole index stays partial (a
gather selects). And the collective signatures: ``x`` split along ``dim`` with the index split
alike (``take``: along any of its dims) gives a result split there: the kernel runs
:func:`mpiflow.algorithms.take` (``take_along``: on single elements), which asks the owners of
the rows each rank needs for them: two ``all_to_all_v``, and only the rows asked for move. An
index every rank holds whole is cut to a split one first (the engine's free ``B -> S``), so
that ``x[idx]`` of a split ``x`` and a whole index is split along ``dim``. A short ``x``
(:func:`~.layout_rules.short_table`: ``classes[labels]``) taken by more indices than its rows
is made whole instead, and each rank takes its indices' rows where they lie. The adjoints run
:func:`mpiflow.algorithms.put`.

Indices may be negative (from the end), as torch's; out-of-range ones raise the same
``IndexError`` on every rank, agreed by one all-reduce of the index's extremes before anything
moves (a step of a traced plan: replays check too).

Examples:
    >>> x = flow.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> flow.take_along_dim(x, flow.tensor([[1, 0]]), dim=0).tolist()
    [[3.0, 2.0]]
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy

from ..algorithms import put, put_along, take, take_along
from ..layouts.sbp import SbpParallel, Split, partial_max, partial_min, partial_sum
from ..tensors.tensor import Tensor, bind
from . import pointwise as pw
from .bounds import check_bounds
from .engine import B, Context, OpDef, Signature, apply
from .layout_rules import short_table, wrap_dim

__all__ = ["take_along_dim"]

Shape = tuple[int, ...]
_PARTIALS = (partial_sum, partial_max, partial_min)


def split_on_comm(ctx: Context, dim: int) -> tuple[SbpParallel, ...]:
    """A layout splitting ``dim`` on the kernel's collective mesh axes (B elsewhere): what
    :meth:`Context.extents` needs to count an operand's rows along ``dim``."""
    assert ctx.placement is not None
    return tuple(Split(dim) if a in ctx.comm_axes else B for a in range(ctx.placement.ndim))


def _wrapped(xp: Any, index: Any, n: int) -> Any:
    index = index.astype(numpy.int64, copy=False)
    return xp.where(index < 0, index + n, index) if index.size else index


def agree_in_bounds(index: Any, n: int, dim: int) -> None:
    """Raise the same ``IndexError`` on every rank where ``index`` (a tensor or an array)
    has an entry outside ``[-n, n)`` (one all-reduce of its extremes for a split index; a
    step of a traced plan, so replays check it too)."""
    if isinstance(index, Tensor):
        check_bounds(index, n, lambda value: IndexError(
            f"index {value} is out of bounds for dimension {dim} with size {n}"), low=-n)
        return
    array = numpy.asarray(index)
    wrong = array[(array < -n) | (array >= n)]
    if wrong.size:
        raise IndexError(f"index {int(wrong[0])} is out of bounds for dimension {dim} with "
                         f"size {n}")


# -- take_along / scatter_along ------------------------------------------------------------------
def _along_layouts(a: Shape, i: Shape, *, dim: int, **_: Any) -> list[Signature]:
    sigs: list[Signature] = [((Split(k), Split(k)), Split(k)) for k in range(len(a)) if k != dim]
    return sigs + [((p, B), p) for p in _PARTIALS]


def _along_collective(a: Shape, i: Shape, *, dim: int, **_: Any) -> list[Signature]:
    # (a whole index is cut to a split one by the engine for free: no mix of whole and split
    # index layouts over the mesh axes of one communicator)
    return [((Split(dim), Split(dim)), Split(dim))]


def _take_along_kernel(ctx: Context, a: Any, index: Any, *, dim: int, n: int) -> Any:
    xp = ctx.xp
    index = _wrapped(xp, index, n)
    if ctx.comm is None:
        return xp.take_along_axis(a, index, axis=dim)
    shape = (*ctx.global_shape[:dim], n, *ctx.global_shape[dim + 1:])
    counts = ctx.extents(shape, split_on_comm(ctx, dim), dim)
    return take_along(a, ctx.comm, dim, counts, index)


def _take_along_grad(g: Tensor, operands: Any, out: Tensor, *, dim: int, n: int
                     ) -> tuple[Tensor, None]:
    x, index = operands
    return apply(SCATTER_ALONG, g, index, dim=dim, size=tuple(x.shape)), None


TAKE_ALONG = OpDef("take_along", _take_along_kernel, lambda a, i, **_: i, _along_layouts,
                   lambda a, i, **_: a, _take_along_grad, collective=_along_collective)


def _scatter_along_kernel(ctx: Context, g: Any, index: Any, *, dim: int, size: Shape) -> Any:
    n = size[dim]
    index = _wrapped(ctx.xp, index, n)
    others = ctx.out_shape[:dim] + ctx.out_shape[dim + 1:]
    if ctx.comm is None:
        return put_along(g, None, dim, index, [n], others)
    assert ctx.out_sbp is not None
    return put_along(g, ctx.comm, dim, index, ctx.extents(size, ctx.out_sbp, dim), others)


def _scatter_along_layouts(g: Shape, i: Shape, *, dim: int, size: Shape) -> list[Signature]:
    sigs: list[Signature] = [((Split(k), Split(k)), Split(k)) for k in range(len(g)) if k != dim]
    return [*sigs, ((partial_sum, B), partial_sum)]


def _scatter_along_collective(g: Shape, i: Shape, *, dim: int, size: Shape) -> list[Signature]:
    return [((Split(dim), Split(dim)), Split(dim))]


def _scatter_along_grad(g: Tensor, operands: Any, out: Tensor, *, dim: int, size: Shape
                        ) -> tuple[Tensor, None]:
    return apply(TAKE_ALONG, g, operands[1], dim=dim, n=size[dim]), None


# Zeros of shape ``size`` with each element of ``g`` added at its index along ``dim``.
SCATTER_ALONG = OpDef("scatter_along", _scatter_along_kernel, lambda g, i, *, size, **_: size,
                      _scatter_along_layouts, lambda g, i, **_: g, _scatter_along_grad,
                      collective=_scatter_along_collective)


def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """Values of ``input`` at ``indices`` along ``dim`` (torch's ``take_along_dim``).

    Args:
        input: a tensor.
        indices: an integer tensor of ``input``'s number of dims, broadcast with it beside
            ``dim``; entries in ``[-n, n)``, negative ones from the end (as numpy's
            ``take_along_axis``; torch leaves negative ones undefined).
        dim: the dim to gather along; None: the flattened tensors.

    Returns:
        A tensor of the broadcast shape with ``indices``' extent along ``dim``. Split along
        ``dim``, the result is split there too (a distributed gather, no whole array moves).

    Raises:
        IndexError: an index out of range (on every rank).

    Examples:
        >>> flow.take_along_dim(flow.tensor([10, 20, 30]), flow.tensor([2, -3])).tolist()
        [30, 10]
    """
    if not isinstance(indices, Tensor) or indices.dtype.numpy.kind not in "iu":
        raise TypeError("take_along_dim(): indices must be an integer tensor")
    if dim is None:
        from .shape import reshape

        input, indices, dim = reshape(input, -1), reshape(indices, -1), 0
    dim = wrap_dim(operator.index(dim), input.ndim)
    if input.ndim != indices.ndim:
        raise RuntimeError(f"take_along_dim(): input and indices should have the same number "
                           f"of dimensions, but got {input.ndim} dimensions for input, and "
                           f"{indices.ndim} dimensions for indices")
    shape = []
    for d, (a, b) in enumerate(zip(input.shape, indices.shape)):
        if d != dim and a != b and 1 not in (a, b):
            raise RuntimeError(f"take_along_dim(): shapes {tuple(input.shape)} and "
                               f"{tuple(indices.shape)} do not broadcast beside dim {dim}")
        shape.append(max(a, b) if d != dim else -1)
    n = input.shape[dim]
    input = pw.expand(input, [n if d == dim else s for d, s in enumerate(shape)])
    indices = pw.expand(indices, [indices.shape[dim] if d == dim else s
                                  for d, s in enumerate(shape)])
    agree_in_bounds(indices, n, dim)
    return apply(TAKE_ALONG, input, indices, dim=dim, n=n)


# -- take / take_grad (fancy indexing) -----------------------------------------------------------
def _take_shape(a: Shape, i: Shape, *, dim: int, n: int) -> Shape:
    return (*a[:dim], *i, *a[dim + 1:])


def _take_layouts(a: Shape, i: Shape, *, dim: int, n: int) -> list[Signature]:
    sigs: list[Signature] = [((Split(k), B), Split(k if k < dim else k + len(i) - 1))
                             for k in range(len(a)) if k != dim]
    sigs += [((B, Split(j)), Split(dim + j)) for j in range(len(i))]
    return sigs + [((p, B), p) for p in _PARTIALS]


def _take_collective(a: Shape, i: Shape, *, dim: int, n: int) -> list[Signature]:
    if short_table((a[dim], *a[:dim], *a[dim + 1:]), math.prod(i)):
        return []  # a small x taken by many indices is made whole: ((B, S(j)), S(dim + j))
    return [((Split(dim), Split(j)), Split(dim + j)) for j in range(len(i))]


def _take_kernel(ctx: Context, a: Any, index: Any, *, dim: int, n: int) -> Any:
    xp = ctx.xp
    index = _wrapped(xp, index, n)
    if ctx.comm is None:
        return xp.take(a, index, axis=dim)
    shape = (*ctx.global_shape[:dim], n, *ctx.global_shape[dim + index.ndim:])
    return take(a, ctx.comm, dim, ctx.extents(shape, split_on_comm(ctx, dim), dim), index)


def _take_grad(g: Tensor, operands: Any, out: Tensor, *, dim: int, n: int
               ) -> tuple[Tensor, None]:
    x, index = operands
    return apply(TAKE_GRAD, g, index, dim=dim, size=tuple(x.shape)), None


TAKE = OpDef("take", _take_kernel, _take_shape, _take_layouts, lambda a, i, **_: a,
             _take_grad, collective=_take_collective)


def _take_grad_layouts(g: Shape, i: Shape, *, dim: int, size: Shape) -> list[Signature]:
    sigs: list[Signature] = [((Split(k if k < dim else k + len(i) - 1), B), Split(k))
                             for k in range(len(size)) if k != dim]
    return [*sigs, ((partial_sum, B), partial_sum)]


def _take_grad_collective(g: Shape, i: Shape, *, dim: int, size: Shape) -> list[Signature]:
    return [((Split(dim + j), Split(j)), Split(dim)) for j in range(len(i))]


def _take_grad_kernel(ctx: Context, g: Any, index: Any, *, dim: int, size: Shape) -> Any:
    xp = ctx.xp
    index = _wrapped(xp, index, size[dim])
    k = index.ndim
    if ctx.comm is None:
        out = xp.zeros(ctx.out_shape, dtype=ctx.out_dtype)
        xp.add.at(out, (slice(None),) * dim + (index,), g)
        return out
    values = g.reshape(*g.shape[:dim], math.prod(g.shape[dim:dim + k]), *g.shape[dim + k:])
    assert ctx.out_sbp is not None
    return put(values, ctx.comm, dim, index.reshape(-1), ctx.extents(size, ctx.out_sbp, dim))


# Zeros of shape ``size`` with the rows of ``g`` added at ``index`` along ``dim``: take's backward.
TAKE_GRAD = OpDef("take_grad", _take_grad_kernel, lambda g, i, *, size, **_: size,
                  _take_grad_layouts, lambda g, i, **_: g,
                  lambda g, operands, out, *, dim, size: (
                      apply(TAKE, g, operands[1], dim=dim, n=size[dim]), None),
                  collective=_take_grad_collective)


def take_rows(input: Tensor, index: Any, dim: int) -> Tensor:
    """``input`` indexed along ``dim`` by one integer index (a tensor, an array or a list;
    negative entries count from the end): numpy's ``take``. A split ``input`` and a split or
    whole index give a split result; nothing is gathered."""
    from ..tensors.creation import tensor

    n = input.shape[dim]
    if not isinstance(index, Tensor):
        index = numpy.asarray(index)
        agree_in_bounds(index, n, dim)
        index = (tensor(index, placement=input.placement, sbp=(B,) * input.placement.ndim)
                 if input.is_global else tensor(index))
    else:
        agree_in_bounds(index, n, dim)
        if input.is_global and not index.is_global:
            index = index.to_global(input.placement, (B,) * input.placement.ndim)
    return apply(TAKE, input, index, dim=dim, n=n)


bind({"take_along_dim": take_along_dim})
