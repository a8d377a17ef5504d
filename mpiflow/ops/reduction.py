"""Reductions (``sum``, ``max``, ``argmax``, ``softmax``, ...) on local and global tensors.

Layout rules, per mesh axis: a split of a dim that is not reduced stays a split (of the shifted
output dim); a split of a reduced dim leaves a partial value where a collective can finish the
reduction (``sum``/``mean`` -> ``P``, ``amax``/``amin`` -> ``P(max)``/``P(min)``), and every
other op omits it, so the engine moves or gathers that split first. Linear ops keep ``P -> P``.
Composites (``var``, ``std``) need no layout or gradient rules of their own.

Gradient rules sit beside their ops and are written with mpiflow ops (so on global tensors they
are global ops): ``sum``/``mean`` broadcast the gradient back (``mean`` divided by the logical
count); ``prod`` gives each element the product of the others, exact with zeros as PyTorch;
``amax``/``amin`` split the gradient equally among ties; ``max``/``min`` with a dim send it to
the returned indices; ``softmax``, ``log_softmax``, ``logsumexp`` and ``cumsum`` have their
closed forms. Indices and bools carry no gradient. The rules the reductions share are in
:mod:`.reduction_rules`; ``softmax``, ``log_softmax``, ``logsumexp`` and ``cumsum`` in
:mod:`.softmax`.
"""

from __future__ import annotations

import builtins
import math
from typing import Any, NamedTuple

import numpy

from ..algorithms import put
from ..algorithms.selection import lines
from ..layouts.sbp import Split
from ..tensors.tensor import Tensor, bind
from . import deterministic_sum as det
from . import pointwise as pw
from .engine import B, Context, OpDef, Signature, apply
from .layout_rules import few_columns
from .reduction_rules import (
    P_SUM,
    DimArg,
    Dims,
    Shape,
    accumulator,
    check_floating,
    check_nonempty,
    extreme_layouts,
    integral_to_long,
    kept_splits,
    linear_layouts,
    reduced_shape,
    reduction_dims,
    requested_dtype,
    unreduce,
)

__all__ = [
    "MaxResult", "sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin",
    "all", "any", "var", "std",
]


class MaxResult(NamedTuple):
    """``(values, indices)`` of ``max``/``min`` along a dimension (PyTorch's ``return_types``)."""

    values: Tensor
    indices: Tensor


# -- sum, mean, prod ---------------------------------------------------------------------------
def _sum_grad(g: Tensor, operands: Any, result: Tensor, *, dims: Dims, keepdim: bool,
              count: int | None = None, **_: Any) -> tuple[Tensor]:
    """Every element gets the gradient of its sum (over ``count`` for the mean)."""
    x = operands[0]
    g = unreduce(g, dims, keepdim)
    if count is not None:
        g = pw.div(g, count)
    return (pw.expand(g, tuple(x.shape)),)


def _prod_grad(g: Tensor, operands: Any, result: Tensor, *, dims: Dims, keepdim: bool, **_: Any
               ) -> tuple[Tensor]:
    """The product of the other elements, exact with zeros (as PyTorch): with no zero in a
    reduced slice it is ``prod / x``; with one zero, that zero gets the product of the rest and
    the others zero; with two or more, every element gets zero."""
    x = operands[0]
    g = unreduce(g, dims, keepdim)
    zero = pw.eq(x, 0)
    zeros = sum(zero, dims, keepdim=True)
    rest = prod(pw.where(zero, 1, x), dims, keepdim=True)  # the product of the non-zeros
    others = pw.where(zero, pw.where(pw.eq(zeros, 1), rest, 0),
                      pw.where(pw.eq(zeros, 0), pw.div(rest, pw.where(zero, 1, x)), 0))
    return (pw.mul(g, others),)


def _sum_kernel(ctx: Context, a: Any, *, dims: Dims, keepdim: bool, count: int | None = None,
                **_: Any) -> Any:
    out = ctx.xp.sum(a, axis=dims, keepdims=keepdim, dtype=accumulator(ctx.out_dtype))
    return out if count is None else out / count


SUM = OpDef("sum", _sum_kernel, reduced_shape, linear_layouts, integral_to_long, _sum_grad)
MEAN = OpDef("mean", _sum_kernel, reduced_shape, linear_layouts,
             lambda dtype, *, out=None, **_: dtype if out is None else out, _sum_grad)
