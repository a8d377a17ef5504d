"""Linear systems and determinants: ``solve``, ``inv``, ``cholesky`` (and their ``_ex``
forms), ``det``, ``slogdet``, ``lstsq``.

Layout rules, per mesh axis: a batch dim split (on every operand) stays split: each rank
solves its own systems. ``lstsq`` of a tall ``A`` (``m >= n``) split by rows, with ``B`` split
the same way, is a collective signature ``(S(-2), S(-2)) -> B``: TSQR of ``[A | B]`` gives
``R`` (``(n + k)`` square), whose blocks hold ``Q^H B`` and the residuals, so no ``Q`` is
formed and no row moves. A square matrix split along one of its own dims is gathered (up to
:data:`~.linalg_rules.GATHER_LIMIT`): the LU and Cholesky kernels need it whole.

Failures: the kernels return torch's ``info`` codes (0: success); the ``_ex`` functions return
them, the others raise :class:`~mpiflow.core.errors.LinAlgError` on every rank alike
(:func:`~.linalg_rules.agree`).

Gradients: ``solve_ex`` (``dB = A^-H g``, ``dA = -dB X^H``), ``inv_ex`` (``-X^H g X^H``),
``cholesky_ex`` (its own op: ``L^-H Phi(L^H dL) L^-1``, symmetrised), ``det`` and ``slogdet``
(``g det A^-H``, ``g A^-H``); ``lstsq`` has none.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy

from ..algorithms import kernels
from ..algorithms.tsqr import tsqr
from ..layouts.sbp import Split
from ..tensors.tensor import Tensor
from . import pointwise as pw
from .engine import B, Context, OpDef, Signature, apply, apply_multi, result_dtype
from .factorizations import mH
from .linalg import matmul
from .linalg_rules import (
    GATHER_LIMIT,
    agree,
    batch_splits,
    check_floating,
    check_gather,
    from_root,
    matrix_shape,
    real_dtype,
    square,
)
from .shape import squeeze, transpose, unsqueeze

__all__ = ["CHOLESKY_EX", "CHOLESKY_GRAD", "DET", "INV_EX", "LSTSQ", "SLOGDET", "SOLVE_EX",
           "CholeskyExResult", "InvExResult", "LstsqResult", "SlogdetResult", "SolveExResult",
           "cholesky", "cholesky_ex", "det", "inv", "inv_ex", "lstsq", "slogdet", "solve",
           "solve_ex"]

Shape = tuple[int, ...]
INT32 = numpy.dtype(numpy.int32)


class SolveExResult(NamedTuple):
    """``(result, info)``, as torch's ``linalg_solve_ex``."""

    result: Tensor
    info: Tensor


class InvExResult(NamedTuple):
    """``(inverse, info)``, as torch's ``linalg_inv_ex``."""

    inverse: Tensor
    info: Tensor


class CholeskyExResult(NamedTuple):
    """``(L, info)``, as torch's ``linalg_cholesky_ex``."""

    L: Tensor
    info: Tensor


class SlogdetResult(NamedTuple):
    """``(sign, logabsdet)``, as torch's ``linalg_slogdet``."""

    sign: Tensor
    logabsdet: Tensor


class LstsqResult(NamedTuple):
    """``(solution, residuals, rank, singular_values)``, as torch's ``linalg_lstsq``."""

    solution: Tensor
    residuals: Tensor
    rank: Tensor
    singular_values: Tensor


def _batch2(a: Shape, b: Shape) -> list[Signature]:
    """``(S(d), S(d)) -> S(d)`` for each batch dim (both operands have the full batch)."""
    return [((Split(d), Split(d)), (Split(d), Split(d))) for d in range(len(a) - 2)]


# -- solve -------------------------------------------------------------------------------------
def _solve_shape(a: Shape, b: Shape) -> tuple[Shape, Shape]:
    square("solve", a)
    if a[:-2] != b[:-2] or b[-2] != a[-1]:
        raise ValueError(f"linalg.solve: incompatible shapes of A {a} and B {b}")
    return b, a[:-2]


def _solve_kernel(ctx: Context, a: Any, b: Any) -> tuple[Any, Any]:
    x, info = kernels.solve_ex(a, b)
    return x, info


