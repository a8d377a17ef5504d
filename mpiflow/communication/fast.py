"""Blocking fast paths of :class:`~.mpi.MPICommunicator` for plain, contiguous numpy arrays.

A collective on an 8-byte message takes about a microsecond in MPI, so every Python check in
front of it shows. Each function here makes the fewest checks that prove the call is the
common, valid one (exact ``numpy.ndarray`` arguments, matching dtypes and sizes, C-contiguous,
not aliased) and then calls mpi4py directly. It returns True when it ran the operation and
False when it did nothing, so that the caller takes its general path, which stages,
validates and raises the precise error. The functions are closures over one communicator's
bound mpi4py methods, with no attribute lookups left to make per call, and their checks are
written inline (a helper call costs as much as two checks).

Two arrays are taken as apart when neither is the other or a view of the other and they do
not view one base: numpy points every view at the array that owns the memory, so that covers
every overlap of arrays made by numpy (the general path copies an aliased input, as MPI needs).

Contiguity costs a ``flags`` lookup only for arrays of two or more dimensions: a 1-D or 0-d
array that mpi4py accepts is C-contiguous, and one it refuses (a strided view) raises
``BufferError`` before anything is sent, which sends it to the general path too (as does the
``KeyError`` of a dtype MPI has no datatype for).

Examples:
    >>> fast = FastPaths(MPI.COMM_WORLD.Dup(), {})
    >>> fast.all_gather(numpy.ones(2), numpy.empty(2 * fast.size))
    True
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy
from mpi4py import MPI

from .reduce_op import ReduceOp
from .watchdog import NEXT, STATE

__all__ = ["FastPaths", "never", "pause", "paused", "resume"]

_ndarray = numpy.ndarray
# What mpi4py raises, before sending anything, for a buffer it cannot take as it is (a strided
# view) or a dtype it cannot map (object, structured...): the general path stages the one and
# raises a clear TypeError for the other.
_DECLINED = (BufferError, KeyError)


def never(*args: Any) -> bool:
    """A fast path that never applies (debug mode checks every call on the general path)."""
    return False


class FastPaths:
    """The blocking fast paths over one MPI communicator; each returns whether it ran.

    Args:
        comm: the mpi4py communicator.
        native: ``{op: {dtype: MPI.Op}}``, the reductions MPI does natively with no staging or
            post-processing; filled in by the general path as it meets them (shared, not copied).

    Examples:
        >>> fast = FastPaths(MPI.COMM_WORLD.Dup(), {})
        >>> fast.broadcast(numpy.zeros(3), 0)
        True
    """

    __slots__ = ("__weakref__", "_paths", "all_gather", "all_reduce", "all_to_all",
                 "broadcast", "recv", "reduce_scatter", "send", "size")

    def __init__(self, comm: MPI.Comm, native: dict[ReduceOp, dict[Any, MPI.Op]]) -> None:
        size, rank = comm.Get_size(), comm.Get_rank()
        self.size = size
        state, step, in_place = STATE, NEXT, MPI.IN_PLACE
        allreduce, allgather, bcast = comm.Allreduce, comm.Allgather, comm.Bcast
        reduce_scatter_block, alltoall = comm.Reduce_scatter_block, comm.Alltoall
        mpi_send, mpi_recv = comm.Send, comm.Recv
        # Each function also takes the communicator as a keyword-only default, ``_comm``, that
        # no caller passes: it costs nothing per call and lets the watchdog's report name the
        # group of a call that hangs here (.watchdog.describe_stack reads the frame's locals).

        def all_reduce(buf: Any, op: ReduceOp, *, _comm: Any = comm) -> bool:
            if type(buf) is _ndarray and (buf.ndim < 2 or buf.flags.c_contiguous):
                by_dtype = native.get(op)
                mpi_op = by_dtype.get(buf.dtype) if by_dtype is not None else None
                if mpi_op is not None:
                    state.seq = step[state.seq]  # the watchdog's mark: a new blocking call
                    try:
                        allreduce(in_place, buf, mpi_op)
                    except _DECLINED:
                        return False
                    return True
            return False

        def all_gather(send: Any, recv: Any, *, _comm: Any = comm) -> bool:
            # recv: ``size`` copies of send's shape, concatenated along dim 0.
            if (type(send) is _ndarray and type(recv) is _ndarray
                    and recv.size == size * send.size
                    and ((dtype := send.dtype) is recv.dtype or dtype == recv.dtype)
                    and (recv.ndim == 1 == send.ndim or _concatenated(recv, send, size))
                    and send is not recv and (sbase := send.base) is not recv
                    and (rbase := recv.base) is not send
                    and (sbase is None or sbase is not rbase)):
                state.seq = step[state.seq]
                try:
                    allgather(send, recv)
                except _DECLINED:
                    return False
                return True
            return False

        def reduce_scatter(send: Any, recv: Any, op: ReduceOp, *, _comm: Any = comm) -> bool:
            # send: ``size`` copies of recv's shape, concatenated along dim 0.
            if (type(send) is _ndarray and type(recv) is _ndarray
                    and send.size == size * recv.size
                    and ((dtype := send.dtype) is recv.dtype or dtype == recv.dtype)
                    and (send.ndim == 1 == recv.ndim or _concatenated(send, recv, size))
                    and send is not recv and (sbase := send.base) is not recv
                    and (rbase := recv.base) is not send
                    and (sbase is None or sbase is not rbase)):
                by_dtype = native.get(op)
                mpi_op = by_dtype.get(dtype) if by_dtype is not None else None
                if mpi_op is not None:
                    state.seq = step[state.seq]
                    try:
                        reduce_scatter_block(send, recv, mpi_op)
                    except _DECLINED:
                        return False
                    return True
            return False

        def broadcast(buf: Any, root: int, *, _comm: Any = comm) -> bool:
            if (type(buf) is _ndarray and type(root) is int and 0 <= root < size
                    and (buf.ndim < 2 or buf.flags.c_contiguous)):
                state.seq = step[state.seq]
                try:
                    bcast(buf, root)
                except _DECLINED:
                    return False
                return True
            return False

        def all_to_all(send: Any, recv: Any, *, _comm: Any = comm) -> bool:
            # Even split along dim 0, as all_to_all_single without split sizes.
            if (type(send) is _ndarray and type(recv) is _ndarray
                    and (sdim := send.ndim) and (rdim := recv.ndim) and send.size == recv.size
                    and ((dtype := send.dtype) is recv.dtype or dtype == recv.dtype)
                    and send.shape[0] % size == 0
                    and send is not recv and (sbase := send.base) is not recv
                    and (rbase := recv.base) is not send
                    and (sbase is None or sbase is not rbase)
                    and (sdim < 2 or send.flags.c_contiguous)
                    and (rdim < 2 or recv.flags.c_contiguous)):
                state.seq = step[state.seq]
                try:
                    alltoall(send, recv)
                except _DECLINED:
                    return False
                return True
            return False

        def send(buf: Any, dst: int, tag: int, *, _comm: Any = comm) -> bool:
            if (type(buf) is _ndarray and type(dst) is int and 0 <= dst < size and dst != rank
                    and (buf.ndim < 2 or buf.flags.c_contiguous)):
                state.seq = step[state.seq]
                try:
                    mpi_send(buf, dst, tag)
                except _DECLINED:
                    return False
                return True
            return False

        def recv(buf: Any, src: int, tag: int, *, _comm: Any = comm) -> bool:
            if (type(buf) is _ndarray and type(src) is int and 0 <= src < size and src != rank
                    and (buf.ndim < 2 or buf.flags.c_contiguous)):
                state.seq = step[state.seq]
                try:
                    mpi_recv(buf, src, tag)
                except _DECLINED:
                    return False
                return True
            return False

        self.all_reduce: Callable[[Any, ReduceOp], bool] = all_reduce
        self.all_gather: Callable[[Any, Any], bool] = all_gather
        self.reduce_scatter: Callable[[Any, Any, ReduceOp], bool] = reduce_scatter
        self.broadcast: Callable[[Any, int], bool] = broadcast
        self.all_to_all: Callable[[Any, Any], bool] = all_to_all
        self.send: Callable[[Any, int, int], bool] = send
        self.recv: Callable[[Any, int, int], bool] = recv
        self._paths = {name: getattr(self, name) for name in _PATHS}
        _live.add(self)
        if _paused:
            self._set(never)

    @classmethod
    def disabled(cls) -> FastPaths:
        """Fast paths that never apply, for a communicator that checks every call."""
        self = cls.__new__(cls)
        self.size, self._paths = 0, dict.fromkeys(_PATHS, never)
        self._set(never)
        return self

    def _set(self, path: Callable[..., bool] | None) -> None:
        for name in _PATHS:
            setattr(self, name, self._paths[name] if path is None else path)


_PATHS = ("all_gather", "all_reduce", "all_to_all", "broadcast", "recv", "reduce_scatter",
          "send")
_live: weakref.WeakSet[FastPaths] = weakref.WeakSet()
_paused = 0


def pause() -> None:
    """Send every call to the general paths until the matching :func:`resume` (nestable)."""
    global _paused
    _paused += 1
    if _paused == 1:
        for fast in list(_live):
            fast._set(never)


def resume() -> None:
    """Undo one :func:`pause`; the fast paths come back when none is left."""
    global _paused
    if _paused <= 0:
        raise RuntimeError("resume() without a matching pause()")
    _paused -= 1
    if not _paused:
        for fast in list(_live):
            fast._set(None)


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Send every call to the general paths inside the ``with`` block (nestable).

    ``count_collectives`` counts the Communicator methods, which the public faces' fast
    paths skip; while it counts, every call goes through them.

    Examples:
        >>> with paused():
        ...     dist.all_reduce(x)   # through MPICommunicator.all_reduce
    """
    pause()
    try:
        yield
    finally:
        resume()


def _concatenated(big: Any, small: Any, size: int) -> bool:
    """Whether ``big``'s shape is ``size`` copies of ``small``'s along dim 0, C-contiguous both.

    A 1-D pair of the right sizes needs nothing more (the callers test that case inline).
    """
    bshape, sshape = big.shape, small.shape
    return (len(bshape) == len(sshape) > 0 and bshape[0] == size * sshape[0]
            and bshape[1:] == sshape[1:] and big.flags.c_contiguous
            and small.flags.c_contiguous)
