"""Orthogonal factorizations: ``qr``, ``svd``, ``svdvals``, ``eigh``, ``eigvalsh``.

Layout rules, per mesh axis (``A`` is ``(*, m, n)``):

- a batch dim split: each rank factors its own matrices, every result split the same way;
- ``qr``: a tall ``A`` (``m >= n``) split by rows, ``mode`` ``"reduced"`` or ``"r"``: TSQR, a
  collective signature ``S(-2) -> (S(-2), B)``: ``Q`` stays split by rows like ``A``, ``R``
  (``n x n``) is on every rank;
- ``svd`` (``full_matrices=False``, or square) and ``svdvals``: a tall ``A`` split by rows:
  TSQR, then the SVD of ``R`` on the root, ``U = Q @ U_R`` applied down the tree (``S(-2) ->
  (S(-2), B, B)``); a wide ``A`` (``m < n``) split by columns, the same on ``A^H``
  (``S(-1) -> (B, B, S(-1))``); ``svdvals`` gives ``S`` on every rank;
- otherwise (``eigh`` of a split matrix, ``mode="complete"``, ``full_matrices=True`` of a
  non-square one) the matrix is gathered, up to :data:`~.linalg_rules.GATHER_LIMIT`.

Signs: ``R``'s diagonal is real and non-negative (the columns of ``Q`` follow), which makes
the QR of a full-rank matrix unique; of each singular pair, the largest entry of the right
singular vector (of the left one where ``m < n``) is real and positive. The results are then
the same, to rounding, at every rank count and layout (torch leaves these signs to LAPACK).

Gradients: ``svdvals`` (``U diag(g) V^H``) and ``eigvalsh`` (``V diag(g) V^H``, symmetric as
torch's); ``qr``, ``svd`` and ``eigh`` have none (their second outputs would carry none).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..algorithms import kernels
from ..algorithms.tsqr import normalize_qr, tsqr
from ..layouts.sbp import Split
from ..tensors.tensor import Tensor
from . import pointwise as pw
from .deterministic_sum import CONJ
from .engine import B, Context, OpDef, Signature, apply, apply_multi
from .linalg import matmul
from .linalg_rules import (
    GATHER_LIMIT,
    batch_splits,
    check_floating,
    check_gather,
    from_root,
    matrix_shape,
    real_dtype,
    square,
)
from .shape import transpose, unsqueeze

__all__ = ["EIGH", "EIGVALSH", "QR", "SVD", "SVDVALS", "EighResult", "QRResult", "SVDResult",
           "eigh", "eigvalsh", "mH", "normalize_svd", "qr", "svd", "svdvals"]

Shape = tuple[int, ...]
_MODES = ("reduced", "complete", "r")


class QRResult(NamedTuple):
    """``(Q, R)``, as torch's ``linalg_qr``."""

    Q: Tensor
    R: Tensor


class SVDResult(NamedTuple):
    """``(U, S, Vh)``, as torch's ``linalg_svd``."""

    U: Tensor
    S: Tensor
    Vh: Tensor


class EighResult(NamedTuple):
    """``(eigenvalues, eigenvectors)``, as torch's ``linalg_eigh``."""

    eigenvalues: Tensor
    eigenvectors: Tensor


def mH(t: Tensor) -> Tensor:
    """The conjugate transpose of the last two dims (torch's ``Tensor.mH``)."""
    out = transpose(t, -1, -2)
    return apply(CONJ, out) if out.dtype.numpy.kind == "c" else out


def _tall_path(m: int, n: int) -> bool:
    """Whether a row-split matrix is factored by TSQR: tall, and its ``R`` not too big."""
    return m >= n and n * n <= GATHER_LIMIT


def _wide_path(m: int, n: int) -> bool:
    """Whether a column-split matrix is factored by TSQR of its transpose."""
    return m < n and m * m <= GATHER_LIMIT


