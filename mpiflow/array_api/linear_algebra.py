"""Linear algebra and indexing functions of the standard's main namespace: ``matmul``,
``matrix_transpose``, ``tensordot``, ``vecdot``, ``take``, ``take_along_axis``.

``matmul`` is mpiflow's distributed ``matmul`` (its layout rules keep a split of the rows or
columns; a split of the contracted dim ends in one all-reduce); ``vecdot`` a product and a sum
where the operands lie.

Examples:
    >>> from mpiflow import array_api as xp
    >>> a = xp.reshape(xp.arange(6.0), (2, 3))
    >>> xp.matmul(a, xp.matrix_transpose(a)).tolist(), xp.vecdot(a, a).tolist()
    ([[5.0, 14.0], [14.0, 50.0]], [5.0, 50.0])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy

from ..ops import linalg as flow_linalg
from ..ops import pointwise as pw
from ..ops import pointwise_more as pm
from ..ops import reduction as red
from ..ops import shape as shape_ops
from ..tensors.tensor import Tensor
from .common import array, axis, face, promote

__all__ = ["matmul", "matrix_transpose", "tensordot", "vecdot", "take", "take_along_axis"]

_axis = axis  # (the functions' own argument is named axis)


def _promoted(x1: Tensor, x2: Tensor) -> tuple[Tensor, Tensor]:
    dt = promote(x1.dtype, x2.dtype)
    return (x1 if x1.dtype is dt else pw.cast(x1, dt)), (x2 if x2.dtype is dt else
                                                         pw.cast(x2, dt))


def matmul(x1: Tensor, x2: Tensor, /) -> Tensor:
    """The matrix product (1-D operands as vectors, batches broadcast), dtypes promoted."""
    array(x1, "matmul")
    array(x2, "matmul")
    if x1.ndim == 0 or x2.ndim == 0:
        raise ValueError("matmul: zero-dimensional arrays are not allowed")
    k1 = x1.shape[-1]
    k2 = x2.shape[-2] if x2.ndim > 1 else x2.shape[0]
    if k1 != k2:
        raise ValueError(f"matmul: shapes {tuple(x1.shape)} and {tuple(x2.shape)} do not "
                         "match in the contracted dimension")
    a, b = _promoted(x1, x2)
    return flow_linalg.matmul(a, b)


def matrix_transpose(x: Tensor, /) -> Tensor:
    """The transpose of the last two dims."""
    array(x, "matrix_transpose")
    if x.ndim < 2:
        raise ValueError("matrix_transpose: needs an array of at least 2 dimensions")
    return shape_ops.transpose(x, -2, -1)


def vecdot(x1: Tensor, x2: Tensor, /, *, axis: int = -1) -> Tensor:
    """``sum(conj(x1) * x2)`` along ``axis`` of the broadcast operands."""
    array(x1, "vecdot")
    array(x2, "vecdot")
    shape = numpy.broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    d = _axis(axis, len(shape), "vecdot")
    n1 = x1.shape[d - len(shape) + x1.ndim] if d - len(shape) + x1.ndim >= 0 else None
    n2 = x2.shape[d - len(shape) + x2.ndim] if d - len(shape) + x2.ndim >= 0 else None
    if n1 != n2:
        raise ValueError(f"vecdot: the arrays must have the same size along axis {axis}")
    a, b = _promoted(x1, x2)
    return red.sum(pw.mul(pm.conj(a), b), d, dtype=a.dtype)


def _tensordot_axes(axes: Any, n1: int, n2: int) -> tuple[list[int], list[int]]:
    if isinstance(axes, int):
        if axes < 0 or axes > min(n1, n2):
            raise ValueError(f"tensordot: axes={axes} is out of range")
        return list(range(n1 - axes, n1)), list(range(axes))
    first, second = axes
    a = [_axis(i, n1, "tensordot") for i in first]
    b = [_axis(i, n2, "tensordot") for i in second]
    if len(a) != len(b):
        raise ValueError("tensordot: the two sequences of axes must have one length")
    return a, b


def tensordot(x1: Tensor, x2: Tensor, /, *, axes: int | tuple[Sequence[int], Sequence[int]]
              = 2) -> Tensor:
    """The sum of products over ``axes`` (the last ``axes`` of ``x1`` with the first of
    ``x2``, or the two given sequences)."""
    array(x1, "tensordot")
    array(x2, "tensordot")
    a_axes, b_axes = _tensordot_axes(axes, x1.ndim, x2.ndim)
    for i, j in zip(a_axes, b_axes):
        if x1.shape[i] != x2.shape[j]:
            raise ValueError(f"tensordot: axis {i} of x1 ({x1.shape[i]}) and axis {j} of x2 "
                             f"({x2.shape[j]}) differ")
    a, b = _promoted(x1, x2)
    free_a = [i for i in range(a.ndim) if i not in a_axes]
    free_b = [j for j in range(b.ndim) if j not in b_axes]
    k = math.prod(a.shape[i] for i in a_axes)
    left = shape_ops.reshape(shape_ops.permute(a, (*free_a, *a_axes)),
                             (math.prod(a.shape[i] for i in free_a), k))
    right = shape_ops.reshape(shape_ops.permute(b, (*b_axes, *free_b)),
                              (k, math.prod(b.shape[j] for j in free_b)))
    out = flow_linalg.matmul(left, right)
    return shape_ops.reshape(out, tuple(a.shape[i] for i in free_a)
                             + tuple(b.shape[j] for j in free_b))


def take(x: Tensor, indices: Tensor, /, *, axis: int | None = None) -> Tensor:
    """The elements of ``x`` at ``indices`` (a 1-D integer array) along ``axis`` (optional
    for 1-D ``x``)."""
    array(x, "take")
    array(indices, "take")
    if indices.ndim != 1 or indices.dtype.numpy.kind not in "iu":
        raise ValueError("take: indices must be a 1-D integer array")
    if axis is None:
        if x.ndim != 1:
            raise ValueError("take: axis is required for arrays of more than one dimension")
        d = 0
    else:
        d = _axis(axis, x.ndim, "take")
    return x[(slice(None),) * d + (indices,)]


def take_along_axis(x: Tensor, indices: Tensor, /, *, axis: int = -1) -> Tensor:
    """The elements of ``x`` at ``indices`` along ``axis`` (the other dims broadcast)."""
    array(x, "take_along_axis")
    array(indices, "take_along_axis")
    if indices.ndim != x.ndim:
        raise ValueError("take_along_axis: x and indices must have the same number of "
                         "dimensions")
    return face("take_along_dim")(x, indices, dim=_axis(axis, x.ndim, "take_along_axis"))
