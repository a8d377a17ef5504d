"""The standard's ``linalg`` extension, on ``mpiflow.linalg`` (PyTorch's ``torch.linalg``
names and signatures) where it has the function, and on this namespace's own functions
(``matmul``, ``tensordot``, ``vecdot``, ``matrix_transpose``, ``trace`` of the diagonal).

The decompositions come from ``mpiflow.linalg``: a function it lacks raises an
``AttributeError`` naming it.

Examples:
    >>> from mpiflow import array_api as xp
    >>> xp.linalg.outer(xp.asarray([1.0, 2.0]), xp.asarray([3.0, 4.0])).tolist()
    [[3.0, 4.0], [6.0, 8.0]]
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..ops import linalg as flow_linalg
from ..tensors.tensor import Tensor
from .common import array, module
from .linear_algebra import matmul, matrix_transpose, tensordot, vecdot
from .statistical import sum as _sum

__all__ = ["cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul",
           "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv",
           "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot",
           "vector_norm"]


class EighResult(NamedTuple):
    eigenvalues: Tensor
    eigenvectors: Tensor


class QRResult(NamedTuple):
    Q: Tensor
    R: Tensor


class SlogdetResult(NamedTuple):
    sign: Tensor
    logabsdet: Tensor


class SVDResult(NamedTuple):
    U: Tensor
    S: Tensor
    Vh: Tensor


def _linalg(name: str) -> Any:
    fn = getattr(module("linalg"), name, None)
    if fn is None:
        raise AttributeError(f"mpiflow.linalg has no '{name}' yet")
    return fn


def _matrices(x: Any, name: str) -> Tensor:
    array(x, name)
    if x.ndim < 2:
        raise ValueError(f"{name}: needs a (stack of) matrices, got {x.ndim} dimension(s)")
    return x


def cholesky(x: Tensor, /, *, upper: bool = False) -> Tensor:
    """The Cholesky factor of a symmetric (Hermitian) positive-definite matrix."""
    return _linalg("cholesky")(_matrices(x, "cholesky"), upper=upper)


def cross(x1: Tensor, x2: Tensor, /, *, axis: int = -1) -> Tensor:
    """The cross product of 3-vectors along ``axis``."""
    array(x1, "cross")
    array(x2, "cross")
    return _linalg("cross")(x1, x2, dim=axis)


def det(x: Tensor, /) -> Tensor:
    """The determinant."""
    return _linalg("det")(_matrices(x, "det"))


def diagonal(x: Tensor, /, *, offset: int = 0) -> Tensor:
    """The ``offset``-th diagonal of the last two dims."""
    return _linalg("diagonal")(_matrices(x, "diagonal"), offset=offset)


def eigh(x: Tensor, /) -> EighResult:
    """Eigenvalues (ascending) and eigenvectors of a symmetric (Hermitian) matrix."""
    values, vectors = _linalg("eigh")(_matrices(x, "eigh"))
    return EighResult(values, vectors)


def eigvalsh(x: Tensor, /) -> Tensor:
    """Eigenvalues (ascending) of a symmetric (Hermitian) matrix."""
    return _linalg("eigvalsh")(_matrices(x, "eigvalsh"))


def inv(x: Tensor, /) -> Tensor:
    """The inverse of a square matrix."""
    return _linalg("inv")(_matrices(x, "inv"))


def matrix_norm(x: Tensor, /, *, keepdims: bool = False, ord: Any = "fro") -> Tensor:
    """A matrix norm of the last two dims ("fro", "nuc", +-1, +-2, +-inf)."""
    return _linalg("matrix_norm")(_matrices(x, "matrix_norm"), ord=ord, keepdim=keepdims)


def matrix_power(x: Tensor, n: int, /) -> Tensor:
    """``x`` multiplied by itself ``n`` times (the inverse's powers for ``n < 0``)."""
    return _linalg("matrix_power")(_matrices(x, "matrix_power"), n)


def matrix_rank(x: Tensor, /, *, rtol: Any = None) -> Tensor:
    """The number of singular values above ``rtol`` times the largest."""
    return _linalg("matrix_rank")(_matrices(x, "matrix_rank"), rtol=rtol)


def outer(x1: Tensor, x2: Tensor, /) -> Tensor:
    """The outer product of two vectors."""
    array(x1, "outer")
    array(x2, "outer")
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError("outer: needs two 1-D arrays")
    return flow_linalg.outer(x1, x2)


def pinv(x: Tensor, /, *, rtol: Any = None) -> Tensor:
    """The Moore-Penrose pseudo-inverse."""
    return _linalg("pinv")(_matrices(x, "pinv"), rtol=rtol)


def qr(x: Tensor, /, *, mode: str = "reduced") -> QRResult:
    """The QR decomposition ("reduced" or "complete")."""
    q, r = _linalg("qr")(_matrices(x, "qr"), mode=mode)
    return QRResult(q, r)


def slogdet(x: Tensor, /) -> SlogdetResult:
    """The sign and the log of the absolute value of the determinant."""
    sign, logabsdet = _linalg("slogdet")(_matrices(x, "slogdet"))
    return SlogdetResult(sign, logabsdet)


def solve(x1: Tensor, x2: Tensor, /) -> Tensor:
    """The solution ``y`` of ``x1 @ y = x2``."""
    array(x2, "solve")
    return _linalg("solve")(_matrices(x1, "solve"), x2)


def svd(x: Tensor, /, *, full_matrices: bool = True) -> SVDResult:
    """The singular value decomposition ``U @ diag(S) @ Vh``."""
    u, s, vh = _linalg("svd")(_matrices(x, "svd"), full_matrices=full_matrices)
    return SVDResult(u, s, vh)


def svdvals(x: Tensor, /) -> Tensor:
    """The singular values, descending."""
    return _linalg("svdvals")(_matrices(x, "svdvals"))


def trace(x: Tensor, /, *, offset: int = 0, dtype: Any = None) -> Tensor:
    """The sum of the ``offset``-th diagonal of the last two dims (the standard's sum dtype
    rules)."""
    return _sum(diagonal(x, offset=offset), axis=-1, dtype=dtype)


def vector_norm(x: Tensor, /, *, axis: Any = None, keepdims: bool = False, ord: Any = 2
                ) -> Tensor:
    """A vector norm over ``axis`` (all by default)."""
    array(x, "vector_norm")
    return _linalg("vector_norm")(x, ord=ord, dim=axis, keepdim=keepdims)
