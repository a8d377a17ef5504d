"""Counting: ``bincount``, ``histc``, ``histogram``, ``count_nonzero``.

Counts are sums: on a global tensor split along any dim each rank counts its own elements
and the result is a partial sum (``S(d) -> P``), which one all-reduce finishes when it is
read or converted; counts of a broadcast input are broadcast; ``bincount``'s weights may be a
partial sum themselves (the counts are linear in them). Where the bins depend on the data
(``bincount``'s length, a histogram's range when none is given) they are agreed first: one
all-reduce of each rank's ``(-min, max, has NaN)`` (the ``extrema`` op, ``S(d) -> P(max)``),
so every rank has the same bins, and the same error where the data do not allow any.

Histograms bin as torch does: ``histc`` by linear interpolation between ``min`` and ``max``;
``histogram`` by the bin edges (the last bin closed on the right); elements outside the range
and NaN are left out.
"""

from __future__ import annotations

import builtins
import math
import operator
from typing import Any, NamedTuple

import numpy

from ..communication import ReduceOp
from ..layouts.sbp import Partial, Split
from ..tensors.tensor import Tensor, bind
from . import pointwise as pw
from .engine import B, Context, OpDef, Signature, apply
from .reduction import sum
from .reduction_rules import P_SUM, Dims, reduction_dims

__all__ = ["HistogramResult", "bincount", "count_nonzero", "histc", "histogram"]

Shape = tuple[int, ...]
P_MAX = Partial(ReduceOp.MAX)
_INT64 = numpy.dtype(numpy.int64)


class HistogramResult(NamedTuple):
    """``(hist, bin_edges)`` of :func:`histogram` (PyTorch's ``return_types.histogram``)."""

    hist: Tensor
    bin_edges: Tensor


def _every_split(shape: Shape, out: Any, n: int = 1) -> list[Signature]:
    return [((Split(d),) * n, out) for d in range(len(shape))]


# -- the range of the data -----------------------------------------------------------------------
def _extrema_kernel(ctx: Context, a: Any) -> Any:
    xp, dtype = ctx.xp, ctx.out_dtype
    low = -numpy.inf if dtype.kind == "f" else numpy.iinfo(dtype).min
    if a.size == 0:
        return xp.asarray([low, low, 0], dtype=dtype)
    nan = xp.isnan(a) if a.dtype.kind == "f" else None
    values = a if nan is None or not bool(nan.any()) else a[~nan]
    if values.size == 0:
        return xp.asarray([low, low, 1], dtype=dtype)
    has_nan = 0 if nan is None else int(bool(nan.any()))
    return xp.asarray([-values.min(), values.max(), has_nan], dtype=dtype)


# (-min, max, whether any is NaN) of the non-NaN elements: one P(max) for all three
EXTREMA = OpDef("extrema", _extrema_kernel, lambda shape: (3,),
                lambda shape: _every_split(shape, P_MAX),
                lambda dtype: numpy.dtype(numpy.float64) if dtype.kind == "f" else _INT64)


def _extrema(input: Tensor) -> tuple[float, float, bool]:
    """``(min, max, any NaN)`` of the non-NaN elements of ``input`` (one all-reduce)."""
    low, high, nan = (v.item() for v in numpy.asarray(apply(EXTREMA, input).numpy()))
    return -low, high, bool(nan)


# -- count_nonzero -------------------------------------------------------------------------------
def _count_nonzero_layouts(shape: Shape, *, dims: Dims) -> list[Signature]:
    kept = [((Split(d),), Split(d - builtins.sum(r < d for r in dims)))
            for d in range(len(shape)) if d not in dims]
    return kept + [((Split(d),), P_SUM) for d in dims]


COUNT_NONZERO = OpDef(
    "count_nonzero",
    lambda ctx, a, *, dims: ctx.xp.count_nonzero(a, axis=dims) if dims else
    ctx.xp.asarray((a != 0).astype(numpy.int64)),
    lambda shape, *, dims: tuple(n for d, n in enumerate(shape) if d not in dims),
    _count_nonzero_layouts, lambda dtype, **_: _INT64)


def count_nonzero(input: Tensor, dim: Any = None) -> Tensor:
    """How many elements are not zero, over ``dim`` (an int, a tuple, or None for all).

    Returns:
        An int64 tensor; on a global tensor split along a counted dim, a partial sum (one
        all-reduce finishes it).

    Examples:
        >>> flow.count_nonzero(flow.tensor([[1, 0], [2, 3]]), dim=0).tolist()
        [2, 1]
    """
    return apply(COUNT_NONZERO, input, dims=reduction_dims(dim, input.ndim))


