"""``mpiflow.linalg``: torch.linalg's functions on local and global tensors.

Tall-skinny matrices split by rows (the common case in data analysis) stay distributed:
``qr``, ``svd``/``svdvals`` (``full_matrices=False``), ``lstsq``, ``pinv``, ``matrix_rank`` and
the spectral norms run TSQR (a reduction tree of small ``R`` factors, :mod:`mpiflow.algorithms
.tsqr`) and keep ``Q``/``U`` split by rows. Batches split along a batch dim are factored where
they lie. A square matrix split along one of its dims (``solve``, ``inv``, ``det``,
``cholesky``, ``eigh``) is gathered onto every rank, up to :data:`GATHER_LIMIT` elements,
and refused beyond it on every rank. Iterative solvers (``cg``, ``gmres``) take a matrix or
any linear operator and keep the vectors laid out as ``b``. ``docs/science.md`` (Linear
algebra) has the table of layouts and costs.

Errors: a singular or indefinite matrix raises :class:`LinAlgError` on every rank alike;
``solve_ex``, ``inv_ex`` and ``cholesky_ex`` return torch's ``info`` codes instead.

Examples:
    >>> Q, R = flow.linalg.qr(flow.tensor([[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]]))
    >>> R.tolist()
    [[1.0, 0.0], [0.0, 2.0]]
"""

from __future__ import annotations

from typing import Any

import numpy

from .core.errors import LinAlgError
from .ops import pointwise as _pw
from .ops import reduction as _red
from .ops.diagonals import diagonal as _diagonal
from .ops.factorizations import (
    EighResult,
    QRResult,
    SVDResult,
    eigh,
    eigvalsh,
    qr,
    svd,
    svdvals,
)
from .ops.iterative import cg, gmres
from .ops.linalg import matmul
from .ops.linalg_functions import (
    cross,
    matrix_norm,
    matrix_rank,
    multi_dot,
    norm,
    pinv,
    vector_norm,
)
from .ops.linalg_rules import GATHER_LIMIT
from .ops.solvers import (
    CholeskyExResult,
    InvExResult,
    LstsqResult,
    SlogdetResult,
    SolveExResult,
    cholesky,
    cholesky_ex,
    det,
    inv,
    inv_ex,
    lstsq,
    slogdet,
    solve,
    solve_ex,
)
from .tensors.creation import tensor
from .tensors.tensor import Tensor

__all__ = ["GATHER_LIMIT", "CholeskyExResult", "EighResult", "InvExResult", "LinAlgError",
           "LstsqResult", "QRResult", "SVDResult", "SlogdetResult", "SolveExResult", "cg",
           "cholesky", "cholesky_ex", "cross", "det", "diagonal", "eigh", "eigvalsh", "gmres",
           "inv", "inv_ex", "lstsq", "matmul", "matrix_norm", "matrix_power", "matrix_rank",
           "multi_dot", "norm", "pinv", "qr", "slogdet", "solve", "solve_ex", "svd", "svdvals",
           "vecdot", "vector_norm"]


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """``sum(conj(x) * y)`` along ``dim`` (torch's ``linalg.vecdot``); other dims broadcast.

    Examples:
        >>> flow.linalg.vecdot(flow.tensor([1.0, 2.0]), flow.tensor([3.0, 4.0])).item()
        11.0
    """
    if x.dtype.numpy.kind == "c":
        from .ops.deterministic_sum import CONJ
        from .ops.engine import apply

        x = apply(CONJ, x)
    return _red.sum(_pw.mul(x, y), dim)


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """The ``offset``-th diagonal of the matrices of ``A`` (torch's ``linalg.diagonal``:
    :func:`mpiflow.diagonal` with the last two dims by default).

    Examples:
        >>> flow.linalg.diagonal(flow.tensor([[1.0, 2.0], [3.0, 4.0]])).tolist()
        [1.0, 4.0]
    """
    return _diagonal(A, offset, dim1, dim2)


def matrix_power(A: Tensor, n: int) -> Tensor:
    """``A`` to the integer power ``n`` (torch's ``linalg.matrix_power``) by repeated
    squaring; ``n < 0`` is the power of the inverse, ``n == 0`` the identity.

    Examples:
        >>> flow.linalg.matrix_power(flow.tensor([[1.0, 1.0], [0.0, 1.0]]), 3).tolist()
        [[1.0, 3.0], [0.0, 1.0]]
    """
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"linalg.matrix_power: A must be batches of square matrices, got "
                         f"shape {tuple(A.shape)}")
    n = int(n)
    if n < 0:
        A, n = inv(A), -n
    result: Any = None
    power = A
    while n:
        if n & 1:
            result = power if result is None else matmul(result, power)
        n >>= 1
        if n:
            power = matmul(power, power)
    if result is None:  # the identity, laid out as A
        eye = numpy.broadcast_to(numpy.eye(A.shape[-1], dtype=A.dtype.numpy), tuple(A.shape))
        if A.is_global:
            return tensor(eye.copy(), placement=A.placement, sbp=A.sbp)
        return tensor(eye.copy())
    return result