def _prod_kernel(ctx: Context, a: Any, *, dims: Dims, keepdim: bool, **_: Any) -> Any:
    out = ctx.xp.asarray(ctx.xp.prod(a, axis=dims, keepdims=keepdim,
                                     dtype=accumulator(ctx.out_dtype)))
    if ctx.comm is not None:  # a split reduced dim: the product of the ranks' products
        from ..communication import ReduceOp

        out = out.astype(ctx.out_dtype, copy=True)  # (contiguous, 0-d stays 0-d)
        ctx.comm.all_reduce(out, ReduceOp.PRODUCT)
    return out


def _reduced_splits(shape: Shape, *, dims: Dims, **_: Any) -> list[Signature]:
    """A split reduced dim, finished by a collective to a broadcast result."""
    return [((Split(d),), B) for d in dims]


PROD = OpDef("prod", _prod_kernel, reduced_shape, kept_splits, integral_to_long, _prod_grad,
             collective=_reduced_splits)


def sum(input: Tensor, dim: DimArg = None, keepdim: bool = False, *, dtype: Any = None
        ) -> Tensor:
    """The sum of the elements over ``dim`` (all by default); bool and integers give int64.

    Args:
        input: the tensor.
        dim: an int, a sequence of ints (negative counts from the end), or None for all.
        keepdim: keep the reduced dimensions with size 1.
        dtype: the dtype to compute in and return.

    Returns:
        The reduced tensor. On a global tensor, summing over a split dimension gives a partial
        sum (``P``); ``numpy()``/``item()`` return the full sum.

    Examples:
        >>> flow.sum(flow.tensor([[1, 2], [3, 4]]), dim=0).tolist()
        [4, 6]
    """
    if det.enabled(input):
        return det.exact_sum(input, reduction_dims(dim, input.ndim), keepdim,
                             out_dtype=requested_dtype(dtype))
    return apply(SUM, input, dims=reduction_dims(dim, input.ndim), keepdim=keepdim,
                 out=requested_dtype(dtype))


def mean(input: Tensor, dim: DimArg = None, keepdim: bool = False, *, dtype: Any = None
         ) -> Tensor:
    """The mean over ``dim`` (all by default), divided by the logical element count.

    Args:
        input: a floating-point or complex tensor (or any, with a floating ``dtype``).
        dim: an int, a sequence of ints, or None for all.
        keepdim: keep the reduced dimensions with size 1.
        dtype: the dtype to compute in and return.

    Returns:
        The reduced tensor (float16 stays float16, accumulated in float32).

    Raises:
        TypeError: an integer or bool input without a floating ``dtype``.

    Examples:
        >>> flow.mean(flow.tensor([1.0, 2.0, 6.0])).item()
        3.0
    """
    out = requested_dtype(dtype)
    check_floating("mean", out if out is not None else input.dtype.numpy)
    dims = reduction_dims(dim, input.ndim)
    if det.enabled(input):
        return det.exact_sum(input, dims, keepdim, out_dtype=out,
                             divisor=math.prod(input.shape[d] for d in dims))
    return apply(MEAN, input, dims=dims, keepdim=keepdim, out=out,
                 count=math.prod(input.shape[d] for d in dims))


def prod(input: Tensor, dim: DimArg = None, keepdim: bool = False, *, dtype: Any = None
         ) -> Tensor:
    """The product of the elements over ``dim`` (all by default); integers give int64.

    Args:
        input: as :func:`sum` (no partial layout: a split reduced dim
        dim: as :func:`sum` (no partial layout: a split reduced dim
        keepdim: as :func:`sum` (no partial layout: a split reduced dim
        dtype: as :func:`sum` (no partial layout: a split reduced dim
            is moved or gathered first).

    Returns:
        The reduced tensor.

    Examples:
        >>> flow.prod(flow.tensor([1, 2, 3, 4])).item()
        24
    """
    return apply(PROD, input, dims=reduction_dims(dim, input.ndim), keepdim=keepdim,
                 out=requested_dtype(dtype))


# -- max, min, argmax, argmin ------------------------------------------------------------------
def _identity(dtype: numpy.dtype, largest: bool) -> Any:
    """The value that never wins a max (``largest``) or a min: what an empty shard holds."""
    if dtype.kind in "iu":
        return numpy.iinfo(dtype).min if largest else numpy.iinfo(dtype).max
    return (-numpy.inf if largest else numpy.inf) if dtype.kind == "f" else not largest