# -- bincount ------------------------------------------------------------------------------------
def _bincount_kernel(ctx: Context, a: Any, *weights: Any, length: int) -> Any:
    w = weights[0] if weights else None
    out = ctx.xp.bincount(a, weights=w, minlength=length) if a.size else \
        ctx.xp.zeros(length, dtype=ctx.out_dtype)
    return out[:length]


def _bincount_dtype(dtype: numpy.dtype, *weights: numpy.dtype, **_: Any) -> numpy.dtype:
    if not weights:
        return _INT64
    return weights[0] if weights[0].kind == "f" else numpy.dtype(numpy.float64)


def _bincount_layouts(*shapes: Shape, **_: Any) -> list[Signature]:
    if len(shapes) == 1:
        return [((Split(0),), P_SUM)]
    return [((Split(0), Split(0)), P_SUM), ((B, P_SUM), P_SUM)]


BINCOUNT = OpDef("bincount", _bincount_kernel, lambda *shapes, length: (length,),
                 _bincount_layouts, _bincount_dtype)


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """How many times each non-negative integer occurs in ``input`` (summing ``weights``).

    Args:
        input: a 1-D tensor of non-negative integers.
        weights: a tensor of ``input``'s length: the count of each occurrence.
        minlength: the least length of the result.

    Returns:
        ``max(input.max() + 1, minlength)`` counts: int64, or the weights' floating dtype
        (float64 for integer weights). A global input split gives a partial sum; the length
        comes from one all-reduce of the input's range first.

    Raises:
        RuntimeError: an input that is not 1-D integers (before anything moves), a negative
            value (after the all-reduce, so on every rank), weights of another length.

    Examples:
        >>> flow.bincount(flow.tensor([0, 2, 2])).tolist()
        [1, 0, 2]
    """
    if input.ndim != 1 or input.dtype.numpy.kind not in "iu":
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None and (weights.ndim != 1 or weights.shape[0] != input.shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    if operator.index(minlength) < 0:
        raise RuntimeError("minlength should be >= 0")
    length = int(minlength)
    if input.numel():
        low, high, _ = _extrema(input)
        if low < 0:
            raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
        length = max(length, int(high) + 1)
    operands = (input.detach(),) if weights is None else (input.detach(), weights.detach())
    return apply(BINCOUNT, *operands, length=length)


# -- histc, histogram ----------------------------------------------------------------------------
def _histc_kernel(ctx: Context, a: Any, *, bins: int, low: float, high: float) -> Any:
    """torch's linear interpolation: bin ``(x - min) * bins / (max - min)``, ``max`` in the
    last bin, in the input's dtype."""
    xp, dtype = ctx.xp, a.dtype
    x = a.reshape(-1)
    lo, hi = dtype.type(low), dtype.type(high)
    x = x[(x >= lo) & (x <= hi)]
    at = ((x - lo) * dtype.type(bins) / (hi - lo)).astype(numpy.int64)
    at = xp.minimum(at, bins - 1)
    return xp.bincount(at, minlength=bins)[:bins].astype(dtype)


HISTC = OpDef("histc", _histc_kernel, lambda shape, *, bins, **_: (bins,),
              lambda shape, **_: _every_split(shape, P_SUM), lambda dtype, **_: dtype)


def _check_floating(name: str, input: Tensor) -> None:
    if input.dtype.numpy.kind != "f":
        raise NotImplementedError(f"{name}: not implemented for {input.dtype} (floating "
                                  "point only, as torch on the CPU)")


def _range(name: str, input: Tensor, low: float, high: float, widen: float, data: bool
           ) -> tuple[float, float]:
    """The range to bin: the data's where ``data`` (one all-reduce), widened by ``widen``
    each way where it is one value; the same error on every rank where it is not finite."""
    if low > high:
        raise RuntimeError(f"{name}: max must be larger than min" if name == "torch.histc" else
                           f"{name}: min should not exceed max, but got min {low} max {high}")
    if data and input.numel():
        low, high, nan = _extrema(input)
        if nan:
            low = high = math.nan
    if low == high:
        low, high = low - widen, high + widen
    if not (math.isfinite(low) and math.isfinite(high)):
        raise RuntimeError(f"{name}: range of [{low}, {high}] is not finite")
    return low, high


def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:
    """A histogram of ``bins`` equal bins between ``min`` and ``max`` (torch's ``histc``).

    Args:
        input: a floating tensor (any shape).
        bins: the number of bins.
        min: the lower end; with ``max`` both 0, the data's minimum and maximum (one
            all-reduce), widened by 1 each way where they are equal.
        max: the upper end (in the last bin).

    Returns:
        ``bins`` counts of ``input``'s dtype; a partial sum where ``input`` is split.

    Raises:
        RuntimeError: ``bins`` not positive, ``min > max``, a range that is not finite (NaN in
            the data without a range): on every rank.

    Examples:
        >>> flow.histc(flow.tensor([1.0, 2.0, 1.0]), bins=4, min=0, max=3).tolist()
        [0.0, 2.0, 1.0, 0.0]
    """
    _check_floating("histc", input)
    bins = operator.index(bins)
    if bins <= 0:
        raise RuntimeError(f"torch.histc: bins must be > 0, but got {bins}")
    low, high = _range("torch.histc", input, float(min), float(max), 1.0, min == max)
    return apply(HISTC, input.detach(), bins=bins, low=low, high=high)


def _histogram_kernel(ctx: Context, a: Any, edges: Any, *weight: Any) -> Any:
    xp = ctx.xp
    x = a.reshape(-1)
    w = weight[0].reshape(-1) if weight else None
    bins = edges.shape[0] - 1
    inside = (x >= edges[0]) & (x <= edges[-1])
    x = x[inside]
    at = xp.minimum(xp.searchsorted(edges, x, side="right") - 1, bins - 1)
    counts = xp.bincount(at, weights=None if w is None else w[inside], minlength=bins)
    return counts[:bins].astype(ctx.out_dtype)


def _histogram_layouts(*shapes: Shape) -> list[Signature]:
    if len(shapes) == 2:
        return [((Split(d), B), P_SUM) for d in range(len(shapes[0]))]
    return [*[((Split(d), B, Split(d)), P_SUM) for d in range(len(shapes[0]))],
            ((B, B, P_SUM), P_SUM)]


HISTOGRAM = OpDef("histogram", _histogram_kernel, lambda x, edges, *w: (edges[0] - 1,),
                  _histogram_layouts, lambda dtype, *_: dtype)


def histogram(input: Tensor, bins: Any, *, range: tuple[float, float] | None = None,
              weight: Tensor | None = None, density: bool = False) -> HistogramResult:
    """A histogram of ``input`` (torch's ``histogram``).

    Args:
        input: a floating tensor (any shape).
        bins: the number of equal bins, or a 1-D tensor of increasing bin edges (a local
            one beside a global ``input`` must be the same on every rank).
        range: ``(min, max)`` of equal bins; default the data's (one all-reduce), widened by
            0.5 each way where they are equal.
        weight: a tensor of ``input``'s shape: what each element counts for.
        density: divide by the total and the bin widths (the result integrates to 1).

    Returns:
        ``(hist, bin_edges)``: where ``input`` is split, ``hist`` is a partial sum (a
        broadcast with ``density``, which needs the total) and ``bin_edges`` broadcast.

    Examples:
        >>> flow.histogram(flow.tensor([1.0, 2.0, 1.0]), bins=2, range=(0.0, 2.0)).hist.tolist()
        [0.0, 3.0]
    """
    _check_floating("torch.histogram()", input)
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        raise RuntimeError("torch.histogram(): weight should have the same shape as input")
    if isinstance(bins, Tensor):
        if bins.ndim != 1 or bins.shape[0] < 1:
            raise RuntimeError("torch.histogram(): bins tensor should have one dimension and "
                               "at least 1 element")
        edges = bins.to(input.dtype).detach()
        if input.is_global and not edges.is_global:  # the same on every rank, as torch's
            edges = _like(input, edges.numpy())
    else:
        count = operator.index(bins)
        if count <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {count}")
        low, high = (0.0, 0.0) if range is None else (float(range[0]), float(range[1]))
        low, high = _range("torch.histogram()", input, low, high, 0.5, range is None)
        values = _linspace(low, high, count + 1, input.dtype.numpy)
        edges = _like(input, values)
    operands = [input.detach(), edges] + ([] if weight is None else [weight.detach()])
    hist = apply(HISTOGRAM, *operands)
    if density:
        widths = pw.sub(edges[1:], edges[:-1])
        hist = pw.div(hist, pw.mul(sum(hist), widths))
    return HistogramResult(hist, edges)


def _linspace(low: float, high: float, steps: int, dtype: numpy.dtype) -> numpy.ndarray:
    """torch's ``linspace``: the first half from ``low``, the second from ``high``."""
    step = (dtype.type(high) - dtype.type(low)) / dtype.type(steps - 1)
    i = numpy.arange(steps)
    half = steps // 2
    return numpy.where(i < half, dtype.type(low) + step * i.astype(dtype),
                       dtype.type(high) - step * (steps - 1 - i).astype(dtype)).astype(dtype)


def _like(input: Tensor, values: numpy.ndarray) -> Tensor:
    """``values`` (the same on every rank) as a tensor beside ``input``: broadcast where it
    is global."""
    from ..tensors.creation import tensor

    if not input.is_global:
        return tensor(values)
    return tensor(values, placement=input.placement, sbp=(B,) * input.placement.ndim)


bind({"bincount": bincount, "count_nonzero": count_nonzero, "histc": histc,
      "histogram": histogram})