def _solve_grad(g: Tensor, operands: Any, out: Tensor, **_: Any) -> tuple[Tensor, Tensor]:
    """``dB = A^-H g``, ``dA = -dB X^H``."""
    a = operands[0]
    gb = apply_multi(SOLVE_EX, mH(a), g)[0]
    return pw.neg(matmul(gb, mH(out))), gb


SOLVE_EX = OpDef("solve_ex", _solve_kernel, _solve_shape, _batch2,
                 lambda da, db, **_: (result_dtype([da, db]), INT32), _solve_grad, outputs=2)


def _system(name: str, A: Tensor, Bm: Tensor, left: bool) -> tuple[Tensor, Tensor, bool]:
    """``A`` and ``B`` of one dtype and batch shape, ``B`` a batch of matrices, transposed
    for ``left=False``; and whether ``B`` was a (batch of) vector(s)."""
    check_floating(name, A, Bm)
    n = square(name, tuple(A.shape))
    vector = Bm.ndim == 1 or (Bm.ndim == A.ndim - 1 and tuple(Bm.shape) == tuple(A.shape[:-1]))
    if vector:
        Bm = unsqueeze(Bm, -1) if left else unsqueeze(Bm, -2)
    if Bm.ndim < 2 or Bm.shape[-2 if left else -1] != n:
        raise ValueError(f"linalg.{name}: incompatible shapes of A {tuple(A.shape)} and B "
                         f"{tuple(Bm.shape)}")
    if not left:  # X A = B is A^T X^T = B^T
        A, Bm = transpose(A, -1, -2), transpose(Bm, -1, -2)
    dtype = result_dtype([A.dtype.numpy, Bm.dtype.numpy])
    A, Bm = (t if t.dtype.numpy == dtype else pw.cast(t, dtype) for t in (A, Bm))
    batch = tuple(numpy.broadcast_shapes(tuple(A.shape[:-2]), tuple(Bm.shape[:-2])))
    if tuple(A.shape[:-2]) != batch:
        A = A.expand(*batch, n, n)
    if tuple(Bm.shape[:-2]) != batch:
        Bm = Bm.expand(*batch, *Bm.shape[-2:])
    if A.ndim == 2:
        check_gather(name, [A, Bm], n * n + n * Bm.shape[-1])
    return A, Bm, vector


def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False
             ) -> SolveExResult:
    """:func:`solve` and the ``info`` codes instead of an error (torch's
    ``linalg.solve_ex``): 0 where ``A`` is invertible, > 0 where singular.

    Examples:
        >>> flow.linalg.solve_ex(flow.tensor([[0.0, 0.0], [0.0, 1.0]]),
        ...                      flow.tensor([1.0, 1.0])).info.item() > 0
        True
    """
    A, B, vector = _system("solve_ex", A, B, left)
    x, info = apply_multi(SOLVE_EX, A, B)
    if check_errors:
        agree("solve", info, "The solver failed because the input matrix is singular.")
    if not left:
        x = transpose(x, -1, -2)
    return SolveExResult(squeeze(x, -1 if left else -2) if vector else x, info)


def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """The solution ``X`` of ``A X = B`` (``X A = B`` where not ``left``), torch's
    ``linalg.solve``.

    Args:
        A: ``(*, n, n)``. Split along a batch dim, each rank solves its own systems; a split
            matrix is gathered onto every rank (up to ``GATHER_LIMIT`` elements).
        B: ``(*, n, k)``, or ``(n,)`` / ``(*, n)`` for vectors; batches broadcast.
        left: solve ``A X = B`` (else ``X A = B``).

    Returns:
        ``X``, of ``B``'s shape (the broadcast batch).

    Raises:
        LinAlgError: ``A`` is singular (on every rank).

    Examples:
        >>> flow.linalg.solve(flow.tensor([[2.0, 0.0], [0.0, 4.0]]),
        ...                   flow.tensor([2.0, 2.0])).tolist()
        [1.0, 0.5]
    """
    return solve_ex(A, B, left=left, check_errors=True).result


# -- inv ---------------------------------------------------------------------------------------
def _inv_grad(g: Tensor, operands: Any, out: Tensor, **_: Any) -> tuple[Tensor]:
    """``-X^H g X^H``."""
    xh = mH(out)
    return (pw.neg(matmul(matmul(xh, g), xh)),)


