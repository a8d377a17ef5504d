"""Reductions (``sum``, ``mean``, ``max``, ``argmax``, ``softmax``, ...) on local and global
tensors.

Each op is an :class:`~mpiflow.ops.engine.OpDef` whose layout rule says, per mesh axis, what a
split of each input dimension becomes:

- a split of a dimension that is *not* reduced stays a split (of the shifted output dim);
- a split of a reduced dimension becomes a partial value where the reduction is one that a
  collective can finish: ``sum``/``mean`` give ``P`` (sum), ``amax``/``amin`` give ``P(max)`` /
  ``P(min)``; every other op (``prod``, ``argmax``, ``softmax``, ...) omits the signature, so
  the engine first moves the split elsewhere (all-to-all) or gathers it;
- linear ops (``sum``, ``mean``, ``cumsum``) keep ``P -> P``; ``amax`` keeps ``P(max) -> P(max)``.

Composites (``var``, ``std``, ``norm``, ``max`` with ``dim``) are built from these ops and
the elementwise ones, and need no layout rules of their own.
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy

from .._tensor import Tensor
from ..communication import ReduceOp
from ..sbp import Partial, Split
from . import pointwise as pw
from .engine import Context, OpDef, Signature, apply
from .methods import bind

__all__ = [
    "MaxResult", "sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin",
    "all", "any", "var", "std", "logsumexp", "softmax", "log_softmax", "cumsum", "norm",
]

Shape = tuple[int, ...]
Dims = tuple[int, ...]
DimArg = int | Sequence[int] | None
P_SUM = Partial(ReduceOp.SUM)


class MaxResult(NamedTuple):
    """``(values, indices)`` of ``max``/``min`` along a dimension (PyTorch's ``return_types``)."""

    values: Tensor
    indices: Tensor


# -- shared rules ------------------------------------------------------------------------------
def _dims(dim: DimArg, ndim: int) -> Dims:
    """``dim`` (an int, a sequence of ints, None or ``()`` for all) as sorted non-negative dims.

    Raises:
        IndexError: a dim outside ``[-ndim, ndim - 1]`` (a 0-d tensor accepts 0 and -1).
        ValueError: a dim given twice.
    """
    if dim is None:
        return tuple(range(ndim))
    items: list[Any] = [dim] if not isinstance(dim, (tuple, list)) else list(dim)
    if not items:
        return tuple(range(ndim))
    bound = builtins.max(ndim, 1)
    out = []
    for item in items:
        d = operator.index(item)
        if not -bound <= d < bound:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-bound}, "
                             f"{bound - 1}], but got {d})")
        out.append(d % bound)
    if len(set(out)) != len(out):
        raise ValueError(f"dim {dim} names a dimension more than once")
    return tuple(sorted(d for d in out if d < ndim))


def _reduced_shape(shape: Shape, *, dims: Dims, keepdim: bool, **_: Any) -> Shape:
    return tuple(1 if i in dims else n for i, n in enumerate(shape) if keepdim or i not in dims)


def _same_shape(shape: Shape, **_: Any) -> Shape:
    return shape


def _out_dim(d: int, dims: Dims, keepdim: bool) -> int:
    return d if keepdim else d - builtins.sum(1 for r in dims if r < d)


def _kept_splits(shape: Shape, *, dims: Dims, keepdim: bool = True, **_: Any) -> list[Signature]:
    """``S(d) -> S(d')`` for every dimension ``d`` that is not reduced."""
    return [((Split(d),), Split(_out_dim(d, dims, keepdim)))
            for d in range(len(shape)) if d not in dims]


def _linear_layouts(shape: Shape, *, dims: Dims, keepdim: bool, **_: Any) -> list[Signature]:
    """Sum-like reductions: a split reduced dim leaves partial sums; ``P -> P``."""
    return [*_kept_splits(shape, dims=dims, keepdim=keepdim),
            *[((Split(d),), P_SUM) for d in dims], ((P_SUM,), P_SUM)]


