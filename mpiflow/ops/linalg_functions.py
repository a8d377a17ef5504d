"""Composite linear algebra: ``vector_norm``, ``matrix_norm``, ``norm`` (torch.linalg's),
``cross``, ``multi_dot``, ``matrix_rank``, ``pinv``.

Each is built from other ops, so it follows their layout rules and needs no rule of its own:
a norm of a split tensor is each rank's partial sum (or maximum) and one reduction; the
spectral and nuclear norms, ``matrix_rank`` and ``pinv`` use ``svdvals``/``svd``, so a tall
matrix split by rows stays distributed (``pinv`` of one is then split by columns, as ``A^H``).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy

from ..layouts.sbp import Split
from ..tensors.tensor import Tensor
from . import pointwise as pw
from . import reduction as red
from .engine import OpDef, Signature, apply
from .factorizations import eigh, eigvalsh, mH, svd, svdvals
from .join import cat
from .layout_rules import wrap_dim
from .linalg import matmul
from .linalg_rules import check_floating, matrix_shape, real_dtype
from .shape import permute, squeeze, unsqueeze

__all__ = ["ABS", "cross", "matrix_norm", "matrix_rank", "multi_dot", "norm", "pinv",
           "vector_norm"]

Shape = tuple[int, ...]


# -- |x| in the real dtype (pointwise abs keeps a complex dtype) -------------------------------
def _abs_layouts(shape: Shape, **_: Any) -> list[Signature]:
    return [((Split(d),), Split(d)) for d in range(len(shape))]


def _abs_grad(g: Tensor, operands: Any, out: Tensor, **_: Any) -> tuple[Tensor]:
    """``g x / |x|`` (0 at 0)."""
    x = operands[0]
    safe = pw.where(pw.eq(out, 0), pw.add(out, 1.0), out)
    return (pw.mul(pw.cast(pw.div(g, safe), x.dtype), x),)


ABS = OpDef("real_abs", lambda ctx, a, **_: ctx.xp.abs(a), lambda shape, **_: shape,
            _abs_layouts, lambda dtype, **_: real_dtype(dtype), _abs_grad)


def _magnitude(x: Tensor) -> Tensor:
    return apply(ABS, x) if x.dtype.numpy.kind == "c" else pw.abs(x)


def _dims(dim: int | Sequence[int] | None, ndim: int) -> tuple[int, ...] | None:
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return tuple(wrap_dim(operator.index(d), ndim) for d in dims)


# -- norms -------------------------------------------------------------------------------------
def vector_norm(x: Tensor, ord: float = 2, dim: int | Sequence[int] | None = None,
                keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """The vector ``ord``-norm over ``dim`` (all elements by default), torch's
    ``linalg.vector_norm``: ``sum(|x|^ord)^(1/ord)``; ``inf``/``-inf`` the largest/smallest
    ``|x|``, 0 the number of non-zeros.

    On a split tensor each rank reduces its own elements and one reduction combines them.

    Examples:
        >>> flow.linalg.vector_norm(flow.tensor([3.0, -4.0])).item()
        5.0
    """
    if dtype is not None:
        x = pw.cast(x, dtype)
    check_floating("vector_norm", x)
    dims = _dims(dim, x.ndim)
    magnitude = _magnitude(x)
    if ord == math.inf:
        return red.amax(magnitude, dims, keepdim)
    if ord == -math.inf:
        return red.amin(magnitude, dims, keepdim)
    if ord == 0:
        return red.sum(pw.ne(magnitude, 0), dims, keepdim, dtype=magnitude.dtype)
    if ord == 1:
        return red.sum(magnitude, dims, keepdim)
    if ord == 2:
        return pw.sqrt(red.sum(pw.mul(magnitude, magnitude), dims, keepdim))
    return pw.pow(red.sum(pw.pow(magnitude, float(ord)), dims, keepdim), 1.0 / float(ord))


_MATRIX_ORDS = ("fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf)


def matrix_norm(A: Tensor, ord: Any = "fro", dim: tuple[int, int] = (-2, -1),
                keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """A matrix norm over the two dims ``dim`` (torch's ``linalg.matrix_norm``):
    ``"fro"``, ``"nuc"`` (sum of singular values), 2 / -2 (largest / smallest singular
    value), 1 / -1 (largest / smallest column sum of ``|A|``), ``inf`` / ``-inf`` (rows).

    The singular-value norms use :func:`~.factorizations.svdvals` (a tall matrix split by
    rows stays distributed); the others are sums and extrema.

    Examples:
        >>> flow.linalg.matrix_norm(flow.tensor([[1.0, -2.0], [3.0, 4.0]]), 1).item()
        6.0
    """
    if ord not in _MATRIX_ORDS:
        raise ValueError(f"linalg.matrix_norm: ord must be one of {_MATRIX_ORDS}, got {ord!r}")
    if dtype is not None:
        A = pw.cast(A, dtype)
    check_floating("matrix_norm", A)
    if A.ndim < 2:
        raise ValueError(f"linalg.matrix_norm: A must have at least 2 dimensions, got shape "
                         f"{tuple(A.shape)}")
    d0, d1 = _dims(dim, A.ndim) or (0, 1)
    if d0 == d1:
        raise ValueError(f"linalg.matrix_norm: dim must name two different dims, got {dim}")
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    if ord in (1, -1, math.inf, -math.inf):
        summed, over = (d0, d1) if ord in (1, -1) else (d1, d0)
        sums = red.sum(_magnitude(A), summed, True)
        pick = red.amax if ord in (1, math.inf) else red.amin
        out = pick(sums, over, True)
        return out if keepdim else squeeze(out, (d0, d1))
    rest = [d for d in range(A.ndim) if d not in (d0, d1)]
    s = svdvals(permute(A, *rest, d0, d1))
    if ord == "nuc":
        out = red.sum(s, -1)
    elif ord == 2:
        out = red.amax(s, -1)
    else:
        out = red.amin(s, -1)
    if keepdim:
        for d in sorted((d0, d1)):
            out = unsqueeze(out, d)
    return out


def norm(A: Tensor, ord: Any = None, dim: int | Sequence[int] | None = None,
         keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """A vector or matrix norm (torch's ``linalg.norm``): with ``dim`` an int, or ``ord``
    and ``dim`` None, or a 1-D ``A``, :func:`vector_norm` (2-norm by default, of all
    elements where ``dim`` is None); with two dims, or a 2-D ``A`` and ``ord`` given,
    :func:`matrix_norm` (Frobenius by default).

    Examples:
        >>> flow.linalg.norm(flow.tensor([[3.0, 0.0], [0.0, 4.0]])).item()
        5.0
        >>> flow.linalg.norm(flow.tensor([[3.0, 0.0], [0.0, 4.0]]), 2).item()
        4.0
    """
    if isinstance(dim, int) or (dim is None and (ord is None or A.ndim == 1)):
        if isinstance(ord, str):
            raise ValueError(f"linalg.norm: ord {ord!r} needs a matrix (two dims)")
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
    if dim is None:
        if A.ndim != 2:
            raise ValueError(f"linalg.norm: with ord given and no dim, A must be 1-D or 2-D, got "
                             f"shape {tuple(A.shape)}")
        dim = (-2, -1)
    dims = tuple(dim)
    if len(dims) != 2:
        raise ValueError(f"linalg.norm: dim must be an int or two ints, got {dim}")
    return matrix_norm(A, "fro" if ord is None else ord, (dims[0], dims[1]), keepdim,
                       dtype=dtype)


# -- cross, multi_dot --------------------------------------------------------------------------
def cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:
    """The cross product of 3-vectors along ``dim`` (torch's ``linalg.cross``); the other
    dims broadcast.

    Examples:
        >>> flow.linalg.cross(flow.tensor([1.0, 0.0, 0.0]), flow.tensor([0.0, 1.0, 0.0])).tolist()
        [0.0, 0.0, 1.0]
    """
    if input.ndim != other.ndim:
        raise ValueError(f"linalg.cross: inputs must have the same number of dimensions, got "
                         f"shapes {tuple(input.shape)} and {tuple(other.shape)}")
    d = wrap_dim(operator.index(dim), input.ndim)
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise ValueError(f"linalg.cross: dimension {dim} must have length 3, got shapes "
                         f"{tuple(input.shape)} and {tuple(other.shape)}")
    index = [slice(None)] * input.ndim

    def part(t: Tensor, i: int) -> Tensor:
        index[d] = slice(i, i + 1)
        return t[tuple(index)]

    a = [part(input, i) for i in range(3)]
    b = [part(other, i) for i in range(3)]
    return cat([pw.sub(pw.mul(a[(i + 1) % 3], b[(i + 2) % 3]),
                       pw.mul(a[(i + 2) % 3], b[(i + 1) % 3])) for i in range(3)], dim=d)


def _chain_order(dims: list[int]) -> list[list[int]]:
    """The split points of the cheapest product of matrices ``dims[i] x dims[i+1]`` (the
    textbook dynamic programme, as numpy's ``multi_dot``)."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf  # type: ignore[call-overload]
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def multi_dot(tensors: Sequence[Tensor]) -> Tensor:
    """The product of two or more matrices in the cheapest order (torch's
    ``linalg.multi_dot``); the first may be a 1-D row vector and the last a 1-D column vector.

    Examples:
        >>> flow.linalg.multi_dot([flow.ones(2), flow.ones(2, 3), flow.ones(3)]).item()
        6.0
    """
    tensors = list(tensors)
    if len(tensors) < 2:
        raise ValueError(f"linalg.multi_dot: expected at least 2 tensors, got {len(tensors)}")
    for i, t in enumerate(tensors):
        allowed = (1, 2) if i in (0, len(tensors) - 1) else (2,)
        if t.ndim not in allowed:
            raise ValueError(f"linalg.multi_dot: tensor {i} must be "
                             f"{' or '.join(f'{a}-D' for a in allowed)}, got shape "
                             f"{tuple(t.shape)}")
    first_vector, last_vector = tensors[0].ndim == 1, tensors[-1].ndim == 1
    if first_vector:
        tensors[0] = unsqueeze(tensors[0], 0)
    if last_vector:
        tensors[-1] = unsqueeze(tensors[-1], 1)
    dims = [tensors[0].shape[0]] + [t.shape[1] for t in tensors]
    for i in range(len(tensors) - 1):
        if tensors[i].shape[1] != tensors[i + 1].shape[0]:
            raise ValueError(f"linalg.multi_dot: tensors {i} and {i + 1} cannot be multiplied: "
                             f"shapes {tuple(tensors[i].shape)} and "
                             f"{tuple(tensors[i + 1].shape)}")
    split = _chain_order(dims)

    def product(i: int, j: int) -> Tensor:
        if i == j:
            return tensors[i]
        k = split[i][j]
        return matmul(product(i, k), product(k + 1, j))

    out = product(0, len(tensors) - 1)
    if first_vector:
        out = squeeze(out, 0)
    if last_vector:
        out = squeeze(out, -1)
    return out


# -- rank and pseudo-inverse -------------------------------------------------------------------
def _tolerance(s_max: Tensor, m: int, n: int, dtype: numpy.dtype, atol: Any, rtol: Any
               ) -> Tensor:
    """torch's ``max(atol, rtol * s_max)``; ``rtol`` defaults to ``eps * max(m, n)`` when
    ``atol`` is not given, else to 0."""
    if rtol is None:
        rtol = float(numpy.finfo(dtype).eps) * max(m, n) if atol is None or (
            not isinstance(atol, Tensor) and atol == 0) else 0.0
    # tensors of tolerances are per matrix (the batch shape, as torch): against s_max's last dim
    if isinstance(rtol, Tensor) and rtol.ndim:
        rtol = unsqueeze(rtol, -1)
    if isinstance(atol, Tensor) and atol.ndim:
        atol = unsqueeze(atol, -1)
    tol = pw.mul(s_max, rtol)
    return tol if atol is None else pw.maximum(tol, atol)


def matrix_rank(A: Tensor, *, atol: Any = None, rtol: Any = None, hermitian: bool = False
                ) -> Tensor:
    """The numerical rank: how many singular values exceed ``max(atol, rtol * s_max)``
    (torch's ``linalg.matrix_rank``). A tall matrix split by rows stays distributed.

    Examples:
        >>> flow.linalg.matrix_rank(flow.tensor([[1.0, 2.0], [2.0, 4.0]])).item()
        1
    """
    check_floating("matrix_rank", A)
    m, n = matrix_shape("matrix_rank", tuple(A.shape))
    s = _magnitude(eigvalsh(A)) if hermitian else svdvals(A)
    if min(m, n) == 0:
        return red.sum(pw.gt(s, 0), -1)
    s_max = red.amax(s, -1, True)
    tol = _tolerance(s_max, m, n, real_dtype(A.dtype.numpy), atol, rtol)
    return red.sum(pw.gt(s, tol), -1)


def pinv(A: Tensor, *, atol: Any = None, rtol: Any = None, hermitian: bool = False
         ) -> Tensor:
    """The Moore-Penrose pseudo-inverse (torch's ``linalg.pinv``): ``V diag(1/s) U^H`` over
    the singular values above ``max(atol, rtol * s_max)``.

    Of a tall matrix split by rows, the SVD stays distributed and the result (``n x m``) is
    split by columns.

    Examples:
        >>> flow.linalg.pinv(flow.tensor([[2.0, 0.0], [0.0, 0.0]])).tolist()
        [[0.5, 0.0], [0.0, 0.0]]
    """
    check_floating("pinv", A)
    m, n = matrix_shape("pinv", tuple(A.shape))
    if hermitian:
        w, v = eigh(A)
        size = _magnitude(w)
        left, right = v, mH(v)
        s = w
    else:
        u, s, vh = svd(A, full_matrices=False)
        size, left, right = s, mH(vh), mH(u)
    if min(m, n) == 0:
        return matmul(left, right)
    tol = _tolerance(red.amax(size, -1, True), m, n, real_dtype(A.dtype.numpy), atol, rtol)
    keep = pw.gt(size, tol)
    inverse = pw.where(keep, pw.reciprocal(pw.where(keep, s, pw.add(pw.mul(s, 0.0), 1.0))),
                       pw.mul(s, 0.0))
    scaled = pw.mul(left, unsqueeze(pw.cast(inverse, left.dtype) if inverse.dtype != left.dtype
                                    else inverse, -2))
    return matmul(scaled, right)

