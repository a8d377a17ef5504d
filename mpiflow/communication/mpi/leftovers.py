"""Messages nobody received: found at exit, reported as a warning naming sender, tag and size.

An ``isend`` that no rank ever receives is not an error to MPI: a small message completes on
the sender at once, and the job ends with status 0. Once every rank has reached its exit
(the watchdog's exit notices, :mod:`mpiflow.communication.watchdog.exits`), every message
sent to this rank on mpiflow's communicators (the world and the groups of ``new_group``) has
been posted, so one that is still waiting here was never received: :func:`unreceived_lines`
drains and describes them, and the exit check prints them::

    [rank 1] mpiflow warning: 1 message sent to rank 1 was never received (an isend or ...
    [rank 1]   from rank 0 on the world (ranks 0..1): tag 5, 24 bytes

Examples:
    >>> from mpiflow.communication.mpi.group import world_comm
    >>> unreceived_lines([world_comm])    # nothing left over
    []
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

from mpi4py import MPI

__all__ = ["unreceived_lines"]


def _world_rank(comm: Any, rank: int) -> int:
    return int(MPI.Group.Translate_ranks(comm.Get_group(), [rank], MPI.COMM_WORLD.Get_group())[0])


def _name(comm: Any) -> str:
    ranks = MPI.Group.Translate_ranks(comm.Get_group(), list(range(comm.Get_size())),
                                      MPI.COMM_WORLD.Get_group())
    if list(ranks) == list(range(MPI.COMM_WORLD.Get_size())):
        return f"the world (ranks 0..{len(ranks) - 1})"
    return f"the group {list(map(int, ranks))}"


def unreceived_lines(communicators: Iterable[Any]) -> list[str]:
    """Receive and describe the messages still waiting for this rank (call it at exit).

    Args:
        communicators: mpiflow communicators (``MPICommunicator``) whose messages to check.

    Returns:
        The lines of the warning, or an empty list when nothing was left over.
    """
    if MPI.Is_finalized():
        return []
    found: list[str] = []
    for communicator in communicators:
        comm = communicator.mpi_comm
        if not isinstance(comm, MPI.Comm):  # finalized
            continue
        status = MPI.Status()
        while (message := comm.Improbe(MPI.ANY_SOURCE, MPI.ANY_TAG, status)) is not None:
            size = status.Get_count(MPI.BYTE)
            # Receiving drains it; a large message's sender may have left already, which
            # fails the copy (the envelope is all this needs).
            with contextlib.suppress(MPI.Exception):
                message.Recv([bytearray(max(size, 1)), size, MPI.BYTE])
            found.append(f"  from rank {_world_rank(comm, status.Get_source())} on "
                         f"{_name(comm)}: tag {status.Get_tag()}, {size} bytes")
    if not found:
        return []
    rank = MPI.COMM_WORLD.Get_rank()
    head = (f"mpiflow warning: {len(found)} message{'s' if len(found) > 1 else ''} sent to rank "
            f"{rank} {'were' if len(found) > 1 else 'was'} never received (an isend or send "
            "without a matching recv):")
    return [head, *found]
