"""Cumulative ops along one dim: ``cumsum``, ``cumprod``, ``cummax``, ``cummin``,
``logcumsumexp``.

Layout rule, per mesh axis: a split of another dim stays a split; a partial sum stays one for
``cumsum`` (the scan is linear); and a split of the scanned dim stays a split too, a collective
signature: the kernel runs :func:`mpiflow.algorithms.scan` (each rank scans its rows, one
all-gather of the shards' totals; ``cummax``/``cummin``: :func:`mpiflow.algorithms.arg_scan`,
one all-gather of each shard's last value and index), so no row moves and a 1-D array is never
gathered.

Gradients, written with mpiflow ops (global where the input is): ``cumsum``'s is the running
sum the other way; ``cumprod``'s is exact with zeros, as torch's (before the first zero of a
line ``rcumsum(g * out) / x``, at it ``rcumsum(g * cumprod(x with that zero as 1))``, after it
zero); ``logcumsumexp``'s is ``sum_{i >= k} g_i exp(x_k - out_i)``, summed in log space for the
positive and the negative parts of ``g`` (no overflow); ``cummax``/``cummin`` send each
gradient to the index of its value (``scatter_along``, which adds where indices repeat).

Examples:
    >>> flow.cummax(flow.tensor([1, 3, 2, 3]), dim=0).indices.tolist()
    [0, 1, 1, 3]
"""

from __future__ import annotations

import operator
from typing import Any

import numpy

from ..algorithms import arg_scan, scan
from ..algorithms.ranges import offsets
from ..algorithms.scans import local_arg_scan, local_scan
from ..layouts.sbp import Split
from ..tensors.tensor import Tensor, bind
from . import pointwise as pw
from .engine import Context, OpDef, Signature, apply, apply_multi
from .gathers import SCATTER_ALONG
from .layout_rules import wrap_dim
from .reduction import MaxResult
from .reduction_rules import (
    P_SUM,
    Dims,
    Shape,
    accumulator,
    integral_to_long,
    kept_splits,
    reduction_dims,
    requested_dtype,
)

__all__ = ["cummax", "cummin", "cumprod", "cumsum", "logcumsumexp"]


def _unchanged(shape: Shape, **_: Any) -> Shape:
    return shape


def _scan_kernel(op: str) -> Any:
    def kernel(ctx: Context, a: Any, *, dims: Dims, reverse: bool = False, **_: Any) -> Any:
        if not dims:  # a 0-d input
            return a.astype(ctx.out_dtype)
        a = a.astype(accumulator(ctx.out_dtype), copy=False)
        if ctx.comm is None:
            return local_scan(a, dims[0], op, reverse=reverse)
        return scan(a, ctx.comm, dims[0], op, reverse=reverse)

    return kernel


def _cumsum_layouts(shape: Shape, *, dims: Dims, **_: Any) -> list[Signature]:
    return [*kept_splits(shape, dims=dims), ((P_SUM,), P_SUM)]


def _scanned_split(shape: Shape, *, dims: Dims, **_: Any) -> list[Signature]:
    return [((Split(dims[0]),), Split(dims[0]))] if dims else []


def _cumsum_grad(g: Tensor, operands: Any, result: Tensor, *, dims: Dims,
                 reverse: bool = False, **_: Any) -> tuple[Tensor]:
    """The running sum in the other direction."""
    if not dims:
        return (g,)
    return (apply(CUMSUM, g, dims=dims, out=None, reverse=not reverse),)


CUMSUM = OpDef("cumsum", _scan_kernel("sum"), _unchanged, _cumsum_layouts, integral_to_long,
               _cumsum_grad, collective=_scanned_split)


def _cumprod_grad(g: Tensor, operands: Any, result: Tensor, *, dims: Dims, **_: Any
                  ) -> tuple[Tensor]:
    """Exact with zeros: before a line's first zero ``rcumsum(g * out) / x``; at it the
    running sum of ``g`` times the products without it; after it nothing."""
    if not dims:
        return (g,)
    x = operands[0]
    zero = pw.eq(x, 0)
    seen = apply(CUMSUM, zero, dims=dims, out=None)  # zeros at or before each element
    before = pw.eq(seen, 0)
    first = pw.logical_and(zero, pw.eq(seen, 1))
    tail = apply(CUMSUM, pw.mul(g, result), dims=dims, out=None, reverse=True)
    ahead = pw.div(tail, pw.where(before, x, 1))
    skipped = apply(CUMPROD, pw.where(first, 1, x), dims=dims, out=None)
    at = apply(CUMSUM, pw.mul(g, skipped), dims=dims, out=None, reverse=True)
    return (pw.where(before, ahead, pw.where(first, at, 0)),)


CUMPROD = OpDef("cumprod", _scan_kernel("prod"), _unchanged, kept_splits, integral_to_long,
                _cumprod_grad, collective=_scanned_split)


def _float_dtype(dtype: numpy.dtype, **_: Any) -> numpy.dtype:
    return dtype


def _logcumsumexp_grad(g: Tensor, operands: Any, result: Tensor, *, dims: Dims,
                       reverse: bool = False, **_: Any) -> tuple[Tensor]:
    """``sum_{i >= k} g_i exp(x_k - out_i)``: the positive and negative parts of ``g`` summed
    in log space (a log-cum-sum-exp the other way), so that nothing overflows."""
    if not dims:
        return (g,)
    x = operands[0]
    parts = []
    for sign in (1, -1):
        wanted = pw.gt(g, 0) if sign > 0 else pw.lt(g, 0)
        size = pw.where(wanted, pw.mul(g, sign), 1)
        logs = pw.where(wanted, pw.sub(pw.log(size), result), -numpy.inf)
        summed = apply(LOGCUMSUMEXP, logs, dims=dims, reverse=not reverse)
        parts.append(pw.exp(pw.add(x, summed)))
    return (pw.sub(parts[0], parts[1]),)


