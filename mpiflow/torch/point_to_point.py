"""The point-to-point methods of the ``"mpiflow"`` process group: send, recv, recv from any.

They are always non-blocking (a send completes at ``wait()``), on the group's communicator, so
an ``isend`` that nobody receives is reported at exit as the numpy API reports it (the group's
communicator is checked for messages left over: :func:`~mpiflow.communication.mpi.group.
check_at_exit`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist
from mpi4py import MPI

from ..communication import Work as MPIWork
from ..communication.mpi.communicator import MPICommunicator
from ..core.torch_arrays import chain, stage
from .guards import self_receive
from .plumbing import contiguous, flat
from .work import PendingWork

__all__ = ["PointToPoint"]


class PointToPoint:
    """``send``, ``recv`` and ``recv_anysource`` of :class:`.process_group.ProcessGroupMPIFlow`
    (which gives ``_comm``, its communicator, and ``_mpi``, the mpi4py one)."""

    _comm: MPICommunicator
    _mpi: Any

    def send(self, tensors: list[torch.Tensor], dstRank: int, tag: int) -> dist._Work:
        """Start sending ``tensors[0]`` to group rank ``dstRank`` (wait() to complete)."""
        t = flat(tensors, "send")
        array, _ = stage(t)
        work = self._comm.send(contiguous(array), dstRank, tag, async_op=True)
        assert work is not None
        return PendingWork(work, [t])

    def recv(self, tensors: list[torch.Tensor], srcRank: int, tag: int) -> dist._Work:
        """Start receiving into ``tensors[0]`` from group rank ``srcRank``."""
        t = flat(tensors, "recv")
        array, post = stage(t, write=True)
        if srcRank == self._comm.rank:
            dst = contiguous(array)
            copy_back = None if dst is array else (lambda: array.__setitem__(Ellipsis, dst))
            return PendingWork(self_receive(self._mpi, dst, srcRank, tag), [t],
                               chain(copy_back, post), source=lambda: srcRank)
        return PendingWork(self._comm.irecv(array, srcRank, tag), [t], post,
                           source=lambda: srcRank)

    def recv_anysource(self, tensors: list[torch.Tensor], tag: int) -> dist._Work:
        """Start receiving into ``tensors[0]`` from whichever rank sends first."""
        t = flat(tensors, "recv")
        array, post = stage(t, write=True)
        dst = contiguous(array)
        status = MPI.Status()
        request = self._mpi.Irecv(dst, MPI.ANY_SOURCE, tag)

        def wait_all(requests: Sequence[MPI.Request]) -> None:
            requests[0].Wait(status)

        def test_all(requests: Sequence[MPI.Request]) -> bool:
            return bool(requests[0].Test(status))

        copy_back = None if dst is array else (lambda: array.__setitem__(Ellipsis, dst))
        work = MPIWork([request], None, dst, wait_all, test_all)
        work.what = ("recv", self._mpi, MPI.ANY_SOURCE)
        return PendingWork(work, [t], chain(copy_back, post), source=status.Get_source)
