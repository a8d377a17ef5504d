"""What happens when MPI itself reports an error inside a collective: a rank-tagged abort.

A collective whose ranks pass buffers of different sizes or dtypes is wrong on every rank, but
MPI notices it, if at all, on some ranks only: in a broadcast the rank with the larger buffer
gets ``MPI_ERR_TRUNCATE`` while the root has long returned; in an all-to-all one rank raises
and the other keeps what it received. mpi4py turns such an error into a bare
``mpi4py.MPI.Exception`` on the rank that saw it, which a program may catch and go on with,
while the other ranks hold garbage. So :func:`collective_failed` does not raise: it writes a
rank-tagged traceback naming the call, its group and this rank's buffers, and aborts the job
(``MPI_Abort``, status 1). With one rank it raises :class:`CollectiveError` instead.

Point-to-point errors are not collective: a receive's size errors stay the receiver's
``MessageSizeError`` (:mod:`.mpi`). MPICH also treats some mismatches that it finds inside a
collective's own messages (an ``all_reduce`` of different lengths) as fatal, and ends the job
itself before Python sees an error: ``MPIFLOW_DEBUG=1`` catches those first.

Examples:
    >>> from mpi4py import MPI
    >>> error = describe_failure("all_reduce", MPI.COMM_SELF, MPI.Exception(MPI.ERR_TRUNCATE),
    ...                          (numpy.zeros(4),))
    >>> error.startswith("all_reduce on "), "failed inside MPI" in error
    (True, True)
    >>> "this rank passed buffer 4 x float64" in error
    True
"""

from __future__ import annotations

import sys
import traceback
from typing import Any, NoReturn

from mpi4py import MPI

from ... import runtime as _runtime
from . import monitor as watchdog
from .report import describe_group

__all__ = ["CollectiveError", "collective_failed", "describe_failure"]


class CollectiveError(RuntimeError):
    """MPI reported an error inside a collective (one rank's view of a mismatched call).

    Raised only in a job of one rank; with more, the rank that sees the error aborts the job.
    """


def _buffers(bufs: Any) -> str:
    """``send 4 x float64, receive 8 x float64`` for the arrays among ``bufs``."""
    found = []
    for buf in bufs if isinstance(bufs, (tuple, list)) else (bufs,):
        size, dtype = getattr(buf, "size", None), getattr(buf, "dtype", None)
        if size is not None and dtype is not None:
            found.append(f"{size} x {dtype}")
    names = ("send", "receive") if len(found) == 2 else ("buffer",) * len(found)
    return ", ".join(f"{name} {text}" for name, text in zip(names, found, strict=True))


def _mpi_detail(exc: Any) -> str:
    """The error's class text, and MPICH's innermost line when it says more."""
    try:
        code = exc.Get_error_class()
    except Exception:
        return str(exc)
    if code == MPI.ERR_IN_STATUS:  # MPI's text only says to look in a status it gave no one
        text = "one of its messages failed (MPI_ERR_IN_STATUS)"
    else:
        text = MPI.Get_error_string(code)
    try:
        lines = [line.strip() for line in exc.Get_error_string().splitlines() if line.strip()]
    except Exception:
        lines = []
    last = lines[-1].split(":", 1)[-1].strip() if len(lines) > 1 else ""
    if last.endswith(" in"):  # MPICH cuts its own message short there
        last = last[:-3] + " ..."
    if last and last != text and "(" not in last[:40]:
        text = f"{text}: {last}"
    return text


def describe_failure(operation: str, mpi_comm: Any, exc: Any, bufs: Any = ()) -> str:
    """The message for an MPI error inside ``operation`` on ``mpi_comm``, as aborts print it.

    Args:
        operation: the collective (``"all_reduce"``).
        mpi_comm: the mpi4py communicator it ran on.
        exc: the ``mpi4py.MPI.Exception``.
        bufs: this rank's arrays of the call, described in the message.
    """
    try:
        size = int(mpi_comm.Get_size())
    except Exception:
        size = None
    world = MPI.COMM_WORLD
    group = describe_group(watchdog.world_ranks(mpi_comm), size, world.Get_size())
    mine = _buffers(bufs)
    return (
        f"{operation} on {group} failed inside MPI on rank {world.Get_rank()}: "
        f"{_mpi_detail(exc)}\n"
        + (f"this rank passed {mine}; " if mine else "")
        + "the ranks of a collective must pass buffers of matching sizes and dtypes. MPI "
        "reports such a mismatch on some ranks only, so the other ranks' results of this "
        "call are wrong too. MPIFLOW_DEBUG=1 compares every collective's arguments across ranks "
        "before it runs and names the ranks that differ.")


def collective_failed(operation: str, mpi_comm: Any, exc: Any, bufs: Any = ()) -> NoReturn:
    """Abort the job with a rank-tagged report of an MPI error inside a collective.

    Args:
        operation: the collective.
        mpi_comm: the mpi4py communicator.
        exc: the ``mpi4py.MPI.Exception`` it raised.
        bufs: this rank's arrays of the call.

    Raises:
        CollectiveError: in a job of one rank (with more, the job is aborted, status 1).
    """
    message = describe_failure(operation, mpi_comm, exc, bufs)
    world = MPI.COMM_WORLD
    if world.Get_size() == 1:
        raise CollectiveError(message) from None
    rank = world.Get_rank()
    stack = traceback.format_stack(sys._getframe(1))
    lines = ["Traceback (most recent call last):", *"".join(stack).rstrip("\n").split("\n"),
             f"mpiflow.communication.watchdog.failure.CollectiveError: {message}",
             f"mpiflow: aborting the job because {operation} failed on rank {rank}"]
    _runtime.abort_job("".join(f"[rank {rank}] {line}\n" for line in "\n".join(lines)
                               .split("\n")), 1)
