"""Local dense kernels (GEMM and LAPACK factorizations), from the fastest library at hand.

Every linear-algebra op and algorithm of mpiflow calls these on this rank's arrays. Which
library runs each family of kernels is chosen once per process, by a rule that gives the same
choice on every rank (a replicated result must have the same bits everywhere, so the choice
may not depend on timings), and ``python -m mpiflow info`` reports it (:func:`describe`).
The rule (:data:`DEFAULTS`) is what the science suite's kernel table measured here (AMD EPYC,
one thread per rank; ``docs/benchmarks/science.md``):

- ``qr``, and ``svd`` of a matrix at least twice as tall as wide (or wide as tall): PyTorch's
  LAPACK (MKL), on the same memory (``torch.from_numpy``, no copy), when torch is
  importable: the QR of a tall 200000 x 64 matrix about 3x faster than numpy's (whose
  ``orgqr`` is slow; its R alone 1.5x), its singular values about 3x (the SVD of a square
  matrix stays with numpy, which was faster);
- ``gemm``, ``lu`` (solve, inverse, determinants), ``cholesky``, ``eigh``: numpy's OpenBLAS,
  which MKL did not beat on this CPU (GEMM even for float32, 25-40% slower for float64; LU,
  Cholesky and eigh 10-30% slower). On a CPU where MKL is faster, ``MPIFLOW_KERNELS=torch``
  gives torch every family but GEMM, and ``MPIFLOW_GEMM=torch`` GEMM too (products below
  :data:`GEMM_MIN_FLOPS` always stay with numpy: torch's call costs microseconds more).

Arrays of fewer than :data:`TORCH_MIN_ELEMENTS` elements always run numpy, and torch is
imported only when a kernel first gives it an array that large: a program (or a test job) whose
matrices are small never pays torch's import, about 2 s per process. The rule depends on the
family and the shapes alone, so a replicated matrix gets the same library on every rank.

``MPIFLOW_KERNELS=numpy`` makes numpy run everything. The results agree with numpy's to
rounding: a product within ``k * eps * |A| |B|`` elementwise, a factorization within its
backward error (``eps * |A|`` times a small multiple of the size); factors whose signs are
not unique (the columns of Q, singular and eigen vectors) are normalised by the ops.

**Threads.** The BLAS/LAPACK threads are the user's to ask for: torch's kernels run with
``MPIFLOW_KERNEL_THREADS`` threads, else ``OMP_NUM_THREADS`` (which ``mpiflow.launch`` sets to
the cores per rank), else one, so that ranks sharing a node do not oversubscribe its cores.
torch's own setting is restored after each call, so a program's torch code is not affected.

CuPy arrays go to CuPy's own ``linalg`` (cuBLAS, cuSOLVER).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import importlib.util
import math
import os
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy

from ..core import settings
from ..core.array_module import array_module

__all__ = ["DEFAULTS", "FAMILIES", "GEMM_ENV", "GEMM_MIN_FLOPS", "KERNELS_ENV",
           "TORCH_MIN_ELEMENTS", "cholesky_ex", "choose_again", "describe", "det", "eigh",
           "inv_ex", "library", "lstsq", "matmul", "qr", "slogdet", "solve_ex",
           "solve_triangular", "svd", "threads"]

KERNELS_ENV = "MPIFLOW_KERNELS"
"""``numpy`` or ``torch``: the library of every factorization family (default: DEFAULTS)."""
GEMM_ENV = "MPIFLOW_GEMM"
THREADS_ENV = "MPIFLOW_KERNEL_THREADS"
GEMM_MIN_FLOPS = 1 << 24
"""Products of fewer multiply-adds than this (256^3) always run in numpy."""
TORCH_MIN_ELEMENTS = 1 << 15
"""Factorizations of fewer elements than this (a 512 x 64 matrix) always run in numpy: they
take microseconds to a millisecond, less than torch's import or its per-call overhead."""

_FLOATING = frozenset("fc")
_torch: ModuleType | None = None
_choice: dict[str, str] | None = None


FAMILIES = ("gemm", "qr", "svd", "eigh", "lu", "cholesky")
DEFAULTS = {"gemm": "numpy", "qr": "torch", "svd": "torch", "eigh": "numpy", "lu": "numpy",
            "cholesky": "numpy"}
"""Each family's library where torch is importable and nothing is asked for."""


def _choose() -> dict[str, str]:
    """The library of each kernel family, chosen once (the same on every rank)."""
    global _choice
    if _choice is not None:
        return _choice
    # "auto" (the default) keeps DEFAULTS
    wanted = settings.read(KERNELS_ENV).replace("auto", "")
    gemm = settings.read(GEMM_ENV).replace("auto", "")
    choice = dict(DEFAULTS)
    if wanted:
        choice.update({f: wanted for f in FAMILIES if f != "gemm"})
    if gemm:
        choice["gemm"] = gemm
    elif wanted == "numpy":
        choice["gemm"] = "numpy"
    # torch is imported at its first use (:func:`_load_torch`), not here
    found = "torch" in choice.values() and importlib.util.find_spec("torch") is not None
    _choice = {f: lib if found else "numpy" for f, lib in choice.items()}
    return _choice