# -- QR ----------------------------------------------------------------------------------------
def _qr_shape(shape: Shape, *, mode: str) -> tuple[Shape, Shape]:
    m, n = matrix_shape("qr", shape)
    batch, k = shape[:-2], min(m, n)
    if mode == "r":
        return (0,), (*batch, k, n)
    if mode == "complete":
        return (*batch, m, m), (*batch, m, n)
    return (*batch, m, k), (*batch, k, n)


def _qr_layouts(shape: Shape, *, mode: str) -> list[Signature]:
    return batch_splits(shape, [mode != "r", True])


def _qr_collective(shape: Shape, *, mode: str) -> list[Signature]:
    m, n = shape[-2:]
    if mode == "complete" or not _tall_path(m, n):
        return []
    rows = Split(len(shape) - 2)
    return [((rows,), (B if mode == "r" else rows, B))]


def _qr_kernel(ctx: Context, a: Any, *, mode: str) -> tuple[Any, Any]:
    xp = ctx.xp
    if ctx.comm is None:
        q, r = kernels.qr(a, mode)
        return normalize_qr(q, r)
    f = tsqr(a, ctx.comm, q=mode != "r")
    return (xp.empty((0,), dtype=a.dtype) if mode == "r" else f.q()), f.r


QR = OpDef("qr", _qr_kernel, _qr_shape, _qr_layouts, lambda dtype, **_: (dtype, dtype),
           collective=_qr_collective, outputs=2)


def qr(A: Tensor, mode: str = "reduced") -> QRResult:
    """The QR factorization ``A = Q R`` of a batch of matrices (torch's ``linalg.qr``).

    Args:
        A: ``(*, m, n)``, floating or complex. Split by rows with ``m >= n`` (tall-skinny,
            the common case in data analysis) it stays distributed: TSQR.
        mode: ``"reduced"`` (``Q (*, m, k)``, ``R (*, k, n)``, ``k = min(m, n)``),
            ``"complete"`` (``Q (*, m, m)``: gathered where ``A`` is split) or ``"r"`` (``R``
            only; ``Q`` is an empty tensor).

    Returns:
        ``(Q, R)``: ``Q`` with orthonormal columns split like ``A``'s rows, ``R`` upper
        triangular with a real non-negative diagonal, on every rank.

    Raises:
        ValueError: a bad mode or shape, or a split matrix that would be gathered beyond
            ``GATHER_LIMIT``.

    Examples:
        >>> Q, R = flow.linalg.qr(flow.tensor([[3.0, 1.0], [4.0, 2.0]], dtype=flow.float64))
        >>> [[round(v, 12) for v in row] for row in R.tolist()]
        [[5.0, 2.2], [0.0, 0.4]]
    """
    if mode not in _MODES:
        raise ValueError(f"linalg.qr: mode must be one of {_MODES}, got {mode!r}")
    check_floating("qr", A)
    m, n = matrix_shape("qr", tuple(A.shape))
    if A.ndim == 2 and (mode == "complete" or not _tall_path(m, n)):
        check_gather("qr", [A], max(m * n, m * m if mode == "complete" else 0),
                     "mode='reduced' keeps Q split by rows")
    q, r = apply_multi(QR, A, mode=mode)
    return QRResult(q, r)


# -- SVD ---------------------------------------------------------------------------------------
def normalize_svd(xp: Any, u: Any, s: Any, vh: Any, by_u: bool) -> tuple[Any, Any, Any]:
    """The SVD with each singular pair's sign fixed: the largest entry (the first of equal
    ones) of each right singular vector (row of ``vh``), or of each left one (column of
    ``u``) where ``by_u``, real and positive.

    Examples:
        >>> u, s, vh = normalize_svd(numpy, -numpy.eye(2), numpy.ones(2), -numpy.eye(2), False)
        >>> u.tolist(), vh.tolist()
        ([[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]])
    """
    k = s.shape[-1]
    vectors = xp.swapaxes(u[..., :, :k], -1, -2) if by_u else vh[..., :k, :]
    if k == 0 or vectors.shape[-1] == 0 or vectors.size == 0:
        return u, s, vh  # no singular pair (an empty matrix): no sign to fix
    at = xp.argmax(xp.abs(vectors), axis=-1)
    pick = xp.take_along_axis(vectors, at[..., None], axis=-1)[..., 0]
    size = xp.abs(pick)
    phase = xp.where(size == 0, 1, pick / xp.where(size == 0, 1, size))
    if by_u:  # u[:, i] / phase_i, vh[i] * phase_i
        phase = xp.conj(phase)
    u = u.copy()
    vh = vh.copy()
    u[..., :, :k] = u[..., :, :k] * phase[..., None, :]
    vh[..., :k, :] = vh[..., :k, :] * xp.conj(phase)[..., :, None]
    return u, s, vh