def _with_info(name: str, shape: Shape) -> tuple[Shape, Shape]:
    """A square batch's shape and its batch (one info code per matrix)."""
    square(name, shape)
    return shape, shape[:-2]


INV_EX = OpDef("inv_ex", lambda ctx, a, **_: kernels.inv_ex(a),
               lambda shape, **_: _with_info("inv", shape),
               lambda shape, **_: batch_splits(shape, [True, True]),
               lambda dtype, **_: (dtype, INT32), _inv_grad, outputs=2)


def inv_ex(A: Tensor, *, check_errors: bool = False) -> InvExResult:
    """:func:`inv` and the ``info`` codes instead of an error (torch's ``linalg.inv_ex``).

    Examples:
        >>> flow.linalg.inv_ex(flow.tensor([[2.0]])).inverse.tolist()
        [[0.5]]
    """
    check_floating("inv", A)
    n = square("inv", tuple(A.shape))
    if A.ndim == 2:
        check_gather("inv", [A], n * n)
    x, info = apply_multi(INV_EX, A)
    if check_errors:
        agree("inv", info, "The diagonal element {code} is zero, the inversion could not be "
              "completed because the input matrix is singular.")
    return InvExResult(x, info)


def inv(A: Tensor) -> Tensor:
    """The inverse of square matrices (torch's ``linalg.inv``).

    Args:
        A: ``(*, n, n)``; split along a batch dim it stays so, a split matrix is gathered (up
            to ``GATHER_LIMIT``).

    Raises:
        LinAlgError: a singular matrix (on every rank).

    Examples:
        >>> flow.linalg.inv(flow.tensor([[2.0, 0.0], [0.0, 4.0]])).tolist()
        [[0.5, 0.0], [0.0, 0.25]]
    """
    return inv_ex(A, check_errors=True).inverse


# -- cholesky ----------------------------------------------------------------------------------
def _cholesky_grad_kernel(ctx: Context, factor: Any, g: Any, *, upper: bool) -> Any:
    """``A``'s gradient from the lower factor's ``g``: ``L^-H Phi(L^H g) L^-1`` made
    Hermitian, ``Phi`` the lower triangle with half the diagonal (Murray, 2016)."""
    xp = ctx.xp
    if upper:  # U = L^H: work with L and its gradient g^H
        factor, g = (xp.conj(xp.swapaxes(t, -1, -2)) for t in (factor, g))
    lh = xp.conj(xp.swapaxes(factor, -1, -2))
    phi = xp.tril(kernels.matmul(lh, g))
    diagonal = xp.diagonal(phi, axis1=-2, axis2=-1)
    phi = phi - 0.5 * xp.eye(phi.shape[-1], dtype=phi.dtype) * diagonal[..., None, :]
    # S = L^-H phi L^-1: two triangular solves
    s = kernels.solve_triangular(lh, phi, upper=True)
    s = xp.conj(xp.swapaxes(kernels.solve_triangular(lh, xp.conj(xp.swapaxes(s, -1, -2)),
                                                     upper=True), -1, -2))
    return 0.5 * (s + xp.conj(xp.swapaxes(s, -1, -2)))


CHOLESKY_GRAD = OpDef("cholesky_grad", _cholesky_grad_kernel, lambda f, g, **_: f,
                      lambda f, g, **_: [((Split(d), Split(d)), Split(d))
                                         for d in range(len(f) - 2)])


def _cholesky_grad(g: Tensor, operands: Any, out: Tensor, *, upper: bool, **_: Any
                   ) -> tuple[Tensor]:
    return (apply(CHOLESKY_GRAD, out, g, upper=upper),)


CHOLESKY_EX = OpDef("cholesky_ex", lambda ctx, a, *, upper: kernels.cholesky_ex(a, upper),
                    lambda shape, **_: _with_info("cholesky", shape),
                    lambda shape, **_: batch_splits(shape, [True, True]),
                    lambda dtype, **_: (dtype, INT32), _cholesky_grad, outputs=2)


