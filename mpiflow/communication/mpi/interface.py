"""The narrow communication interface every mpiflow layer talks to, and its request handle.

A :class:`Communicator` moves the memory of arrays of one array module (numpy for MPI, CuPy
for NCCL later). It knows nothing of shapes beyond element counts: the public faces
(:mod:`mpiflow.comm`, :mod:`mpiflow.distributed`) check shapes, and layouts build on it.
All ranks are ranks *of this communicator*.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ...core.reduce_op import ReduceOp
from ..watchdog import monitor as watchdog
from ..watchdog.state import mark_call

__all__ = ["OPERATIONS", "Communicator", "Work"]

Array = Any  # an array of the communicator's array module
E = TypeVar("E", bound=BaseException)

# Every operation of the Communicator interface (collectives, point to point, groups).
OPERATIONS = (
    "barrier", "all_reduce", "reduce", "broadcast", "all_gather", "all_gather_v", "gather",
    "scatter", "reduce_scatter", "reduce_scatter_v", "all_to_all", "all_to_all_v", "send",
    "recv", "irecv", "split", "split_by_color",
)


class Work:
    """Handle of a non-blocking operation, as PyTorch's ``Work``: ``wait()`` and ``is_completed()``.

    Examples:
        >>> from mpiflow.communication.mpi.group import world_comm as comm
        >>> x = numpy.ones(3)
        >>> work = comm.all_reduce(x, async_op=True)
        >>> work.wait()
        True
    """

    __slots__ = ("_done", "_finalize", "_keep", "_requests", "_test_all", "_wait_all", "what")

    def __init__(
        self,
        requests: Sequence[Any] = (),
        finalize: Callable[[], None] | None = None,
        keep: Any = None,
        wait_all: Callable[[Sequence[Any]], None] | None = None,
        test_all: Callable[[Sequence[Any]], bool] | None = None,
    ) -> None:
        self._requests = list(requests)
        self._finalize = finalize
        self._keep = keep  # buffers that must outlive the operation
        self._wait_all = wait_all
        self._test_all = test_all
        self.what: Any = None  # what started it, for the watchdog's report
        self._done = not self._requests
        if self._done:
            self._finish()

    def _finish(self) -> None:
        self._done = True
        finalize, self._finalize, self._keep = self._finalize, None, None
        if finalize is not None:
            finalize()

    def then(self, step: Callable[[], None]) -> Work:
        """Run ``step`` once the operation has completed (now, if it already has)."""
        if self._done:
            step()
            return self
        previous = self._finalize
        if previous is None:
            self._finalize = step
        else:
            def both() -> None:
                previous()
                step()

            self._finalize = both
        return self

    def translate_errors(self, kind: type[E], translate: Callable[[E], BaseException]) -> None:
        """Raise ``translate(error)`` instead of an error of type ``kind`` that waiting for or
        testing the operation raises (a no-op on a work without requests).

        Args:
            kind: the exception type to translate.
            translate: makes the exception to raise from the one caught.

        Examples:
            >>> from mpiflow.communication.mpi.group import world_comm as comm
            >>> work = comm.all_reduce(numpy.ones(3), async_op=True)
            >>> work.translate_errors(ValueError, lambda exc: RuntimeError(str(exc)))
            >>> work.wait()
            True
        """
        wait_all, test_all = self._wait_all, self._test_all
        if wait_all is None or test_all is None:
            return

        def wait(requests: Sequence[Any]) -> None:
            try:
                wait_all(requests)
            except kind as exc:
                raise translate(exc) from None

        def test(requests: Sequence[Any]) -> bool:
            try:
                return test_all(requests)
            except kind as exc:
                raise translate(exc) from None

        self._wait_all, self._test_all = wait, test

    def is_completed(self) -> bool:
        """Return True once the operation has finished (its results are then in place)."""
        if not self._done and self._test_all is not None and self._test_all(self._requests):
            self._finish()
        return self._done

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the operation finishes; results are in place afterwards.

        Args:
            timeout: seconds to wait at most; None waits as long as it takes.

        Returns:
            True.

        Raises:
            TimeoutError: the operation did not finish within ``timeout`` (it is still pending).
        """
        if self._done:
            return True
        if timeout is None:
            assert self._wait_all is not None
            mark_call()  # the watchdog's mark: a new blocking call
            self._wait_all(self._requests)
            self._finish()
            return True
        deadline = time.monotonic() + timeout
        while not self.is_completed():
            if time.monotonic() > deadline:
                raise TimeoutError(f"operation did not complete within {timeout} s")
            time.sleep(0)
        return True

    def __repr__(self) -> str:
        return f"<mpiflow Work {'completed' if self._done else 'pending'}>"


