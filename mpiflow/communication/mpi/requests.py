"""Waiting for MPI requests: the functions that wait for and test a non-blocking call's Work.

A :class:`~.interface.Work` completes its requests with the two functions it is given. Those
of a point-to-point send are MPI's own (:func:`wait_all`, :func:`test_all`); those of a
collective turn an error MPI reports while waiting into the job's abort with a report naming
the call (:func:`collective_waits`, :func:`.failure.collective_failed`); those of a receive
also check the received size (:func:`receive_waits`).

Every waiting function is named ``wait_all`` (or ``test_all``), closures included: they call
MPI's blocking wait themselves, and the watchdog knows this file's ``wait_all`` functions as
blocking sites (registered below).

Example:
    >>> from mpi4py import MPI
    >>> from mpiflow.communication.mpi.requests import wait_all
    >>> wait_all([MPI.COMM_WORLD.Ibarrier()])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mpi4py import MPI

from ...core.message_size import MessageSizeError
from ..watchdog import monitor as watchdog
from ..watchdog.failure import collective_failed
from ..watchdog.monitor import operation_of
from .buffers import p2p_error
from .interface import Array

__all__ = ["collective_waits", "receive_waits", "test_all", "wait_all"]

_BYTE = MPI.BYTE
Waits = tuple[Callable[[Sequence[MPI.Request]], None], Callable[[Sequence[MPI.Request]], bool]]


def wait_all(requests: Sequence[MPI.Request]) -> None:
    """Wait for every request (``MPI_Waitall``)."""
    MPI.Request.Waitall(list(requests))


def test_all(requests: Sequence[MPI.Request]) -> bool:
    """Whether every request has completed (``MPI_Testall``)."""
    return bool(MPI.Request.Testall(list(requests)))


def collective_waits(start: Any, mpi_comm: Any, keep: Any) -> Waits:
    """The wait and test of a non-blocking collective: an error MPI reports in them aborts
    the job with a report naming the call (:func:`.failure.collective_failed`).

    Args:
        start: what started the call (the operation's name comes from it,
            :func:`.sites.operation_of`).
        mpi_comm: the mpi4py communicator it runs on.
        keep: buffers that must outlive the call (kept until the abort).
    """

    def wait_all(requests: Sequence[MPI.Request]) -> None:
        try:
            MPI.Request.Waitall(list(requests))
        except MPI.Exception as exc:
            collective_failed(operation_of(start)[0], mpi_comm, exc, keep)

    def test_all(requests: Sequence[MPI.Request]) -> bool:
        try:
            return bool(MPI.Request.Testall(list(requests)))
        except MPI.Exception as exc:
            collective_failed(operation_of(start)[0], mpi_comm, exc, keep)

    return wait_all, test_all


def receive_waits(src: int | None, tag: int, dst: Array) -> Waits:
    """The wait and test of a receive into ``dst``: MPI's errors become clear ones
    (:func:`.buffers.p2p_error`), and a message whose size differs from ``dst``'s raises
    :class:`MessageSizeError` once it has arrived.

    Args:
        src: the source rank asked for (None: any), for the errors.
        tag: the tag.
        dst: the contiguous receive buffer.
    """
    status = MPI.Status()

    def check() -> None:
        if status.Get_count(_BYTE) != dst.nbytes:
            raise MessageSizeError(status.Get_source(), tag, dst, status.Get_count(_BYTE))

    def wait_all(requests: Sequence[MPI.Request]) -> None:
        try:
            requests[0].Wait(status)
        except MPI.Exception as exc:
            raise p2p_error(exc, "recv", src, tag, dst) from None
        check()

    def test_all(requests: Sequence[MPI.Request]) -> bool:
        try:
            done = bool(requests[0].Test(status))
        except MPI.Exception as exc:
            raise p2p_error(exc, "recv", src, tag, dst) from None
        if done:
            check()
        return done

    return wait_all, test_all


watchdog.register_blocking_site(wait_all)  # the closures share its file and name
