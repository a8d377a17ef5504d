"""Collectives given up at a deadline: a process group's timeout as a catchable error.

torch promises a ``RuntimeError`` when a group's operation outlives the group's timeout
(``init_process_group(timeout=)``, ``new_group(timeout=)``, ``barrier(timeout=)``), as gloo
raises it. A blocking MPI call cannot be given up, so such operations are started
non-blocking and polled against the deadline; past it the process group retires itself (its
operation can never be matched), and the error says so.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

__all__ = ["barrier_by", "finish_by", "timeout_message"]


def timeout_message(rank: int, group: str, what: str, limit: timedelta) -> str:
    """The error of ``what`` (``"barrier"``, ``"a collective"``) timed out in ``group``.

    >>> timeout_message(1, "", "barrier", timedelta(seconds=2))[:59]
    '[rank 1] barrier of the process group (default): Timed out '
    """
    ms = round(limit.total_seconds() * 1000)
    return (f"[rank {rank}] {what} of the process group {group or '(default)'}: Timed out "
            f"waiting {ms}ms for the other ranks; the group is unusable now, make a new one")


def barrier_by(mpi_comm: Any, limit: timedelta) -> bool:
    """A barrier over ``mpi_comm`` (``Ibarrier``) polled until ``limit``; whether it ended."""
    request = mpi_comm.Ibarrier()
    deadline = time.monotonic() + limit.total_seconds()
    pause = 1e-5
    while not request.Test():
        if time.monotonic() > deadline:
            return False
        time.sleep(pause)
        pause = min(2 * pause, 1e-3)
    return True


def finish_by(work: Any, limit: timedelta) -> bool:
    """Wait for a started operation (an mpiflow ``Work``) until ``limit``; whether it ended."""
    try:
        work.wait(limit.total_seconds())
    except TimeoutError:
        return False
    return True