def _svd_shape(shape: Shape, *, full_matrices: bool) -> tuple[Shape, Shape, Shape]:
    m, n = matrix_shape("svd", shape)
    batch, k = shape[:-2], min(m, n)
    if full_matrices:
        return (*batch, m, m), (*batch, k), (*batch, n, n)
    return (*batch, m, k), (*batch, k), (*batch, k, n)


def _svd_layouts(shape: Shape, **_: Any) -> list[Signature]:
    return batch_splits(shape, [True, True, True])


def _svd_collective(shape: Shape, *, full_matrices: bool) -> list[Signature]:
    m, n = shape[-2:]
    if full_matrices and m != n:
        return []
    rows, cols = Split(len(shape) - 2), Split(len(shape) - 1)
    if _tall_path(m, n):
        return [((rows,), (rows, B, B))]
    if _wide_path(m, n):
        return [((cols,), (B, B, cols))]
    return []


def _svd_kernel(ctx: Context, a: Any, *, full_matrices: bool) -> tuple[Any, Any, Any]:
    xp = ctx.xp
    shapes: Any = ctx.global_shape  # (U's, S's, Vh's)
    m, n = shapes[0][-2], shapes[2][-1]
    if ctx.comm is None:
        u, s, vh = kernels.svd(a, full_matrices)
        return normalize_svd(xp, u, s, vh, by_u=m < n)
    comm, batch = ctx.comm, a.shape[:-2]
    sdt = real_dtype(a.dtype)
    if m >= n:  # tall: A = Q R, R = U_R S Vh
        f = tsqr(a, comm)
        u_r = vh = s = None
        if comm.rank == 0:
            u_r, s, vh = kernels.svd(f.r, False)
            u_r, s, vh = normalize_svd(xp, u_r, s, vh, by_u=False)
        s = from_root(comm, xp, s, (*batch, n), sdt)
        vh = from_root(comm, xp, vh, (*batch, n, n), a.dtype)
        return f.q(u_r, columns=n), s, vh
    # wide: A^H = Q R, so A = R^H Q^H; R^H = U S W gives Vh = W Q^H, i.e. Vh^H = Q W^H
    f = tsqr(xp.conj(xp.swapaxes(a, -1, -2)), comm)
    u = w = s = None
    if comm.rank == 0:
        u, s, w = kernels.svd(xp.conj(xp.swapaxes(f.r, -1, -2)), False)
        u, s, w = normalize_svd(xp, u, s, w, by_u=True)
    u = from_root(comm, xp, u, (*batch, m, m), a.dtype)
    s = from_root(comm, xp, s, (*batch, m), sdt)
    w_h = None if w is None else xp.conj(xp.swapaxes(w, -1, -2))
    vh_local = xp.conj(xp.swapaxes(f.q(w_h, columns=m), -1, -2))
    return u, s, xp.ascontiguousarray(vh_local)


SVD = OpDef("svd", _svd_kernel, _svd_shape, _svd_layouts,
            lambda dtype, **_: (dtype, real_dtype(dtype), dtype),
            collective=_svd_collective, outputs=3)


