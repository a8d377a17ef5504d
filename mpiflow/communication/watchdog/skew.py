"""A collective that raised on one rank's arguments while the other ranks ran it.

A public collective checks its arguments on the calling rank before anything is sent. When
the check raises on some ranks only and the program catches the error and goes on, the ranks
that passed it have entered the collective: they wait in it, or have even finished it (a
broadcast's root never waits), and the failing rank's next collective on that group would meet
their previous one and take its data. Debug mode makes every rank raise instead
(:meth:`.debug_mode.DebugMPICommunicator.failed`); without it, :func:`skipped` marks the group
on the failing rank (its in-use mark, :class:`.fast.InUse`, so that the calls on it pay
nothing more) and announces the error to the group's other ranks through the watchdog's
channel. The failing rank's next collective on the group then waits for the same
announcement from every other rank (:func:`resync`): when they all raised, the ranks are in
step and it runs; a rank that does not announce it ran the call, and the call raises
``RuntimeError`` instead of taking that rank's data. The watchdog of a rank that ran it and
then waits on the group reports the failing rank's error after ``min(MPIFLOW_TIMEOUT, 10 s)``.

Without a watchdog that can talk to the other ranks (``MPIFLOW_TIMEOUT=0``, no
``MPI_THREAD_MULTIPLE``) nothing is marked, and the error stays the failing rank's alone.

Examples:
    >>> mark = Skipped(1, (0, 1), "broadcast", "ValueError: src=7 is not a rank")
    >>> mark.op, mark.count
    ('broadcast', 1)
"""

from __future__ import annotations

from typing import Any

from mpi4py import MPI

from . import monitor as watchdog
from .report import describe_group, ranks_text

__all__ = ["Skipped", "resync", "skipped"]


class Skipped:
    """The in-use mark of a group whose last collective raised on this rank before taking part.

    Attributes:
        count: how many calls on the group this rank skipped so, this one included.
        group: the group's world ranks.
        op: the collective that raised.
        error: what it raised, as ``Type: message``.
    """

    __slots__ = ("count", "error", "group", "op")

    def __init__(self, count: int, group: tuple[int, ...], op: str, error: str) -> None:
        self.count, self.group, self.op, self.error = count, group, op, error


def skipped(comm: Any, operation: str, error: BaseException) -> None:
    """Mark ``comm``'s group: this rank's ``operation`` raised ``error`` before taking part.

    Args:
        comm: the communicator (an :class:`~.mpi.MPICommunicator`; others are left alone).
        operation: the collective, as the other ranks run it.
        error: what this rank's checks raised.
    """
    fast = getattr(comm, "fast", None)
    in_use = getattr(fast, "in_use", None)
    if in_use is None or comm.size == 1 or in_use.owner is not None:
        return
    group = watchdog.world_ranks(comm.mpi_comm)
    if group is None:
        return
    count = in_use.skipped + 1  # the same on every rank that raised in the same calls
    text = f"{type(error).__name__}: {error}"
    if watchdog.announce_skip(group, count, operation, text):
        in_use.skipped = count
        in_use.owner = Skipped(count, group, operation, text)


def resync(in_use: Any, mpi_comm: Any, operation: str) -> None:
    """Before the next collective on a marked group: go on if every rank raised too.

    Raises:
        RuntimeError: some rank did not raise: it ran the collective this rank skipped. The
            mark stays, so every later collective on the group raises too.
    """
    mark = in_use.owner
    assert isinstance(mark, Skipped)
    with watchdog.watched(f"{operation}, waiting for every rank to have raised in its "
                          f"previous {mark.op} too", mpi_comm):
        missing = watchdog.await_skips(mark.group, mark.count,
                                       watchdog.get_timeout() or 600.0)
    if not missing:
        in_use.owner = None
        return
    size = mpi_comm.Get_size() if mpi_comm is not None else None
    group = describe_group(mark.group, size, MPI.COMM_WORLD.Get_size())
    raise RuntimeError(
        f"{operation} on {group}: this rank's previous {mark.op} on it raised {mark.error} "
        f"before taking part, and {ranks_text(missing)} did not raise it: they ran that "
        "collective without this rank, so the ranks are out of step (this call did not run, "
        "nor will any later one on this group). Catch such an error only when every rank "
        "raises it; MPIFLOW_DEBUG=1 makes every rank raise when some do.")
