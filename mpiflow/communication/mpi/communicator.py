"""The MPI implementation of :class:`Communicator`, over mpi4py's buffer (upper-case) API.

Contiguous buffers go straight to MPI with no copy. A non-contiguous view is staged through a
contiguous copy and, for outputs, written back into the view once the operation completes, so a
strided view is received in place as far as the caller can tell.

Device (CuPy) arrays go to the communicator's device communicator instead (NCCL, CUDA-aware
MPI or staging through host buffers), made the first time one is passed by the maker that
:mod:`.device` registers (:func:`set_device_maker`); numpy arrays pay one type check for it.

Make communicators with :func:`new_communicator`: it gives debug mode's checking subclass
when ``MPIFLOW_DEBUG`` is set (:mod:`.debug_mode` registers it, :func:`set_debug_kind`), and
an :class:`MPICommunicator` otherwise.
"""

from __future__ import annotations

import sys
from _thread import get_ident
from collections.abc import Callable, Sequence
from typing import Any

import numpy
from mpi4py import MPI

from ...core.completion import chain as _chain
from ...core.message_size import MessageSizeError
from ...core.reduce_op import ReduceOp, divide_in_place
from ..fast import UNCHECKED, FastPaths, concurrent_use
from ..form import all_reduce_formed, out_of_place_from, pieces
from ..watchdog import monitor as watchdog
from ..watchdog.failure import collective_failed
from ..watchdog.monitor import operation_of
from ..watchdog.state import mark_call
from .buffers import (
    TAG_UB,
    UNMAPPABLE,
    check_same_dtype,
    check_tag,
    displacements,
    p2p_error,
    readable,
    unmappable,
    writable,
)
from .datatypes import reduce_plan
from .interface import Array, Communicator, Work
from .requests import collective_waits, receive_waits, test_all, wait_all

__all__ = ["TAG_UB", "MPICommunicator", "MessageSizeError", "check_tag", "new_communicator",
           "p2p_error", "set_debug_kind", "set_device_maker"]

_IN_PLACE = MPI.IN_PLACE
_BYTE = MPI.BYTE
_ndarray = numpy.ndarray


def _device_route(comm: MPICommunicator, *bufs: Any) -> Communicator | None:
    """The device communicator of ``comm`` when a buffer is a CuPy array, else None."""
    cupy = sys.modules.get("cupy")
    device_array = getattr(cupy, "ndarray", None)
    if device_array is None or not any(isinstance(b, device_array) for b in bufs):
        return None
    return comm.on_device()