def _extreme_layouts(shape: Shape, *, dims: Dims, keepdim: bool, largest: bool, partial: bool,
                     **_: Any) -> list[Signature]:
    """``amax``/``amin``: a split reduced dim leaves ``P(max)``/``P(min)``, which stays one."""
    sigs = _kept_splits(shape, dims=dims, keepdim=keepdim)
    if partial:
        p = Partial(ReduceOp.MAX if largest else ReduceOp.MIN)
        sigs += [*[((Split(d),), p) for d in dims], ((p,), p)]
    return sigs


def _accumulator(dtype: numpy.dtype) -> numpy.dtype:
    """The dtype to accumulate in: float16 sums run in float32, as PyTorch does."""
    return numpy.dtype(numpy.float32) if dtype == numpy.float16 else dtype


def _integral_to_long(dtype: numpy.dtype, *, out: numpy.dtype | None = None, **_: Any
                      ) -> numpy.dtype:
    """``sum``/``prod``/``cumsum``: bool and integers give int64 unless ``dtype`` is given."""
    if out is not None:
        return out
    return numpy.dtype(numpy.int64) if dtype.kind in "biu" else dtype


def _floating(name: str, dtype: numpy.dtype) -> None:
    if dtype.kind not in "fc":
        raise TypeError(f"{name}(): could not infer output dtype. Input dtype must be either a "
                        f"floating point or complex dtype. Got: {dtype}")


def _numpy_dtype(dtype: Any) -> numpy.dtype | None:
    from ..dtypes import as_dtype

    return None if dtype is None else as_dtype(dtype).numpy


def _count(shape: Shape, dims: Dims) -> int:
    return math.prod(shape[d] for d in dims)


def _check_nonempty(name: str, input: Tensor, dims: Dims | None) -> None:
    """Reductions without an identity need elements; ``dims=None`` means all (flattened)."""
    if dims is None:
        if input.numel() == 0:
            raise RuntimeError(f"{name}(): Expected reduction dim to be specified for "
                               "input.numel() == 0")
        return
    for d in dims:
        if input.shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size")


# -- sum, mean, prod ---------------------------------------------------------------------------
def _sum_kernel(ctx: Context, a: Any, *, dims: Dims, keepdim: bool, count: int | None = None,
                **_: Any) -> Any:
    out = ctx.xp.sum(a, axis=dims, keepdims=keepdim, dtype=_accumulator(ctx.out_dtype))
    return out if count is None else out / count


def _mean_dtype(dtype: numpy.dtype, *, out: numpy.dtype | None = None, **_: Any) -> numpy.dtype:
    return dtype if out is None else out


SUM = OpDef("sum", _sum_kernel, _reduced_shape, _linear_layouts, _integral_to_long)
MEAN = OpDef("mean", _sum_kernel, _reduced_shape, _linear_layouts, _mean_dtype)
PROD = OpDef("prod", lambda ctx, a, *, dims, keepdim, **_: ctx.xp.prod(
    a, axis=dims, keepdims=keepdim, dtype=_accumulator(ctx.out_dtype)),
    _reduced_shape, _kept_splits, _integral_to_long)


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

    Example:
        >>> flow.sum(flow.tensor([[1, 2], [3, 4]]), dim=0).tolist()
        [4, 6]
    """
    return apply(SUM, input, dims=_dims(dim, input.ndim), keepdim=keepdim,
                 out=_numpy_dtype(dtype))


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

    Example:
        >>> flow.mean(flow.tensor([1.0, 2.0, 6.0])).item()
        3.0
    """
    out = _numpy_dtype(dtype)
    _floating("mean", out if out is not None else input.dtype.numpy)
    dims = _dims(dim, input.ndim)
    return apply(MEAN, input, dims=dims, keepdim=keepdim, out=out,
                 count=_count(tuple(input.shape), dims))