def _load_torch() -> bool:
    """Import torch for its first kernel; where that fails, numpy runs every family."""
    global _torch, _choice
    if _torch is not None:
        return True
    try:
        _torch = importlib.import_module("torch")
    except Exception:  # broken: numpy runs everything from now on
        _choice = {f: "numpy" for f in FAMILIES}
        return False
    return True


def choose_again() -> None:
    """Forget the choice: the next kernel call chooses again from the environment (for
    benchmarks and tests that compare the libraries; every rank must call it alike).

    Examples:
        >>> choose_again(); library("gemm") in ("numpy", "torch")
        True
    """
    global _choice
    _choice = None


def library(family: str) -> str:
    """``"torch"`` or ``"numpy"``: which library runs ``family`` (one of :data:`FAMILIES`)
    on numpy arrays in this process.

    Examples:
        >>> library("gemm") in ("numpy", "torch")
        True
    """
    return _choose()[family]


def threads() -> int:
    """The threads torch's kernels run with: ``MPIFLOW_KERNEL_THREADS``, else
    ``OMP_NUM_THREADS``, else 1.

    Examples:
        >>> threads() >= 1
        True
    """
    asked = settings.read(THREADS_ENV)
    if asked is not None:
        return int(asked)
    value = os.environ.get("OMP_NUM_THREADS", "").strip()  # the OpenMP standard's, not ours
    return int(value) if value.isdigit() and int(value) > 0 else 1


def describe() -> str:
    """One line for ``python -m mpiflow info``: each family's library and the threads.

    Examples:
        >>> "qr " in describe()
        True
    """
    choice = _choose()
    names = ", ".join(f"{f} {choice[f]}" for f in FAMILIES)
    versions = f"numpy {numpy.__version__}"
    if "torch" in choice.values():
        try:
            versions += f", torch {importlib.metadata.version('torch')}"
        except importlib.metadata.PackageNotFoundError:
            versions += ", torch ?"
    return f"{names} ({versions}); {threads()} thread(s) per rank"


@contextlib.contextmanager
def _torch_threads() -> Iterator[ModuleType]:
    torch = _torch
    assert torch is not None
    want, now = threads(), torch.get_num_threads()
    if want == now:
        yield torch
        return
    torch.set_num_threads(want)
    try:
        yield torch
    finally:
        torch.set_num_threads(now)


def _torch_ok(family: str, *arrays: Any) -> bool:
    """Whether torch runs ``family`` on these arrays: numpy floating arrays it can share."""
    if _choose()[family] != "torch":
        return False
    if family != "gemm" and sum(getattr(a, "size", 0) for a in arrays) < TORCH_MIN_ELEMENTS:
        return False
    dtype = arrays[0].dtype
    for a in arrays:
        if type(a) is not numpy.ndarray or a.dtype != dtype or a.dtype.kind not in _FLOATING:
            return False
        if not a.flags.writeable or any(s < 0 for s in a.strides):
            return False  # torch.from_numpy refuses negative strides, warns on read-only
    return _load_torch()


def _t(a: numpy.ndarray) -> Any:
    assert _torch is not None
    return _torch.from_numpy(a)


def _np(t: Any) -> numpy.ndarray:
    return t.numpy() if not t.is_conj() else t.resolve_conj().numpy()


# -- GEMM --------------------------------------------------------------------------------------
def matmul(a: Any, b: Any) -> Any:
    """``a @ b`` with numpy's semantics (1-D operands, broadcast batches).

    Examples:
        >>> matmul(numpy.ones((2, 3)), numpy.ones(3)).tolist()
        [3.0, 3.0]
    """
    if (a.ndim >= 2 and b.ndim >= 2 and _torch_ok("gemm", a, b)
            and math.prod(a.shape) * b.shape[-1] >= GEMM_MIN_FLOPS):
        with _torch_threads() as torch:
            return torch.matmul(_t(a), _t(b)).numpy()
    return array_module(a).matmul(a, b)


