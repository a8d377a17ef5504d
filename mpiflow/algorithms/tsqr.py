"""TSQR: the QR factorization of a tall matrix whose rows are split across ranks.

Demmel, Grigori, Hoemmen and Langou, "Communication-optimal parallel and sequential QR and LU
factorizations" (SIAM J. Sci. Comput., 2012): each rank factors its own rows, ``A_r = Q_r R_r``;
the small ``R_r`` (``n x n``) climb a reduction tree, each group's leader stacking its members'
``R`` under its own and factoring the stack again, until the root holds ``R``; ``Q`` is then
applied back down the tree: each leader multiplies its stack's ``Q`` factor by the
coefficients it received and sends each member its block, and each rank's rows of ``Q`` are
``Q_r`` times its block. No row of ``A`` or ``Q`` moves: each message is one ``n x n`` matrix
(times the batch), ``2 * ceil(log_fanin(p))`` of them on the longest path, plus one broadcast
of ``R``. The tree (:func:`tree`) is a pure function of the rank count and the fan-in.

``R`` is normalised to a real non-negative diagonal (the columns of ``Q`` scaled to match):
for a matrix of full column rank that makes the factorization unique, so the result is the
same, to rounding, at any rank count and equals a local QR normalised the same way
(:func:`normalize_qr`). A rank holding fewer rows than columns (or none) takes part with a
zero-padded ``R``.

Examples:
    >>> from mpiflow.communication.mpi.group import world_comm as comm
    >>> a = numpy.arange(12.0).reshape(6, 2) ** 2
    >>> rows = numpy.array_split(a, comm.size)[comm.rank]
    >>> f = tsqr(rows, comm)
    >>> bool(numpy.allclose(f.r, numpy.linalg.cholesky(a.T @ a).T))  # R^T R = A^T A
    True
"""

from __future__ import annotations

from typing import Any

from ..communication import Communicator
from ..core.array_module import array_module
from . import kernels

__all__ = ["TSQR", "normalize_qr", "tree", "tsqr"]

Group = tuple[int, ...]


def tree(size: int, fanin: int = 2) -> list[list[Group]]:
    """The reduction tree of ``size`` ranks: per level (leaves first), the groups of ranks
    whose ``R`` factors are stacked, each group's leader (its lowest rank) first. Rank 0 is
    the root. Pure.

    Examples:
        >>> tree(5)
        [[(0, 1), (2, 3), (4,)], [(0, 2), (4,)], [(0, 4)]]
        >>> tree(4, fanin=4)
        [[(0, 1, 2, 3)]]
        >>> tree(1)
        []
    """
    if fanin < 2:
        raise ValueError(f"a reduction tree needs a fan-in of at least 2, got {fanin}")
    levels: list[list[Group]] = []
    alive = list(range(size))
    while len(alive) > 1:
        groups = [tuple(alive[i:i + fanin]) for i in range(0, len(alive), fanin)]
        levels.append(groups)
        alive = [g[0] for g in groups]
    return levels


def _signs(xp: Any, r: Any) -> Any:
    """Per row of ``r`` (``(*, n, n)``) the unit number that makes its diagonal real and
    non-negative when ``r``'s row is divided by it (1 where the diagonal is 0)."""
    d = xp.diagonal(r, axis1=-2, axis2=-1)
    size = xp.abs(d)
    safe = xp.where(size == 0, 1, size)
    return xp.where(size == 0, xp.ones_like(d), d / safe)


def normalize_qr(q: Any, r: Any) -> tuple[Any, Any]:
    """``(Q D, D^H R)`` with the unit diagonal ``D`` that makes ``R``'s diagonal real and
    non-negative: the unique QR of a full-rank matrix (``q`` may be empty: ``mode="r"``).

    Examples:
        >>> q, r = normalize_qr(-numpy.eye(2), -numpy.eye(2))
        >>> q.tolist(), r.tolist()
        ([[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]])
    """
    xp = array_module(r)
    k = min(r.shape[-2], r.shape[-1])
    phase = _signs(xp, r[..., :k, :k])
    r = r.copy()
    r[..., :k, :] = r[..., :k, :] * xp.conj(phase)[..., :, None]
    if q.ndim >= 2:
        q = q.copy()
        q[..., :, :k] = q[..., :, :k] * phase[..., None, :]
    return q, r