def prod(input: Tensor, dim: DimArg = None, keepdim: bool = False, *, dtype: Any = None
         ) -> Tensor:
    """The product of the elements over ``dim`` (all by default); integers give int64.

    Example:
        >>> flow.prod(flow.tensor([1, 2, 3, 4])).item()
        24
    """
    return apply(PROD, input, dims=_dims(dim, input.ndim), keepdim=keepdim,
                 out=_numpy_dtype(dtype))


# -- max, min, argmax, argmin ------------------------------------------------------------------
def _identity(dtype: numpy.dtype, largest: bool) -> Any:
    """The value that never wins a max (``largest``) or a min: what an empty shard holds."""
    if dtype.kind == "f":
        return -numpy.inf if largest else numpy.inf
    if dtype.kind in "iu":
        info = numpy.iinfo(dtype)
        return info.min if largest else info.max
    return not largest


def _extreme_kernel(ctx: Context, a: Any, *, dims: Dims, keepdim: bool, largest: bool,
                    **_: Any) -> Any:
    if builtins.any(a.shape[d] == 0 for d in dims):  # an empty shard of a split reduced dim
        return ctx.xp.full(ctx.out_shape, _identity(ctx.out_dtype, largest), ctx.out_dtype)
    reduce = ctx.xp.max if largest else ctx.xp.min
    return reduce(a, axis=dims, keepdims=keepdim)


def _arg_shape(shape: Shape, *, dim: int | None, keepdim: bool, **_: Any) -> Shape:
    return () if dim is None else _reduced_shape(shape, dims=(dim,), keepdim=keepdim)


def _arg_layouts(shape: Shape, *, dim: int | None, keepdim: bool, **_: Any) -> list[Signature]:
    """Indices need the whole reduced dim on each rank: no split of it (nor of any, for all)."""
    return [] if dim is None else _kept_splits(shape, dims=(dim,), keepdim=keepdim)


def _arg_kernel(ctx: Context, a: Any, *, dim: int | None, keepdim: bool, largest: bool,
                **_: Any) -> Any:
    find = ctx.xp.argmax if largest else ctx.xp.argmin
    return find(a) if dim is None else find(a, axis=dim, keepdims=keepdim)


def _long(*_: Any, **__: Any) -> numpy.dtype:
    return numpy.dtype(numpy.int64)


# Keyed by ``largest``: the max and the min flavour share kernel and rules.
EXTREME = {True: OpDef("amax", _extreme_kernel, _reduced_shape, _extreme_layouts),
           False: OpDef("amin", _extreme_kernel, _reduced_shape, _extreme_layouts)}
ARG_EXTREME = {True: OpDef("argmax", _arg_kernel, _arg_shape, _arg_layouts, _long),
               False: OpDef("argmin", _arg_kernel, _arg_shape, _arg_layouts, _long)}


def _extreme(name: str, input: Tensor, dim: DimArg, keepdim: bool, largest: bool) -> Tensor:
    dims = _dims(dim, input.ndim)
    _check_nonempty(name, input, None if dim is None or dim == () else dims)
    return apply(EXTREME[largest], input, dims=dims, keepdim=keepdim, largest=largest,
                 partial=input.dtype.numpy.kind in "iuf")


def _arg_extreme(name: str, input: Tensor, dim: int | None, keepdim: bool, largest: bool
                 ) -> Tensor:
    dims = _dims(dim, input.ndim) if dim is not None else ()
    _check_nonempty(name, input, None if dim is None else dims)
    one = None if dim is None or input.ndim == 0 else dims[0]
    return apply(ARG_EXTREME[largest], input, dim=one, keepdim=keepdim and dim is not None,
                 largest=largest)


def amax(input: Tensor, dim: DimArg = None, keepdim: bool = False) -> Tensor:
    """The largest element over ``dim`` (all by default, as ``dim=()``); NaN propagates.

    On a global tensor a split reduced dimension gives ``P(max)`` (finished on conversion).

    Example:
        >>> flow.amax(flow.tensor([[1, 5], [7, 2]]), dim=1).tolist()
        [5, 7]
    """
    return _extreme("amax", input, dim, keepdim, True)


