"""``softmax``, ``log_softmax`` and ``logsumexp``: reductions along one dim.

Layout rules, per mesh axis: a split of another dim stays a split; a split of the reduced dim is
omitted, so the engine gathers it first.
Gradient rules are the closed forms, written with mpiflow ops.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy

from ..tensors.tensor import Tensor, bind
from . import pointwise as pw
from .engine import Context, OpDef, apply
from .reduction import sum as reduce_sum
from .reduction_rules import (
    DimArg,
    Dims,
    Shape,
    accumulator,
    check_floating,
    kept_splits,
    reduced_shape,
    reduction_dims,
    unreduce,
)

__all__ = ["logsumexp", "softmax", "log_softmax"]


def _unchanged(shape: Shape, **_: Any) -> Shape:
    return shape


def _float_dtype(dtype: numpy.dtype, **_: Any) -> numpy.dtype:
    return dtype if dtype.kind in "fc" else numpy.dtype(numpy.float32)


def _softmax_kernel(ctx: Context, a: Any, *, dims: Dims, log: bool, **_: Any) -> Any:
    xp = ctx.xp
    a = a.astype(accumulator(ctx.out_dtype), copy=False)  # read only below: no copy needed
    if not dims:  # a 0-d input
        return _softmax_kernel(ctx, a.reshape(1), dims=(0,), log=log).reshape(())
    if a.size == 0:
        return a
    top = xp.max(a, axis=dims, keepdims=True)
    shifted = a - xp.where(xp.isfinite(top), top, 0)  # stable; rows of -inf stay finite-free
    exps = xp.exp(shifted)
    total = xp.sum(exps, axis=dims, keepdims=True)
    return shifted - xp.log(total) if log else exps / total


def _logsumexp_kernel(ctx: Context, a: Any, *, dims: Dims, keepdim: bool, **_: Any) -> Any:
    xp = ctx.xp
    a = a.astype(accumulator(ctx.out_dtype))
    if any(a.shape[d] == 0 for d in dims):
        return xp.full(ctx.out_shape, -numpy.inf, a.dtype)
    top = xp.max(a, axis=dims, keepdims=True)
    top = xp.where(xp.isfinite(top), top, 0)
    out = xp.log(xp.sum(xp.exp(a - top), axis=dims, keepdims=True)) + top
    return out.reshape(ctx.out_shape)


def _logsumexp_grad(g: Tensor, operands: Any, result: Tensor, *, dims: Dims, keepdim: bool,
                    **_: Any) -> tuple[Tensor]:
    """``g * softmax(x)``, with ``softmax(x) = exp(x - logsumexp(x))``."""
    weights = pw.exp(pw.sub(operands[0], unreduce(result, dims, keepdim)))
    return (pw.mul(unreduce(g, dims, keepdim), weights),)


def _softmax_grad(g: Tensor, operands: Any, result: Tensor, *, dims: Dims, log: bool, **_: Any
                  ) -> tuple[Tensor]:
    """softmax: ``y * (g - sum(g * y))``; log_softmax: ``g - exp(y) * sum(g)``."""
    if not dims:  # a 0-d input: the output is constant
        return (pw.mul(g, 0),)
    if log:
        return (pw.sub(g, pw.mul(pw.exp(result), reduce_sum(g, dims, keepdim=True))),)
    return (pw.mul(result, pw.sub(g, reduce_sum(pw.mul(g, result), dims, keepdim=True))),)


# Ops along a dim need it whole: their layout rules split the other dims only.
SOFTMAX = OpDef("softmax", _softmax_kernel, _unchanged, kept_splits, _float_dtype,
                _softmax_grad)
LOGSUMEXP = OpDef("logsumexp", _logsumexp_kernel, reduced_shape, kept_splits, _float_dtype,
                  _logsumexp_grad)


def _softmax(name: str, input: Tensor, dim: int, dtype: Any, log: bool) -> Tensor:
    if dtype is not None:
        input = pw.cast(input, dtype)
    check_floating(name, input.dtype.numpy)
    return apply(SOFTMAX, input, dims=reduction_dims(operator.index(dim), input.ndim), log=log)


def softmax(input: Tensor, dim: int, dtype: Any = None) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``dim``, computed stably (the max is subtracted first).

    Args:
        input: a floating-point tensor.
        dim: the dimension to normalize (on a global tensor, splits of it are moved first).
        dtype: cast the input to this dtype first.

    Returns:
        A tensor of ``input``'s shape (float16 computed in float32).

    Examples:
        >>> flow.softmax(flow.tensor([0.0, 0.0]), dim=0).tolist()
        [0.5, 0.5]
    """
    return _softmax("softmax", input, dim, dtype, False)


def log_softmax(input: Tensor, dim: int, dtype: Any = None) -> Tensor:
    """``x - logsumexp(x)`` along ``dim``, computed stably.

    Args:
        input: as :func:`softmax`.
        dim: as :func:`softmax`.
        dtype: as :func:`softmax`.

    Returns:
        A tensor of ``input``'s shape.

    Examples:
        >>> flow.log_softmax(flow.tensor([0.0, 1000.0]), dim=0).tolist()
        [-1000.0, 0.0]
    """
    return _softmax("log_softmax", input, dim, dtype, True)


def logsumexp(input: Tensor, dim: DimArg, keepdim: bool = False) -> Tensor:
    """``log(sum(exp(x)))`` over ``dim``, computed stably; integers give float32.

    Args:
        input: the tensor.
        dim: an int or a sequence of ints (no default, as PyTorch).
        keepdim: keep the reduced dimensions with size 1.

    Returns:
        The reduced tensor; on a global tensor the reduced dims are never split.

    Examples:
        >>> round(flow.logsumexp(flow.tensor([1000.0, 1000.0]), dim=0).item(), 3)
        1000.693
    """
    return apply(LOGSUMEXP, input, dims=reduction_dims(dim, input.ndim), keepdim=keepdim)


bind({_name: globals()[_name] for _name in __all__})