def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False
                ) -> CholeskyExResult:
    """:func:`cholesky` and the ``info`` codes instead of an error (torch's
    ``linalg.cholesky_ex``): per matrix 0, or the order of the leading minor that is not
    positive-definite.

    Examples:
        >>> flow.linalg.cholesky_ex(flow.tensor([[-1.0]])).info.item()
        1
    """
    check_floating("cholesky", A)
    n = square("cholesky", tuple(A.shape))
    if A.ndim == 2:
        check_gather("cholesky", [A], n * n)
    factor, info = apply_multi(CHOLESKY_EX, A, upper=bool(upper))
    if check_errors:
        agree("cholesky", info, "The factorization could not be completed because the input "
              "is not positive-definite (the leading minor of order {code} is not "
              "positive-definite).")
    return CholeskyExResult(factor, info)


def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    """The Cholesky factor ``L`` (``A = L L^H``) of Hermitian positive-definite matrices
    (torch's ``linalg.cholesky``), from their lower triangle.

    Args:
        A: ``(*, n, n)``; split along a batch dim it stays so, a split matrix is gathered (up
            to ``GATHER_LIMIT``).
        upper: return ``U = L^H`` (``A = U^H U``) instead.

    Raises:
        LinAlgError: a matrix that is not positive-definite (on every rank).

    Examples:
        >>> flow.linalg.cholesky(flow.tensor([[4.0, 2.0], [2.0, 5.0]])).tolist()
        [[2.0, 0.0], [1.0, 2.0]]
    """
    return cholesky_ex(A, upper=upper, check_errors=True).L


# -- determinants ------------------------------------------------------------------------------
def _det_shape(shape: Shape, **_: Any) -> Shape:
    square("det", shape)
    return shape[:-2]


def _inverse_h(a: Tensor) -> Tensor:
    return mH(apply_multi(INV_EX, a)[0])


def _det_grad(g: Tensor, operands: Any, out: Tensor, **_: Any) -> tuple[Tensor]:
    """``g conj(det) A^-H``."""
    scale = pw.mul(g, apply(_conj_op(), out) if out.dtype.numpy.kind == "c" else out)
    return (pw.mul(unsqueeze(unsqueeze(scale, -1), -1), _inverse_h(operands[0])),)


def _conj_op() -> OpDef:
    from .deterministic_sum import CONJ

    return CONJ


DET = OpDef("det", lambda ctx, a, **_: kernels.det(a), _det_shape,
            lambda shape, **_: batch_splits(shape, [True]), lambda dtype, **_: dtype,
            _det_grad)


def _slogdet_grad(g: Tensor, operands: Any, out: Tensor, **_: Any) -> tuple[Tensor]:
    """``g A^-H`` (of ``log|det|``; the sign has no gradient)."""
    a = operands[0]
    gc = pw.cast(g, a.dtype) if g.dtype != a.dtype else g
    return (pw.mul(unsqueeze(unsqueeze(gc, -1), -1), _inverse_h(a)),)


def _slogdet_kernel(ctx: Context, a: Any, **_: Any) -> tuple[Any, Any]:
    sign, logabs = kernels.slogdet(a)
    return logabs, sign


SLOGDET = OpDef("slogdet", _slogdet_kernel, lambda shape, **_: _det_shape(shape),
                lambda shape, **_: batch_splits(shape, [True]),  # one layout for both
                lambda dtype, **_: (real_dtype(dtype), dtype), _slogdet_grad, outputs=2)


def _square_input(name: str, A: Tensor) -> None:
    check_floating(name, A)
    n = square(name, tuple(A.shape))
    if A.ndim == 2:
        check_gather(name, [A], n * n)


def det(A: Tensor) -> Tensor:
    """The determinants of square matrices (torch's ``linalg.det``), by LU.

    Examples:
        >>> round(flow.linalg.det(flow.tensor([[1.0, 2.0], [3.0, 4.0]])).item(), 5)
        -2.0
    """
    _square_input("det", A)
    return apply(DET, A)


