"""What the ``"mpiflow"`` process group refuses before it communicates, and its end of life.

- :func:`overlaps`: whether two tensors' memory ranges overlap (an input inside an output);
- :func:`check_list` and :func:`split_rows`: a list of tensors with one per rank, each like
  another; all-to-all split sizes;
- :func:`check_reduce_dtype`: a reduction the dtype has no meaning for, named by torch's dtype
  (a bfloat16 is reduced through float32, but the error names bfloat16);
- :func:`self_receive`: a receive from this rank itself, which completes when a matching send
  to itself was posted first, and otherwise fails at ``wait()`` instead of waiting forever;
- :class:`Unusable`: what a group's communicator is replaced with once the group is
  destroyed or broken by a timeout: every use raises, naming why.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from typing import Any

import torch
from mpi4py import MPI

from ..communication import ReduceOp
from ..communication import Work as MPIWork

__all__ = ["Unusable", "check_list", "check_reduce_dtype", "overlaps", "self_receive",
           "split_rows"]

_SELF_MATCH_SECONDS = 0.05  # how long a receive from itself waits for its own send


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


def check_list(tensors: Sequence[torch.Tensor], like: torch.Tensor, size: int,
               what: str) -> None:
    """Check that ``tensors`` has ``size`` entries, each with ``like``'s size and dtype.

    Raises:
        ValueError, TypeError: a wrong length or size; a wrong dtype.

    >>> check_list([torch.zeros(2)], torch.ones(2), 2, "gather_list")
    Traceback (most recent call last):
    ...
    ValueError: gather_list must have one tensor per rank of the group (2), got 1
    """
    if len(tensors) != size:
        raise ValueError(f"{what} must have one tensor per rank of the group ({size}), got "
                         f"{len(tensors)}")
    for i, t in enumerate(tensors):
        if t.numel() != like.numel():
            raise ValueError(f"{what}[{i}] has shape {tuple(t.shape)}, expected "
                             f"{tuple(like.shape)}")
        if t.dtype != like.dtype:
            raise TypeError(f"{what}[{i}] has dtype {t.dtype}, expected {like.dtype}")


def split_rows(t: torch.Tensor, splits: list[int] | None, size: int,
               what: str) -> list[int] | None:
    """All-to-all's rows of ``t`` per rank: ``splits`` checked, or None for an even split.

    >>> split_rows(torch.zeros(4, 2), [], 2, "input_split_sizes") is None
    True
    """
    if not splits:
        if t.dim() == 0 or t.shape[0] % size:
            raise ValueError(f"all_to_all_single: dim 0 of a tensor of shape {tuple(t.shape)} "
                             f"does not split into {size} equal parts; give {what}")
        return None
    if len(splits) != size or any(n < 0 for n in splits):
        raise ValueError(f"{what} must have {size} non-negative entries, got {splits}")
    if sum(splits) != t.shape[0]:
        raise ValueError(f"{what} {splits} sums to {sum(splits)}, but dim 0 of the tensor "
                         f"is {t.shape[0]}")
    return list(splits)


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
        # A send to itself posted before is matched within a few progress steps, but not
        # always by the first Test (seen at 4 ranks on 2 busy cores): poll briefly, and trust
        # the cancel only when MPI says it cancelled (a matched receive completes instead).
        deadline = time.monotonic() + _SELF_MATCH_SECONDS
        while True:
            if requests[0].Test():
                return
            if time.monotonic() > deadline:
                break
            time.sleep(0)
        status = MPI.Status()
        with contextlib.suppress(MPI.Exception):
            requests[0].Cancel()
            requests[0].Wait(status)
            if not status.Is_cancelled():
                return
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