class Communicator(abc.ABC):
    """A group of ranks and the operations between them, on one array module's arrays.

    Buffers are arrays of ``array_module``; reductions and broadcasts are in place. Any
    operation takes ``async_op``: False blocks and returns None, True returns a :class:`Work`.
    Counts are in elements; ``send`` buffers of the gathering operations are concatenated in
    rank order into ``recv``.
    """

    rank: int
    size: int

    @property
    @abc.abstractmethod
    def array_module(self) -> Any:
        """The module of the arrays this communicator moves (``numpy``, ``cupy``)."""

    @abc.abstractmethod
    def barrier(self, async_op: bool = False) -> Work | None:
        """Block until every rank has entered."""

    @abc.abstractmethod
    def all_reduce(self, buf: Array, op: ReduceOp = ReduceOp.SUM,
                   async_op: bool = False) -> Work | None:
        """Reduce ``buf`` over all ranks, result in ``buf`` everywhere."""

    @abc.abstractmethod
    def reduce(self, buf: Array, op: ReduceOp, root: int,
               async_op: bool = False) -> Work | None:
        """Reduce ``buf`` over all ranks, result in ``buf`` on ``root`` (others unchanged)."""

    @abc.abstractmethod
    def broadcast(self, buf: Array, root: int, async_op: bool = False) -> Work | None:
        """Copy ``root``'s ``buf`` into ``buf`` on every rank."""

    @abc.abstractmethod
    def all_gather(self, send: Array, recv: Array, async_op: bool = False) -> Work | None:
        """Concatenate every rank's ``send`` (equal sizes) into ``recv`` on every rank."""

    @abc.abstractmethod
    def all_gather_v(self, send: Array, recv: Array, counts: Sequence[int],
                     async_op: bool = False) -> Work | None:
        """As :meth:`all_gather` with rank ``i`` contributing ``counts[i]`` elements."""

    @abc.abstractmethod
    def gather(self, send: Array, recv: Array | None, root: int,
               async_op: bool = False) -> Work | None:
        """Concatenate every rank's ``send`` into ``recv`` on ``root`` (None elsewhere)."""

    @abc.abstractmethod
    def scatter(self, send: Array | None, recv: Array, root: int,
                async_op: bool = False) -> Work | None:
        """Give rank ``i`` the ``i``-th equal chunk of ``root``'s ``send``."""

    @abc.abstractmethod
    def reduce_scatter(self, send: Array, recv: Array, op: ReduceOp = ReduceOp.SUM,
                       async_op: bool = False) -> Work | None:
        """Reduce ``send`` (``size`` equal chunks) and give rank ``i`` chunk ``i``."""

    @abc.abstractmethod
    def reduce_scatter_v(self, send: Array, recv: Array, counts: Sequence[int],
                         op: ReduceOp = ReduceOp.SUM, async_op: bool = False) -> Work | None:
        """As :meth:`reduce_scatter` with chunk ``i`` of ``counts[i]`` elements."""

    @abc.abstractmethod
    def all_to_all(self, send: Array, recv: Array, async_op: bool = False) -> Work | None:
        """Send the ``i``-th equal chunk of ``send`` to rank ``i``; receive in rank order."""

    @abc.abstractmethod
    def all_to_all_v(self, send: Array, send_counts: Sequence[int], recv: Array,
                     recv_counts: Sequence[int], async_op: bool = False) -> Work | None:
        """As :meth:`all_to_all` with per-rank element counts, chunks packed in rank order."""

    @abc.abstractmethod
    def send(self, buf: Array, dst: int, tag: int = 0, async_op: bool = False) -> Work | None:
        """Send ``buf`` to rank ``dst``."""

    @abc.abstractmethod
    def recv(self, buf: Array, src: int | None, tag: int = 0) -> int:
        """Receive into ``buf`` from ``src`` (None: any rank); return the sender's rank."""

    @abc.abstractmethod
    def irecv(self, buf: Array, src: int | None, tag: int = 0) -> Work:
        """Start receiving into ``buf`` from ``src`` (None: any rank)."""

    @abc.abstractmethod
    def split(self, ranks: Sequence[int]) -> Communicator | None:
        """Collectively make a communicator of ``ranks`` (in that order); None on non-members."""

    def split_by_color(self, color: int | None, key: int = 0) -> Communicator | None:
        """Collectively split into one communicator per ``color``, as ``MPI_Comm_split``.

        Every rank of this communicator must call it at the same point. Ranks of one color
        form one new communicator, ordered by ``key`` (ties by their rank here).

        Args:
            color: this rank's group (a non-negative int), or None to join no group.
            key: this rank's sort key within its group.

        Returns:
            This rank's new communicator, or None where ``color`` is None.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement split_by_color")


_NAMES = frozenset(OPERATIONS) | {"wait"}


def _blocked_call(frame: Any) -> watchdog.BlockedCall | None:
    """The operation a frame of a Communicator method or of ``Work.wait`` runs (for the
    watchdog's report; registered below)."""
    name = frame.f_code.co_name
    if name not in _NAMES:  # the common case, without reading the frame's locals
        return None
    local = frame.f_locals
    me = local.get("self")
    if isinstance(me, Communicator) and name != "wait":
        peer = local.get("src", local.get("dst")) if name in ("send", "recv") else None
        return watchdog.BlockedCall(name, getattr(me, "mpi_comm", None), me.size,
                                    peer if isinstance(peer, int) else None)
    if isinstance(me, Work) and name == "wait":
        what = me.what
        op, comm = watchdog.operation_of(what) if what is not None else ("an operation", None)
        peer = what[2] if isinstance(what, tuple) and len(what) > 2 else None
        return watchdog.BlockedCall(f"{op} (Work.wait)", comm, None, peer)
    return None


watchdog.register_frame_reader(_blocked_call)