def _extreme_kernel(ctx: Context, a: Any, *, dims: Dims, keepdim: bool, largest: bool,
                    **_: Any) -> Any:
    if builtins.any(a.shape[d] == 0 for d in dims):  # an empty shard of a split reduced dim
        return ctx.xp.full(ctx.out_shape, _identity(ctx.out_dtype, largest), ctx.out_dtype)
    reduce = ctx.xp.max if largest else ctx.xp.min
    return reduce(a, axis=dims, keepdims=keepdim)


def _arg_kernel(ctx: Context, a: Any, *, dims: Dims, keepdim: bool, largest: bool,
                **_: Any) -> Any:
    """Indices along one dim, or into the flattened input where ``dims`` are all of them."""
    if ctx.comm is not None:
        return _arg_split(ctx, a, dims[0], keepdim, largest)
    find = ctx.xp.argmax if largest else ctx.xp.argmin
    return find(a, axis=dims[0], keepdims=keepdim) if len(dims) == 1 else find(a)


def _arg_along(shape: Shape, *, dims: Dims, **_: Any) -> list[Signature]:
    return [((Split(dims[0]),), B)] if len(dims) == 1 and shape else []


def _arg_split(ctx: Context, a: Any, d: int, keepdim: bool, largest: bool) -> Any:
    """argmax/argmin along a split dim: each rank's winner and its global index, all-gathered
    (a few numbers per output element and rank), then the first winner in rank order (NaN
    wins, as in numpy)."""
    from ..algorithms import gather_counts, offsets

    xp, comm = ctx.xp, ctx.comm
    assert comm is not None
    counts = gather_counts(comm, a.shape[d])
    shape = list(a.shape)
    shape[d] = 1
    if a.shape[d]:
        index = (ctx.xp.argmax if largest else ctx.xp.argmin)(a, axis=d, keepdims=True)
        value = xp.take_along_axis(a, index, axis=d)
        index = index.astype(numpy.int64) + offsets(counts)[comm.rank]
    else:
        index = xp.zeros(shape, dtype=numpy.int64)
        value = xp.zeros(shape, dtype=a.dtype)
    values = xp.empty((comm.size, *shape), dtype=a.dtype)
    indices = xp.empty((comm.size, *shape), dtype=numpy.int64)
    comm.all_gather(xp.ascontiguousarray(value), values)
    comm.all_gather(xp.ascontiguousarray(index), indices)
    ranks = [r for r, c in enumerate(counts) if c]
    best_v, best_i = values[ranks[0]], indices[ranks[0]]
    for r in ranks[1:]:
        v = values[r]
        beats = (v > best_v) if largest else (v < best_v)
        if v.dtype.kind in "fc":  # NaN wins; the first one found stays
            beats = (beats & ~xp.isnan(best_v)) | (xp.isnan(v) & ~xp.isnan(best_v))
        best_v, best_i = xp.where(beats, v, best_v), xp.where(beats, indices[r], best_i)
    return best_i if keepdim else xp.squeeze(best_i, axis=d)


def _extreme_grad(g: Tensor, operands: Any, result: Tensor, *, dims: Dims, keepdim: bool,
                  **_: Any) -> tuple[Tensor]:
    """``amax``/``amin``: the gradient split equally among the elements equal to the result."""
    x = operands[0]
    hit = pw.eq(x, unreduce(result, dims, keepdim)).to(g.dtype)
    share = pw.div(hit, sum(hit, dims, keepdim=True))
    return (pw.mul(unreduce(g, dims, keepdim), share),)


def _extreme_at_grad(g: Tensor, operands: Any, result: Tensor, *, dims: Dims, keepdim: bool,
                     indices: Tensor, **_: Any) -> tuple[Tensor]:
    """``max``/``min`` with a dim: the gradient goes to the position ``indices`` name."""
    x = operands[0]
    return (apply(PUT_ALONG, g, indices, dim=dims[0], keepdim=keepdim,
                  size=tuple(x.shape)),)


def _put_along_kernel(ctx: Context, g: Any, indices: Any, *, dim: int, keepdim: bool,
                      size: Shape) -> Any:
    xp = ctx.xp
    if ctx.comm is not None:
        return _put_along_split(ctx, g, indices, dim, size)
    out = xp.zeros(ctx.out_shape, dtype=ctx.out_dtype)
    if not keepdim:
        g, indices = xp.expand_dims(g, dim), xp.expand_dims(indices, dim)
    xp.put_along_axis(out, indices, g, axis=dim)
    return out