def svd(A: Tensor, full_matrices: bool = True) -> SVDResult:
    """The singular value decomposition ``A = U diag(S) Vh`` (torch's ``linalg.svd``).

    Args:
        A: ``(*, m, n)``, floating or complex. A tall one split by rows (or a wide one split
            by columns) stays distributed with ``full_matrices=False``: TSQR, then the SVD
            of the small ``R``.
        full_matrices: ``U (*, m, m)`` and ``Vh (*, n, n)`` (torch's default; the matrix is
            then gathered unless square), else ``U (*, m, k)``, ``Vh (*, k, n)``,
            ``k = min(m, n)``.

    Returns:
        ``(U, S, Vh)``, ``S`` descending and real. Of a tall row-split ``A``: ``U`` split by
        rows, ``S`` and ``Vh`` on every rank; of a wide column-split one: ``Vh`` split by
        columns, ``U`` and ``S`` on every rank.

    Raises:
        ValueError: a split matrix that would be gathered beyond ``GATHER_LIMIT``.

    Examples:
        >>> U, S, Vh = flow.linalg.svd(flow.tensor([[3.0, 0.0], [0.0, -4.0]]))
        >>> S.tolist()
        [4.0, 3.0]
    """
    check_floating("svd", A)
    m, n = matrix_shape("svd", tuple(A.shape))
    if A.ndim == 2:
        distributed = (not full_matrices or m == n) and (_tall_path(m, n) or _wide_path(m, n))
        if not distributed:
            check_gather("svd", [A], max(m * n, m * m, n * n) if full_matrices else m * n,
                         "full_matrices=False keeps U (Vh) split")
    u, s, vh = apply_multi(SVD, A, full_matrices=bool(full_matrices))
    return SVDResult(u, s, vh)


def _svdvals_shape(shape: Shape, **_: Any) -> Shape:
    m, n = matrix_shape("svdvals", shape)
    return (*shape[:-2], min(m, n))


def _svdvals_layouts(shape: Shape, **_: Any) -> list[Signature]:
    return batch_splits(shape, [True])


def _svdvals_collective(shape: Shape, *, tall: bool) -> list[Signature]:
    m, n = shape[-2:]
    if tall and _tall_path(m, n):
        return [((Split(len(shape) - 2),), B)]
    if not tall and _wide_path(m, n):
        return [((Split(len(shape) - 1),), B)]
    return []


def _svdvals_kernel(ctx: Context, a: Any, *, tall: bool) -> Any:
    """``tall`` (``m >= n``, which the public function passes) says which collective
    signature runs: rows split, or columns split (the shards' shapes cannot tell)."""
    xp = ctx.xp
    if ctx.comm is None:
        return kernels.svd(a, compute_uv=False)
    f = tsqr(a if tall else xp.conj(xp.swapaxes(a, -1, -2)), ctx.comm, q=False)
    s = kernels.svd(f.r, compute_uv=False) if ctx.comm.rank == 0 else None
    return from_root(ctx.comm, xp, s, ctx.out_shape, real_dtype(a.dtype))


def _svdvals_grad(g: Tensor, operands: Any, out: Tensor, **_: Any) -> tuple[Tensor]:
    """``U diag(g) Vh``."""
    u, _s, vh = apply_multi(SVD, operands[0], full_matrices=False)
    scaled = pw.mul(u, unsqueeze(pw.cast(g, u.dtype) if u.dtype != g.dtype else g, -2))
    return (matmul(scaled, vh),)


SVDVALS = OpDef("svdvals", _svdvals_kernel, _svdvals_shape, _svdvals_layouts,
                lambda dtype, **_: real_dtype(dtype), _svdvals_grad,
                collective=_svdvals_collective)