class MPICommunicator(Communicator):
    """A :class:`Communicator` over an ``mpi4py.MPI.Comm``, for numpy arrays.

    mpiflow makes its communicators with :func:`new_communicator`, which gives debug mode's
    subclass under ``MPIFLOW_DEBUG``; the class itself always makes a plain one.

    Args:
        comm: the MPI communicator (``MPI.COMM_WORLD`` by default).

    Examples:
        >>> c = MPICommunicator(MPI.COMM_WORLD)
        >>> x = numpy.ones(3)
        >>> c.all_reduce(x)   # x is now world_size everywhere
    """

    def __init__(self, comm: MPI.Comm | None = None) -> None:
        self.mpi_comm: MPI.Comm = MPI.COMM_WORLD if comm is None else comm
        self.rank = self.mpi_comm.Get_rank()
        self.size = self.mpi_comm.Get_size()
        # op -> dtype -> MPI op, for the pairs MPI reduces natively with no post-processing:
        # the fast path of all_reduce.
        self._native: dict[ReduceOp, dict[Any, MPI.Op]] = {op: {} for op in ReduceOp}
        # The blocking calls on plain contiguous numpy arrays, with the fewest checks; the
        # public faces call them first for the world group.
        # The calls left until the next one whose arguments the ranks compare (a sampled
        # communicator's schedule, .debug.sampled; never for this class): shared with the
        # fast paths, which count the calls they run.
        self.check_due = [UNCHECKED]
        self.fast = (FastPaths.disabled() if self.checks_every_call
                     else FastPaths(self.mpi_comm, self._native, self.check_due))

    checks_every_call = False
    """True for a communicator that must see every call (debug mode): no fast paths."""

    never_due = True
    """True for a communicator none of whose calls the ranks compare (``check_due`` is only
    the fast paths' count then, which the general path starts again when it runs out)."""

    @property
    def array_module(self) -> Any:
        return numpy

    def __repr__(self) -> str:
        return f"MPICommunicator(rank={self.rank}, size={self.size})"

    # -- helpers -------------------------------------------------------------------------------
    device_comm: Communicator | None = None
    """This group's device communicator, once the device maker made it (set_device_maker)."""

    def on_device(self) -> Communicator | None:
        """The communicator that moves this group's device arrays (made on first use).

        Returns None in a subclass that gives device arrays to MPI itself (the CUDA-aware
        layer's ``DirectMPICommunicator``).
        """
        device = self.device_comm
        if device is None:
            make = _device_maker
            if make is None:
                raise RuntimeError("no device transport is registered: import "
                                   "mpiflow.communication.gpu.maker (importing mpiflow does)")
            device = make(self)
        return device

    def _source(self, send: Array, recv: Array | None) -> Array:
        """``send`` as MPI may read it beside ``recv``: contiguous, and a copy when the two
        share memory (MPI forbids aliased buffers; PyTorch allows, e.g., gathering into a
        tensor whose chunk is the input)."""
        if recv is not None and self.array_module.may_share_memory(send, recv):
            return send.copy()  # C order, in the array's own module
        return readable(send)

    def check_rank(self, rank: int, what: str) -> int:
        """Return ``rank`` as an int, checked to be a rank of this group.

        Args:
            rank: the rank argument.
            what: its name, for the error (``"dst"``, ``"src"``).

        Raises:
            TypeError: ``rank`` is not an int.
            ValueError: ``rank`` is outside ``0..size-1``.

        Examples:
            >>> MPICommunicator(MPI.COMM_WORLD).check_rank(0, "dst")
            0
        """
        if not isinstance(rank, (int, numpy.integer)) or isinstance(rank, bool):
            raise TypeError(f"{what} must be an int rank, got {rank!r}")
        if not 0 <= rank < self.size:
            raise ValueError(f"{what}={rank} is not a rank of this group (size {self.size})")
        return int(rank)

    def check_counts(self, counts: Sequence[int], what: str) -> list[int]:
        """Return ``counts`` as ints, checked to be one non-negative count per rank.

        Raises:
            ValueError: a wrong number of counts, or a negative one.
        """
        out = [int(c) for c in counts]
        if len(out) != self.size or any(c < 0 for c in out):
            raise ValueError(f"{what} must be {self.size} non-negative counts, got {list(counts)}")
        return out

    def run(self, blocking: Callable[[], Any], start: Callable[[], MPI.Request],
            async_op: bool, finalize: Callable[[], None] | None, keep: Any = None,
            collective: bool = True) -> Work | None:
        """Run a call's blocking form, or start its non-blocking one (``async_op``).

        For a collective (``collective``), a second thread of this rank that calls one on
        this communicator meanwhile gets ``RuntimeError`` (the in-use mark of the fast
        paths, :func:`.fast.concurrent_use`), and an error MPI reports aborts the job with a
        report naming the call (:func:`.failure.collective_failed`); the operation's name
        comes from ``start``, a closure made in its method (or a bound ``comm.Ibarrier``).
        Debug mode's subclass overrides it to agree on the call right before MPI.

        Args:
            blocking: the blocking MPI call.
            start: the non-blocking MPI call, returning its request.
            async_op: start the call and return its :class:`Work` instead of blocking.
            finalize: what to run once the call has completed (a write-back), or None.
            keep: buffers that must outlive the call.
            collective: a collective (False: a point-to-point call).
        """
        in_use = self.fast.in_use
        owner = in_use.owner
        if collective:
            if owner is not None and owner != get_ident():  # not a nested call
                concurrent_use(in_use, self.mpi_comm, operation_of(start)[0])
                owner = in_use.owner  # None again after a resync (.skew)
            if (due := self.check_due)[0] <= 1 and self.never_due:
                due[0] = UNCHECKED  # the fast paths counted UNCHECKED calls: they go on
        if async_op:
            try:
                request = start()
            except UNMAPPABLE as exc:
                raise unmappable(exc) from None
            except MPI.Exception as exc:
                if collective:
                    collective_failed(operation_of(start)[0], self.mpi_comm, exc, keep)
                raise
            waits = collective_waits(start, self.mpi_comm, keep) if collective else \
                (wait_all, test_all)
            work = Work([request], finalize, keep, *waits)
            work.what = start  # what the watchdog names when a wait() hangs
            return work
        mark_call()  # the watchdog's mark: a new blocking call
        mark = collective and owner is None
        if mark:
            in_use.owner = get_ident()
        try:
            blocking()
        except UNMAPPABLE as exc:
            raise unmappable(exc) from None
        except MPI.Exception as exc:
            if collective:
                collective_failed(operation_of(start)[0], self.mpi_comm, exc, keep)
            raise
        finally:
            if mark:
                in_use.owner = None
        if finalize is not None:
            finalize()
        return None

    def _average(self, buf: Array) -> Callable[[], None]:
        size = self.size

        def divide() -> None:
            divide_in_place(buf, size)  # in place, in the buffer's own dtype

        return divide

    # -- collectives ---------------------------------------------------------------------------
    def barrier(self, async_op: bool = False) -> Work | None:
        comm = self.mpi_comm
        return self.run(comm.Barrier, comm.Ibarrier, async_op, None)

    def all_reduce(self, buf: Array, op: ReduceOp = ReduceOp.SUM,
                   async_op: bool = False) -> Work | None:
        if not async_op and self.fast.all_reduce(buf, op):
            return None
        if type(buf) is not _ndarray and (dev := _device_route(self, buf)) is not None:
            return dev.all_reduce(buf, op, async_op)
        plan = reduce_plan(buf.dtype, op)
        if plan.datatype is None and not plan.average:
            self._native[op][buf.dtype] = plan.op
        stage, write_back = writable(buf, keep_contents=True)
        spec = plan.spec(stage)
        comm = self.mpi_comm
        finalize = _chain(self._average(stage) if plan.average else None, write_back)
        # The blocking call's form (.form): in pieces, out of place; non-blocking: whole, in place.
        oop_from, in_pieces = out_of_place_from(), pieces()

        def start() -> MPI.Request:
            return comm.Iallreduce(_IN_PLACE, spec, plan.op)

        if async_op or ((oop_from is None or stage.nbytes < oop_from)
                        and (in_pieces is None or stage.nbytes <= in_pieces[0])):
            return self.run(lambda: comm.Allreduce(_IN_PLACE, spec, plan.op), start,
                            async_op, finalize, stage)
        return self.run(lambda: all_reduce_formed(comm.Allreduce, stage, plan.spec, plan.op,
                                                  self.fast.scratch),
                        start, False, finalize, stage)

    def reduce(self, buf: Array, op: ReduceOp, root: int,
               async_op: bool = False) -> Work | None:
        if type(buf) is not _ndarray and (dev := _device_route(self, buf)) is not None:
            return dev.reduce(buf, op, root, async_op)
        root = self.check_rank(root, "dst")
        plan = reduce_plan(buf.dtype, op)
        comm = self.mpi_comm
        if self.rank == root:
            stage, write_back = writable(buf, keep_contents=True)
            send, recv = _IN_PLACE, plan.spec(stage)
            finalize = _chain(self._average(stage) if plan.average else None, write_back)
        else:
            stage, finalize = readable(buf), None
            send, recv = plan.spec(stage), None
        return self.run(lambda: comm.Reduce(send, recv, plan.op, root),
                        lambda: comm.Ireduce(send, recv, plan.op, root),
                        async_op, finalize, stage)

    def broadcast(self, buf: Array, root: int, async_op: bool = False) -> Work | None:
        if not async_op and self.fast.broadcast(buf, root):
            return None
        if type(buf) is not _ndarray and (dev := _device_route(self, buf)) is not None:
            return dev.broadcast(buf, root, async_op)
        root = self.check_rank(root, "src")
        if self.rank == root:
            stage, write_back = readable(buf), None
        else:
            stage, write_back = writable(buf, keep_contents=False)
        comm = self.mpi_comm
        return self.run(lambda: comm.Bcast(stage, root), lambda: comm.Ibcast(stage, root),
                        async_op, write_back, stage)

    def all_gather(self, send: Array, recv: Array, async_op: bool = False) -> Work | None:
        if not async_op and self.fast.all_gather(send, recv):
            return None
        if (type(send) is not _ndarray or type(recv) is not _ndarray) and \
                (dev := _device_route(self, send, recv)) is not None:
            return dev.all_gather(send, recv, async_op)
        check_same_dtype(send, recv)
        if recv.size != send.size * self.size:
            raise ValueError(f"all_gather needs {self.size} x {send.size} receive elements, "
                             f"got {recv.size}")
        src = self._source(send, recv)
        dst, write_back = writable(recv, keep_contents=False)
        comm = self.mpi_comm
        return self.run(lambda: comm.Allgather(src, dst), lambda: comm.Iallgather(src, dst),
                        async_op, write_back, (src, dst))

    def all_gather_v(self, send: Array, recv: Array, counts: Sequence[int],
                     async_op: bool = False) -> Work | None:
        if (type(send) is not _ndarray or type(recv) is not _ndarray) and \
                (dev := _device_route(self, send, recv)) is not None:
            return dev.all_gather_v(send, recv, counts, async_op)
        check_same_dtype(send, recv)
        counts = self.check_counts(counts, "counts")
        if counts[self.rank] != send.size or sum(counts) != recv.size:
            raise ValueError(f"all_gather_v counts {counts} do not match send size {send.size} "
                             f"on rank {self.rank} and receive size {recv.size}")
        src = self._source(send, recv)
        dst, write_back = writable(recv, keep_contents=False)
        spec = [dst, (counts, displacements(counts))]
        comm = self.mpi_comm
        return self.run(lambda: comm.Allgatherv(src, spec), lambda: comm.Iallgatherv(src, spec),
                        async_op, write_back, (src, dst))

    def gather(self, send: Array, recv: Array | None, root: int,
               async_op: bool = False) -> Work | None:
        if (type(send) is not _ndarray or type(recv) is not _ndarray) and \
                (dev := _device_route(self, send, recv)) is not None:
            return dev.gather(send, recv, root, async_op)
        root = self.check_rank(root, "dst")
        src = self._source(send, recv)
        dst, write_back = None, None
        if self.rank == root:
            if recv is None:
                raise ValueError("gather needs a receive buffer on the destination rank")
            check_same_dtype(send, recv)
            if recv.size != send.size * self.size:
                raise ValueError(f"gather needs {self.size} x {send.size} receive elements on "
                                 f"the destination, got {recv.size}")
            dst, write_back = writable(recv, keep_contents=False)
        comm = self.mpi_comm
        return self.run(lambda: comm.Gather(src, dst, root), lambda: comm.Igather(src, dst, root),
                        async_op, write_back, (src, dst))

    def scatter(self, send: Array | None, recv: Array, root: int,
                async_op: bool = False) -> Work | None:
        if (type(send) is not _ndarray or type(recv) is not _ndarray) and \
                (dev := _device_route(self, send, recv)) is not None:
            return dev.scatter(send, recv, root, async_op)
        root = self.check_rank(root, "src")
        src = None
        if self.rank == root:
            if send is None:
                raise ValueError("scatter needs a send buffer on the source rank")
            check_same_dtype(send, recv)
            if send.size != recv.size * self.size:
                raise ValueError(f"scatter needs {self.size} x {recv.size} send elements on the "
                                 f"source, got {send.size}")
            src = self._source(send, recv)
        dst, write_back = writable(recv, keep_contents=False)
        comm = self.mpi_comm
        return self.run(lambda: comm.Scatter(src, dst, root),
                        lambda: comm.Iscatter(src, dst, root), async_op, write_back, (src, dst))

    def reduce_scatter(self, send: Array, recv: Array, op: ReduceOp = ReduceOp.SUM,
                       async_op: bool = False) -> Work | None:
        if not async_op and self.fast.reduce_scatter(send, recv, op):
            return None
        if (type(send) is not _ndarray or type(recv) is not _ndarray) and \
                (dev := _device_route(self, send, recv)) is not None:
            return dev.reduce_scatter(send, recv, op, async_op)
        check_same_dtype(send, recv)
        if send.size != recv.size * self.size:
            raise ValueError(f"reduce_scatter needs {self.size} x {recv.size} send elements, "
                             f"got {send.size}")
        plan = reduce_plan(send.dtype, op)
        if plan.datatype is None and not plan.average:
            self._native[op][send.dtype] = plan.op
        src = self._source(send, recv)
        dst, write_back = writable(recv, keep_contents=False)
        s, r = plan.spec(src, count=dst.size), plan.spec(dst)
        finalize = _chain(self._average(dst) if plan.average else None, write_back)
        comm = self.mpi_comm
        return self.run(lambda: comm.Reduce_scatter_block(s, r, plan.op),
                        lambda: comm.Ireduce_scatter_block(s, r, plan.op),
                        async_op, finalize, (src, dst))

    def reduce_scatter_v(self, send: Array, recv: Array, counts: Sequence[int],
                         op: ReduceOp = ReduceOp.SUM, async_op: bool = False) -> Work | None:
        if (type(send) is not _ndarray or type(recv) is not _ndarray) and \
                (dev := _device_route(self, send, recv)) is not None:
            return dev.reduce_scatter_v(send, recv, counts, op, async_op)
        check_same_dtype(send, recv)
        counts = self.check_counts(counts, "counts")
        if counts[self.rank] != recv.size or sum(counts) != send.size:
            raise ValueError(f"reduce_scatter_v counts {counts} do not match receive size "
                             f"{recv.size} on rank {self.rank} and send size {send.size}")
        plan = reduce_plan(send.dtype, op)
        src = self._source(send, recv)
        dst, write_back = writable(recv, keep_contents=False)
        s, r = plan.spec(src), plan.spec(dst)
        finalize = _chain(self._average(dst) if plan.average else None, write_back)
        comm = self.mpi_comm
        return self.run(lambda: comm.Reduce_scatter(s, r, counts, plan.op),
                        lambda: comm.Ireduce_scatter(s, r, counts, plan.op),
                        async_op, finalize, (src, dst))

    def all_to_all(self, send: Array, recv: Array, async_op: bool = False) -> Work | None:
        if not async_op and self.fast.all_to_all(send, recv):
            return None
        if (type(send) is not _ndarray or type(recv) is not _ndarray) and \
                (dev := _device_route(self, send, recv)) is not None:
            return dev.all_to_all(send, recv, async_op)
        check_same_dtype(send, recv)
        if send.size != recv.size or send.size % self.size:
            raise ValueError(f"all_to_all needs equal send and receive sizes divisible by "
                             f"{self.size}, got {send.size} and {recv.size}")
        src = self._source(send, recv)
        dst, write_back = writable(recv, keep_contents=False)
        comm = self.mpi_comm
        return self.run(lambda: comm.Alltoall(src, dst), lambda: comm.Ialltoall(src, dst),
                        async_op, write_back, (src, dst))

    def all_to_all_v(self, send: Array, send_counts: Sequence[int], recv: Array,
                     recv_counts: Sequence[int], async_op: bool = False) -> Work | None:
        if (type(send) is not _ndarray or type(recv) is not _ndarray) and \
                (dev := _device_route(self, send, recv)) is not None:
            return dev.all_to_all_v(send, send_counts, recv, recv_counts, async_op)
        check_same_dtype(send, recv)
        scounts = self.check_counts(send_counts, "send_counts")
        rcounts = self.check_counts(recv_counts, "recv_counts")
        if sum(scounts) != send.size or sum(rcounts) != recv.size:
            raise ValueError(f"all_to_all_v counts ({sum(scounts)} sent, {sum(rcounts)} "
                             f"received) do not match buffer sizes {send.size} and {recv.size}")
        src = self._source(send, recv)
        dst, write_back = writable(recv, keep_contents=False)
        s = [src, (scounts, displacements(scounts))]
        r = [dst, (rcounts, displacements(rcounts))]
        comm = self.mpi_comm
        return self.run(lambda: comm.Alltoallv(s, r), lambda: comm.Ialltoallv(s, r),
                        async_op, write_back, (src, dst))

    # -- point to point ------------------------------------------------------------------------
    def send(self, buf: Array, dst: int, tag: int = 0, async_op: bool = False) -> Work | None:
        if not async_op:
            try:
                if self.fast.send(buf, dst, tag):
                    return None
            # A bad tag: MPI refused before sending anything (mpi4py's OverflowError for one
            # past a C int, where TAG_UB is the largest int: Open MPI).
            except (MPI.Exception, OverflowError) as exc:
                raise p2p_error(exc, "send", dst, tag) from None
        if type(buf) is not _ndarray and (dev := _device_route(self, buf)) is not None:
            return dev.send(buf, dst, tag, async_op)
        dst = self.check_rank(dst, "dst")
        check_tag(tag)
        src = readable(buf)
        comm = self.mpi_comm
        try:
            return self.run(lambda: comm.Send(src, dst, tag), lambda: comm.Isend(src, dst, tag),
                            async_op, None, src, collective=False)
        except MPI.Exception as exc:
            raise p2p_error(exc, "send", dst, tag) from None

    def recv(self, buf: Array, src: int | None, tag: int = 0) -> int:
        # The common case first: the fast path (which checks the received size too), once
        # the tag is known to be in range (MPICH reads -1 as MPI_ANY_TAG).
        if type(src) is int and type(tag) is int and 0 <= tag <= TAG_UB:
            try:
                if self.fast.recv(buf, src, tag):
                    return src
            except MPI.Exception as exc:
                raise p2p_error(exc, "recv", src, tag, buf) from None
        if type(buf) is not _ndarray and (dev := _device_route(self, buf)) is not None:
            return dev.recv(buf, src, tag)
        source = MPI.ANY_SOURCE if src is None else self.check_rank(src, "src")
        if type(tag) is not int or not 0 <= tag <= TAG_UB:  # MPICH reads -1 as MPI_ANY_TAG
            check_tag(tag)
        dst, write_back = writable(buf, keep_contents=False)
        status = MPI.Status()
        mark_call()
        try:
            self.mpi_comm.Recv(dst, source, tag, status)
        except UNMAPPABLE as exc:
            raise unmappable(exc) from None
        except MPI.Exception as exc:
            raise p2p_error(exc, "recv", src, tag, dst) from None
        if status.Get_count(_BYTE) != dst.nbytes:
            raise MessageSizeError(status.Get_source(), tag, dst, status.Get_count(_BYTE))
        if write_back is not None:
            write_back()
        return int(status.Get_source())

    def irecv(self, buf: Array, src: int | None, tag: int = 0) -> Work:
        if type(buf) is not _ndarray and (dev := _device_route(self, buf)) is not None:
            return dev.irecv(buf, src, tag)
        source = MPI.ANY_SOURCE if src is None else self.check_rank(src, "src")
        check_tag(tag)
        dst, write_back = writable(buf, keep_contents=False)
        try:
            request = self.mpi_comm.Irecv(dst, source, tag)
        except UNMAPPABLE as exc:
            raise unmappable(exc) from None
        except MPI.Exception as exc:
            raise p2p_error(exc, "recv", src, tag, dst) from None
        work = Work([request], write_back, dst, *receive_waits(src, tag, dst))
        work.what = ("recv", self.mpi_comm, source)
        return work

    # -- groups --------------------------------------------------------------------------------
    def split(self, ranks: Sequence[int]) -> MPICommunicator | None:
        members = [self.check_rank(r, "rank") for r in ranks]
        if len(set(members)) != len(members) or not members:
            raise ValueError(f"group ranks must be distinct and non-empty, got {list(ranks)}")
        group = self.mpi_comm.Get_group().Incl(members)
        mark_call()
        try:
            comm = self.mpi_comm.Create(group)
        finally:
            group.Free()
        return None if comm == MPI.COMM_NULL else new_communicator(_returning(comm))

    def split_by_color(self, color: int | None, key: int = 0) -> MPICommunicator | None:
        if color is not None and (isinstance(color, bool) or int(color) < 0):
            raise ValueError(f"color must be a non-negative int or None, got {color!r}")
        mark_call()
        comm = self.mpi_comm.Split(MPI.UNDEFINED if color is None else int(color), int(key))
        return None if comm == MPI.COMM_NULL else new_communicator(_returning(comm))


