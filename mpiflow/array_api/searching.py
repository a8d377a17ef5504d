"""Searching and sorting functions of the standard: ``argmax``, ``argmin``, ``count_nonzero``,
``nonzero``, ``searchsorted``, ``where``, ``sort``, ``argsort``.

``sort`` and ``argsort`` of an array split along ``axis`` are a distributed sample sort (the
result stays split); the others use the torch-named functions of the same job.

Examples:
    >>> from mpiflow import array_api as xp
    >>> x = xp.asarray([3.0, 1.0, 2.0])
    >>> xp.sort(x, descending=True).tolist(), xp.argmin(x).item()
    ([3.0, 2.0, 1.0], 1)
"""

from __future__ import annotations

import builtins
from typing import Any

from ..ops import pointwise as pw
from ..ops import reduction as red
from ..ops import shape as shape_ops
from ..ops import sorting
from ..tensors.tensor import Tensor
from .common import array, axes, axis, face, promote

__all__ = ["argmax", "argmin", "count_nonzero", "nonzero", "searchsorted", "where", "sort",
           "argsort"]

_axis = axis  # (the functions' own argument is named axis)


def _arg(x: Tensor, axis: int | None, keepdims: builtins.bool, largest: builtins.bool,
         name: str) -> Tensor:
    array(x, name)
    if x.numel() == 0:
        raise ValueError(f"{name}: the array has no elements")
    if x.ndim == 0:
        return red.argmax(shape_ops.reshape(x, (1,)), 0) if largest else \
            red.argmin(shape_ops.reshape(x, (1,)), 0)
    find = red.argmax if largest else red.argmin
    if axis is None:
        out = find(shape_ops.reshape(x, (-1,)), 0)
        return shape_ops.reshape(out, (1,) * x.ndim) if keepdims else out
    return find(x, _axis(axis, x.ndim, name), keepdims)


def argmax(x: Tensor, /, *, axis: int | None = None, keepdims: builtins.bool = False
           ) -> Tensor:
    """The index of the first largest element along ``axis`` (of the flattened array by
    default)."""
    return _arg(x, axis, keepdims, True, "argmax")


def argmin(x: Tensor, /, *, axis: int | None = None, keepdims: builtins.bool = False
           ) -> Tensor:
    """The index of the first smallest element along ``axis`` (of the flattened array by
    default)."""
    return _arg(x, axis, keepdims, False, "argmin")


def count_nonzero(x: Tensor, /, *, axis: Any = None, keepdims: builtins.bool = False
                  ) -> Tensor:
    """How many elements along ``axis`` (all by default) are not zero (int64)."""
    dims = axes(axis, array(x, "count_nonzero").ndim, "count_nonzero")
    out = face("count_nonzero")(x, dim=dims)
    if keepdims:
        shape = [1 if d in dims else n for d, n in enumerate(x.shape)]
        out = shape_ops.reshape(out, tuple(shape))
    return out


def nonzero(x: Tensor, /) -> tuple[Tensor, ...]:
    """The indices of the non-zero elements, one array per axis (of at least 1-D ``x``)."""
    array(x, "nonzero")
    if x.ndim == 0:
        raise ValueError("nonzero: needs an array of at least one dimension")
    return tuple(face("nonzero")(x, as_tuple=True))


def searchsorted(x1: Tensor, x2: Tensor, /, *, side: str = "left",
                 sorter: Tensor | None = None) -> Tensor:
    """Where the values ``x2`` would go in the sorted 1-D ``x1`` (``side`` of equal ones)."""
    array(x1, "searchsorted")
    array(x2, "searchsorted")
    if x1.ndim != 1:
        raise ValueError(f"searchsorted: x1 must be 1-D, got {x1.ndim} dimensions")
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    dt = promote(x1.dtype, x2.dtype)
    x1 = x1 if x1.dtype is dt else pw.cast(x1, dt)
    x2 = x2 if x2.dtype is dt else pw.cast(x2, dt)
    return face("searchsorted")(x1, x2, side=side, sorter=sorter)


def where(condition: Tensor, x1: Any, x2: Any, /) -> Tensor:
    """``x1`` where ``condition`` holds, else ``x2`` (either may be a Python scalar),
    broadcasting; the dtypes of array operands promoted."""
    array(condition, "where")
    if condition.dtype.numpy.kind != "b":
        raise TypeError(f"where: condition must be a bool array, got {condition.dtype}")
    if not isinstance(x1, Tensor) and not isinstance(x2, Tensor):
        raise TypeError("where: at least one of x1 and x2 must be an array")
    if isinstance(x1, Tensor) and isinstance(x2, Tensor) and x1.dtype is not x2.dtype:
        dt = promote(x1.dtype, x2.dtype)
        x1, x2 = pw.cast(x1, dt), pw.cast(x2, dt)
    out = pw.where(condition, x1, x2)
    like = x1 if isinstance(x1, Tensor) else x2
    return out if out.dtype is like.dtype else pw.cast(out, like.dtype)


def _check_sortable(x: Tensor, name: str) -> None:
    if x.dtype.numpy.kind == "c":
        raise TypeError(f"{name}: complex values have no order")


def sort(x: Tensor, /, *, axis: int = -1, descending: builtins.bool = False,
         stable: builtins.bool = True) -> Tensor:
    """``x`` sorted along ``axis`` (stable; NaN last, first when descending)."""
    array(x, "sort")
    _check_sortable(x, "sort")
    if x.ndim == 0:
        return pw.clone(x)
    return sorting.sort(x, _axis(axis, x.ndim, "sort"), descending, stable)[0]


def argsort(x: Tensor, /, *, axis: int = -1, descending: builtins.bool = False,
            stable: builtins.bool = True) -> Tensor:
    """The indices that sort ``x`` along ``axis`` (stable: equal elements keep their
    order)."""
    array(x, "argsort")
    _check_sortable(x, "argsort")
    if x.ndim == 0:
        return red.argmax(shape_ops.reshape(x, (1,)), 0)
    return sorting.argsort(x, _axis(axis, x.ndim, "argsort"), descending, stable)