# -- factorizations ------------------------------------------------------------------------------
def qr(a: Any, mode: str = "reduced") -> tuple[Any, Any]:
    """``(Q, R)`` of a batch of matrices ``(*, m, n)``; ``mode`` ``"reduced"``, ``"complete"``
    or ``"r"`` (Q then an empty array), as ``torch.linalg.qr``.

    Examples:
        >>> q, r = qr(numpy.array([[3.0], [4.0]]))
        >>> float(abs(r[0, 0]))
        5.0
    """
    if _torch_ok("qr", a):
        with _torch_threads() as torch:
            q, r = torch.linalg.qr(_t(a), mode=mode)
            return _np(q), _np(r)
    xp = array_module(a)
    if mode == "r":
        if a.ndim == 2:  # numpy's "r" is upper-triangular only for 2-D input
            return xp.empty((0,), dtype=a.dtype), xp.linalg.qr(a, mode="r")
        return xp.empty((0,), dtype=a.dtype), xp.linalg.qr(a, mode="reduced")[1]
    q, r = xp.linalg.qr(a, mode=mode)
    return q, r


def _elongated(a: Any) -> bool:
    """Whether a matrix is at least twice as tall as wide (or wide as tall): where torch's
    SVD beat numpy's (about 3x at 200000 x 64); of square ones numpy's was faster."""
    m, n = a.shape[-2:]
    return max(m, n) >= 2 * min(m, n)


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True) -> Any:
    """``(U, S, Vh)`` of ``(*, m, n)`` (``S`` alone without ``compute_uv``).

    Examples:
        >>> svd(numpy.diag([1.0, 3.0]), compute_uv=False).tolist()
        [3.0, 1.0]
    """
    if _torch_ok("svd", a) and _elongated(a):
        with _torch_threads() as torch:
            if not compute_uv:
                return _np(torch.linalg.svdvals(_t(a)))
            u, s, vh = torch.linalg.svd(_t(a), full_matrices=full_matrices)
            return _np(u), _np(s), _np(vh)
    xp = array_module(a)
    if not compute_uv:
        return xp.linalg.svd(a, compute_uv=False)
    u, s, vh = xp.linalg.svd(a, full_matrices=full_matrices)
    return u, s, vh


def eigh(a: Any, upper: bool = False, eigenvectors: bool = True) -> Any:
    """Eigenvalues (ascending) and eigenvectors of Hermitian ``(*, n, n)`` from one triangle.

    Examples:
        >>> eigh(numpy.array([[2.0, 1.0], [1.0, 2.0]]), eigenvectors=False).tolist()
        [1.0, 3.0]
    """
    uplo = "U" if upper else "L"
    if _torch_ok("eigh", a):
        with _torch_threads() as torch:
            if not eigenvectors:
                return _np(torch.linalg.eigvalsh(_t(a), UPLO=uplo))
            w, v = torch.linalg.eigh(_t(a), UPLO=uplo)
            return _np(w), _np(v)
    xp = array_module(a)
    if not eigenvectors:
        return xp.linalg.eigvalsh(a, UPLO=uplo)
    w, v = xp.linalg.eigh(a, UPLO=uplo)
    return w, v


def _per_matrix(xp: Any, fn: Any, a: Any, *rest: Any) -> tuple[Any, Any]:
    """``fn`` on each matrix of a batch; ``(results, info)``: a failing one NaN, info 1."""
    batch = a.shape[:-2]
    info = numpy.zeros(batch, dtype=numpy.int32)
    outs = []
    for index in numpy.ndindex(*batch):
        try:
            outs.append(fn(a[index], *[r[index] for r in rest]))
        except numpy.linalg.LinAlgError:
            info[index] = 1
            outs.append(None)
    dtype = numpy.result_type(a.dtype, *[r.dtype for r in rest])
    # each result has the shape of the matrix (or right-hand side) it came from
    shape = (rest[0] if rest else a).shape[-2:]
    filled = [o if o is not None else xp.full(shape, numpy.nan, dtype=dtype) for o in outs]
    return xp.stack(filled).reshape(*batch, *shape), xp.asarray(info)


def cholesky_ex(a: Any, upper: bool = False) -> tuple[Any, Any]:
    """``(L, info)``: the Cholesky factor of Hermitian positive-definite ``(*, n, n)`` (its
    upper one ``L^H`` where ``upper``) and, per matrix, 0 or the order of the first leading
    minor that is not positive-definite (its factor then holds no meaning), as
    ``torch.linalg.cholesky_ex``.

    Examples:
        >>> cholesky_ex(numpy.array([[4.0, 2.0], [2.0, 5.0]]))[0].tolist()
        [[2.0, 0.0], [1.0, 2.0]]
    """
    if _torch_ok("cholesky", a):
        with _torch_threads() as torch:
            factor, info = torch.linalg.cholesky_ex(_t(a), upper=upper)
            return _np(factor), info.numpy()
    xp = array_module(a)
    try:
        factor, info = xp.linalg.cholesky(a), xp.zeros(a.shape[:-2], dtype=numpy.int32)
    except numpy.linalg.LinAlgError:
        factor, info = _per_matrix(xp, xp.linalg.cholesky, a)
    if upper:
        factor = xp.conj(xp.swapaxes(factor, -1, -2))
    return factor, info


