"""The process group's plumbing: staging checks, works chained on works, option shims.

Package-internal helpers of :mod:`.process_group`, one step each; none communicates.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import numpy
import torch
import torch.distributed as dist
from mpi4py import MPI

from ..communication import Work as MPIWork
from ..core import settings
from ..core.torch_arrays import Post, chain, overlaps_itself
from .work import DoneWork, PendingWork

__all__ = ["DECLINED", "DONE", "all_of", "barrier_limit", "contiguous", "flat", "flat_view",
           "mpi_work", "overlap_enabled", "plain", "plain_pair", "premul", "scatter_rows", "then",
           "with_async"]

TORCH_DEFAULT_TIMEOUT = getattr(dist, "default_pg_timeout", None)


def flat(tensors: Sequence[Any], what: str) -> Any:
    if len(tensors) != 1:
        raise ValueError(f"the mpiflow backend takes one tensor per rank in {what} "
                         f"(one device per process), got {len(tensors)}")
    return tensors[0]


def premul(t: torch.Tensor, factor: Any) -> torch.Tensor:
    """``t`` multiplied by PREMUL_SUM's factor (a number or a one-element tensor)."""
    return t.detach() * (factor.item() if isinstance(factor, torch.Tensor) else factor)



# What a blocking call returns: torch only waits on it (a no-op), so one object serves all.
DONE = DoneWork([])


class _DeclinedFastPaths:
    """The fast paths of a group with its own timeout: each declines, as a blocking MPI call
    cannot be given up at a deadline (the general path's non-blocking one can)."""

    @staticmethod
    def _decline(*args: Any) -> bool:
        return False

    all_reduce = all_reduce_at = reduce_scatter = broadcast = all_gather = all_to_all = _decline


DECLINED: Any = _DeclinedFastPaths()


def barrier_limit(opts: Any, group_timeout: timedelta | None) -> timedelta | None:
    """The time a barrier may wait before raising: ``barrier(timeout=)``, else the group's
    own timeout when one was given; None leaves it to the watchdog."""
    given = getattr(opts, "timeout", None)
    if isinstance(given, timedelta) and given >= timedelta(0):
        return given
    if group_timeout is not None and group_timeout != TORCH_DEFAULT_TIMEOUT:
        return group_timeout
    return None


def plain(t: torch.Tensor) -> Any:
    """The numpy view of a CPU tensor numpy has a dtype for, else None (the fast paths decline
    None)."""
    try:
        return t.numpy()
    except (TypeError, RuntimeError):
        return None


def plain_pair(out: torch.Tensor, inp: torch.Tensor) -> bool:
    """Whether two CPU tensors may go to a fast path: no autograd, separate storages (numpy
    views of one storage do not share a ``.base``, so the fast paths could not tell), and an
    output whose elements have their own memory (one that overlaps itself goes the general
    way, which writes into a copy and raises after the call: every rank takes part)."""
    return (out.is_cpu and inp.is_cpu and not out.requires_grad and not inp.requires_grad
            and not overlaps_itself(out)
            and out.untyped_storage().data_ptr() != inp.untyped_storage().data_ptr())


def flat_view(array: Any) -> Any:
    """A 1-D view of a contiguous array (strided arrays stay: the communicator stages them)."""
    flags = getattr(array, "flags", None)
    if flags is not None and flags.c_contiguous:
        return array.reshape(-1)
    return array


def contiguous(array: Any) -> Any:
    flags = getattr(array, "flags", None)
    if flags is None or flags.c_contiguous:
        return array
    return numpy.ascontiguousarray(array)


def scatter_rows(outs: Sequence[torch.Tensor], big: torch.Tensor) -> Post:
    def post() -> None:
        for out, row in zip(outs, big):
            out.copy_(row.view(out.shape))

    return post


def then(work: dist._Work, result: list[torch.Tensor], step: Post) -> dist._Work:
    """``work`` followed by ``step``, as one work whose result is ``result``."""
    if isinstance(work, DoneWork):
        step()
        return DoneWork(result)
    assert isinstance(work, PendingWork)
    return PendingWork(work._work, result, chain(work._post, step))


def all_of(works: list[dist._Work], result: list[torch.Tensor]) -> dist._Work:
    """One work for several: done when all are."""
    pending = [w for w in works if not isinstance(w, DoneWork)]
    if not pending:
        return DoneWork(result)

    def wait_all(items: Sequence[Any]) -> None:
        for item in items:
            item.wait()

    def test_all(items: Sequence[Any]) -> bool:
        return all(item.is_completed() for item in items)

    return PendingWork(MPIWork(pending, None, None, wait_all, test_all), result)


def with_async(opts: Any, source: Any) -> Any:
    opts.reduceOp = source.reduceOp
    opts.asyncOp = getattr(source, "asyncOp", True)
    return opts


def mpi_work(requests: list[MPI.Request], keep: Any) -> MPIWork:
    def wait_all(reqs: Sequence[MPI.Request]) -> None:
        MPI.Request.Waitall(list(reqs))

    def test_all(reqs: Sequence[MPI.Request]) -> bool:
        return bool(MPI.Request.Testall(list(reqs)))

    return MPIWork(requests, None, keep, wait_all, test_all)


def overlap_enabled() -> bool:
    """Whether ``MPIFLOW_TORCH_OVERLAP=1`` asks for non-blocking asynchronous collectives."""
    return bool(settings.read("MPIFLOW_TORCH_OVERLAP"))


class _AsyncOption:
    """``opts.asyncOp`` for torch releases whose option structs lack it: True, as those
    releases treated every operation as asynchronous (the caller waits)."""

    def __get__(self, opts: Any, owner: Any = None) -> bool:
        return True


for _name in ("AllreduceOptions", "BroadcastOptions", "AllgatherOptions", "ReduceOptions",
              "ReduceScatterOptions", "GatherOptions", "ScatterOptions", "AllToAllOptions",
              "BarrierOptions", "AllreduceCoalescedOptions"):
    _cls = getattr(dist, _name, None)
    if _cls is not None and not hasattr(_cls(), "asyncOp"):
        # Older torch: a plain attribute lookup must still answer (pybind classes take it).
        with contextlib.suppress(Exception):
            _cls.asyncOp = _AsyncOption()
