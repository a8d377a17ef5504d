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
from ..core.array_module import array_module, to_host

__all__ = ["local_moments", "moments"]


def _parts(array: Any, dims: tuple[int, ...], dtype: Any) -> tuple[int, Any, Any, Any]:
    """``(count, mean, correction, M2)`` of one array over ``dims`` (kept as size 1): the
    corrected two-pass algorithm. ``mean + correction`` is the mean to more than the dtype's
    precision (``correction`` is the rounding error of ``mean``, from the deviations' sum)."""
    xp = array_module(array)
    count = math.prod(array.shape[d] for d in dims)
    shape = tuple(1 if d in dims else n for d, n in enumerate(array.shape))
    if count == 0:
        zeros = xp.zeros(shape, dtype=dtype)
        return 0, zeros, zeros, zeros
    mean = xp.sum(array, axis=dims, keepdims=True, dtype=dtype) / count
    deviation = array - mean
    residual = xp.sum(deviation, axis=dims, keepdims=True, dtype=dtype)
    m2 = xp.sum(deviation * deviation, axis=dims, keepdims=True, dtype=dtype)
    return count, mean, residual / count, m2 - residual * residual / count


def local_moments(array: Any, dims: Sequence[int], dtype: Any = None) -> tuple[int, Any, Any]:
    """``(count, mean, sum of squared deviations)`` over ``dims`` of one array (kept as size 1
    dims), computed in ``dtype`` (default the array's); the mean of no elements is 0."""
    dtype = array.dtype if dtype is None else numpy.dtype(dtype)
    count, mean, correction, m2 = _parts(array, tuple(dims), dtype)
    return count, mean + correction, m2


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
    if comm is None or comm.size == 1:
        return local_moments(local, dims, wide)
    count, mean, correction, m2 = _parts(local, tuple(dims), wide)
    shape = mean.shape
    send = xp.concatenate([xp.asarray([count], dtype=wide), mean.reshape(-1),
                           correction.reshape(-1), m2.reshape(-1)])
    recv = xp.empty((comm.size, send.shape[0]), dtype=wide)
    comm.all_gather(send, recv)
    k = mean.size
    counts = recv[:, 0]
    means, fixes, m2s = (recv[:, 1 + j * k:1 + (j + 1) * k].reshape(comm.size, *shape)
                         for j in range(3))
    total = round(float(counts.sum()))
    if total == 0:
        return 0, means[0], m2s[0]
    # Differences from one part's mean (exact for close means), plus each part's rounding
    # correction: the spread of the parts' means keeps the precision of the deviations.
    weights = counts.reshape(-1, *([1] * len(shape)))
    reference = means[int(numpy.argmax(to_host(counts) > 0))]
    offsets = xp.where(weights > 0, (means - reference) + fixes, 0.0)
    shift = (weights * offsets).sum(axis=0) / total
    spread = (offsets - shift) ** 2  # empty parts weigh nothing
    return total, reference + shift, (m2s + weights * spread).sum(axis=0)