def _put_along_layouts(g: Shape, indices: Shape, *, dim: int, keepdim: bool, size: Shape
                       ) -> list[Signature]:
    sigs: list[Signature] = []
    for d in range(len(size)):
        if d != dim:
            s = Split(d if keepdim or d < dim else d - 1)
            sigs.append(((s, s), Split(d)))
    return [*sigs, ((P_SUM, B), P_SUM)]


def _put_along_split(ctx: Context, g: Any, indices: Any, dim: int, size: Shape) -> Any:
    """Along a split ``dim``: each column's values go to the ranks holding their rows
    (:func:`mpiflow.algorithms.put`), so that nothing is gathered."""
    xp = ctx.xp
    assert ctx.out_sbp is not None
    out_counts = ctx.extents(size, ctx.out_sbp, dim)
    values, rows = lines(g, dim), lines(indices, dim)
    out = xp.zeros((out_counts[ctx.comm.rank], values.shape[1]), dtype=ctx.out_dtype)
    for j in range(values.shape[1]):
        out[:, j] = put(xp.ascontiguousarray(values[:, j]), ctx.comm, 0, rows[:, j],
                        out_counts, accumulate=False)
    inner = tuple(n for d, n in enumerate(ctx.out_shape) if d != dim)
    return xp.moveaxis(out.reshape(out.shape[0], *inner), 0, dim)


def _put_along_collective(g: Shape, indices: Shape, *, dim: int, keepdim: bool, size: Shape
                          ) -> list[Signature]:
    """With ``dim`` kept: ``(S(dim), S(dim)) -> S(dim)``, a distributed scatter (the gradient
    of a sort or a top k along a split dim)."""
    return [((Split(dim), Split(dim)), Split(dim))] if keepdim and few_columns(size, dim) else []


# Zeros of shape ``size`` with ``g`` put at ``indices`` along ``dim``: the backward of max/min,
# sort and topk.
PUT_ALONG = OpDef("put_along", _put_along_kernel, lambda g, i, *, size, **_: size,
                  _put_along_layouts, lambda g, i, **_: g, collective=_put_along_collective)


# Keyed by ``largest``: the max and the min flavour share kernel and rules.
EXTREME = {True: OpDef("amax", _extreme_kernel, reduced_shape, extreme_layouts,
                       grad=_extreme_grad),
           False: OpDef("amin", _extreme_kernel, reduced_shape, extreme_layouts,
                        grad=_extreme_grad)}
# The values of max/min with a dim: amax/amin whose gradient goes to the indices' positions.
EXTREME_AT = {True: OpDef("max", _extreme_kernel, reduced_shape, extreme_layouts,
                          grad=_extreme_at_grad),
              False: OpDef("min", _extreme_kernel, reduced_shape, extreme_layouts,
                           grad=_extreme_at_grad)}
# Indices along a split dim: each rank's winner, then the first winner of all (collective).
ARG_EXTREME = {largest: OpDef(name, _arg_kernel, reduced_shape, kept_splits,
                              lambda *_, **__: numpy.dtype(numpy.int64),
                              collective=_arg_along)
               for largest, name in ((True, "argmax"), (False, "argmin"))}


def _extreme(name: str, input: Tensor, dim: DimArg, keepdim: bool, largest: bool) -> Tensor:
    dims = reduction_dims(dim, input.ndim)
    check_nonempty(name, input, None if dim is None or dim == () else dims)
    return apply(EXTREME[largest], input, dims=dims, keepdim=keepdim, largest=largest,
                 partial=input.dtype.numpy.kind in "iuf")


def _arg_extreme(name: str, input: Tensor, dim: int | None, keepdim: bool, largest: bool
                 ) -> Tensor:
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"{name}() takes one int dimension or None, got {dim!r}")
    dims = reduction_dims(dim, input.ndim)
    check_nonempty(name, input, None if dim is None else dims)
    return apply(ARG_EXTREME[largest], input, dims=dims, keepdim=keepdim and dim is not None,
                 largest=largest)


