"""Device arrays straight to a CUDA-aware MPI library.

mpi4py accepts CuPy arrays directly (through DLPack and the CUDA array interface) but does not
synchronize CUDA streams; a CUDA-aware MPI then reads and writes GPU memory itself.
:class:`CudaAwareCommunicator` makes device buffers contiguous on the device, synchronizes
the current stream (the one that produced them) and hands them to MPI. Reductions that MPI
cannot do natively on the device (those mpiflow runs as a numpy function inside a
user-defined MPI op, e.g. where the library lacks float16 sums) are staged through host
buffers instead (:class:`~.staging.StagedCommunicator`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...core.reduce_op import ReduceOp
from ..mpi.communicator import MPICommunicator
from ..mpi.datatypes import reduce_plan
from ..mpi.interface import Array, Communicator, Work
from .array_ops import DeviceOps
from .staging import PinnedPool, StagedCommunicator

__all__ = ["CudaAwareCommunicator", "DirectMPICommunicator"]


class DirectMPICommunicator(MPICommunicator):
    """An :class:`MPICommunicator` that gives every buffer, device ones too, to MPI itself.

    The ordinary MPICommunicator routes device arrays to the group's device communicator;
    this one is what that device communicator uses underneath (on the same MPI communicator).
    """

    def __init__(self, mpi: MPICommunicator, ops: DeviceOps) -> None:
        super().__init__(mpi.mpi_comm)
        self._ops = ops

    @property
    def array_module(self) -> Any:
        return self._ops.xp

    def on_device(self) -> Communicator | None:
        return None


class CudaAwareCommunicator(Communicator):
    """A :class:`Communicator` for device arrays over a CUDA-aware MPI library.

    Args:
        mpi: the group's MPI communicator.
        ops: the device operations.
        pool: the pinned buffers of the staged fallback (a new pool by default).
    """

    def __init__(self, mpi: MPICommunicator, ops: DeviceOps, pool: PinnedPool | None = None
                 ) -> None:
        self.mpi = mpi
        self.rank, self.size = mpi.rank, mpi.size
        self._ops = ops
        self._direct = DirectMPICommunicator(mpi, ops)
        self.staged = StagedCommunicator(mpi, ops, pool)

    @property
    def array_module(self) -> Any:
        return self._ops.xp

    def __repr__(self) -> str:
        return f"CudaAwareCommunicator(rank={self.rank}, size={self.size}, ops={self._ops.name})"

    # -- buffers -------------------------------------------------------------------------------
    def _contiguous(self, buf: Array | None, copy_in: bool, copy_out: bool,
                    steps: list[Callable[[], None]]) -> Any:
        """``buf`` as MPI may take it: device buffers C-contiguous on the device."""
        if buf is None or not self._ops.is_device(buf) or buf.flags.c_contiguous:
            return buf
        ops = self._ops
        stand_in = ops.contiguous(buf) if copy_in else ops.empty(buf.shape, buf.dtype)
        if copy_out:
            def write_back() -> None:
                buf[...] = stand_in

            steps.append(write_back)
        return stand_in

    def _go(self, start: Callable[[], Work | None], steps: list[Callable[[], None]],
            async_op: bool) -> Work | None:
        self._ops.synchronize()  # MPI reads what the stream has produced
        work = start()
        if async_op:
            assert work is not None
            for step in steps:
                work.then(step)
            return work
        for step in steps:
            step()
        return None

    def _on_device(self, *bufs: Array | None) -> bool:
        return any(b is not None and self._ops.is_device(b) for b in bufs)

    def _staged_reduction(self, dtype: Any, op: ReduceOp, *bufs: Array | None) -> bool:
        """Whether this reduction must go through host buffers (a numpy-function MPI op)."""
        return reduce_plan(dtype, op).datatype is not None and self._on_device(*bufs)

    # -- collectives ---------------------------------------------------------------------------
    def barrier(self, async_op: bool = False) -> Work | None:
        return self.mpi.barrier(async_op)

    def all_reduce(self, buf: Array, op: ReduceOp = ReduceOp.SUM,
                   async_op: bool = False) -> Work | None:
        if self._staged_reduction(buf.dtype, op, buf):
            return self.staged.all_reduce(buf, op, async_op)
        steps: list[Callable[[], None]] = []
        b = self._contiguous(buf, True, True, steps)
        return self._go(lambda: self._direct.all_reduce(b, op, async_op), steps, async_op)

    def reduce(self, buf: Array, op: ReduceOp, root: int,
               async_op: bool = False) -> Work | None:
        if self._staged_reduction(buf.dtype, op, buf):
            return self.staged.reduce(buf, op, root, async_op)
        steps: list[Callable[[], None]] = []
        b = self._contiguous(buf, True, self.rank == root, steps)
        return self._go(lambda: self._direct.reduce(b, op, root, async_op), steps, async_op)

    def broadcast(self, buf: Array, root: int, async_op: bool = False) -> Work | None:
        steps: list[Callable[[], None]] = []
        b = self._contiguous(buf, self.rank == root, self.rank != root, steps)
        return self._go(lambda: self._direct.broadcast(b, root, async_op), steps, async_op)

    def all_gather(self, send: Array, recv: Array, async_op: bool = False) -> Work | None:
        steps: list[Callable[[], None]] = []
        s = self._contiguous(send, True, False, steps)
        r = self._contiguous(recv, False, True, steps)
        return self._go(lambda: self._direct.all_gather(s, r, async_op), steps, async_op)

    def all_gather_v(self, send: Array, recv: Array, counts: Sequence[int],
                     async_op: bool = False) -> Work | None:
        steps: list[Callable[[], None]] = []
        s = self._contiguous(send, True, False, steps)
        r = self._contiguous(recv, False, True, steps)
        return self._go(lambda: self._direct.all_gather_v(s, r, counts, async_op), steps,
                        async_op)

    def gather(self, send: Array, recv: Array | None, root: int,
               async_op: bool = False) -> Work | None:
        steps: list[Callable[[], None]] = []
        s = self._contiguous(send, True, False, steps)
        r = self._contiguous(recv if self.rank == root else None, False, True, steps)
        return self._go(lambda: self._direct.gather(s, r, root, async_op), steps, async_op)

    def scatter(self, send: Array | None, recv: Array, root: int,
                async_op: bool = False) -> Work | None:
        steps: list[Callable[[], None]] = []
        s = self._contiguous(send if self.rank == root else None, True, False, steps)
        r = self._contiguous(recv, False, True, steps)
        return self._go(lambda: self._direct.scatter(s, r, root, async_op), steps, async_op)

    def reduce_scatter(self, send: Array, recv: Array, op: ReduceOp = ReduceOp.SUM,
                       async_op: bool = False) -> Work | None:
        if self._staged_reduction(send.dtype, op, send, recv):
            return self.staged.reduce_scatter(send, recv, op, async_op)
        steps: list[Callable[[], None]] = []
        s = self._contiguous(send, True, False, steps)
        r = self._contiguous(recv, False, True, steps)
        return self._go(lambda: self._direct.reduce_scatter(s, r, op, async_op), steps,
                        async_op)

    def reduce_scatter_v(self, send: Array, recv: Array, counts: Sequence[int],
                         op: ReduceOp = ReduceOp.SUM, async_op: bool = False) -> Work | None:
        if self._staged_reduction(send.dtype, op, send, recv):
            return self.staged.reduce_scatter_v(send, recv, counts, op, async_op)
        steps: list[Callable[[], None]] = []
        s = self._contiguous(send, True, False, steps)
        r = self._contiguous(recv, False, True, steps)
        return self._go(lambda: self._direct.reduce_scatter_v(s, r, counts, op, async_op),
                        steps, async_op)

    def all_to_all(self, send: Array, recv: Array, async_op: bool = False) -> Work | None:
        steps: list[Callable[[], None]] = []
        s = self._contiguous(send, True, False, steps)
        r = self._contiguous(recv, False, True, steps)
        return self._go(lambda: self._direct.all_to_all(s, r, async_op), steps, async_op)

    def all_to_all_v(self, send: Array, send_counts: Sequence[int], recv: Array,
                     recv_counts: Sequence[int], async_op: bool = False) -> Work | None:
        steps: list[Callable[[], None]] = []
        s = self._contiguous(send, True, False, steps)
        r = self._contiguous(recv, False, True, steps)
        return self._go(
            lambda: self._direct.all_to_all_v(s, send_counts, r, recv_counts, async_op),
            steps, async_op)

    # -- point to point ------------------------------------------------------------------------
    def send(self, buf: Array, dst: int, tag: int = 0, async_op: bool = False) -> Work | None:
        steps: list[Callable[[], None]] = []
        b = self._contiguous(buf, True, False, steps)
        return self._go(lambda: self._direct.send(b, dst, tag, async_op), steps, async_op)

    def recv(self, buf: Array, src: int | None, tag: int = 0) -> int:
        steps: list[Callable[[], None]] = []
        b = self._contiguous(buf, False, True, steps)
        self._ops.synchronize()
        source = self._direct.recv(b, src, tag)
        for step in steps:
            step()
        return source

    def irecv(self, buf: Array, src: int | None, tag: int = 0) -> Work:
        steps: list[Callable[[], None]] = []
        b = self._contiguous(buf, False, True, steps)
        work = self._go(lambda: self._direct.irecv(b, src, tag), steps, async_op=True)
        assert work is not None
        return work

    # -- groups --------------------------------------------------------------------------------
    def split(self, ranks: Sequence[int]) -> CudaAwareCommunicator | None:
        child = self.mpi.split(ranks)
        return None if child is None else CudaAwareCommunicator(child, self._ops,
                                                                self.staged.pool)

    def split_by_color(self, color: int | None, key: int = 0) -> CudaAwareCommunicator | None:
        child = self.mpi.split_by_color(color, key)
        return None if child is None else CudaAwareCommunicator(child, self._ops,
                                                                self.staged.pool)
