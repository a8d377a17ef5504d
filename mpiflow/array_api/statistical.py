"""Statistical and utility functions of the standard: ``sum``, ``prod``, ``mean``, ``var``,
``std``, ``max``, ``min``, ``cumulative_sum``, ``cumulative_prod``, ``all``, ``any``, ``diff``;
and ``median``, which the standard lacks but NumPy, CuPy, PyTorch and JAX have (scikit-learn
looks it up and otherwise copies the array into NumPy).

Reductions over a split dim finish with one all-reduce of the result (a partial sum, max or
min), never a gather; ``all``/``any`` reduce as the max and min of 0/1; ``cumulative_sum`` is
a distributed scan. The standard's dtype rules hold: an integer sum or product is int64
(uint64 for unsigned integers) unless ``dtype``; ``axis=()`` reduces nothing; ``var`` and
``std`` take a float ``correction``.

Examples:
    >>> from mpiflow import array_api as xp
    >>> x = xp.asarray([[1, 2], [3, 4]], dtype=xp.uint8)
    >>> xp.sum(x).dtype, xp.sum(x, axis=()).tolist(), float(xp.std(xp.asarray([1.0, 3.0])))
    (mpiflow.uint64, [[1, 2], [3, 4]], 1.0)
"""

from __future__ import annotations

import builtins
import math
from typing import Any

import numpy

from .. import dtypes as _dt
from ..ops import pointwise as pw
from ..ops import pointwise_more as pm
from ..ops import quantiles, scans
from ..ops import reduction as red
from ..ops import shape as shape_ops
from ..tensors.tensor import Tensor
from .common import array, axes, axis, face
from .data_types import dtype as checked_dtype

__all__ = ["sum", "prod", "mean", "var", "std", "max", "min", "cumulative_sum",
           "cumulative_prod", "all", "any", "diff", "median"]


def _sum_dtype(x: Tensor, dtype: Any) -> _dt.DType:
    """The standard's result dtype of ``sum``/``prod``/``cumulative_sum``."""
    if dtype is not None:
        return checked_dtype(dtype)
    kind = x.dtype.numpy.kind
    if kind in "bi":
        return _dt.int64
    if kind == "u":
        return _dt.uint64
    return x.dtype


def _keep(x: Tensor, dt: _dt.DType) -> Tensor:
    """``axis=()``: nothing reduced, a copy in the result dtype."""
    return pw.clone(x) if x.dtype is dt else pw.cast(x, dt)


def sum(x: Tensor, /, *, axis: Any = None, dtype: Any = None,
        keepdims: builtins.bool = False) -> Tensor:
    """The sum over ``axis`` (all by default, ``()`` none).

    Examples:
        >>> from mpiflow import array_api as xp
        >>> xp.sum(xp.asarray([[1.0, 2.0], [3.0, 4.0]]), axis=0).tolist()
        [4.0, 6.0]
    """
    dims = axes(axis, array(x, "sum").ndim, "sum")
    dt = _sum_dtype(x, dtype)
    if not dims:
        return _keep(x, dt)
    return red.sum(x, dims, keepdims, dtype=dt)


def prod(x: Tensor, /, *, axis: Any = None, dtype: Any = None,
         keepdims: builtins.bool = False) -> Tensor:
    """The product over ``axis`` (all by default, ``()`` none)."""
    dims = axes(axis, array(x, "prod").ndim, "prod")
    dt = _sum_dtype(x, dtype)
    if not dims:
        return _keep(x, dt)
    return red.prod(x, dims, keepdims, dtype=dt)


def _floating(x: Tensor, name: str) -> None:
    if x.dtype.numpy.kind not in "fc":
        raise TypeError(f"{name}: needs a floating-point array, got {x.dtype}")


