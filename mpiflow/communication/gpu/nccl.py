"""Device arrays over NCCL (through CuPy's ``cupy.cuda.nccl``): the GPU fast path.

One NCCL communicator per mpiflow group, made the first time a collective of the group moves
device arrays: group rank 0 draws NCCL's unique id, MPI broadcasts it, and every member joins
(``ncclCommInitRank``). It is cached for the life of the group. Point-to-point messages use a
two-rank NCCL communicator per pair of peers, set up by the pair alone the first time they
talk (the lower rank sends the id over MPI), so a send never needs the rest of the group;
after :meth:`NCCLCommunicator.connect` (which ``init_process_group(backend="nccl")`` calls for
the world and ``new_group`` then for every new group) they use the group's communicator
instead. That matters because NCCL's set-up blocks until both sides join: if every rank's first
message goes to a neighbour who is itself first sending to its own (``isend`` to ``rank + 1``,
then ``irecv``), the pairs' set-ups wait on each other in a cycle, while the group's
communicator exists before any message is sent. :mod:`.nccl_comms` makes and keeps these
communicators; :mod:`.nccl_library` is the NCCL library underneath.

| operation | NCCL |
|---|---|
| all_reduce, reduce, reduce_scatter | ``ncclAllReduce``, ``ncclReduce``, ``ncclReduceScatter`` |
| AVG | ``ncclAvg`` (NCCL 2.10+), else SUM then a division |
| bool any/all, complex sums | uint8 max/min; complex as pairs of floats |
| broadcast, all_gather | ``ncclBroadcast``, ``ncclAllGather`` (as bytes) |
| all_gather_v, reduce_scatter_v | grouped broadcasts / grouped reduces, one per rank |
| gather, scatter, all_to_all(_v) | grouped ``ncclSend``/``ncclRecv`` (``groupStart/End``) |
| send, recv, irecv | ``ncclSend``/``ncclRecv`` on the pair's (or, after connect, the group's) |
| barrier | MPI barrier after this group's NCCL work has finished |

What NCCL lacks (bitwise reductions, bool xor, complex product, int16 and other dtypes) goes to
the MPI fallback (CUDA-aware or staged) with a one-time :class:`RuntimeWarning`. NCCL and MPI
must not use the same GPU at once (an NCCL kernel waiting for a peer that is itself waiting in
MPI deadlocks), so every call of a communicator takes its lock, and an MPI call first waits for
the NCCL work already queued.

Operations run on CuPy's current stream. A blocking call returns once its result is in place
(the stream is synchronized); ``async_op=True`` returns a :class:`Work` whose ``wait()`` does
that. Messages have no tags on NCCL (a pair's messages arrive in order) and a receive needs
its source.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy

from ...core.reduce_op import ReduceOp, check_reduce_dtype
from ..mpi.buffers import check_same_dtype, displacements
from ..mpi.communicator import MPICommunicator
from ..mpi.interface import Array, Communicator, Work
from .array_ops import DeviceOps, Marker
from .cuda_aware import CudaAwareCommunicator
from .nccl_comms import BOOTSTRAP_TAG, NcclComms
from .nccl_library import CupyNccl, NcclBackend
from .staging import PinnedPool, StagedCommunicator
from .transport import NcclReduction, nccl_reduction

__all__ = ["BOOTSTRAP_TAG", "CupyNccl", "NCCLCommunicator", "NcclBackend"]

_Step = Callable[[], None]


def _wait_markers(markers: Sequence[Marker]) -> None:
    for m in markers:
        m.wait()


def _markers_done(markers: Sequence[Marker]) -> bool:
    return all(m.done() for m in markers)


_noted: set[tuple[str, str, ReduceOp]] = set()


class NCCLCommunicator(Communicator):
    """A :class:`Communicator` for device arrays over NCCL, with an MPI fallback.

    Args:
        mpi: the group's MPI communicator (bootstraps NCCL; carries the fallback).
        ops: the device operations.
        backend: the NCCL library (:class:`CupyNccl`).
        cuda_aware: whether the fallback may give device buffers to MPI directly (else it
            stages them through host buffers).
        pool: the pinned buffers of a staged fallback.

    Examples:
        >>> nccl = NCCLCommunicator(world_comm, CupyOps(cupy), CupyNccl(), cuda_aware=False)
        >>> x = cupy.ones(3)
        >>> nccl.all_reduce(x)            # x == world size
    """

    def __init__(self, mpi: MPICommunicator, ops: DeviceOps, backend: NcclBackend,
                 cuda_aware: bool = False, pool: PinnedPool | None = None) -> None:
        self.mpi = mpi
        self.rank, self.size = mpi.rank, mpi.size
        self._ops = ops
        self._backend = backend
        self._cuda_aware = cuda_aware
        self.fallback: Communicator = (CudaAwareCommunicator(mpi, ops, pool) if cuda_aware
                                       else StagedCommunicator(mpi, ops, pool))
        self._pool = pool
        self._lock = threading.RLock()
        self.comms = NcclComms(mpi, backend, self._lock)
        self._last: Marker | None = None
        self._plans: dict[tuple[Any, ReduceOp], NcclReduction | str] = {}
        self._code_cache: dict[NcclReduction, tuple[int, int]] = {}

    @property
    def array_module(self) -> Any:
        return self._ops.xp

    def __repr__(self) -> str:
        return f"NCCLCommunicator(rank={self.rank}, size={self.size}, ops={self._ops.name})"

    # -- set-up --------------------------------------------------------------------------------
    @property
    def connected(self) -> bool:
        """Whether the group's NCCL communicator has been made."""
        return self.comms.connected

    def connect(self) -> None:
        """Make the group's NCCL communicator now; send and recv use it from then on.

        Collective over the group: every member must call it, before any of them sends or
        receives device arrays on this communicator (so that both ends of every message use
        the same NCCL communicator).

        Examples:
            >>> device = device_communicator(world_comm)
            >>> device.connect()   # on every rank, e.g. at start-up
        """
        self.comms.connect()

    # -- running -------------------------------------------------------------------------------
    def _device(self, buf: Array, copy_in: bool, copy_out: bool, after: list[_Step]) -> Any:
        """``buf`` as NCCL takes it: a C-contiguous device array (host arrays are copied)."""
        ops = self._ops
        if ops.is_device(buf):
            if buf.flags.c_contiguous:
                return buf
            dev = ops.contiguous(buf) if copy_in else ops.empty(buf.shape, buf.dtype)
            if copy_out:
                def write_back() -> None:
                    buf[...] = dev

                after.append(write_back)
            return dev
        host = numpy.asarray(buf)
        dev = ops.from_host(host) if copy_in else ops.empty(host.shape, host.dtype)
        if copy_out:
            after.append(lambda: ops.to_host(dev, host))
        return dev

    def _launch(self, enqueue: _Step, after: Sequence[_Step], keep: Any,
                async_op: bool) -> Work | None:
        """Queue NCCL work under the lock; finish now, or when the returned work completes."""
        if not async_op:
            # A blocking call waits for the stream itself: no event to make and record (a few
            # microseconds of an 8-byte call), and nothing left queued for a later MPI call.
            with self._lock:
                enqueue()
                self._ops.synchronize()
                self._last = None
            for step in after:
                step()
            return None
        with self._lock:
            enqueue()
            marker = self._ops.record()
            self._last = marker

        def finish() -> None:
            for step in after:
                step()

        return Work([marker], finish, keep, _wait_markers, _markers_done)

    def _drain(self) -> None:
        """Wait for the NCCL work queued so far (before MPI may touch the GPU)."""
        last, self._last = self._last, None
        if last is not None:
            last.wait()

    def _fallback(self, what: str, dtype: Any, op: ReduceOp, reason: str,
                  call: Callable[[], Any], async_op: bool) -> Work | None:
        """Run ``call`` (blocking, on the MPI fallback) after the queued NCCL work."""
        key = (what, numpy.dtype(dtype).str, op)
        if key not in _noted:
            _noted.add(key)
            kind = "CUDA-aware MPI" if self._cuda_aware else "MPI through host buffers"
            warnings.warn(f"mpiflow: {reason}, so {what} of {numpy.dtype(dtype)} with "
                          f"{op.name} goes over {kind} (noted once)", RuntimeWarning,
                          stacklevel=3)
        with self._lock:
            self._drain()
            call()
        return Work() if async_op else None

    def _reduction(self, dtype: Any, op: ReduceOp) -> NcclReduction | str:
        # Planned once per (dtype, op): the checks and dtype names cost more than the NCCL
        # call of a small message. A pair that fails the check is never cached.
        key = (dtype, op)
        plan = self._plans.get(key)
        if plan is None:
            check_reduce_dtype(op, dtype)
            plan = self._plans[key] = nccl_reduction(dtype, op, self._backend.has_avg)
        return plan

    def _codes(self, plan: NcclReduction) -> tuple[int, int]:
        codes = self._code_cache.get(plan)
        if codes is None:
            codes = self._code_cache[plan] = (self._backend.dtype(plan.dtype),
                                              self._backend.op(plan.op))
        return codes

    def _divide(self, dev: Any) -> _Step:
        size = self.size

        def divide() -> None:
            target = dev
            target /= size

        return divide

    # -- collectives ---------------------------------------------------------------------------
    def barrier(self, async_op: bool = False) -> Work | None:
        with self._lock:
            self._drain()
            return self.mpi.barrier(async_op)

    def all_reduce(self, buf: Array, op: ReduceOp = ReduceOp.SUM,
                   async_op: bool = False) -> Work | None:
        plan = self._reduction(buf.dtype, op)
        if isinstance(plan, str):
            return self._fallback("all_reduce", buf.dtype, op, plan,
                                  lambda: self.fallback.all_reduce(buf, op), async_op)
        after: list[_Step] = []
        dev = self._device(buf, True, True, after)
        if plan.divide:
            after.insert(0, self._divide(dev))
        count = dev.size * plan.count_factor
        dt, code = self._codes(plan)
        comm, ptr, stream = self.comms.group(), self._ops.pointer(dev), self._ops.stream()

        def enqueue() -> None:
            if count:
                comm.allReduce(ptr, ptr, count, dt, code, stream)

        return self._launch(enqueue, after, dev, async_op)

    def reduce(self, buf: Array, op: ReduceOp, root: int,
               async_op: bool = False) -> Work | None:
        root = self.mpi.check_rank(root, "dst")
        plan = self._reduction(buf.dtype, op)
        if isinstance(plan, str):
            return self._fallback("reduce", buf.dtype, op, plan,
                                  lambda: self.fallback.reduce(buf, op, root), async_op)
        mine = self.rank == root
        after: list[_Step] = []
        dev = self._device(buf, True, mine, after)
        if plan.divide and mine:
            after.insert(0, self._divide(dev))
        count = dev.size * plan.count_factor
        dt, code = self._codes(plan)
        comm, ptr, stream = self.comms.group(), self._ops.pointer(dev), self._ops.stream()

        def enqueue() -> None:
            if count:
                comm.reduce(ptr, ptr, count, dt, code, root, stream)

        return self._launch(enqueue, after, dev, async_op)

    def broadcast(self, buf: Array, root: int, async_op: bool = False) -> Work | None:
        root = self.mpi.check_rank(root, "src")
        after: list[_Step] = []
        dev = self._device(buf, self.rank == root, self.rank != root, after)
        comm, ptr, stream = self.comms.group(), self._ops.pointer(dev), self._ops.stream()
        nbytes, u8 = dev.nbytes, self._backend.dtype("uint8")

        def enqueue() -> None:
            if nbytes:
                comm.bcast(ptr, nbytes, u8, root, stream)

        return self._launch(enqueue, after, dev, async_op)

    def all_gather(self, send: Array, recv: Array, async_op: bool = False) -> Work | None:
        check_same_dtype(send, recv)
        if recv.size != send.size * self.size:
            raise ValueError(f"all_gather needs {self.size} x {send.size} receive elements, "
                             f"got {recv.size}")
        after: list[_Step] = []
        s = self._device(send, True, False, after)
        r = self._device(recv, False, True, after)
        comm, stream = self.comms.group(), self._ops.stream()
        ps, pr, nbytes, u8 = (self._ops.pointer(s), self._ops.pointer(r), s.nbytes,
                              self._backend.dtype("uint8"))

        def enqueue() -> None:
            if nbytes:
                comm.allGather(ps, pr, nbytes, u8, stream)

        return self._launch(enqueue, after, (s, r), async_op)

    def all_gather_v(self, send: Array, recv: Array, counts: Sequence[int],
                     async_op: bool = False) -> Work | None:
        check_same_dtype(send, recv)
        counts = self.mpi.check_counts(counts, "counts")
        if counts[self.rank] != send.size or sum(counts) != recv.size:
            raise ValueError(f"all_gather_v counts {counts} do not match send size {send.size} "
                             f"on rank {self.rank} and receive size {recv.size}")
        after: list[_Step] = []
        s = self._device(send, True, False, after)
        r = self._device(recv, False, True, after)
        comm, stream, backend = self.comms.group(), self._ops.stream(), self._backend
        ps, pr, item, u8 = (self._ops.pointer(s), self._ops.pointer(r), recv.dtype.itemsize,
                            backend.dtype("uint8"))
        offsets, me = displacements(counts), self.rank

        def enqueue() -> None:
            backend.group_start()
            try:
                for root, (n, off) in enumerate(zip(counts, offsets)):
                    if n:
                        chunk = pr + off * item
                        comm.broadcast(ps if root == me else chunk, chunk, n * item, u8, root,
                                       stream)
            finally:
                backend.group_end()

        return self._launch(enqueue, after, (s, r), async_op)

    def gather(self, send: Array, recv: Array | None, root: int,
               async_op: bool = False) -> Work | None:
        root = self.mpi.check_rank(root, "dst")
        mine = self.rank == root
        if mine:
            if recv is None:
                raise ValueError("gather needs a receive buffer on the destination rank")
            check_same_dtype(send, recv)
            if recv.size != send.size * self.size:
                raise ValueError(f"gather needs {self.size} x {send.size} receive elements on "
                                 f"the destination, got {recv.size}")
        after: list[_Step] = []
        s = self._device(send, True, False, after)
        r = self._device(recv, False, True, after) if mine else None
        ops, backend = self._ops, self._backend
        comm, stream = self.comms.group(), ops.stream()
        ps, nbytes, u8 = ops.pointer(s), s.nbytes, backend.dtype("uint8")
        pr = ops.pointer(r) if r is not None else 0
        me, size = self.rank, self.size

        def enqueue() -> None:
            if not nbytes:
                return
            if r is not None:
                flat = r.reshape(-1)
                flat[me * s.size:(me + 1) * s.size] = s.reshape(-1)
            backend.group_start()
            try:
                if r is None:
                    comm.send(ps, nbytes, u8, root, stream)
                else:
                    for peer in range(size):
                        if peer != me:
                            comm.recv(pr + peer * nbytes, nbytes, u8, peer, stream)
            finally:
                backend.group_end()

        return self._launch(enqueue, after, (s, r), async_op)

    def scatter(self, send: Array | None, recv: Array, root: int,
                async_op: bool = False) -> Work | None:
        root = self.mpi.check_rank(root, "src")
        mine = self.rank == root
        if mine:
            if send is None:
                raise ValueError("scatter needs a send buffer on the source rank")
            check_same_dtype(send, recv)
            if send.size != recv.size * self.size:
                raise ValueError(f"scatter needs {self.size} x {recv.size} send elements on the "
                                 f"source, got {send.size}")
        after: list[_Step] = []
        s = self._device(send, True, False, after) if mine else None
        r = self._device(recv, False, True, after)
        ops, backend = self._ops, self._backend
        comm, stream = self.comms.group(), ops.stream()
        pr, nbytes, u8 = ops.pointer(r), r.nbytes, backend.dtype("uint8")
        ps = ops.pointer(s) if s is not None else 0
        me, size = self.rank, self.size

        def enqueue() -> None:
            if not nbytes:
                return
            if s is not None:
                r.reshape(-1)[...] = s.reshape(-1)[me * r.size:(me + 1) * r.size]
            backend.group_start()
            try:
                if s is None:
                    comm.recv(pr, nbytes, u8, root, stream)
                else:
                    for peer in range(size):
                        if peer != me:
                            comm.send(ps + peer * nbytes, nbytes, u8, peer, stream)
            finally:
                backend.group_end()

        return self._launch(enqueue, after, (s, r), async_op)

    def reduce_scatter(self, send: Array, recv: Array, op: ReduceOp = ReduceOp.SUM,
                       async_op: bool = False) -> Work | None:
        check_same_dtype(send, recv)
        if send.size != recv.size * self.size:
            raise ValueError(f"reduce_scatter needs {self.size} x {recv.size} send elements, "
                             f"got {send.size}")
        plan = self._reduction(send.dtype, op)
        if isinstance(plan, str):
            return self._fallback("reduce_scatter", send.dtype, op, plan,
                                  lambda: self.fallback.reduce_scatter(send, recv, op), async_op)
        after: list[_Step] = []
        s = self._device(send, True, False, after)
        r = self._device(recv, False, True, after)
        if plan.divide:
            after.insert(0, self._divide(r))
        count = r.size * plan.count_factor
        dt, code = self._codes(plan)
        comm, stream = self.comms.group(), self._ops.stream()
        ps, pr = self._ops.pointer(s), self._ops.pointer(r)

        def enqueue() -> None:
            if count:
                comm.reduceScatter(ps, pr, count, dt, code, stream)

        return self._launch(enqueue, after, (s, r), async_op)

    def reduce_scatter_v(self, send: Array, recv: Array, counts: Sequence[int],
                         op: ReduceOp = ReduceOp.SUM, async_op: bool = False) -> Work | None:
        check_same_dtype(send, recv)
        counts = self.mpi.check_counts(counts, "counts")
        if counts[self.rank] != recv.size or sum(counts) != send.size:
            raise ValueError(f"reduce_scatter_v counts {counts} do not match receive size "
                             f"{recv.size} on rank {self.rank} and send size {send.size}")
        plan = self._reduction(send.dtype, op)
        if isinstance(plan, str):
            return self._fallback("reduce_scatter_v", send.dtype, op, plan,
                                  lambda: self.fallback.reduce_scatter_v(send, recv, counts, op),
                                  async_op)
        after: list[_Step] = []
        s = self._device(send, True, False, after)
        r = self._device(recv, False, True, after)
        if plan.divide:
            after.insert(0, self._divide(r))
        dt, code = self._codes(plan)
        comm, stream, backend = self.comms.group(), self._ops.stream(), self._backend
        ps, pr, item = self._ops.pointer(s), self._ops.pointer(r), send.dtype.itemsize
        offsets, me, factor = displacements(counts), self.rank, plan.count_factor

        def enqueue() -> None:
            backend.group_start()
            try:
                for root, (n, off) in enumerate(zip(counts, offsets)):
                    if n:
                        chunk = ps + off * item
                        comm.reduce(chunk, pr if root == me else chunk, n * factor, dt, code,
                                    root, stream)
            finally:
                backend.group_end()

        return self._launch(enqueue, after, (s, r), async_op)

    def all_to_all(self, send: Array, recv: Array, async_op: bool = False) -> Work | None:
        check_same_dtype(send, recv)
        if send.size != recv.size or send.size % self.size:
            raise ValueError(f"all_to_all needs equal send and receive sizes divisible by "
                             f"{self.size}, got {send.size} and {recv.size}")
        per = send.size // self.size
        counts = [per] * self.size
        return self._exchange(send, counts, recv, counts, async_op)

    def all_to_all_v(self, send: Array, send_counts: Sequence[int], recv: Array,
                     recv_counts: Sequence[int], async_op: bool = False) -> Work | None:
        check_same_dtype(send, recv)
        scounts = self.mpi.check_counts(send_counts, "send_counts")
        rcounts = self.mpi.check_counts(recv_counts, "recv_counts")
        if sum(scounts) != send.size or sum(rcounts) != recv.size:
            raise ValueError(f"all_to_all_v counts ({sum(scounts)} sent, {sum(rcounts)} "
                             f"received) do not match buffer sizes {send.size} and {recv.size}")
        return self._exchange(send, scounts, recv, rcounts, async_op)

    def _exchange(self, send: Array, scounts: list[int], recv: Array, rcounts: list[int],
                  async_op: bool) -> Work | None:
        """All-to-all as grouped sends and receives; this rank's own chunk is a local copy."""
        me = self.rank
        if scounts[me] != rcounts[me]:
            raise ValueError(f"all_to_all_v: rank {me} sends itself {scounts[me]} elements but "
                             f"expects {rcounts[me]}")
        after: list[_Step] = []
        s = self._device(send, True, False, after)
        r = self._device(recv, False, True, after)
        comm, stream, backend = self.comms.group(), self._ops.stream(), self._backend
        ps, pr, item, u8 = (self._ops.pointer(s), self._ops.pointer(r), send.dtype.itemsize,
                            backend.dtype("uint8"))
        soff, roff, me = displacements(scounts), displacements(rcounts), self.rank

        def enqueue() -> None:
            if scounts[me]:
                r.reshape(-1)[roff[me]:roff[me] + rcounts[me]] = \
                    s.reshape(-1)[soff[me]:soff[me] + scounts[me]]
            backend.group_start()
            try:
                for peer in range(len(scounts)):
                    if peer == me:
                        continue
                    if scounts[peer]:
                        comm.send(ps + soff[peer] * item, scounts[peer] * item, u8, peer, stream)
                    if rcounts[peer]:
                        comm.recv(pr + roff[peer] * item, rcounts[peer] * item, u8, peer, stream)
            finally:
                backend.group_end()

        return self._launch(enqueue, after, (s, r), async_op)

    # -- point to point ------------------------------------------------------------------------
    def _peer(self, rank: int | None, what: str) -> int:
        if rank is None:
            raise ValueError("NCCL cannot receive from any source: give src (or use "
                             "MPIFLOW_BACKEND=mpi)")
        peer = self.mpi.check_rank(rank, what)
        if peer == self.rank:
            raise ValueError(f"{what}={peer} is this rank: NCCL cannot send a rank to itself")
        return peer

    def send(self, buf: Array, dst: int, tag: int = 0, async_op: bool = False) -> Work | None:
        peer = self._peer(dst, "dst")
        after: list[_Step] = []
        dev = self._device(buf, True, False, after)
        comm, index = self.comms.peer(peer)
        ptr, nbytes, stream = self._ops.pointer(dev), dev.nbytes, self._ops.stream()
        u8 = self._backend.dtype("uint8")

        def enqueue() -> None:
            if nbytes:
                comm.send(ptr, nbytes, u8, index, stream)

        return self._launch(enqueue, after, dev, async_op)

    def _start_recv(self, buf: Array, src: int | None) -> tuple[int, _Step, list[_Step], Any]:
        peer = self._peer(src, "src")
        after: list[_Step] = []
        dev = self._device(buf, False, True, after)
        comm, index = self.comms.peer(peer)
        ptr, nbytes, stream = self._ops.pointer(dev), dev.nbytes, self._ops.stream()
        u8 = self._backend.dtype("uint8")

        def enqueue() -> None:
            if nbytes:
                comm.recv(ptr, nbytes, u8, index, stream)

        return peer, enqueue, after, dev

    def recv(self, buf: Array, src: int | None, tag: int = 0) -> int:
        peer, enqueue, after, dev = self._start_recv(buf, src)
        self._launch(enqueue, after, dev, async_op=False)
        return peer

    def irecv(self, buf: Array, src: int | None, tag: int = 0) -> Work:
        _, enqueue, after, dev = self._start_recv(buf, src)
        work = self._launch(enqueue, after, dev, async_op=True)
        assert work is not None
        return work

    # -- groups --------------------------------------------------------------------------------
    def split(self, ranks: Sequence[int]) -> NCCLCommunicator | None:
        child = self.mpi.split(ranks)
        return None if child is None else NCCLCommunicator(child, self._ops, self._backend,
                                                           self._cuda_aware, self._pool)

    def split_by_color(self, color: int | None, key: int = 0) -> NCCLCommunicator | None:
        child = self.mpi.split_by_color(color, key)
        return None if child is None else NCCLCommunicator(child, self._ops, self._backend,
                                                           self._cuda_aware, self._pool)
