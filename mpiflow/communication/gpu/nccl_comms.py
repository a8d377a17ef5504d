"""The NCCL communicators of one mpiflow group: the group's own, and one per pair of peers.

The group's NCCL communicator is made the first time a collective of the group moves device
arrays: group rank 0 draws NCCL's unique id, MPI broadcasts it, and every member joins
(``ncclCommInitRank``). Point-to-point messages use a two-rank NCCL communicator per pair of
peers, set up by the pair alone the first time they talk (the lower rank sends the id over
MPI, tag :data:`BOOTSTRAP_TAG`), so a send never needs the rest of the group; after
:meth:`NcclComms.connect` they use the group's communicator instead (see :mod:`.nccl` for why
that matters). Each is cached for the life of the group.

Example:
    >>> from mpiflow.communication.gpu.nccl_comms import BOOTSTRAP_TAG
    >>> BOOTSTRAP_TAG
    32011
"""

from __future__ import annotations

import threading
from typing import Any

import numpy

from ..mpi.communicator import MPICommunicator
from .nccl_library import NcclBackend

__all__ = ["BOOTSTRAP_TAG", "NcclComms"]

# The MPI tag of the message that gives a pair of ranks their NCCL unique id.
BOOTSTRAP_TAG = 32011
_UID_BYTES = 128


class NcclComms:
    """The NCCL communicators of one group, made on first use.

    Args:
        mpi: the group's MPI communicator (it carries the unique ids).
        backend: the NCCL library.
        lock: the lock of the group's :class:`~.nccl.NCCLCommunicator`, held while one is made.

    Attributes:
        p2p_on_group: whether point-to-point messages use the group's communicator (after
            :meth:`connect`) rather than the pairs'.
    """

    def __init__(self, mpi: MPICommunicator, backend: NcclBackend,
                 lock: threading.RLock) -> None:
        self.mpi = mpi
        self.rank, self.size = mpi.rank, mpi.size
        self._backend = backend
        self._lock = lock
        self._comm: Any = None
        self._pairs: dict[int, Any] = {}
        self.p2p_on_group = False

    @property
    def connected(self) -> bool:
        """Whether the group's NCCL communicator has been made."""
        return self._comm is not None

    def group(self) -> Any:
        """The group's NCCL communicator, made on first use (collective over the group)."""
        with self._lock:
            if self._comm is None:
                uid = numpy.zeros(_UID_BYTES, dtype=numpy.int16)  # chars, signed or not
                if self.rank == 0:
                    uid[:] = self._backend.unique_id()
                self.mpi.broadcast(uid, 0)
                self._comm = self._backend.connect(self.size, tuple(int(v) for v in uid),
                                                   self.rank, self.mpi.mpi_comm, None)
            return self._comm

    def connect(self) -> None:
        """Make the group's NCCL communicator now; point-to-point messages use it from then on.

        Collective over the group (:meth:`.nccl.NCCLCommunicator.connect` says when to call it).
        """
        with self._lock:
            self.group()
            self.p2p_on_group = True

    def peer(self, peer: int) -> tuple[Any, int]:
        """The NCCL communicator that carries messages to and from ``peer``, and its rank there."""
        with self._lock:
            if self.p2p_on_group:
                return self.group(), peer
            return self._pair(peer)

    def _pair(self, peer: int) -> tuple[Any, int]:
        """The two-rank NCCL communicator shared with ``peer`` and the peer's rank in it."""
        comm = self._pairs.get(peer)
        low = self.rank < peer
        if comm is None:
            uid = numpy.zeros(_UID_BYTES, dtype=numpy.int16)
            if low:
                uid[:] = self._backend.unique_id()
                self.mpi.send(uid, peer, BOOTSTRAP_TAG)
            else:
                self.mpi.recv(uid, peer, BOOTSTRAP_TAG)
            members = (self.rank, peer) if low else (peer, self.rank)
            comm = self._backend.connect(2, tuple(int(v) for v in uid), 0 if low else 1,
                                         self.mpi.mpi_comm, members)
            self._pairs[peer] = comm
        return comm, 1 if low else 0