def mean(x: Tensor, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Tensor:
    """The mean over ``axis`` (a floating-point array; NaN for no elements)."""
    dims = axes(axis, array(x, "mean").ndim, "mean")
    _floating(x, "mean")
    if not dims:
        return pw.clone(x)
    with numpy.errstate(invalid="ignore", divide="ignore"):
        return red.mean(x, dims, keepdims)


def var(x: Tensor, /, *, axis: Any = None, correction: int | float = 0.0,
        keepdims: builtins.bool = False) -> Tensor:
    """The variance ``sum(|x - mean|**2) / (N - correction)`` over ``axis`` (NaN or inf
    where ``N - correction <= 0``).

    Examples:
        >>> from mpiflow import array_api as xp
        >>> xp.var(xp.asarray([1.0, 2.0, 3.0, 4.0]), correction=1).item()
        1.6666666666666667
    """
    dims = axes(axis, array(x, "var").ndim, "var")
    _floating(x, "var")
    if isinstance(correction, builtins.bool) or not isinstance(correction, (int, float)):
        raise TypeError(f"var: correction must be an int or a float, got {correction!r}")
    n = math.prod(x.shape[d] for d in dims)
    with numpy.errstate(invalid="ignore", divide="ignore"):
        deviation = pw.sub(x, red.mean(x, dims, keepdim=True)) if dims else pw.sub(x, x)
        squares = pw.mul(deviation, pm.conj(deviation))
        if x.dtype.numpy.kind == "c":
            squares = pm.real(squares)
        total = red.sum(squares, dims, keepdims) if dims else squares
        return pw.div(total, builtins.max(0.0, n - builtins.float(correction)))


def std(x: Tensor, /, *, axis: Any = None, correction: int | float = 0.0,
        keepdims: builtins.bool = False) -> Tensor:
    """The standard deviation: ``sqrt(var(x, ...))``."""
    return pw.sqrt(var(x, axis=axis, correction=correction, keepdims=keepdims))


def max(x: Tensor, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Tensor:
    """The largest element over ``axis`` (NaN wins); an error for no elements."""
    dims = axes(axis, array(x, "max").ndim, "max")
    if not dims:
        return pw.clone(x)
    return red.amax(x, dims, keepdims)


def min(x: Tensor, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Tensor:
    """The smallest element over ``axis`` (NaN wins); an error for no elements."""
    dims = axes(axis, array(x, "min").ndim, "min")
    if not dims:
        return pw.clone(x)
    return red.amin(x, dims, keepdims)


def _scan_axis(x: Tensor, axis_: Any, name: str) -> int:
    if axis_ is None:
        if x.ndim > 1:
            raise ValueError(f"{name}: axis is required for arrays of more than one "
                             "dimension")
        return 0
    return axis(axis_, builtins.max(x.ndim, 1), name)


def _with_initial(out: Tensor, a: int, value: int) -> Tensor:
    """``out`` with a slice of ``value`` before its first element along ``a``."""
    from .creation import full
    from .manipulation import concat

    shape = list(out.shape)
    shape[a] = 1
    return concat([full(tuple(shape), value, dtype=out.dtype, device=out.device), out], axis=a)


def cumulative_sum(x: Tensor, /, *, axis: Any = None, dtype: Any = None,
                   include_initial: builtins.bool = False) -> Tensor:
    """Running sums along ``axis`` (required above 1-D); a distributed scan along a split
    dim. ``include_initial`` puts a 0 first.

    Examples:
        >>> from mpiflow import array_api as xp
        >>> xp.cumulative_sum(xp.asarray([1, 2, 3]), include_initial=True).tolist()
        [0, 1, 3, 6]
    """
    array(x, "cumulative_sum")
    a = _scan_axis(x, axis, "cumulative_sum")
    dt = _sum_dtype(x, dtype)
    if x.ndim == 0:
        x = shape_ops.reshape(x, (1,))
    out = scans.cumsum(x, a, dtype=dt)
    return _with_initial(out, a, 0) if include_initial else out


def cumulative_prod(x: Tensor, /, *, axis: Any = None, dtype: Any = None,
                    include_initial: builtins.bool = False) -> Tensor:
    """Running products along ``axis`` (``include_initial`` puts a 1 first)."""
    array(x, "cumulative_prod")
    a = _scan_axis(x, axis, "cumulative_prod")
    dt = _sum_dtype(x, dtype)
    if x.ndim == 0:
        x = shape_ops.reshape(x, (1,))
    out = face("cumprod")(x, a, dtype=dt)
    return _with_initial(out, a, 1) if include_initial else out


def _truth(x: Tensor, axis_: Any, keepdims: builtins.bool, name: str, every: builtins.bool
           ) -> Tensor:
    dims = axes(axis_, array(x, name).ndim, name)
    truth = pw.ne(x, 0) if x.dtype.numpy.kind != "b" else x
    if not dims:
        return pw.clone(truth) if truth is x else truth
    if builtins.any(x.shape[d] == 0 for d in dims):  # nothing to reduce: the identity
        return (red.all if every else red.any)(truth, dims, keepdims)
    # The min (all) or max (any) of 0/1: a partial min/max over a split dim, one all-reduce
    ones = pw.cast(truth, _dt.uint8)
    out = red.amin(ones, dims, keepdims) if every else red.amax(ones, dims, keepdims)
    return pw.cast(out, _dt.bool)


def all(x: Tensor, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Tensor:
    """Whether every element over ``axis`` is true (non-zero); True for no elements."""
    return _truth(x, axis, keepdims, "all", True)


def any(x: Tensor, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Tensor:
    """Whether some element over ``axis`` is true (non-zero); False for no elements."""
    return _truth(x, axis, keepdims, "any", False)


def diff(x: Tensor, /, *, axis: int = -1, n: int = 1, prepend: Tensor | None = None,
         append: Tensor | None = None) -> Tensor:
    """The ``n``-th forward difference along ``axis`` (``prepend``/``append`` arrays first
    joined to ``x`` along it)."""
    array(x, "diff")
    a = axis if isinstance(axis, int) else builtins.int(axis)
    if n < 0:
        raise ValueError(f"diff: n must be non-negative, got {n}")
    return face("diff")(x, n=n, dim=a, prepend=prepend, append=append)


def median(x: Tensor, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Tensor:
    """The median over ``axis`` (all by default), NumPy's ``median``: the mean of the two
    middle values of an even count, float64 for integer arrays, NaN where a NaN is reduced.

    Not in the standard (NumPy, CuPy, PyTorch's ``quantile`` and JAX have it). Over a split
    dim the two middle values are found by distributed selection
    (:func:`mpiflow.quantile`), without sorting or gathering the array.

    Examples:
        >>> from mpiflow import array_api as xp
        >>> xp.median(xp.asarray([[1.0, 4.0], [2.0, 3.0], [9.0, 0.0]]), axis=0).tolist()
        [2.0, 3.0]
    """
    dims = axes(axis, array(x, "median").ndim, "median")
    kind = x.dtype.numpy.kind
    if kind == "c":
        raise TypeError(f"median: needs a real array, got {x.dtype}")
    if kind != "f":
        x = pw.cast(x, _dt.float64)
    if not dims:
        return pw.clone(x) if kind == "f" else x
    if len(dims) == 1:
        return quantiles.quantile(x, 0.5, dims[0], keepdims)
    if len(dims) == x.ndim:
        return quantiles.quantile(x, 0.5, None, keepdims)
    # Several axes: move them last and make them one (the quantile reduces one dim)
    rest = [d for d in range(x.ndim) if d not in dims]
    moved = shape_ops.permute(x, *rest, *dims)
    flat = shape_ops.reshape(moved, *(x.shape[d] for d in rest), -1)
    out = quantiles.quantile(flat, 0.5, -1, False)
    if keepdims:
        out = shape_ops.reshape(out, *(1 if d in dims else x.shape[d] for d in range(x.ndim)))
    return out
