"""Reproducible SUM/AVG collectives on float data: the same bits for any rank count or order.

Under the reproducibility switch (:mod:`mpiflow.core.deterministic`) a float or complex SUM/AVG
all-reduce, reduce or reduce-scatter gathers every rank's values and sums each element exactly
(:mod:`mpiflow.core.exact_sum`), rounding once. The result is the correctly rounded sum, so it
does not depend on MPI's reduction order or algorithm (``1e16 + 1 - 1e16 + 1`` gives 2 on every
rank count). It moves ``size`` times the data of a plain all-reduce, and its per-element rounding
runs in Python: it is meant for results that must reproduce, not for gradient traffic.

Example:
    >>> import numpy
    >>> from mpiflow.communication.collectives.deterministic import sum_over_ranks
    >>> sum_over_ranks(numpy.array([[1e16], [1.0], [-1e16], [1.0]]), average=False).tolist()
    [2.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy

from ...core import exact_sum as xs
from ...core.deterministic import are_deterministic_algorithms_enabled
from ...core.reduce_op import ReduceOp
from ..mpi.interface import Communicator

__all__ = ["wanted", "sum_over_ranks", "all_reduce", "reduce", "reduce_scatter"]


def wanted(buf: Any, op: ReduceOp) -> bool:
    """Whether a reduction of ``buf`` with ``op`` must run exactly (switch on, numpy float)."""
    return (are_deterministic_algorithms_enabled() and op in (ReduceOp.SUM, ReduceOp.AVG)
            and type(buf) is numpy.ndarray and buf.dtype.kind in "fc")


def sum_over_ranks(stacked: numpy.ndarray, average: bool) -> numpy.ndarray:
    """The correctly rounded elementwise sum (or mean) over axis 0 of ``stacked``.

    Args:
        stacked: ``(ranks, ...)`` float or complex values.
        average: divide by the number of ranks (exactly, before the one rounding).

    Returns:
        An array of shape ``stacked.shape[1:]`` and the same dtype.
    """
    count = stacked.shape[0]
    dtype = stacked.dtype
    real = stacked
    if dtype.kind == "c":
        real = numpy.ascontiguousarray(stacked).view(dtype.type(0).real.dtype)
    flat = real.reshape(count, -1)
    states = xs.rows_state(flat.T)
    values = xs.state_values(states, flat.dtype, divisor=count if average else 1)
    if dtype.kind == "c":
        values = values.view(dtype)
    return values.reshape(stacked.shape[1:])


def _stacked(comm: Communicator, buf: numpy.ndarray) -> numpy.ndarray:
    out = numpy.empty((comm.size, *buf.shape), buf.dtype)
    comm.all_gather(numpy.ascontiguousarray(buf), out)
    return out


def all_reduce(comm: Communicator, buf: numpy.ndarray, op: ReduceOp) -> None:
    """Exact SUM/AVG all-reduce of ``buf`` in place over ``comm``."""
    if comm.size == 1:
        return      # one value per element: already exact (AVG divides by 1)
    buf[...] = sum_over_ranks(_stacked(comm, buf), op == ReduceOp.AVG)


def reduce(comm: Communicator, buf: numpy.ndarray, op: ReduceOp, root: int) -> None:
    """Exact SUM/AVG reduce of ``buf`` into ``buf`` on ``root`` (a group rank)."""
    send = numpy.ascontiguousarray(buf)
    recv = numpy.empty((comm.size, *buf.shape), buf.dtype) if comm.rank == root else None
    comm.gather(send, recv, root)
    if recv is not None:
        buf[...] = sum_over_ranks(recv, op == ReduceOp.AVG)


def reduce_scatter(comm: Communicator, send: numpy.ndarray, recv: numpy.ndarray, op: ReduceOp,
                   counts: Sequence[int] | None = None) -> None:
    """Exact SUM/AVG reduce-scatter: ``recv`` gets this rank's chunk of the reduced ``send``.

    Args:
        comm: the communicator.
        send: the full array, chunked along its flattened order (``counts`` elements each, or
            ``recv.size`` each).
        recv: this rank's output.
        op: SUM or AVG.
        counts: elements per rank for uneven chunks.
    """
    total = sum_over_ranks(_stacked(comm, send), op == ReduceOp.AVG).reshape(-1)
    sizes = list(counts) if counts is not None else [recv.size] * comm.size
    start = sum(sizes[:comm.rank])
    recv[...] = total[start:start + sizes[comm.rank]].reshape(recv.shape)
