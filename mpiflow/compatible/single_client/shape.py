"""The tensor functions at the top of OneFlow 0.x's namespace: reshape, transpose, concat, ...

Examples:
    >>> import mpiflow as mf
    >>> reshape(mf.ones(2, 3), [2, -1]).shape
    mpiflow.Size([2, 3])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ... import dtypes as _dtypes
from ...ops import join, linalg
from ...ops import pointwise as pw
from ...ops import shape as sh
from ...tensors.creation import full
from ...tensors.tensor import Tensor

__all__ = ["cast", "concat", "constant", "expand_dims", "flatten", "identity", "matmul",
           "reshape", "squeeze", "transpose"]


def reshape(x: Tensor, shape: Sequence[int], name: str | None = None) -> Tensor:
    """``x`` with ``shape`` (one entry may be -1)."""
    return sh.reshape(x, tuple(int(n) for n in shape))


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1, name: str | None = None
            ) -> Tensor:
    """Merge dims ``start_dim..end_dim``."""
    return sh.flatten(input, start_dim, end_dim)


def transpose(a: Tensor, perm: Sequence[int] | None = None, name: str | None = None,
              **_: Any) -> Tensor:
    """``a`` with its dims in the order ``perm`` (reversed by default)."""
    return sh.permute(a, *(perm if perm is not None else range(a.ndim - 1, -1, -1)))


def concat(values: Sequence[Tensor], axis: int = 0, name: str | None = None) -> Tensor:
    """The tensors joined along ``axis``."""
    return join.cat(list(values), axis)


def matmul(a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False,
           alpha: float = 1.0, name: str | None = None) -> Tensor:
    """``alpha * op(a) @ op(b)``, ``op`` transposing the last two dims when asked."""
    if transpose_a:
        a = sh.transpose(a, -2, -1)
    if transpose_b:
        b = sh.transpose(b, -2, -1)
    out = linalg.matmul(a, b)
    return out if alpha == 1.0 else out * alpha


def cast(x: Tensor, dtype: Any, name: str | None = None) -> Tensor:
    """``x`` as ``dtype``."""
    return pw.cast(x, _dtypes.as_dtype(dtype))


def identity(x: Tensor, name: str | None = None) -> Tensor:
    """``x``."""
    return x


def constant(value: float, dtype: Any = None, shape: Sequence[int] = (), name: str | None = None
             ) -> Tensor:
    """A tensor of ``shape`` filled with ``value``."""
    return full(tuple(shape), value, dtype=_dtypes.as_dtype(dtype) if dtype else None)


def squeeze(input: Tensor, axis: Sequence[int] | None = None, name: str | None = None
            ) -> Tensor:
    """``input`` without the size-1 dims ``axis`` (all by default)."""
    return sh.squeeze(input, None if axis is None else tuple(axis))


def expand_dims(input: Tensor, axis: int, name: str | None = None) -> Tensor:
    """``input`` with a size-1 dim at ``axis``."""
    return sh.unsqueeze(input, axis)
