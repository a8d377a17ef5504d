"""Means and sums of squared deviations over a distributed axis: per-part moments, combined.

Each rank computes, over its own elements, their count ``n_r``, mean ``m_r`` and sum of squared
deviations from it ``M2_r`` (two local passes: no cancellation); one all-gather of those (a
slice of each per rank) lets every rank combine them exactly as a two-level formula (Chan,
Golub and LeVeque): ``n = sum n_r``, ``mean = sum n_r m_r / n`` and ``M2 = sum (M2_r + n_r (m_r -
mean)**2)``. No element moves, and the result is as sound as the two-pass variance.

Examples:
    >>> from mpiflow.communication.mpi.group import world_comm as comm
    >>> n, mean, m2 = moments(numpy.array([1.0, 3.0]) + comm.rank, (0,), comm)
    >>> n == 2 * comm.size and mean.tolist() == [2.0 + (comm.size - 1) / 2]
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy

from ..communication import Communicator
from ..core.array_module import array_module

__all__ = ["local_moments", "moments"]


def local_moments(array: Any, dims: Sequence[int], dtype: Any = None) -> tuple[int, Any, Any]:
    """``(count, mean, sum of squared deviations)`` over ``dims`` of one array (kept as size 1
    dims), computed in ``dtype`` (default the array's); the mean of no elements is 0."""
    xp = array_module(array)
    dims = tuple(dims)
    count = math.prod(array.shape[d] for d in dims)
    dtype = array.dtype if dtype is None else numpy.dtype(dtype)
    if count == 0:
        shape = tuple(1 if d in dims else n for d, n in enumerate(array.shape))
        return 0, xp.zeros(shape, dtype=dtype), xp.zeros(shape, dtype=dtype)
    mean = xp.sum(array, axis=dims, keepdims=True, dtype=dtype) / count
    deviation = array - mean
    m2 = xp.sum(deviation * deviation, axis=dims, keepdims=True, dtype=dtype)
    return count, mean.astype(dtype, copy=False), m2


def moments(local: Any, dims: Sequence[int], comm: Communicator | None
            ) -> tuple[int, Any, Any]:
    """``(count, mean, M2)`` over ``dims`` of a distributed array (collective: one all-gather).

    Args:
        local: this rank's part (split along some of ``dims`` over ``comm``).
        dims: the dims reduced (kept as size 1 in the results).
        comm: the ranks whose parts make the whole (None: ``local`` is all of it).

    Returns:
        The total count, the mean and the sum of squared deviations of real values, in
        float64.
    """
    xp = array_module(local)
    wide = numpy.dtype(numpy.float64)
    count, mean, m2 = local_moments(local, dims, wide)
    if comm is None or comm.size == 1:
        return count, mean, m2
    shape = mean.shape
    send = xp.concatenate([xp.asarray([count], dtype=wide), mean.reshape(-1),
                           m2.reshape(-1)])
    recv = xp.empty((comm.size, send.shape[0]), dtype=wide)
    comm.all_gather(send, recv)
    k = mean.size
    counts = recv[:, 0]
    means = recv[:, 1:1 + k].reshape(comm.size, *shape)
    m2s = recv[:, 1 + k:].reshape(comm.size, *shape)
    total = round(float(counts.sum()))
    if total == 0:
        return 0, means[0], m2s[0]
    weights = counts.reshape(-1, *([1] * len(shape)))
    mean = (weights * means).sum(axis=0) / total
    spread = (means - mean) ** 2  # empty parts weigh nothing
    return total, mean, (m2s + weights * spread).sum(axis=0)
