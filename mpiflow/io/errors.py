"""Failing together: every rank learns whether any rank failed, and all raise the same error.

A checkpoint is written and read by collective MPI-IO calls. If one rank raised and left while
the others entered the next collective, they would wait forever; so each step that can fail on
some ranks only is followed by an *agreement*: one small all-reduce of a failure flag. When it
is set, the failing ranks' messages are gathered and every rank raises
:class:`CheckpointError` with the first failing rank's message.

Examples:
    >>> with agreed(comm, "writing the metadata"):
    ...     if comm.Get_rank() == 0:
    ...         write_metadata()
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy
from mpi4py import MPI

__all__ = ["CheckpointError", "agree", "agreed"]


class CheckpointError(RuntimeError):
    """A save or load failed; raised on every rank with the (first) failing rank's message.

    Attributes:
        rank: the first world rank that failed.
        ranks: every rank that failed.
    """

    def __init__(self, message: str, rank: int = 0, ranks: tuple[int, ...] = (0,)) -> None:
        super().__init__(message)
        self.rank = rank
        self.ranks = ranks


def _describe(error: BaseException) -> str:
    if isinstance(error, CheckpointError):
        return str(error)
    return f"{type(error).__name__}: {error}"


def agree(comm: Any, error: BaseException | None, what: str) -> None:
    """Raise :class:`CheckpointError` on every rank if ``error`` is set on any (collective).

    Args:
        comm: the mpi4py communicator of every rank taking part.
        error: this rank's exception, or None if it succeeded.
        what: the step, for the message (``"writing 'model.w'"``).

    Raises:
        CheckpointError: some rank failed; chained from this rank's own error, if any.

    Examples:
        >>> agree(comm, None, "opening the files")    # returns: nobody failed
    """
    flag = numpy.array([0 if error is None else 1], dtype=numpy.int32)
    comm.Allreduce(MPI.IN_PLACE, flag, MPI.MAX)
    if not flag[0]:
        return
    messages = comm.allgather(None if error is None else _describe(error))
    failed = tuple(r for r, m in enumerate(messages) if m is not None)
    first = failed[0]
    also = f" (and on rank(s) {', '.join(map(str, failed[1:]))})" if len(failed) > 1 else ""
    raise CheckpointError(f"{what} failed on rank {first}{also}: {messages[first]}", first,
                          failed) from error


@contextmanager
def agreed(comm: Any, what: str) -> Iterator[None]:
    """Run the ``with`` body, then :func:`agree` on whether it raised (collective).

    A body holds either local work or one collective MPI call, never local work that can fail
    before a collective: a rank that raised there would skip the call and leave the others
    waiting in it.

    Args:
        comm: the mpi4py communicator of every rank taking part.
        what: the step, for the message.

    Examples:
        >>> with agreed(comm, "opening x.npy"):
        ...     fh = MPI.File.Open(comm, "x.npy", MPI.MODE_RDONLY)
    """
    error: BaseException | None = None
    try:
        yield
    except Exception as exc:
        error = exc
    agree(comm, error, what)