def amin(input: Tensor, dim: DimArg = None, keepdim: bool = False) -> Tensor:
    """The smallest element over ``dim`` (all by default); a split reduced dim gives ``P(min)``.

    Example:
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

    Example:
        >>> flow.argmax(flow.tensor([[1, 5], [7, 2]]), dim=0).tolist()
        [1, 0]
    """
    return _arg_extreme("argmax", input, dim, keepdim, True)


def argmin(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """The index (int64) of the first smallest element along ``dim`` (see :func:`argmax`).

    Example:
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
    return MaxResult(_extreme(name, input, dim, keepdim, largest),
                     _arg_extreme(name, input, dim, keepdim, largest))


def max(input: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """``max(x)``: the largest element (0-d); ``max(x, dim, keepdim)``: ``(values, indices)``.

    Args:
        input: the tensor.
        dim: None, one int dimension, or a tensor (then the elementwise ``maximum``).
        keepdim: keep ``dim`` with size 1.

    Returns:
        A 0-d tensor, a :class:`MaxResult` ``(values, indices)``, or the elementwise maximum.

    Example:
        >>> values, indices = flow.max(flow.tensor([[1, 5], [7, 2]]), dim=1)
        >>> values.tolist(), indices.tolist()
        ([5, 7], [1, 0])
    """
    return _max_or_min("max", input, dim, keepdim, True)


def min(input: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """``min(x)``: the smallest element; ``min(x, dim, keepdim)``: ``(values, indices)``.

    Example:
        >>> flow.min(flow.tensor([[1, 5], [7, 2]]), dim=1).indices.tolist()
        [0, 1]
    """
    return _max_or_min("min", input, dim, keepdim, False)


# -- all, any ----------------------------------------------------------------------------------
def _logical_dtype(dtype: numpy.dtype, **_: Any) -> numpy.dtype:
    return dtype if dtype == numpy.uint8 else numpy.dtype(bool)  # PyTorch keeps uint8


ALL = OpDef("all", lambda ctx, a, *, dims, keepdim, **_: ctx.xp.all(
    a, axis=dims, keepdims=keepdim), _reduced_shape, _kept_splits, _logical_dtype)
ANY = OpDef("any", lambda ctx, a, *, dims, keepdim, **_: ctx.xp.any(
    a, axis=dims, keepdims=keepdim), _reduced_shape, _kept_splits, _logical_dtype)


def all(input: Tensor, dim: DimArg = None, keepdim: bool = False) -> Tensor:
    """Whether every element over ``dim`` (all by default) is true (non-zero); bool result.

    Example:
        >>> flow.all(flow.tensor([[True, False], [True, True]]), dim=1).tolist()
        [False, True]
    """
    return apply(ALL, input, dims=_dims(dim, input.ndim), keepdim=keepdim)


def any(input: Tensor, dim: DimArg = None, keepdim: bool = False) -> Tensor:
    """Whether some element over ``dim`` (all by default) is true (non-zero); bool result.

    Example:
        >>> flow.any(flow.tensor([0, 0, 3])).item()
        True
    """
    return apply(ANY, input, dims=_dims(dim, input.ndim), keepdim=keepdim)


# -- var, std, norm (composites) ---------------------------------------------------------------
def var(input: Tensor, dim: DimArg = None, unbiased: bool | None = None, keepdim: bool = False,
        *, correction: int | None = None) -> Tensor:
    """The variance over ``dim``: ``sum((x - mean)**2) / (n - correction)``.

    Args:
        input: a floating-point tensor.
        dim: an int, a sequence of ints, or None for all.
        unbiased: True (default) is ``correction=1``, False ``correction=0``.
        keepdim: keep the reduced dimensions with size 1.
        correction: the difference subtracted from the element count (overrides ``unbiased``).

    Returns:
        The variance (NaN or inf where ``n - correction <= 0``, as PyTorch).

    Example:
        >>> flow.var(flow.tensor([1.0, 2.0, 3.0, 4.0])).item()
        1.6666666269302368
    """
    _floating("var", input.dtype.numpy)
    if input.dtype.numpy.kind == "c":
        raise TypeError("var() of complex tensors is not supported yet")
    if correction is None:
        correction = 0 if unbiased is False else 1
    dims = _dims(dim, input.ndim)
    deviation = pw.sub(input, mean(input, dims, keepdim=True))  # two passes: no cancellation
    squares = sum(pw.mul(deviation, deviation), dims, keepdim)
    with numpy.errstate(divide="ignore", invalid="ignore"):
        return pw.div(squares, builtins.max(0, _count(tuple(input.shape), dims) - correction))


def std(input: Tensor, dim: DimArg = None, unbiased: bool | None = None, keepdim: bool = False,
        *, correction: int | None = None) -> Tensor:
    """The standard deviation over ``dim``: ``sqrt(var(...))`` (see :func:`var`).

    Example:
        >>> flow.std(flow.tensor([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]), unbiased=False).item()
        2.0
    """
    return pw.sqrt(var(input, dim, unbiased, keepdim, correction=correction))


def norm(input: Tensor, p: Any = "fro", dim: DimArg = None, keepdim: bool = False, *,
         dtype: Any = None) -> Tensor:
    """The vector ``p``-norm over ``dim`` (all by default); ``"fro"``/2 is the Frobenius norm.

    Args:
        input: a floating-point tensor.
        p: ``"fro"``, 2, 1, ``inf``, ``-inf``, 0 (count of non-zeros) or any other number.
        dim: an int, a sequence of ints, or None for all.
        keepdim: keep the reduced dimensions with size 1.
        dtype: cast the input to this dtype first.

    Example:
        >>> flow.norm(flow.tensor([[3.0, 0.0], [0.0, 4.0]])).item()
        5.0
    """
    if dtype is not None:
        input = pw.cast(input, dtype)
    _floating("norm", input.dtype.numpy)
    if input.dtype.numpy.kind == "c":
        raise TypeError("norm() of complex tensors is not supported yet")
    magnitude = pw.abs(input)
    if p in ("fro", 2):
        return pw.sqrt(sum(pw.mul(input, input), dim, keepdim))
    if isinstance(p, str):
        raise ValueError(f"norm(): unsupported p={p!r}: use 'fro' or a number")
    if p == math.inf:
        return amax(magnitude, dim, keepdim)
    if p == -math.inf:
        return amin(magnitude, dim, keepdim)
    if p == 0:
        return sum(pw.ne(input, 0), dim, keepdim, dtype=input.dtype)
    if p == 1:
        return sum(magnitude, dim, keepdim)
    return pw.pow(sum(pw.pow(magnitude, p), dim, keepdim), 1.0 / p)


# -- softmax, log_softmax, logsumexp, cumsum -------------------------------------------------
def _float_dtype(dtype: numpy.dtype, **_: Any) -> numpy.dtype:
    return dtype if dtype.kind in "fc" else numpy.dtype(numpy.float32)


def _softmax_kernel(ctx: Context, a: Any, *, dim: int, log: bool, **_: Any) -> Any:
    xp = ctx.xp
    a = a.astype(_accumulator(ctx.out_dtype))
    if a.ndim == 0:
        return _softmax_kernel(ctx, a.reshape(1), dim=0, log=log).reshape(())
    if a.size == 0:
        return a
    top = xp.max(a, axis=dim, keepdims=True)
    shifted = a - xp.where(xp.isfinite(top), top, 0)  # stable; rows of -inf stay finite-free
    exps = xp.exp(shifted)
    total = xp.sum(exps, axis=dim, keepdims=True)
    return shifted - xp.log(total) if log else exps / total


def _logsumexp_kernel(ctx: Context, a: Any, *, dims: Dims, keepdim: bool, **_: Any) -> Any:
    xp = ctx.xp
    a = a.astype(_accumulator(ctx.out_dtype))
    if builtins.any(a.shape[d] == 0 for d in dims):
        return xp.full(ctx.out_shape, -numpy.inf, a.dtype)
    top = xp.max(a, axis=dims, keepdims=True)
    top = xp.where(xp.isfinite(top), top, 0)
    out = xp.log(xp.sum(xp.exp(a - top), axis=dims, keepdims=True)) + top
    return out.reshape(ctx.out_shape)


def _cumsum_kernel(ctx: Context, a: Any, *, dim: int, **_: Any) -> Any:
    if a.ndim == 0:
        return a.astype(ctx.out_dtype)
    return ctx.xp.cumsum(a, axis=dim, dtype=_accumulator(ctx.out_dtype))


def _along_layouts(shape: Shape, *, dim: int, **_: Any) -> list[Signature]:
    """Ops along ``dim`` need it whole: splits of the other dims only."""
    return _kept_splits(shape, dims=(dim,))


def _cumsum_layouts(shape: Shape, *, dim: int, **_: Any) -> list[Signature]:
    return [*_along_layouts(shape, dim=dim), ((P_SUM,), P_SUM)]


SOFTMAX = OpDef("softmax", _softmax_kernel, _same_shape, _along_layouts, _float_dtype)
LOGSUMEXP = OpDef("logsumexp", _logsumexp_kernel, _reduced_shape, _kept_splits, _float_dtype)
CUMSUM = OpDef("cumsum", _cumsum_kernel, _same_shape, _cumsum_layouts, _integral_to_long)


def _one_dim(dim: int, ndim: int) -> int:
    dims = _dims(operator.index(dim), ndim)
    return dims[0] if dims else 0


def _softmax(name: str, input: Tensor, dim: int, dtype: Any, log: bool) -> Tensor:
    if dtype is not None:
        input = pw.cast(input, dtype)
    _floating(name, input.dtype.numpy)
    return apply(SOFTMAX, input, dim=_one_dim(dim, input.ndim), log=log)


def softmax(input: Tensor, dim: int, dtype: Any = None) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``dim``, computed stably (the max is subtracted first).

    Args:
        input: a floating-point tensor.
        dim: the dimension to normalize (on a global tensor, splits of it are moved first).
        dtype: cast the input to this dtype first.

    Example:
        >>> flow.softmax(flow.tensor([0.0, 0.0]), dim=0).tolist()
        [0.5, 0.5]
    """
    return _softmax("softmax", input, dim, dtype, False)


def log_softmax(input: Tensor, dim: int, dtype: Any = None) -> Tensor:
    """``x - logsumexp(x)`` along ``dim``, computed stably.

    Example:
        >>> round(flow.log_softmax(flow.tensor([0.0, 0.0]), dim=0)[0].item(), 4)
        -0.6931
    """
    return _softmax("log_softmax", input, dim, dtype, True)


def logsumexp(input: Tensor, dim: DimArg, keepdim: bool = False) -> Tensor:
    """``log(sum(exp(x)))`` over ``dim``, computed stably; integers give float32.

    Example:
        >>> round(flow.logsumexp(flow.tensor([1000.0, 1000.0]), dim=0).item(), 3)
        1000.693
    """
    return apply(LOGSUMEXP, input, dims=_dims(dim, input.ndim), keepdim=keepdim)


def cumsum(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """Running sums along ``dim``; bool and integers give int64 unless ``dtype`` is given.

    Example:
        >>> flow.cumsum(flow.tensor([1, 2, 3]), dim=0).tolist()
        [1, 3, 6]
    """
    return apply(CUMSUM, input, dim=_one_dim(dim, input.ndim), out=_numpy_dtype(dtype))


for _name in ("sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "all",
              "any", "var", "std", "logsumexp", "softmax", "log_softmax", "cumsum", "norm"):
    bind(_name, globals()[_name])
