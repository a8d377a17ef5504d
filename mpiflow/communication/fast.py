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

Two threads must not call collectives on one group at once: MPI would match one thread's call
on this rank with the other thread's on another, and the results would be wrong with no error
(issue #18). Each communicator has an :class:`InUse` mark, a plain attribute that the fast
paths set around their collective's MPI call (a load and two stores, about 25 ns); a
second thread that enters while it is set gets a ``RuntimeError`` naming the group and both
threads (:func:`concurrent_use`) instead of joining the call. The general path
(``MPICommunicator.run``) and debug mode check every other collective the same way.
Point-to-point calls are not checked: MPI matches them by source and tag, and one thread
sending while another receives on a group is a legitimate pattern.

Examples:
    >>> fast = FastPaths(MPI.COMM_WORLD.Dup(), {})
    >>> fast.all_gather(numpy.ones(2), numpy.empty(2 * fast.size))
    True
"""

from __future__ import annotations

import contextlib
import sys
import threading
import weakref
from _thread import get_ident
from collections.abc import Callable, Iterator
from typing import Any

import numpy
from mpi4py import MPI

from ..core.message_size import MessageSizeError
from ..core.reduce_op import ReduceOp
from .fast_all_reduce import DECLINED, Limits, all_reduce_at_path, all_reduce_path
from .form import Scratch, on_change, out_of_place_from, pieces
from .watchdog import monitor as watchdog
from .watchdog.failure import collective_failed
from .watchdog.report import describe_group
from .watchdog.skew import Skipped, resync
from .watchdog.state import STATE, mark_call

__all__ = ["UNCHECKED", "FastPaths", "InUse", "concurrent_use", "never", "pause", "paused",
           "resume"]

_ndarray = numpy.ndarray
_DECLINED = DECLINED

#: The calls a communicator that never checks counts down before its general path sees one
#: and counts again (``MPICommunicator.run``): under 2**30, an int of one machine digit, which
#: a fast path decrements in a third of the time a larger one takes (20 ns of a call's 500).
UNCHECKED = (1 << 30) - 1


class InUse:
    """Whether a thread is inside a collective's MPI call on one communicator.

    ``owner`` is None when none is, the thread's ident when debug mode set it, and True when a
    fast path did (storing a constant is cheaper than asking for the ident, and the error
    finds the thread from the stacks). A plain attribute, not a lock: setting and testing it
    costs a few tens of nanoseconds, and it only has to catch the misuse, not arbitrate it.
    """

    __slots__ = ("owner", "skipped")

    def __init__(self) -> None:
        self.owner: Any = None
        self.skipped = 0  # calls this rank raised in before taking part (.skew)


def _thread_name(ident: int) -> str:
    for thread in threading.enumerate():
        if thread.ident == ident:
            return f"thread {thread.name!r} (ident {ident})"
    return f"thread ident {ident}"


def _threads_inside(mpi_comm: Any, me: int) -> list[int]:
    """The other threads whose stack holds a call on ``mpi_comm`` (a fast path of its
    :class:`FastPaths` or a method of a communicator over it)."""
    found = []
    for ident, top in sys._current_frames().items():
        frame: Any = top
        while frame is not None and ident != me:
            owner = _owner(frame)
            if (owner is not None and owner[0].comm is mpi_comm) or \
                    getattr(frame.f_locals.get("self"), "mpi_comm", None) is mpi_comm:
                found.append(ident)
                break
            frame = frame.f_back
    return found


def concurrent_use(in_use: InUse, mpi_comm: Any, operation: str) -> None:
    """Raise the error for a call on a communicator another thread is inside of, if it is.

    A call from the thread that holds the mark (a nested call of its own) passes.

    Raises:
        RuntimeError: another thread is in a collective's MPI call on this communicator.
    """
    owner, me = in_use.owner, get_ident()
    if owner is None or (owner is not True and owner == me):
        return
    if type(owner) is Skipped:  # this rank raised in the last call on the group (.skew)
        resync(in_use, mpi_comm, operation)
        return
    size = mpi_comm.Get_size() if mpi_comm is not None else None
    group = describe_group(watchdog.world_ranks(mpi_comm), size, MPI.COMM_WORLD.Get_size())
    others = [owner] if owner is not True else _threads_inside(mpi_comm, me)
    inside = " and ".join(_thread_name(t) for t in others) or "another thread"
    raise RuntimeError(
        f"{operation} on {group} was called by {_thread_name(me)} while {inside} is inside "
        f"a collective on the same group (rank {MPI.COMM_WORLD.Get_rank()} of the world). MPI "
        "matches the collectives of one group in the order each rank calls them, so two "
        "threads calling them at once mix their data between ranks: this call did not run, "
        "and the results of both threads on every rank are unreliable from here on. Call the "
        "collectives of a group from one thread at a time, or give each thread its own group "
        "(dist.new_group(...), made in the same order on every rank).")


def never(*args: Any) -> bool:
    """A fast path that never applies (debug mode checks every call on the general path)."""
    return False


class FastPaths:
    """The blocking fast paths over one MPI communicator; each returns whether it ran.

    Args:
        comm: the mpi4py communicator.
        native: ``{op: {dtype: MPI.Op}}``, the reductions MPI does natively with no staging or
            post-processing; filled in by the general path as it meets them (shared, not copied).

    Attributes:
        paths: the fast paths by name, whether or not their attributes are switched off
            (:meth:`set_all`).

    Examples:
        >>> fast = FastPaths(MPI.COMM_WORLD.Dup(), {})
        >>> fast.broadcast(numpy.zeros(3), 0)
        True
    """

    __slots__ = ("__weakref__", "all_gather", "all_reduce", "all_reduce_at", "all_to_all",
                 "broadcast", "comm", "due", "in_use", "limits", "native", "paths", "recv",
                 "reduce_scatter", "remake", "scratch", "send", "size")

    def __init__(self, comm: MPI.Comm, native: dict[ReduceOp, dict[Any, MPI.Op]],
                 due: list[int] | None = None) -> None:
        size, rank = comm.Get_size(), comm.Get_rank()
        # due[0]: the calls left until the next collective whose arguments the ranks compare
        # (MPIFLOW_CHECK=sampled, .debug.sampled); a collective path declines the due one, so
        # that the general path checks it, and counts every other one it runs.
        due = [UNCHECKED] if due is None else due
        # Counting ``due`` down is also the watchdog's mark of the paths that count it
        # (_due_counts): a mark would cost as much again.
        self.due, self.native = due, native
        self.size = size
        self.comm: Any = comm  # for the watchdog's report (_blocked_call) and the errors
        # The communicator's in-use mark (see the module's docstring); the general path and
        # debug mode may share it through ``self.in_use``.
        self.in_use = in_use = InUse()
        mark, in_place = mark_call, MPI.IN_PLACE
        allreduce, allgather, bcast = comm.Allreduce, comm.Allgather, comm.Bcast
        reduce_scatter_block, alltoall = comm.Reduce_scatter_block, comm.Alltoall
        mpi_send, mpi_recv = comm.Send, comm.Recv
        new_status, byte = MPI.Status, MPI.BYTE
        # The watchdog's report names the group of a call that hangs in one of these functions
        # by finding the FastPaths whose closure the frame runs (_owner): nothing per call.

        def all_gather(send: Any, recv: Any) -> bool:
            # recv: ``size`` copies of send's shape, concatenated along dim 0.
            if (type(send) is _ndarray and type(recv) is _ndarray
                    and recv.size == size * send.size
                    and ((dtype := send.dtype) is recv.dtype or dtype == recv.dtype)
                    and (recv.ndim == 1 == send.ndim or _concatenated(recv, send, size))
                    and send is not recv and (sbase := send.base) is not recv
                    and (rbase := recv.base) is not send
                    and (sbase is None or sbase is not rbase)):
                if due[0] <= 1:
                    return False  # the general path checks this call
                due[0] -= 1
                if in_use.owner is not None:
                    concurrent_use(in_use, comm, "all_gather")
                try:
                    in_use.owner = True
                    allgather(send, recv)
                except _DECLINED:
                    due[0] += 1
                    return False
                except MPI.Exception as exc:
                    collective_failed("all_gather", comm, exc, (send, recv))
                finally:
                    in_use.owner = None
                return True
            return False

        def reduce_scatter(send: Any, recv: Any, op: ReduceOp) -> bool:
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
                    if due[0] <= 1:
                        return False  # the general path checks this call
                    due[0] -= 1
                    if in_use.owner is not None:
                        concurrent_use(in_use, comm, "reduce_scatter")
                    try:
                        in_use.owner = True
                        reduce_scatter_block(send, recv, mpi_op)
                    except _DECLINED:
                        due[0] += 1
                        return False
                    except MPI.Exception as exc:
                        collective_failed("reduce_scatter", comm, exc, (send, recv))
                    finally:
                        in_use.owner = None
                    return True
            return False

        def broadcast(buf: Any, root: int) -> bool:
            if (type(buf) is _ndarray and type(root) is int and 0 <= root < size
                    and (buf.ndim < 2 or buf.flags.c_contiguous)):
                if due[0] <= 1:
                    return False  # the general path checks this call
                due[0] -= 1
                if in_use.owner is not None:
                    concurrent_use(in_use, comm, "broadcast")
                try:
                    in_use.owner = True
                    bcast(buf, root)
                except _DECLINED:
                    due[0] += 1
                    return False
                except MPI.Exception as exc:
                    collective_failed("broadcast", comm, exc, (buf,))
                finally:
                    in_use.owner = None
                return True
            return False

        def all_to_all(send: Any, recv: Any) -> bool:
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
                if due[0] <= 1:
                    return False  # the general path checks this call
                due[0] -= 1
                if in_use.owner is not None:
                    concurrent_use(in_use, comm, "all_to_all")
                try:
                    in_use.owner = True
                    alltoall(send, recv)
                except _DECLINED:
                    due[0] += 1
                    return False
                except MPI.Exception as exc:
                    collective_failed("all_to_all", comm, exc, (send, recv))
                finally:
                    in_use.owner = None
                return True
            return False

        def send(buf: Any, dst: int, tag: int) -> bool:
            if (type(buf) is _ndarray and type(dst) is int and 0 <= dst < size and dst != rank
                    and (buf.ndim < 2 or buf.flags.c_contiguous)):
                mark()
                try:
                    mpi_send(buf, dst, tag)
                except _DECLINED:
                    return False
                return True
            return False

        def recv(buf: Any, src: int, tag: int) -> bool:
            if (type(buf) is _ndarray and type(src) is int and 0 <= src < size and src != rank
                    and (buf.ndim < 2 or buf.flags.c_contiguous)):
                mark()
                status = new_status()  # per call: two threads may receive on one group
                try:
                    mpi_recv(buf, src, tag, status)
                except _DECLINED:
                    return False
                except MPI.Exception as exc:
                    if exc.Get_error_class() == MPI.ERR_TRUNCATE:
                        raise MessageSizeError(src, tag, buf, None) from None
                    raise
                received = status.Get_count(byte)
                if received != buf.nbytes:  # a shorter message filled part of the buffer
                    raise MessageSizeError(src, tag, buf, received)
                return True
            return False

        self.all_gather: Callable[[Any, Any], bool] = all_gather
        self.reduce_scatter: Callable[[Any, Any, ReduceOp], bool] = reduce_scatter
        self.broadcast: Callable[[Any, int], bool] = broadcast
        self.all_to_all: Callable[[Any, Any], bool] = all_to_all
        self.send: Callable[[Any, int, int], bool] = send
        self.recv: Callable[[Any, int, int], bool] = recv
        self.scratch = scratch = Scratch()

        # The form in force (.form), changed on form.set_form() and form.set_pieces(): the
        # all-reduce path reads it per call (the public face's function stays one function,
        # public_all_reduce); the path of an address is remade with it.
        self.limits = limits = Limits(out_of_place_from(), pieces())

        def make_all_reduce() -> None:
            oop_from, in_pieces = out_of_place_from(), pieces()
            limits.set(oop_from, in_pieces)
            self.paths["all_reduce_at"] = all_reduce_at_path(comm, in_use, allreduce,
                                                             in_place, due, oop_from, in_pieces,
                                                             scratch, concurrent_use)

        self.paths = {name: getattr(self, name) for name in _PATHS if name not in _FORMED}
        self.paths["all_reduce"] = all_reduce_path(comm, native, due, in_use, allreduce,
                                                   in_place, limits, scratch, concurrent_use)
        make_all_reduce()
        self.all_reduce: Callable[[Any, ReduceOp], bool] = self.paths["all_reduce"]
        self.all_reduce_at: Callable[[int, int, Any, Any], bool] = self.paths["all_reduce_at"]
        self.remake: Callable[[], None] = make_all_reduce
        _live.add(self)
        if _paused:
            self.set_all(never)

    @classmethod
    def disabled(cls) -> FastPaths:
        """Fast paths that never apply, for a communicator that checks every call."""
        self = cls.__new__(cls)
        self.size, self.paths, self.comm = 0, dict.fromkeys(_PATHS, never), None
        self.in_use, self.scratch, self.remake = InUse(), Scratch(), _nothing
        self.due, self.native, self.limits = [UNCHECKED], {}, Limits(None, None)
        self.limits.off = True
        self.set_all(never)
        return self

    def set_all(self, path: Callable[..., bool] | None) -> None:
        """Make every fast path ``path`` (:func:`never`: all off), or None: its own again.

        :func:`pause` and :func:`resume` call it on every live FastPaths; the public
        all-reduce (:meth:`public_all_reduce`) declines every call while they are off.
        """
        for name in _PATHS:
            setattr(self, name, self.paths[name] if path is None else path)
        if self.size:  # not disabled(): those stay off
            self.limits.off = path is not None

    def public_all_reduce(self, general: Callable[..., Any], switch: Any,
                          op: ReduceOp) -> Callable[..., Any]:
        """``mpiflow.distributed.all_reduce`` for this group: the all-reduce fast path with
        the public signature, returning None for a call it ran and ``general(tensor, op,
        group, async_op)`` for any other (one Python frame for the common call: the fast
        path costs about 0.3 us a call where a wrapper around it cost 0.1 us more).

        Args:
            general: the public function's general path.
            switch: read as ``switch.on`` per call: on, every call takes ``general`` (the
                deterministic reductions, :mod:`mpiflow.core.deterministic`).
            op: the default reduction.
        """
        if not self.size:  # disabled(): every call is checked
            def all_reduce(tensor: Any, op: Any = op, group: Any = None,
                           async_op: bool = False) -> Any:
                return general(tensor, op, group, async_op)

            return all_reduce
        path = all_reduce_path(self.comm, self.native, self.due, self.in_use,
                               self.comm.Allreduce, MPI.IN_PLACE, self.limits, self.scratch,
                               concurrent_use, ran=None, otherwise=general, switch=switch,
                               default_op=op)
        self.paths[_PUBLIC] = path  # for the watchdog's report (_owner)
        return path


def _nothing() -> None:
    """The remake of fast paths that never apply."""


_PATHS = ("all_gather", "all_reduce", "all_reduce_at", "all_to_all", "broadcast", "recv",
          "reduce_scatter", "send")
_FORMED = ("all_reduce", "all_reduce_at")  # made by the form in force (.form)
_PUBLIC = "public_all_reduce"  # the paths' key of the public face's function (public_all_reduce)
_live: weakref.WeakSet[FastPaths] = weakref.WeakSet()
_paused = 0
_FILE = FastPaths.__init__.__code__.co_filename
_ALL_REDUCE_FILE = all_reduce_path.__code__.co_filename
_FILES = (_FILE, _ALL_REDUCE_FILE)
_ABSENT = object()


def _live_paths() -> list[FastPaths]:
    """Every FastPaths alive, also while another thread makes or frees one."""
    for _ in range(10):
        try:
            return list(_live)
        except RuntimeError:  # the set changed size during the copy: copy again
            continue
    return []


def _due_counts() -> tuple[int, ...]:
    """Every live FastPaths' count of calls left to its next check, for the watchdog: a
    collective fast path counts it down instead of marking the call (``CallState.progress``)."""
    return tuple([fast.due[0] for fast in _live_paths()])


STATE.counters.append(_due_counts)


def _owner(frame: Any) -> tuple[FastPaths, Any] | None:
    """The FastPaths and the path (function) that ``frame`` runs, or None for any other frame.

    All FastPaths share their functions' code, so the frame is matched by its free variables:
    a path's cells hold objects of its FastPaths alone (the bound mpi4py methods), and a frame
    of the path sees the same objects among its locals.
    """
    code = frame.f_code
    if code.co_filename not in _FILES or code.co_name not in _PATHS or not code.co_freevars:
        return None
    local = frame.f_locals
    for fast in _live_paths():
        for path in fast.paths.values():
            if getattr(path, "__code__", None) is code and _runs(path, local):
                return fast, path
    return None


def _runs(path: Any, local: dict[str, Any]) -> bool:
    """Whether a frame whose locals are ``local`` runs ``path`` (same code known)."""
    try:
        return all(local.get(name, _ABSENT) is cell.cell_contents
                   for name, cell in zip(path.__code__.co_freevars, path.__closure__ or (),
                                         strict=True))
    except ValueError:  # an empty cell
        return False


def _blocked_call(frame: Any) -> watchdog.BlockedCall | None:
    """The operation and group of a fast path's frame, for the watchdog's report."""
    owner = _owner(frame)
    if owner is None:
        return None
    fast, path = owner
    name = frame.f_code.co_name
    local = frame.f_locals
    peer = local.get("src", local.get("dst")) if name in ("send", "recv") else None
    public = fast.paths.get(_PUBLIC)
    api = f"{public.__module__}.{public.__name__}" if public is not None and path is public \
        else None
    return watchdog.BlockedCall(name, fast.comm, None, peer if isinstance(peer, int) else None,
                                api=api)


# Each fast path calls MPI itself, so its own frame is the innermost while it blocks (the
# function of all_reduce_at is named all_reduce too).
watchdog.register_blocking_names(_FILE, _PATHS)
watchdog.register_blocking_names(_ALL_REDUCE_FILE, ("all_reduce",))
watchdog.register_frame_reader(_blocked_call)


def _form_changed() -> None:
    """Remake every live FastPaths' all-reduce paths for the form now in force."""
    for fast in _live_paths():
        fast.remake()
        if not _paused:
            fast.set_all(None)


on_change(_form_changed)


def pause() -> None:
    """Send every call to the general paths until the matching :func:`resume` (nestable)."""
    global _paused
    _paused += 1
    if _paused == 1:
        for fast in list(_live):
            fast.set_all(never)


def resume() -> None:
    """Undo one :func:`pause`; the fast paths come back when none is left."""
    global _paused
    if _paused <= 0:
        raise RuntimeError("resume() without a matching pause()")
    _paused -= 1
    if not _paused:
        for fast in list(_live):
            fast.set_all(None)


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Send every call to the general paths inside the ``with`` block (nestable).

    ``count_collectives`` counts the Communicator methods, which the public faces' fast
    paths skip; while it counts, every call goes through them.

    Examples:
        >>> x = numpy.ones(3)
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
