"""The call state that every blocking call marks, and :func:`watched` for other blocking code.

This is the hot path's side of the watchdog (:mod:`.monitor`, its thread, only reads it):
:func:`mark_call` is called on entry to every blocking call of the communication layer (and
of the torch backend), and :func:`watched` bounds a blocking section that does not go through
that layer (raw mpi4py, MPI-IO).

Example:
    >>> from mpiflow.communication.watchdog.state import STATE, mark_call
    >>> before = STATE.seq
    >>> mark_call()
    >>> (STATE.seq - before) % 256
    1
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["STATE", "CallState", "mark_call", "watched"]


class CallState:
    """What this process's blocking calls are doing, as the hot path records it.

    Attributes:
        mark: the per-call marker: called, with no arguments, on entry to every blocking call.
            It is the bound ``rotate`` of a ring of the ints 0..255: one C call, no allocation,
            no clock (as cheap as the inline store it replaces, see the commit that made it).
        note: ``(operation, mpi4py communicator)`` of an open :func:`watched` block, or None.
        counters: functions returning other counts that calls step instead of the mark (the
            collectives' fast paths count their calls down on their group's schedule,
            :mod:`..fast`, rather than pay for a mark too): :meth:`progress` includes them.

    Example:
        >>> state = CallState()
        >>> before = state.seq
        >>> state.mark(); state.mark()
        >>> (state.seq - before) % 256
        2
    """

    __slots__ = ("_ring", "counters", "mark", "note")

    def __init__(self) -> None:
        # rotate() moves the last item to the front: the front counts 0, 1, ..., 255, 0, ...
        self._ring: collections.deque[int] = collections.deque([0, *range(255, 0, -1)])
        self.mark: Callable[[], None] = self._ring.rotate
        self.note: tuple[str, Any] | None = None
        self.counters: list[Callable[[], Any]] = []

    @property
    def seq(self) -> int:
        """The number of marked calls, modulo 256. The watchdog compares values only, so the
        wrap is harmless: a false alarm would need exactly a multiple of 256 calls between
        every two samples for the whole timeout."""
        return self._ring[0]

    def progress(self) -> tuple[Any, ...]:
        """What changes whenever a blocking call starts: :attr:`seq` and the :attr:`counters`'
        values. The watchdog's thread reads it; a call that marks nothing changes a counter."""
        return (self._ring[0], *[count() for count in self.counters])


STATE = CallState()
"""The process's call state: the communication layer updates it, the watchdog samples it."""

mark_call: Callable[[], None] = STATE.mark
"""The watchdog's per-call marker: every blocking call of the communication layer (and of the
torch backend) calls ``mark_call()`` on entry, so that the watchdog tells one call from the
next. The one place the mark is written."""


@contextlib.contextmanager
def watched(operation: str, comm: Any = None) -> Iterator[None]:
    """Let the watchdog bound a blocking section that does not go through mpiflow's layer.

    mpiflow's own calls inside the block count as progress; the block is reported as
    ``operation`` when it hangs elsewhere (in raw mpi4py or MPI-IO calls).

    Args:
        operation: what the block does, for the report (e.g. ``"checkpoint save"``).
        comm: the mpi4py communicator it runs on, for the report's group, or None.

    Example:
        >>> from mpi4py import MPI
        >>> comm = MPI.COMM_WORLD
        >>> fh = MPI.File.Open(comm, "x.bin", MPI.MODE_WRONLY | MPI.MODE_CREATE)
        >>> offset, buf = 8 * comm.Get_rank(), numpy.zeros(1)
        >>> with watched("checkpoint save", comm):
        ...     fh.Write_at_all(offset, buf)
        >>> fh.Close()
    """
    state = STATE
    previous = state.note
    state.note = (operation, comm)
    mark_call()
    try:
        yield
    finally:
        mark_call()
        state.note = previous