def slogdet(A: Tensor) -> SlogdetResult:
    """The sign (a unit complex number for complex input) and the log of the absolute value
    of the determinant (torch's ``linalg.slogdet``): ``(0, -inf)`` where singular.

    Examples:
        >>> sign, logabsdet = flow.linalg.slogdet(flow.tensor([[-2.0, 0.0], [0.0, 3.0]]))
        >>> sign.item(), round(logabsdet.item(), 6)
        (-1.0, 1.791759)
    """
    _square_input("slogdet", A)
    logabs, sign = apply_multi(SLOGDET, A)
    return SlogdetResult(sign, logabs)


# -- least squares -----------------------------------------------------------------------------
_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _lstsq_shape(a: Shape, b: Shape, *, driver: str, **_: Any
                 ) -> tuple[Shape, Shape, Shape, Shape]:
    m, n = matrix_shape("lstsq", a)
    if len(b) != len(a) or b[:-2] != a[:-2] or b[-2] != m:
        raise ValueError(f"linalg.lstsq: incompatible shapes of A {a} and B {b}")
    batch, k = a[:-2], b[-1]
    return ((*batch, n, k),
            (*batch, k) if driver != "gelsy" and m > n else (0,),
            batch if driver != "gels" else (0,),
            (*batch, min(m, n)) if driver in ("gelsd", "gelss") else (0,))


def _lstsq_layouts(a: Shape, b: Shape, *, driver: str, **_: Any) -> list[Signature]:
    shapes = _lstsq_shape(a, b, driver=driver)
    return [((Split(d), Split(d)), tuple(Split(d) if s != (0,) else B for s in shapes))
            for d in range(len(a) - 2)]


def _lstsq_collective(a: Shape, b: Shape, **_: Any) -> list[Signature]:
    m, n = a[-2:]
    if m < n or (n + b[-1]) ** 2 > GATHER_LIMIT:
        return []
    rows = Split(len(a) - 2)
    return [((rows, rows), (B, B, B, B))]


def _from_r(xp: Any, r: Any, n: int, rcond: float) -> tuple[Any, Any, Any, Any]:
    """From ``R`` of ``[A | B]`` (batched): the minimum-norm solutions, the residuals, the
    ranks and the singular values of ``A`` (``R``'s blocks: ``R_A x = (Q^H B)_1``, the
    residuals the squared column norms of the block below)."""
    batch = r.shape[:-2]
    if r.shape[-2] < r.shape[-1]:  # fewer rows than n + k: R's missing rows are zero
        pad = xp.zeros((*batch, r.shape[-1] - r.shape[-2], r.shape[-1]), dtype=r.dtype)
        r = xp.concatenate([r, pad], axis=-2)
    solution, rank, sv = _small(xp, r[..., :n, :n], r[..., :n, n:], rcond)
    residuals = xp.sum(xp.abs(r[..., n:, n:]) ** 2, axis=-2)
    return solution, residuals, rank, sv


def _small(xp: Any, a: Any, b: Any, rcond: float) -> tuple[Any, Any, Any]:
    """:func:`~mpiflow.algorithms.kernels.lstsq` of each matrix of a batch."""
    batch = a.shape[:-2]
    k = min(a.shape[-2:])
    if math.prod(batch) == 0:  # a rank's empty part of a split batch
        real = real_dtype(a.dtype)
        return (xp.zeros((*batch, a.shape[-1], b.shape[-1]), dtype=a.dtype),
                xp.zeros(batch, dtype=numpy.int64), xp.zeros((*batch, k), dtype=real))
    xs, ranks, svs = [], [], []
    for i in numpy.ndindex(*batch):
        x, rank, s = kernels.lstsq(a[i], b[i], rcond)
        xs.append(x)
        ranks.append(rank)
        svs.append(s)
    solution = xp.stack(xs).reshape(*batch, a.shape[-1], b.shape[-1])
    rank_array = xp.asarray(numpy.array(ranks, numpy.int64).reshape(batch))
    return solution, rank_array, xp.stack(svs).reshape(*batch, k)


