"""Device arrays over an MPI library that cannot read GPU memory: staging through host buffers.

:class:`StagedCommunicator` wraps the :class:`~.mpi.MPICommunicator` of a group. For each
operation it copies the device buffers that MPI must read into page-locked ("pinned") host
buffers, runs the ordinary MPI operation on those, and copies what MPI wrote back into the
device buffers. Host (numpy) buffers pass through untouched, so mixed calls work too.

The pinned buffers come from a :class:`PinnedPool` and go back to it when the operation
completes: after the first call of a size, no call allocates (pinned allocations are slow,
and would dominate small messages). Operations that are outstanding at the same time hold
different buffers.

All device work goes through :class:`~.device_ops.DeviceOps`: with :class:`CupyOps` this
moves CuPy arrays; with :class:`HostOps` the same code runs on numpy arrays in CI.

Examples:
    >>> from mpiflow.communication.gpu.array_ops import HostOps
    >>> from mpiflow.communication.mpi.group import world_comm
    >>> staged = StagedCommunicator(world_comm, HostOps())
    >>> x = numpy.ones(3)
    >>> staged.all_reduce(x)            # x == world size, through a reused host buffer
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy

from ...core.reduce_op import ReduceOp
from ..mpi.communicator import MPICommunicator
from ..mpi.interface import Array, Communicator, Work
from .array_ops import DeviceOps

__all__ = ["PinnedPool", "StagedCommunicator"]

_Step = Callable[[], None]


class PinnedPool:
    """Reusable pinned host buffers, kept by power-of-two capacity.

    Args:
        ops: makes the buffers (:meth:`DeviceOps.pinned`).
        smallest: the least capacity handed out, in bytes.

    Examples:
        >>> from mpiflow.communication.gpu.array_ops import HostOps
        >>> pool = PinnedPool(HostOps())
        >>> raw = pool.take(100)           # a 256-byte buffer, allocated now
        >>> pool.give(raw)
        >>> pool.take(200) is raw          # reused
        True
    """

    def __init__(self, ops: DeviceOps, smallest: int = 256) -> None:
        self._ops = ops
        self._smallest = smallest
        self._free: dict[int, list[numpy.ndarray]] = {}
        self._lock = threading.Lock()
        self.allocations = 0
        self.held_bytes = 0

    def _capacity(self, nbytes: int) -> int:
        return max(self._smallest, 1 << max(nbytes - 1, 0).bit_length())

    def take(self, nbytes: int) -> numpy.ndarray:
        """A uint8 buffer of at least ``nbytes`` bytes, reused when one is free."""
        capacity = self._capacity(nbytes)
        with self._lock:
            free = self._free.get(capacity)
            if free:
                return free.pop()
            self.allocations += 1
            self.held_bytes += capacity
        return self._ops.pinned(capacity)

    def give(self, raw: numpy.ndarray) -> None:
        """Return a buffer from :meth:`take` for reuse."""
        with self._lock:
            self._free.setdefault(raw.size, []).append(raw)

    def clear(self) -> None:
        """Drop the free buffers (the memory is released once nothing refers to it)."""
        with self._lock:
            for buffers in self._free.values():
                self.held_bytes -= sum(b.size for b in buffers)
            self._free.clear()


class _Staging:
    """The buffers one operation borrowed from the pool and the steps that end it."""

    __slots__ = ("_pool", "held", "steps")

    def __init__(self, pool: PinnedPool) -> None:
        self._pool = pool
        self.held: list[numpy.ndarray] = []
        self.steps: list[_Step] = []

    def release(self) -> None:
        held, self.held = self.held, []
        for raw in held:
            self._pool.give(raw)

    def finish(self) -> None:
        try:
            for step in self.steps:
                step()
        finally:
            self.release()


class StagedCommunicator(Communicator):
    """A :class:`Communicator` for device arrays, through pinned host buffers and MPI.

    Args:
        mpi: the group's MPI communicator (it only ever sees host arrays from here).
        ops: the device operations (:class:`~.device_ops.CupyOps`, or ``HostOps`` in tests).
        pool: the pinned buffers to use (a new pool by default).
    """

    def __init__(self, mpi: MPICommunicator, ops: DeviceOps, pool: PinnedPool | None = None
                 ) -> None:
        self.mpi = mpi
        self.rank, self.size = mpi.rank, mpi.size
        self._ops = ops
        self.pool = PinnedPool(ops) if pool is None else pool

    @property
    def array_module(self) -> Any:
        return self._ops.xp

    def __repr__(self) -> str:
        return f"StagedCommunicator(rank={self.rank}, size={self.size}, ops={self._ops.name})"

    # -- staging -------------------------------------------------------------------------------
    def _stage(self, staging: _Staging, buf: Array | None, copy_in: bool, copy_out: bool
               ) -> Any:
        """The host stand-in of ``buf`` for MPI: ``buf`` itself if on the host, else a view of
        a pooled buffer (filled from ``buf`` if ``copy_in``; copied back if ``copy_out``)."""
        if buf is None or not self._ops.is_device(buf):
            return buf
        raw = self._pool_take(staging, buf.nbytes)
        host = raw[:buf.nbytes].view(buf.dtype).reshape(buf.shape)
        if copy_in:
            self._ops.to_host(buf, host)
        if copy_out:
            ops = self._ops
            staging.steps.append(lambda: ops.to_device(host, buf))
        return host

    def _pool_take(self, staging: _Staging, nbytes: int) -> numpy.ndarray:
        raw = self.pool.take(nbytes)
        staging.held.append(raw)
        return raw

    def _run(self, staging: _Staging, start: Callable[[], Work | None], async_op: bool
             ) -> Work | None:
        """Start the MPI operation; finish the staging now, or when the work completes."""
        try:
            work = start()
        except BaseException:
            staging.release()
            raise
        if async_op:
            assert work is not None
            return work.then(staging.finish)
        staging.finish()
        return None

    # -- collectives ---------------------------------------------------------------------------
    def barrier(self, async_op: bool = False) -> Work | None:
        return self.mpi.barrier(async_op)

    def all_reduce(self, buf: Array, op: ReduceOp = ReduceOp.SUM,
                   async_op: bool = False) -> Work | None:
        s = _Staging(self.pool)
        host = self._stage(s, buf, copy_in=True, copy_out=True)
        return self._run(s, lambda: self.mpi.all_reduce(host, op, async_op), async_op)

    def reduce(self, buf: Array, op: ReduceOp, root: int,
               async_op: bool = False) -> Work | None:
        s = _Staging(self.pool)
        host = self._stage(s, buf, copy_in=True, copy_out=self.rank == root)
        return self._run(s, lambda: self.mpi.reduce(host, op, root, async_op), async_op)

    def broadcast(self, buf: Array, root: int, async_op: bool = False) -> Work | None:
        s = _Staging(self.pool)
        host = self._stage(s, buf, copy_in=self.rank == root, copy_out=self.rank != root)
        return self._run(s, lambda: self.mpi.broadcast(host, root, async_op), async_op)

    def all_gather(self, send: Array, recv: Array, async_op: bool = False) -> Work | None:
        s = _Staging(self.pool)
        src = self._stage(s, send, copy_in=True, copy_out=False)
        dst = self._stage(s, recv, copy_in=False, copy_out=True)
        return self._run(s, lambda: self.mpi.all_gather(src, dst, async_op), async_op)

    def all_gather_v(self, send: Array, recv: Array, counts: Sequence[int],
                     async_op: bool = False) -> Work | None:
        s = _Staging(self.pool)
        src = self._stage(s, send, copy_in=True, copy_out=False)
        dst = self._stage(s, recv, copy_in=False, copy_out=True)
        return self._run(s, lambda: self.mpi.all_gather_v(src, dst, counts, async_op),
                         async_op)

    def gather(self, send: Array, recv: Array | None, root: int,
               async_op: bool = False) -> Work | None:
        s = _Staging(self.pool)
        src = self._stage(s, send, copy_in=True, copy_out=False)
        dst = self._stage(s, recv if self.rank == root else None, copy_in=False, copy_out=True)
        return self._run(s, lambda: self.mpi.gather(src, dst, root, async_op), async_op)

    def scatter(self, send: Array | None, recv: Array, root: int,
                async_op: bool = False) -> Work | None:
        s = _Staging(self.pool)
        src = self._stage(s, send if self.rank == root else None, copy_in=True, copy_out=False)
        dst = self._stage(s, recv, copy_in=False, copy_out=True)
        return self._run(s, lambda: self.mpi.scatter(src, dst, root, async_op), async_op)

    def reduce_scatter(self, send: Array, recv: Array, op: ReduceOp = ReduceOp.SUM,
                       async_op: bool = False) -> Work | None:
        s = _Staging(self.pool)
        src = self._stage(s, send, copy_in=True, copy_out=False)
        dst = self._stage(s, recv, copy_in=False, copy_out=True)
        return self._run(s, lambda: self.mpi.reduce_scatter(src, dst, op, async_op), async_op)

    def reduce_scatter_v(self, send: Array, recv: Array, counts: Sequence[int],
                         op: ReduceOp = ReduceOp.SUM, async_op: bool = False) -> Work | None:
        s = _Staging(self.pool)
        src = self._stage(s, send, copy_in=True, copy_out=False)
        dst = self._stage(s, recv, copy_in=False, copy_out=True)
        return self._run(s, lambda: self.mpi.reduce_scatter_v(src, dst, counts, op, async_op),
                         async_op)

    def all_to_all(self, send: Array, recv: Array, async_op: bool = False) -> Work | None:
        s = _Staging(self.pool)
        src = self._stage(s, send, copy_in=True, copy_out=False)
        dst = self._stage(s, recv, copy_in=False, copy_out=True)
        return self._run(s, lambda: self.mpi.all_to_all(src, dst, async_op), async_op)

    def all_to_all_v(self, send: Array, send_counts: Sequence[int], recv: Array,
                     recv_counts: Sequence[int], async_op: bool = False) -> Work | None:
        s = _Staging(self.pool)
        src = self._stage(s, send, copy_in=True, copy_out=False)
        dst = self._stage(s, recv, copy_in=False, copy_out=True)
        return self._run(
            s, lambda: self.mpi.all_to_all_v(src, send_counts, dst, recv_counts, async_op),
            async_op)

    # -- point to point ------------------------------------------------------------------------
    def send(self, buf: Array, dst: int, tag: int = 0, async_op: bool = False) -> Work | None:
        s = _Staging(self.pool)
        host = self._stage(s, buf, copy_in=True, copy_out=False)
        return self._run(s, lambda: self.mpi.send(host, dst, tag, async_op), async_op)

    def recv(self, buf: Array, src: int | None, tag: int = 0) -> int:
        s = _Staging(self.pool)
        host = self._stage(s, buf, copy_in=False, copy_out=True)
        try:
            source = self.mpi.recv(host, src, tag)
        except BaseException:
            s.release()
            raise
        s.finish()
        return source

    def irecv(self, buf: Array, src: int | None, tag: int = 0) -> Work:
        s = _Staging(self.pool)
        host = self._stage(s, buf, copy_in=False, copy_out=True)
        work = self._run(s, lambda: self.mpi.irecv(host, src, tag), async_op=True)
        assert work is not None
        return work

    # -- groups --------------------------------------------------------------------------------
    def split(self, ranks: Sequence[int]) -> StagedCommunicator | None:
        child = self.mpi.split(ranks)
        return None if child is None else StagedCommunicator(child, self._ops, self.pool)

    def split_by_color(self, color: int | None, key: int = 0) -> StagedCommunicator | None:
        child = self.mpi.split_by_color(color, key)
        return None if child is None else StagedCommunicator(child, self._ops, self.pool)
