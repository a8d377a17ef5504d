"""Iterative solvers of ``A x = b`` on distributed vectors: ``cg`` and ``gmres``.

``A`` is a matrix (a tensor: ``A @ x`` follows matmul's layout rules, so a matrix split by
rows times a vector split the same way stays split) or any linear operator on tensors: a
function ``x -> A x``, or an object with ``@`` (a banded or stencil matrix that exchanges
halos, say). The vectors stay laid out as ``b`` is: each iteration is the operator, local
vector updates, and inner products, each rank's partial sum all-reduced (``.item()``), so
every rank sees the same numbers and takes the same branch: convergence and breakdown are
decided alike everywhere, with no extra collective.

The convention is SciPy's (``scipy.sparse.linalg``): ``(x, info)``, ``info`` 0 when
``|b - A x| <= max(rtol * |b|, atol)`` was reached, the number of iterations done when
``maxiter`` ran out first (the last iterate is returned), and a negative number on a
breakdown (``cg``: ``A`` not positive-definite, -1). Nothing is raised for non-convergence:
test ``info``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy

from ..tensors.tensor import Tensor
from .deterministic_sum import CONJ, vdot
from .engine import apply
from .join import stack
from .linalg import dot, matmul
from .linalg_rules import check_floating

__all__ = ["cg", "gmres"]

Operator = Any  # a Tensor, a callable, or an object with __matmul__


def _operator(A: Operator, name: str) -> Callable[[Tensor], Tensor]:
    """``x -> A x`` for a matrix, a function or an object with ``@``."""
    if isinstance(A, Tensor):
        if A.ndim != 2 or A.shape[0] != A.shape[1]:
            raise ValueError(f"linalg.{name}: A must be a square matrix, got shape "
                             f"{tuple(A.shape)}")
        return lambda x: matmul(A, x)
    if callable(A):
        return A
    if hasattr(A, "__matmul__"):
        return lambda x: A @ x
    raise TypeError(f"linalg.{name}: A must be a tensor, a function x -> A x or an object "
                    f"with @, got {type(A).__name__}")


def _inner(a: Tensor, b: Tensor) -> complex | float:
    """``a^H b`` as a Python number (collective where the vectors are split)."""
    if a.dtype.numpy.kind == "c":
        return vdot(a, b).item()
    return dot(a, b).item()


def _start(name: str, A: Operator, b: Tensor, x0: Tensor | None, M: Operator | None,
           maxiter: int | None) -> tuple[Any, Any, Tensor, Tensor, int]:
    check_floating(name, b)
    if b.ndim != 1:
        raise ValueError(f"linalg.{name}: b must be a vector, got shape {tuple(b.shape)}")
    op = _operator(A, name)
    precondition = (lambda r: r) if M is None else _operator(M, name)
    if x0 is None:
        x, r = b * 0, b.clone()
    else:
        x = x0.clone()
        r = b - op(x)
    n = b.shape[0]
    return op, precondition, x, r, (10 * n if maxiter is None else int(maxiter))


def cg(A: Operator, b: Tensor, x0: Tensor | None = None, *, rtol: float = 1e-5,
       atol: float = 0.0, maxiter: int | None = None, M: Operator | None = None,
       callback: Callable[[Tensor], Any] | None = None) -> tuple[Tensor, int]:
    """Solve ``A x = b`` for Hermitian positive-definite ``A`` by (preconditioned)
    conjugate gradients, SciPy's ``cg``.

    Args:
        A: the matrix (a tensor), a function ``x -> A x``, or an object with ``@``.
        b: the right-hand side, a vector (split or not: the iterates are laid out alike).
        x0: the first iterate (default zeros).
        rtol: stop when ``|r| <= max(rtol * |b|, atol)``.
        atol: the absolute part of that test.
        maxiter: the most iterations (default ``10 n``).
        M: a preconditioner approximating ``A^-1``: a matrix, function or object with ``@``.
        callback: called with the iterate after each iteration.

    Returns:
        ``(x, info)``: ``info`` 0 when converged, the iterations done when ``maxiter`` ran
        out, -1 on a breakdown (``p^H A p <= 0``: ``A`` is not positive-definite).

    Examples:
        >>> x, info = flow.linalg.cg(flow.tensor([[4.0, 1.0], [1.0, 3.0]]),
        ...                          flow.tensor([1.0, 2.0]), rtol=1e-12)
        >>> [round(v, 6) for v in x.tolist()], info
        ([0.090909, 0.636364], 0)
    """
    op, precondition, x, r, maxiter = _start("cg", A, b, x0, M, maxiter)
    target = max(rtol * math.sqrt(abs(_inner(b, b))), atol)
    z = precondition(r)
    rz = _inner(r, z)
    rr = rz if M is None else _inner(r, r)
    p = z
    for _ in range(maxiter):
        if math.sqrt(abs(rr)) <= target:
            return x, 0
        q = op(p)
        pq = _inner(p, q)
        if pq.real <= 0 if isinstance(pq, complex) else pq <= 0:
            return x, -1
        alpha = rz / pq
        x = x + alpha * p
        r = r - alpha * q
        if callback is not None:
            callback(x)
        z = precondition(r)
        rz_new = _inner(r, z)
        rr = rz_new if M is None else _inner(r, r)
        p = z + (rz_new / rz) * p
        rz = rz_new
    return x, (0 if math.sqrt(abs(rr)) <= target else maxiter)


def _givens(a: Any, b: Any) -> tuple[float, Any, Any]:
    """``(c, s, r)`` with ``[[c, s], [-conj(s), c]] @ [a, b] = [r, 0]``, ``c`` real (real or
    complex numbers)."""
    if b == 0:
        return 1.0, 0.0 * b, a
    if a == 0:
        return 0.0, numpy.conj(b) / abs(b), abs(b)
    size = math.hypot(abs(a), abs(b))
    phase = a / abs(a)
    return abs(a) / size, phase * numpy.conj(b) / size, phase * size


def gmres(A: Operator, b: Tensor, x0: Tensor | None = None, *, rtol: float = 1e-5,
          atol: float = 0.0, restart: int | None = None, maxiter: int | None = None,
          M: Operator | None = None, callback: Callable[[Tensor], Any] | None = None
          ) -> tuple[Tensor, int]:
    """Solve ``A x = b`` for a general (non-singular) ``A`` by restarted GMRES, SciPy's
    ``gmres``.

    Arnoldi with classical Gram-Schmidt applied twice: each pass is one all-reduce of all
    the basis vectors' inner products at once (stacked partial sums), not one per vector.
    The small Hessenberg least-squares problem is solved by Givens rotations on every rank
    (its numbers are the all-reduced ones, the same everywhere). Preconditioning is on the
    right (``A M y = b``, ``x = M y``), so the residual tested is ``b - A x`` itself.

    Args:
        A: the matrix (a tensor), a function ``x -> A x``, or an object with ``@``.
        b: the right-hand side, a vector.
        x0: the first iterate (default zeros).
        rtol: stop when ``|r| <= max(rtol * |b|, atol)``.
        atol: the absolute part of that test.
        restart: the Krylov basis size before a restart (default 20, at most ``n``).
        maxiter: the most restart cycles (default ``10 n``).
        M: a preconditioner approximating ``A^-1``.
        callback: called with each cycle's iterate.

    Returns:
        ``(x, info)``: ``info`` 0 when converged, else the iterations (matrix products)
        done.

    Examples:
        >>> x, info = flow.linalg.gmres(flow.tensor([[3.0, 1.0], [-1.0, 2.0]]),
        ...                             flow.tensor([4.0, 1.0]), rtol=1e-12)
        >>> [round(v, 6) for v in x.tolist()], info
        ([1.0, 1.0], 0)
    """
    op, precondition, x, r, maxiter = _start("gmres", A, b, x0, M, maxiter)
    n = b.shape[0]
    restart = min(20 if restart is None else int(restart), max(n, 1))
    target = max(rtol * math.sqrt(abs(_inner(b, b))), atol)
    complex_ = b.dtype.numpy.kind == "c"
    done = 0
    beta = math.sqrt(abs(_inner(r, r)))
    for _ in range(maxiter):
        if beta <= target:
            return x, 0
        basis = [r * (1.0 / beta)]
        h = numpy.zeros((restart + 1, restart), dtype=complex if complex_ else float)
        rotations: list[tuple[float, Any]] = []
        g = numpy.zeros(restart + 1, dtype=h.dtype)
        g[0] = beta
        steps = 0
        for j in range(restart):
            w = op(precondition(basis[j]))
            done += 1
            for _pass in range(2):  # classical Gram-Schmidt, twice
                coeffs = _project(basis, w)
                for i, c in enumerate(coeffs):
                    w = w - c * basis[i]
                h[: j + 1, j] += coeffs
            size = _norm(w)
            h[j + 1, j] = size
            for i, (c, s) in enumerate(rotations):  # apply the earlier rotations
                h[i, j], h[i + 1, j] = (c * h[i, j] + s * h[i + 1, j],
                                        -numpy.conj(s) * h[i, j] + c * h[i + 1, j])
            c, s, rho = _givens(h[j, j], h[j + 1, j])
            rotations.append((c, s))
            h[j, j], h[j + 1, j] = rho, 0.0
            g[j], g[j + 1] = c * g[j], -numpy.conj(s) * g[j]
            steps = j + 1
            # converged, or a lucky breakdown (the Krylov space is invariant: x is in it)
            if abs(g[j + 1]) <= target or size == 0:
                break
            basis.append(w * (1.0 / size))
        y = numpy.linalg.solve(numpy.triu(h[:steps, :steps]), g[:steps])
        update = basis[0] * y[0].item()
        for i in range(1, steps):
            update = update + basis[i] * y[i].item()
        x = x + precondition(update)
        if callback is not None:
            callback(x)
        r = b - op(x)
        beta = math.sqrt(abs(_inner(r, r)))
    return x, (0 if beta <= target else done)


def _project(basis: list[Tensor], w: Tensor) -> numpy.ndarray:
    """``[v_i^H w]`` for every basis vector, in one all-reduce (stacked partial sums)."""
    parts = []
    for v in basis:
        a = apply(CONJ, v) if v.dtype.numpy.kind == "c" else v
        parts.append(dot(a, w))
    return numpy.asarray(stack(parts).numpy())


def _norm(w: Tensor) -> float:
    return math.sqrt(abs(_inner(w, w)))