def _lstsq_kernel(ctx: Context, a: Any, b: Any, *, driver: str, rcond: float
                  ) -> tuple[Any, ...]:
    xp = ctx.xp
    n = a.shape[-1]
    if ctx.comm is not None:  # rows split: TSQR of [A | B], the small solve on the root
        f = tsqr(xp.concatenate([a, b], axis=-1), ctx.comm, q=False)
        parts = _from_r(xp, f.r, n, rcond) if ctx.comm.rank == 0 else None
        batch, k = f.r.shape[:-2], b.shape[-1]
        real = real_dtype(a.dtype)
        kinds = [((*batch, n, k), a.dtype), ((*batch, k), real),
                 (batch, numpy.dtype(numpy.int64)), ((*batch, n), real)]
        outs = [from_root(ctx.comm, xp, None if parts is None else parts[j], shape, dtype)
                for j, (shape, dtype) in enumerate(kinds)]
    elif a.shape[-2] >= n:  # whole tall matrices: the same from a local QR
        r = kernels.qr(xp.concatenate([a, b], axis=-1), "r")[1]
        outs = list(_from_r(xp, r, n, rcond))
    else:  # wide: the minimum-norm solutions by the SVD, no residuals
        solution, rank, sv = _small(xp, a, b, rcond)
        outs = [solution, None, rank, sv]
    shapes: Any = ctx.out_shape  # one per output
    dtypes: Any = ctx.out_dtype
    return tuple(o if shape != (0,) and o is not None else xp.empty((0,), dtype=dt)
                 for o, shape, dt in zip(outs, shapes, dtypes))


LSTSQ = OpDef("lstsq", _lstsq_kernel, _lstsq_shape, _lstsq_layouts,
              lambda da, db, **_: (da, real_dtype(da), numpy.dtype(numpy.int64),
                                   real_dtype(da)),
              collective=_lstsq_collective, outputs=4)


def lstsq(A: Tensor, B: Tensor, rcond: float | None = None, *, driver: str | None = None
          ) -> LstsqResult:
    """The least-squares solutions of ``A X = B`` (torch's ``linalg.lstsq``), of minimum
    norm where ``A`` is rank-deficient.

    Args:
        A: ``(*, m, n)``. A tall one (``m >= n``) split by rows stays distributed: TSQR of
            ``[A | B]`` (``B`` split by rows too; no ``Q`` is formed).
        B: ``(*, m, k)`` or ``(m,)``.
        rcond: singular values of ``A`` below ``rcond`` times the largest count as zero
            (default: machine epsilon times ``max(m, n)``, torch's).
        driver: which of torch's fields are filled (the computation is the same, an SVD of
            the small ``R``): ``"gelsy"`` (default) the rank; ``"gels"`` the residuals;
            ``"gelsd"`` and ``"gelss"`` both and the singular values. The others are
            empty tensors, as torch's.

    Returns:
        ``(solution (*, n, k), residuals (*, k), rank (*), singular_values (*, min(m, n)))``,
        on every rank (split like a split batch dim). Residuals (``|A X - B|^2`` per column)
        exist where ``m > n``, also for a rank-deficient ``A`` (where torch leaves them
        empty).

    Examples:
        >>> A = flow.tensor([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]], dtype=flow.float64)
        >>> b = flow.tensor([[1.0], [2.0], [3.0]], dtype=flow.float64)
        >>> x = flow.linalg.lstsq(A, b).solution
        >>> [round(v, 9) for v in x.reshape(-1).tolist()]
        [1.0, 1.0]
    """
    driver = "gelsy" if driver is None else driver
    if driver not in _DRIVERS:
        raise ValueError(f"linalg.lstsq: driver must be one of {_DRIVERS}, got {driver!r}")
    check_floating("lstsq", A, B)
    m, n = matrix_shape("lstsq", tuple(A.shape))
    vector = B.ndim == 1
    if vector:
        B = unsqueeze(B, -1)
    dtype = result_dtype([A.dtype.numpy, B.dtype.numpy])
    A, B = (t if t.dtype.numpy == dtype else pw.cast(t, dtype) for t in (A, B))
    if A.ndim == 2 and (m < n or (n + B.shape[-1]) ** 2 > GATHER_LIMIT):
        check_gather("lstsq", [A, B], m * (n + B.shape[-1]))
    if rcond is None:
        rcond = float(numpy.finfo(real_dtype(dtype)).eps) * max(m, n)
    x, res, rank, sv = apply_multi(LSTSQ, A, B, driver=driver, rcond=float(rcond))
    return LstsqResult(squeeze(x, -1) if vector else x, res, rank, sv)