def amax(input: Tensor, dim: DimArg = None, keepdim: bool = False) -> Tensor:
    """The largest element over ``dim`` (all by default, as ``dim=()``); NaN propagates.

    Args:
        input: as :func:`sum`.
        dim: as :func:`sum`.
        keepdim: as :func:`sum`.

    Returns:
        The reduced tensor, of ``input``'s dtype; on a global tensor a split reduced dim
        gives ``P(max)`` (finished by ``numpy()`` or a conversion).

    Examples:
        >>> flow.amax(flow.tensor([[1, 5], [7, 2]]), dim=1).tolist()
        [5, 7]
    """
    return _extreme("amax", input, dim, keepdim, True)


def amin(input: Tensor, dim: DimArg = None, keepdim: bool = False) -> Tensor:
    """The smallest element over ``dim`` (all by default); see :func:`amax`.

    Args:
        input: as :func:`sum`.
        dim: as :func:`sum`.
        keepdim: as :func:`sum`.

    Returns:
        The reduced tensor; a split reduced dim gives ``P(min)``.

    Examples:
        >>> flow.amin(flow.tensor([[1, 5], [7, 2]]), dim=1).tolist()
        [1, 2]
    """
    return _extreme("amin", input, dim, keepdim, False)


def argmax(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """The index (int64) of the first largest element along ``dim``, or of the flattened input.

    Args:
        input: the tensor.
        dim: the dimension to reduce, or None for the flattened input (``keepdim`` is then
            ignored, as in PyTorch).
        keepdim: keep ``dim`` with size 1.

    Returns:
        An int64 tensor; on a global tensor ``dim`` is never split (it is moved first).

    Examples:
        >>> flow.argmax(flow.tensor([[1, 5], [7, 2]]), dim=0).tolist()
        [1, 0]
    """
    return _arg_extreme("argmax", input, dim, keepdim, True)


def argmin(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """The index (int64) of the first smallest element along ``dim``.

    Args:
        input: as :func:`argmax`.
        dim: as :func:`argmax`.
        keepdim: as :func:`argmax`.

    Returns:
        An int64 tensor.

    Examples:
        >>> flow.argmin(flow.tensor([3, 1, 2])).item()
        1
    """
    return _arg_extreme("argmin", input, dim, keepdim, False)


def _max_or_min(name: str, input: Tensor, dim: Any, keepdim: bool, largest: bool) -> Any:
    if isinstance(dim, Tensor):
        return (pw.maximum if largest else pw.minimum)(input, dim)
    if dim is None:
        return _extreme(name, input, None, False, largest)
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"{name}() with a dim takes one int dimension, got {dim!r}; use "
                        f"a{name}() to reduce several")
    # Two ops, not one with two outputs: the values keep the cheap partial path (a split
    # reduced dim leaves P(max), finished by a small all-reduce of the result) and only the
    # indices need the reduced dim gathered.
    indices = _arg_extreme(name, input, dim, keepdim, largest)
    values = apply(EXTREME_AT[largest], input, dims=reduction_dims(dim, input.ndim),
                   keepdim=keepdim, largest=largest, partial=input.dtype.numpy.kind in "iuf",
                   indices=indices)
    return MaxResult(values, indices)


def max(input: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """``max(x)``: the largest element (0-d); ``max(x, dim, keepdim)``: ``(values, indices)``.

    Args:
        input: the tensor.
        dim: None, one int dimension, or a tensor (then the elementwise ``maximum``).
        keepdim: keep ``dim`` with size 1.

    Returns:
        A 0-d tensor, a :class:`MaxResult` ``(values, indices)``, or the elementwise maximum.

    Examples:
        >>> values, indices = flow.max(flow.tensor([[1, 5], [7, 2]]), dim=1)
        >>> values.tolist(), indices.tolist()
        ([5, 7], [1, 0])
    """
    return _max_or_min("max", input, dim, keepdim, True)


def min(input: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """``min(x)``: the smallest element; ``min(x, dim, keepdim)``: ``(values, indices)``.

    Args:
        input: as :func:`max`.
        dim: as :func:`max`.
        keepdim: as :func:`max`.

    Returns:
        A 0-d tensor, a :class:`MaxResult` ``(values, indices)``, or the elementwise minimum.

    Examples:
        >>> flow.min(flow.tensor([[1, 5], [7, 2]]), dim=1).indices.tolist()
        [0, 1]
    """
    return _max_or_min("min", input, dim, keepdim, False)


# -- all, any ----------------------------------------------------------------------------------
def _logical_dtype(dtype: numpy.dtype, **_: Any) -> numpy.dtype:
    return dtype if dtype == numpy.uint8 else numpy.dtype(bool)  # PyTorch keeps uint8


# No partial layouts: MPI has no portable max/min of bools (a split reduced dim is moved).
ALL = OpDef("all", lambda ctx, a, *, dims, keepdim, **_: ctx.xp.all(
    a, axis=dims, keepdims=keepdim), reduced_shape, kept_splits, _logical_dtype)
ANY = OpDef("any", lambda ctx, a, *, dims, keepdim, **_: ctx.xp.any(
    a, axis=dims, keepdims=keepdim), reduced_shape, kept_splits, _logical_dtype)


def all(input: Tensor, dim: DimArg = None, keepdim: bool = False) -> Tensor:
    """Whether every element over ``dim`` (all by default) is true (non-zero).

    Args:
        input: as :func:`sum`.
        dim: as :func:`sum`.
        keepdim: as :func:`sum`.

    Returns:
        A bool tensor (uint8 for a uint8 input, as PyTorch).

    Examples:
        >>> flow.all(flow.tensor([[True, False], [True, True]]), dim=1).tolist()
        [False, True]
    """
    return apply(ALL, input, dims=reduction_dims(dim, input.ndim), keepdim=keepdim)


def any(input: Tensor, dim: DimArg = None, keepdim: bool = False) -> Tensor:
    """Whether some element over ``dim`` (all by default) is true (non-zero).

    Args:
        input: as :func:`sum`.
        dim: as :func:`sum`.
        keepdim: as :func:`sum`.

    Returns:
        A bool tensor (uint8 for a uint8 input).

    Examples:
        >>> flow.any(flow.tensor([0, 0, 3])).item()
        True
    """
    return apply(ANY, input, dims=reduction_dims(dim, input.ndim), keepdim=keepdim)


# -- var, std (composites) ---------------------------------------------------------------
def var(input: Tensor, dim: DimArg = None, unbiased: bool | None = None, keepdim: bool = False,
        *, correction: int | None = None) -> Tensor:
    """The variance over ``dim``: ``sum((x - mean)**2) / (n - correction)``.

    Args:
        input: as :func:`mean` (a floating-point input).
        dim: as :func:`mean` (a floating-point input).
        keepdim: as :func:`mean` (a floating-point input).
        unbiased: True (default) is ``correction=1``, False ``correction=0``.
        correction: subtracted from the element count ``n`` (overrides ``unbiased``).

    Returns:
        The variance (NaN or inf where ``n - correction <= 0``, as PyTorch).

    Examples:
        >>> flow.var(flow.tensor([1.0, 2.0, 3.0, 4.0])).item()
        1.6666666269302368
    """
    if input.dtype.numpy.kind != "f":
        raise TypeError(f"var(): input dtype should be floating point, got {input.dtype}")
    if correction is None:
        correction = 0 if unbiased is False else 1
    dims = reduction_dims(dim, input.ndim)
    deviation = pw.sub(input, mean(input, dims, keepdim=True))  # two passes: no cancellation
    n = math.prod(input.shape[d] for d in dims)
    if det.enabled(input):  # one rounding of sum(fl(d * d)) / (n - correction)
        squares = pw.mul(deviation, deviation)
        if n - correction <= 0:
            return pw.div(det.exact_sum(squares, dims, keepdim), builtins.max(0, n - correction))
        return det.exact_sum(squares, dims, keepdim, divisor=n - correction)
    squares = sum(pw.mul(deviation, deviation), dims, keepdim)
    with numpy.errstate(divide="ignore", invalid="ignore"):
        return pw.div(squares, builtins.max(0, n - correction))


def std(input: Tensor, dim: DimArg = None, unbiased: bool | None = None, keepdim: bool = False,
        *, correction: int | None = None) -> Tensor:
    """The standard deviation over ``dim``: ``sqrt(var(...))``.

    Args:
        input: as :func:`var`.
        dim: as :func:`var`.
        unbiased: as :func:`var`.
        keepdim: as :func:`var`.
        correction: as :func:`var`.

    Returns:
        The standard deviation.

    Examples:
        >>> flow.std(flow.tensor([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]), unbiased=False).item()
        2.0
    """
    return pw.sqrt(var(input, dim, unbiased, keepdim, correction=correction))


bind({_name: globals()[_name] for _name in __all__[1:]})