class TSQR:
    """One rank's part of a TSQR factorization of a row-split ``A (*, m, n)``.

    Attributes:
        r: ``R (*, n, n)``, the same on every rank, diagonal real and non-negative.
    """

    def __init__(self, comm: Communicator, r: Any, phase: Any, local_q: Any,
                 factors: list[tuple[Group, Any]], fanin: int) -> None:
        self.comm = comm
        self.r = r
        self._phase = phase
        self._local_q = local_q
        self._factors = factors  # (group, Q of the stacked R's) where this rank led one
        self._fanin = fanin

    def q(self, coefficients: Any = None, columns: int | None = None) -> Any:
        """This rank's rows of ``Q @ C`` (collective), ``C (*, n, k)`` given on rank 0 (the
        root; other ranks' are not read, and may pass None with ``columns``, the ``k`` of
        ``C``): ``Q`` itself where None everywhere. ``Q`` is that of :attr:`r` (its columns
        follow the normalised signs).

        Raises:
            ValueError: the factorization was made without ``Q`` (``tsqr(..., q=False)``).
        """
        if self._local_q is None:
            raise ValueError("this TSQR was made without Q (q=False)")
        xp = array_module(self.r)
        comm, rank = self.comm, self.comm.rank
        n = self.r.shape[-1]
        batch = self.r.shape[:-2]
        if rank == 0:
            c = (xp.broadcast_to(xp.eye(n, dtype=self.r.dtype), (*batch, n, n))
                 if coefficients is None else coefficients)
            c = c * self._phase[..., :, None]  # Q D C: D undoes the sign flips of R's rows
            c = xp.ascontiguousarray(c, dtype=self.r.dtype)
        else:
            c = None
        led = dict(self._factors)
        for level, groups in reversed(list(enumerate(tree(comm.size, self._fanin)))):
            for group in groups:
                if len(group) == 1 or rank not in group:
                    continue
                tag = 1000 + level
                if rank != group[0]:  # a member: its block of the leader's product
                    k = (columns if columns is not None else
                         coefficients.shape[-1] if coefficients is not None else n)
                    c = xp.empty((*batch, n, k), dtype=self.r.dtype)
                    comm.recv(c, group[0], tag)
                    continue
                assert c is not None
                product = kernels.matmul(led[group], c)
                for j, member in enumerate(group[1:], start=1):
                    comm.send(xp.ascontiguousarray(product[..., j * n:(j + 1) * n, :]), member,
                              tag)
                c = xp.ascontiguousarray(product[..., :n, :])
        assert c is not None
        return kernels.matmul(self._local_q, c)


def _local(a: Any, with_q: bool) -> tuple[Any, Any]:
    """The local QR of ``a (*, m, n)``, padded to ``Q (*, m, n)`` and ``R (*, n, n)`` where
    ``m < n`` (Q None without ``with_q``)."""
    xp = array_module(a)
    *batch, m, n = a.shape
    if m == 0:
        q = xp.zeros((*batch, 0, n), dtype=a.dtype) if with_q else None
        return q, xp.zeros((*batch, n, n), dtype=a.dtype)
    q, r = kernels.qr(a, "reduced" if with_q else "r")
    if m < n:  # R (m, n), Q (m, m): pad with zero rows and columns
        r = xp.concatenate([r, xp.zeros((*batch, n - m, n), dtype=r.dtype)], axis=-2)
        if with_q:
            q = xp.concatenate([q, xp.zeros((*batch, m, n - m), dtype=q.dtype)], axis=-1)
    return (q if with_q else None), xp.ascontiguousarray(r)


def tsqr(local: Any, comm: Communicator, *, q: bool = True, fanin: int = 2) -> TSQR:
    """Factor a row-split ``A (*, m, n)`` (collective): ``R`` on every rank, ``Q`` on demand.

    Args:
        local: this rank's rows of ``A`` (``(*, m_r, n)``, ``m_r`` any, 0 included); the
            ranks' parts in rank order are ``A``, with ``m >= n`` rows in all (with fewer,
            ``R``'s last ``n - m`` rows are zero and ``Q``'s last columns too). Every rank has
            the same batch shape and ``n``.
        comm: the ranks that hold the rows, in their order.
        q: keep what :meth:`TSQR.q` needs (else only ``R`` is computed: cheaper).
        fanin: the tree's fan-in (how many ``R`` factors a leader stacks per level).

    Returns:
        A :class:`TSQR`: ``.r`` is ``R``; ``.q()`` this rank's rows of ``Q``.
    """
    xp = array_module(local)
    n = local.shape[-1]
    local_q, r = _local(local, q)
    rank = comm.rank
    factors: list[tuple[Group, Any]] = []
    for level, groups in enumerate(tree(comm.size, fanin)):
        for group in groups:
            if len(group) == 1 or rank not in group:
                continue
            tag = 1000 + level
            if rank != group[0]:
                comm.send(r, group[0], tag)
                continue
            stack = [r]
            for member in group[1:]:
                other = xp.empty_like(r)
                comm.recv(other, member, tag)
                stack.append(other)
            level_q, r = kernels.qr(xp.concatenate(stack, axis=-2), "reduced" if q else "r")
            r = xp.ascontiguousarray(r)
            if q:
                factors.append((group, level_q))
    phase = None
    if rank == 0:
        phase = _signs(xp, r)
        r = xp.ascontiguousarray(r * xp.conj(phase)[..., :, None])
    if comm.size > 1:
        if rank != 0:
            r = xp.empty((*local.shape[:-2], n, n), dtype=r.dtype)
        comm.broadcast(r, 0)
    return TSQR(comm, r, phase, local_q, factors, fanin)
