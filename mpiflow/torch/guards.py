"""What the ``"mpiflow"`` process group refuses before it communicates, and its end of life.

- :func:`overlaps`: whether two tensors' memory ranges overlap (an input inside an output);
- :func:`check_reduce_dtype`: a reduction the dtype has no meaning for, named by torch's dtype
  (a bfloat16 is reduced through float32, but the error names bfloat16);
- :func:`self_receive`: a receive from this rank itself, which completes when a matching send
  to itself was posted first, and otherwise fails at ``wait()`` instead of waiting forever;
- :class:`Unusable`: what a group's communicator is replaced with once the group is
  destroyed or broken by a timeout: every use raises, naming why.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import torch
from mpi4py import MPI

from ..communication import ReduceOp
from ..communication import Work as MPIWork

__all__ = ["Unusable", "check_reduce_dtype", "overlaps", "self_receive"]


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors' memory ranges overlap (conservatively, by their extents).

    >>> t = torch.zeros(4)
    >>> overlaps(t[:2], t[1:]), overlaps(t[:2], t[2:])
    (True, False)
    """
    if a.device != b.device or a.numel() == 0 or b.numel() == 0:
        return False
    a0, b0 = a.data_ptr(), b.data_ptr()
    return a0 < b0 + _extent(b) and b0 < a0 + _extent(a)


def _extent(t: torch.Tensor) -> int:
    if t.is_contiguous():
        return t.nbytes
    span = 1 + sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride()))
    return span * t.element_size()


def check_reduce_dtype(op: ReduceOp, dtype: torch.dtype) -> None:
    """Refuse a bitwise reduction of a floating-point or complex dtype, naming torch's dtype.

    Raises:
        TypeError: ``op`` is BAND, BOR or BXOR and ``dtype`` is not an integer or bool.

    >>> check_reduce_dtype(ReduceOp.BAND, torch.bfloat16)
    Traceback (most recent call last):
    ...
    TypeError: ReduceOp.BAND needs integer or bool tensors, got torch.bfloat16
    """
    if op.is_bitwise and (dtype.is_floating_point or dtype.is_complex):
        raise TypeError(f"{op!r} needs integer or bool tensors, got {dtype}")


def self_receive(mpi_comm: Any, dst: Any, rank: int, tag: int) -> MPIWork:
    """Receive into ``dst`` from this rank itself: its send must already be posted.

    A single-rank ring (``isend`` to itself, then ``recv``) works as on gloo. A receive whose
    send was never posted would wait forever: at ``wait()`` it is cancelled and raises.

    Args:
        mpi_comm: the group's mpi4py communicator.
        dst: the contiguous array to receive into.
        rank: this process's rank in ``mpi_comm``.
        tag: the message tag.

    Returns:
        The work; ``wait()`` raises ``ValueError`` when no send to this rank was posted.
    """
    request = mpi_comm.Irecv(dst, rank, tag)

    def wait_all(requests: Sequence[MPI.Request]) -> None:
        if requests[0].Test():
            return
        with contextlib.suppress(MPI.Exception):
            requests[0].Cancel()
            requests[0].Wait()
        raise ValueError(f"recv from rank {rank}, this process itself, with no send to itself "
                         f"posted (tag {tag}): it would wait forever")

    def test_all(requests: Sequence[MPI.Request]) -> bool:
        return bool(requests[0].Test())

    return MPIWork([request], None, dst, wait_all, test_all)


class Unusable:
    """Stands in for a group's communicator once the group cannot be used: every attribute
    read raises ``RuntimeError`` with the reason.

    >>> Unusable("the group was destroyed").all_reduce
    Traceback (most recent call last):
    ...
    RuntimeError: the group was destroyed
    """

    def __init__(self, reason: str) -> None:
        self._reason = reason

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(self._reason)