def solve_ex(a: Any, b: Any) -> tuple[Any, Any]:
    """``(X, info)`` with ``A X = B`` for square ``A (*, n, n)`` and ``B (*, n, k)`` (batches
    broadcast); ``info`` per matrix: 0, or > 0 where ``A`` is singular (``X`` then NaN or
    meaningless), as ``torch.linalg.solve_ex``.

    Examples:
        >>> solve_ex(numpy.eye(2) * 2, numpy.ones((2, 1)))[0].tolist()
        [[0.5], [0.5]]
    """
    if _torch_ok("lu", a, b):
        with _torch_threads() as torch:
            x, info = torch.linalg.solve_ex(_t(a), _t(b))
            return _np(x), info.numpy()
    xp = array_module(a)
    batch = numpy.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = xp.broadcast_to(a, (*batch, *a.shape[-2:]))
    b = xp.broadcast_to(b, (*batch, *b.shape[-2:]))
    try:
        return xp.linalg.solve(a, b), xp.zeros(batch, dtype=numpy.int32)
    except numpy.linalg.LinAlgError:
        return _per_matrix(xp, xp.linalg.solve, a, b)


def inv_ex(a: Any) -> tuple[Any, Any]:
    """``(inverse, info)`` of square ``(*, n, n)``; ``info`` > 0 where singular.

    Examples:
        >>> inv_ex(numpy.eye(2) * 4)[0].tolist()
        [[0.25, 0.0], [0.0, 0.25]]
    """
    if _torch_ok("lu", a):
        with _torch_threads() as torch:
            x, info = torch.linalg.inv_ex(_t(a))
            return _np(x), info.numpy()
    xp = array_module(a)
    try:
        return xp.linalg.inv(a), xp.zeros(a.shape[:-2], dtype=numpy.int32)
    except numpy.linalg.LinAlgError:
        return _per_matrix(xp, xp.linalg.inv, a)


def slogdet(a: Any) -> tuple[Any, Any]:
    """``(sign, log|det|)`` of square ``(*, n, n)`` (sign 0 and -inf where singular).

    Examples:
        >>> [float(v) for v in slogdet(numpy.eye(2) * -2)]
        [1.0, 1.3862943611198906]
    """
    if _torch_ok("lu", a):
        with _torch_threads() as torch:
            sign, logabs = torch.linalg.slogdet(_t(a))
            return _np(sign), _np(logabs)
    sign, logabs = array_module(a).linalg.slogdet(a)
    return sign, logabs


def det(a: Any) -> Any:
    """The determinants of square ``(*, n, n)`` (LU).

    Examples:
        >>> round(float(det(numpy.eye(3) * 2)), 12)
        8.0
    """
    if _torch_ok("lu", a):
        with _torch_threads() as torch:
            return _np(torch.linalg.det(_t(a)))
    return array_module(a).linalg.det(a)


def solve_triangular(a: Any, b: Any, upper: bool) -> Any:
    """``X`` with ``A X = B`` for triangular ``A (*, n, n)`` (its other triangle ignored).

    Examples:
        >>> solve_triangular(numpy.array([[2.0, 1.0], [0.0, 1.0]]), numpy.ones((2, 1)),
        ...                  upper=True).tolist()
        [[0.0], [1.0]]
    """
    if _torch_ok("lu", a, b):
        with _torch_threads() as torch:
            return _np(torch.linalg.solve_triangular(_t(a), _t(b), upper=upper))
    xp = array_module(a)
    tri = xp.triu(a) if upper else xp.tril(a)
    return xp.linalg.solve(tri, b)


def lstsq(a: Any, b: Any, rcond: float | None) -> tuple[Any, Any, Any]:
    """Minimum-norm least squares of one small ``A (m, n)`` and ``B (m, k)`` by the SVD:
    ``(X, rank, singular values)``; singular values below ``rcond`` times the largest count
    as zero (default: ``eps * max(m, n)``, torch's).

    Examples:
        >>> x, rank, s = lstsq(numpy.array([[1.0], [1.0]]), numpy.array([[1.0], [3.0]]), None)
        >>> round(float(x[0, 0]), 12), rank
        (2.0, 1)
    """
    xp = array_module(a)
    m, n = a.shape
    if rcond is None:
        rcond = float(numpy.finfo(a.dtype).eps) * max(m, n)
    if min(m, n) == 0:
        return (xp.zeros((n, b.shape[-1]), dtype=numpy.result_type(a, b)), 0,
                xp.zeros((0,), dtype=a.real.dtype))
    u, s, vh = svd(a, full_matrices=False)
    keep = s > rcond * s[0]
    rank = int(keep.sum())
    # x = V diag(1/s) U^H b over the kept singular values
    coef = matmul(xp.conj(u[:, :rank]).T, b) / s[:rank, None]
    return matmul(xp.conj(vh[:rank]).T, coef), rank, s
