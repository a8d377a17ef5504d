"""Failing together: every rank learns whether any rank failed, and all raise the same error.

A checkpoint is written and read by collective MPI-IO calls. If one rank raised and left while
the others entered the next collective, they would wait forever; so each step that can fail on
some ranks only is followed by an *agreement*: one small all-reduce of a failure flag. When it
is set, the failing ranks' messages are gathered and every rank raises
:class:`CheckpointError` with the first failing rank's message.

Every blocking MPI call of a checkpoint (the agreements, the broadcasts, the collective MPI-IO
calls) runs inside :func:`blocking`, which marks it for mpiflow's watchdog
(:func:`mpiflow.communication.watchdog.watched`): a rank that never arrives at one (stuck, or
gone) is reported after ``MPIFLOW_TIMEOUT`` seconds and the job aborts, instead of hanging.

Examples:
    >>> from mpi4py import MPI
    >>> comm = MPI.COMM_WORLD
    >>> write_metadata = lambda: None
    >>> with agreed(comm, "writing the metadata"):
    ...     if comm.Get_rank() == 0:
    ...         write_metadata()
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import numpy
from mpi4py import MPI

from ..communication.watchdog.state import watched

__all__ = ["CheckpointError", "ParallelIOError", "agree", "agreed", "blocking"]


def blocking(operation: str, comm: Any) -> AbstractContextManager[None]:
    """Mark a blocking MPI call of a checkpoint for the watchdog (one store, no MPI call).

    Args:
        operation: what the call does, the same text on every rank (it names the call in the
            watchdog's report, which counts the ranks waiting in the same operation).
        comm: the mpi4py communicator of the call.

    Examples:
        >>> comm, path = MPI.COMM_WORLD, "x.npy"
        >>> numpy.save(path, numpy.zeros(3))
        >>> with blocking(f"checkpoint: MPI-IO File.Open of {path}", comm):
        ...     fh = MPI.File.Open(comm, path, MPI.MODE_RDONLY)
        >>> fh.Close()
    """
    return watched(operation, comm)


class ParallelIOError(RuntimeError):
    """A collective save or load failed; raised on every rank with the first failing rank's
    message (checkpoints raise the subclass :class:`CheckpointError`; the data files of
    :mod:`mpiflow.io`, HDF5, netCDF, Zarr, CSV and ``.npy``, raise this class itself).

    Attributes:
        rank: the first world rank that failed.
        ranks: every rank that failed.
    """

    def __init__(self, message: str, rank: int = 0, ranks: tuple[int, ...] = (0,)) -> None:
        super().__init__(message)
        self.rank = rank
        self.ranks = ranks


class CheckpointError(ParallelIOError):
    """A checkpoint's save or load failed; raised on every rank with the (first) failing rank's
    message.

    Attributes:
        rank: the first world rank that failed.
        ranks: every rank that failed.
    """


def _describe(error: BaseException) -> str:
    if isinstance(error, ParallelIOError):
        return str(error)
    return f"{type(error).__name__}: {error}"


def agree(comm: Any, error: BaseException | None, what: str,
          kind: type[ParallelIOError] = CheckpointError) -> None:
    """Raise :class:`CheckpointError` on every rank if ``error`` is set on any (collective).

    Args:
        comm: the mpi4py communicator of every rank taking part.
        error: this rank's exception, or None if it succeeded.
        what: the step, for the message (``"writing 'model.w'"``).
        kind: the class of the error raised (the same on every rank).

    Raises:
        CheckpointError: some rank failed (or ``kind``); chained from this rank's own error,
            if any.

    Examples:
        >>> comm = MPI.COMM_WORLD
        >>> agree(comm, None, "opening the files")    # returns: nobody failed
    """
    flag = numpy.array([0 if error is None else 1], dtype=numpy.int32)
    operation = f"{'checkpoint' if kind is CheckpointError else 'io'} agreement after {what!r}"
    with watched(operation, comm):
        comm.Allreduce(MPI.IN_PLACE, flag, MPI.MAX)
    if not flag[0]:
        return
    with watched(operation, comm):
        messages = comm.allgather(None if error is None else _describe(error))
    failed = tuple(r for r, m in enumerate(messages) if m is not None)
    first = failed[0]
    also = f" (and on rank(s) {', '.join(map(str, failed[1:]))})" if len(failed) > 1 else ""
    raise kind(f"{what} failed on rank {first}{also}: {messages[first]}", first,
               failed) from error


@contextmanager
def agreed(comm: Any, what: str, kind: type[ParallelIOError] = CheckpointError
           ) -> Iterator[None]:
    """Run the ``with`` body, then :func:`agree` on whether it raised (collective).

    A body holds either local work or one collective MPI call, never local work that can fail
    before a collective: a rank that raised there would skip the call and leave the others
    waiting in it.

    Args:
        comm: the mpi4py communicator of every rank taking part.
        what: the step, for the message.
        kind: the class of the error raised.

    Examples:
        >>> comm = MPI.COMM_WORLD
        >>> numpy.save("x.npy", numpy.zeros(3))
        >>> with agreed(comm, "opening x.npy"):
        ...     fh = MPI.File.Open(comm, "x.npy", MPI.MODE_RDONLY)
        >>> fh.Close()
    """
    error: BaseException | None = None
    try:
        yield
    except Exception as exc:
        error = exc
    agree(comm, error, what, kind)