LOGCUMSUMEXP = OpDef("logcumsumexp", _scan_kernel("logsumexp"), _unchanged, kept_splits,
                     _float_dtype, _logcumsumexp_grad, collective=_scanned_split)


def _arg_scan_kernel(ctx: Context, a: Any, *, dim: int, largest: bool) -> tuple[Any, Any]:
    if a.ndim == 0:
        return a.copy(), ctx.xp.zeros((), dtype=numpy.int64)
    if ctx.comm is None:
        return local_arg_scan(a, dim, largest)
    assert ctx.out_sbp is not None
    start = offsets(ctx.extents(ctx.global_shape, ctx.out_sbp, dim))[ctx.comm.rank]
    return arg_scan(a, ctx.comm, dim, largest, start)


def _other_splits(shape: Shape, *, dim: int, **_: Any) -> list[Signature]:
    return [((Split(d),), Split(d)) for d in range(len(shape)) if d != dim]


def _dim_split(shape: Shape, *, dim: int, **_: Any) -> list[Signature]:
    return [((Split(dim),), Split(dim))] if shape else []


def _arg_scan_grad(g: Tensor, operands: Any, out: Tensor, *, dim: int, outputs: Any, **_: Any
                   ) -> tuple[Tensor]:
    """Each value's gradient goes to the index it came from (added where they repeat)."""
    x = operands[0]
    if x.ndim == 0:
        return (g,)
    return (apply(SCATTER_ALONG, g, outputs[1], dim=dim, size=tuple(x.shape)),)


# Keyed by ``largest``: cummax and cummin share kernel and rules.
ARG_SCAN = {largest: OpDef(name, _arg_scan_kernel, _unchanged, _other_splits,
                           lambda dtype, **_: (dtype, numpy.dtype(numpy.int64)),
                           _arg_scan_grad, collective=_dim_split, outputs=2)
            for largest, name in ((True, "cummax"), (False, "cummin"))}


def cumsum(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """Running sums along ``dim``; bool and integers give int64 unless ``dtype`` is given.

    Args:
        input: the tensor.
        dim: the dimension to accumulate along; a global tensor split along it stays split
            (a distributed scan: each rank sends one slice of totals).
        dtype: the dtype to compute in and return.

    Returns:
        A tensor of ``input``'s shape and layout (a partial sum stays one).

    Examples:
        >>> flow.cumsum(flow.tensor([1, 2, 3]), dim=0).tolist()
        [1, 3, 6]
    """
    return apply(CUMSUM, input, dims=reduction_dims(operator.index(dim), input.ndim),
                 out=requested_dtype(dtype))


def cumprod(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """Running products along ``dim``; bool and integers give int64 unless ``dtype`` is given.

    Args:
        input: the tensor.
        dim: the dimension to accumulate along; a global tensor split along it stays split
            (a distributed scan).
        dtype: the dtype to compute in and return.

    Returns:
        A tensor of ``input``'s shape and layout.

    Examples:
        >>> flow.cumprod(flow.tensor([1, 2, 3]), dim=0).tolist()
        [1, 2, 6]
    """
    return apply(CUMPROD, input, dims=reduction_dims(operator.index(dim), input.ndim),
                 out=requested_dtype(dtype))


def logcumsumexp(input: Tensor, dim: int) -> Tensor:
    """``log(cumsum(exp(input)))`` along ``dim``, computed without overflow.

    Args:
        input: a floating-point tensor.
        dim: the dimension to accumulate along (split: a distributed scan, layout kept).

    Returns:
        A tensor of ``input``'s shape, dtype and layout.

    Examples:
        >>> [round(v, 4) for v in flow.logcumsumexp(flow.tensor([0.0, 0.0, 0.0]), 0).tolist()]
        [0.0, 0.6931, 1.0986]
    """
    if input.dtype.numpy.kind not in "f":
        raise TypeError(f"logcumsumexp(): expected a floating-point tensor, got {input.dtype}")
    return apply(LOGCUMSUMEXP, input, dims=reduction_dims(operator.index(dim), input.ndim))


def _cum_extreme(name: str, input: Tensor, dim: int, largest: bool) -> MaxResult:
    if input.dtype.numpy.kind == "c":
        raise TypeError(f"{name}(): complex values have no order")
    values, indices = apply_multi(ARG_SCAN[largest], input,
                                  dim=wrap_dim(operator.index(dim), input.ndim),
                                  largest=largest)
    return MaxResult(values, indices)


def cummax(input: Tensor, dim: int) -> MaxResult:
    """The running maximum along ``dim`` and where it was reached (torch's ``cummax``).

    A later equal value takes the index (as torch), and NaN propagates (a later NaN takes
    the index).

    Args:
        input: a real tensor.
        dim: the dimension (split: a distributed scan, layout kept, indices global).

    Returns:
        ``(values, indices)``: ``input``'s shape and layout; int64 indices along ``dim``.

    Examples:
        >>> flow.cummax(flow.tensor([1.0, 0.0, 2.0]), 0).values.tolist()
        [1.0, 1.0, 2.0]
    """
    return _cum_extreme("cummax", input, dim, True)


def cummin(input: Tensor, dim: int) -> MaxResult:
    """The running minimum along ``dim`` and where it was reached (torch's ``cummin``; see
    :func:`cummax`).

    Examples:
        >>> flow.cummin(flow.tensor([1.0, 0.0, 2.0]), 0).indices.tolist()
        [0, 1, 1]
    """
    return _cum_extreme("cummin", input, dim, False)


bind({_name: globals()[_name] for _name in __all__})