def _returning(comm: MPI.Comm) -> MPI.Comm:
    """``comm`` returning MPI's errors as exceptions (MPICH's ``MPI_Comm_create`` does not pass
    the handler on), so that a failed collective is mpiflow's report, not MPI's fatal abort."""
    comm.Set_errhandler(MPI.ERRORS_RETURN)
    return comm


# -- what other modules plug in ----------------------------------------------------------------
_Maker = Callable[[MPI.Comm | None], MPICommunicator]
_debug_kind: tuple[Callable[[], bool], _Maker] | None = None
_device_maker: Callable[[MPICommunicator], Communicator] | None = None


def new_communicator(comm: MPI.Comm | None = None) -> MPICommunicator:
    """The communicator mpiflow makes over ``comm``: use it rather than the class.

    What ``MPIFLOW_CHECK`` asks for (:mod:`.debug.sampled`): by default a communicator that
    compares the arguments of a sample of the collectives across ranks; with ``all`` (or
    ``MPIFLOW_DEBUG=1``) debug mode's, which compares every call; with ``off`` a plain
    :class:`MPICommunicator`.

    Args:
        comm: the MPI communicator (``MPI.COMM_WORLD`` by default).

    Examples:
        >>> c = new_communicator(MPI.COMM_WORLD.Dup())
        >>> type(c).__name__                  # MPIFLOW_CHECK unset: sampled
        'SampledMPICommunicator'
    """
    kind = _debug_kind
    if kind is not None and kind[0]():
        return kind[1](comm)
    return MPICommunicator(comm)


def set_debug_kind(enabled: Callable[[], bool], kind: _Maker) -> None:
    """Make :func:`new_communicator` call ``kind(comm)`` whenever ``enabled()`` says so.

    :mod:`.debug.sampled` calls it at import with the maker of the communicator that
    ``MPIFLOW_CHECK`` asks for (a checking subclass, or the plain class).
    """
    global _debug_kind
    _debug_kind = (enabled, kind)


def set_device_maker(make: Callable[[MPICommunicator], Communicator]) -> None:
    """Set what makes a group's device communicator, the first time a device array comes.

    :mod:`.device` calls it at import; ``make`` keeps the communicator it makes on the
    MPI communicator's ``device_comm``, which routes the later calls straight to it.
    """
    global _device_maker
    _device_maker = make


# The functions that block in MPI themselves: run's ``blocking`` is a lambda or a bound
# mpi4py method (the Works wait in the functions of .requests, which registers them).
for _site in (MPICommunicator.run, MPICommunicator.recv, MPICommunicator.split,
              MPICommunicator.split_by_color):
    watchdog.register_blocking_site(_site)
watchdog.register_blocking_names(MPICommunicator.recv.__code__.co_filename, ("<lambda>",))