def svdvals(A: Tensor) -> Tensor:
    """The singular values of a batch of matrices, descending (torch's ``linalg.svdvals``).

    Args:
        A: ``(*, m, n)``; a tall one split by rows (a wide one split by columns) stays
            distributed: only TSQR's ``R`` is computed, no ``Q``.

    Returns:
        ``(*, min(m, n))``, real, on every rank (split like a split batch dim).

    Examples:
        >>> flow.linalg.svdvals(flow.tensor([[0.0, 2.0], [1.0, 0.0]])).tolist()
        [2.0, 1.0]
    """
    check_floating("svdvals", A)
    m, n = matrix_shape("svdvals", tuple(A.shape))
    if A.ndim == 2 and not (_tall_path(m, n) or _wide_path(m, n)):
        check_gather("svdvals", [A], m * n)
    return apply(SVDVALS, A, tall=m >= n)


# -- eigh --------------------------------------------------------------------------------------
def _eigh_shape(shape: Shape, **_: Any) -> tuple[Shape, Shape]:
    n = square("eigh", shape)
    return (*shape[:-2], n), shape


def _eigh_kernel(ctx: Context, a: Any, *, UPLO: str) -> tuple[Any, Any]:
    w, v = kernels.eigh(a, upper=UPLO == "U")
    return w, v


EIGH = OpDef("eigh", _eigh_kernel, _eigh_shape,
             lambda shape, **_: batch_splits(shape, [True, True]),
             lambda dtype, **_: (real_dtype(dtype), dtype), outputs=2)


def _eigvalsh_kernel(ctx: Context, a: Any, *, UPLO: str) -> Any:
    return kernels.eigh(a, upper=UPLO == "U", eigenvectors=False)


def _eigvalsh_grad(g: Tensor, operands: Any, out: Tensor, *, UPLO: str) -> tuple[Tensor]:
    """``V diag(g) V^H`` (symmetric, as torch's)."""
    _, v = apply_multi(EIGH, operands[0], UPLO=UPLO)
    gv = pw.cast(g, v.dtype) if v.dtype != g.dtype else g
    return (matmul(pw.mul(v, unsqueeze(gv, -2)), mH(v)),)


EIGVALSH = OpDef("eigvalsh", _eigvalsh_kernel, lambda shape, **_: _eigh_shape(shape)[0],
                 lambda shape, **_: batch_splits(shape, [True]),
                 lambda dtype, **_: real_dtype(dtype), _eigvalsh_grad)


def _check_uplo(name: str, A: Tensor, UPLO: str) -> None:
    if UPLO not in ("L", "U"):
        raise ValueError(f"linalg.{name}: UPLO must be 'L' or 'U', got {UPLO!r}")
    check_floating(name, A)
    n = square(name, tuple(A.shape))
    if A.ndim == 2:
        check_gather(name, [A], n * n, "a Gram matrix A^T A of a tall split A is small: "
                     "eigh(A.mT @ A)")


def eigh(A: Tensor, UPLO: str = "L") -> EighResult:
    """Eigenvalues (ascending) and eigenvectors of Hermitian matrices (torch's
    ``linalg.eigh``), read from one triangle.

    Args:
        A: ``(*, n, n)``. Split along a batch dim it stays so; a split matrix is gathered (up
            to ``GATHER_LIMIT``).
        UPLO: ``"L"`` (the lower triangle) or ``"U"``.

    Returns:
        ``(eigenvalues (*, n), eigenvectors (*, n, n))``, the eigenvectors in the columns.

    Examples:
        >>> w, V = flow.linalg.eigh(flow.tensor([[2.0, 1.0], [1.0, 2.0]]))
        >>> w.tolist()
        [1.0, 3.0]
    """
    _check_uplo("eigh", A, UPLO)
    w, v = apply_multi(EIGH, A, UPLO=UPLO)
    return EighResult(w, v)


def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:
    """The eigenvalues of Hermitian matrices, ascending (torch's ``linalg.eigvalsh``).

    Examples:
        >>> flow.linalg.eigvalsh(flow.tensor([[2.0, 0.0], [0.0, 1.0]])).tolist()
        [1.0, 2.0]
    """
    _check_uplo("eigvalsh", A, UPLO)
    return apply(EIGVALSH, A, UPLO=UPLO)

