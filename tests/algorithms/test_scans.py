"""Distributed scans against numpy's on the whole axis."""

from __future__ import annotations

import numpy
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from mpiflow.algorithms import arg_scan, scan
from mpiflow.algorithms.ranges import balanced, offsets
from mpiflow.communication import count_collectives
from mpiflow.communication.mpi.group import world_comm as comm

pytestmark = pytest.mark.mpi
RANK, SIZE = comm.rank, comm.size

NUMPY = {"sum": numpy.cumsum, "prod": numpy.cumprod,
         "max": numpy.maximum.accumulate, "min": numpy.minimum.accumulate,
         "logsumexp": numpy.logaddexp.accumulate}


def _whole_scan(x: numpy.ndarray, op: str, axis: int, reverse: bool) -> numpy.ndarray:
    if reverse:
        return numpy.flip(_whole_scan(numpy.flip(x, axis), op, axis, False), axis)
    return NUMPY[op](x, axis=axis)


@pytest.mark.parametrize("op", sorted(NUMPY))
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("n", [0, 1, 3 * 4 + 1])
def test_scan_matches_numpy(op: str, reverse: bool, n: int) -> None:
    rng = numpy.random.default_rng(3)
    whole = rng.uniform(0.5, 1.5, (2, n))
    if op in ("max", "min") and n > 3:
        whole[0, 3] = numpy.nan  # NaN propagates, as numpy's
    counts = balanced(n, SIZE)
    lo, hi = offsets(counts)[RANK], offsets(counts)[RANK + 1]
    got = scan(whole[:, lo:hi], comm, 1, op, reverse=reverse)
    assert_allclose(got, _whole_scan(whole, op, 1, reverse)[:, lo:hi], rtol=1e-12)


def test_integer_sum_is_exact_and_sends_one_gather() -> None:
    whole = numpy.arange(10 * SIZE, dtype=numpy.int64)
    counts = balanced(whole.size, SIZE)
    lo, hi = offsets(counts)[RANK], offsets(counts)[RANK + 1]
    with count_collectives() as calls:
        got = scan(whole[lo:hi], comm, 0, "sum")
    assert_array_equal(got, numpy.cumsum(whole)[lo:hi])
    assert dict(calls) == ({"all_gather": 1} if SIZE > 1 else {})


def test_an_unknown_scan_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown scan"):
        scan(numpy.ones(2), comm, 0, "median")


def _torch_arg_scan(x: numpy.ndarray, largest: bool) -> tuple[numpy.ndarray, numpy.ndarray]:
    """torch's cummax/cummin rule on the whole axis, one element at a time (axis 1)."""
    values, indices = numpy.empty_like(x), numpy.zeros(x.shape, dtype=numpy.int64)
    for row in range(x.shape[0]):
        best, at = None, -1
        for i, v in enumerate(x[row]):
            if best is None or numpy.isnan(v) or (not numpy.isnan(best) and
                                                  (v >= best if largest else v <= best)):
                best, at = v, i
            values[row, i], indices[row, i] = best, at
    return values, indices


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("n", [0, 1, 3 * 4 + 1])
def test_arg_scan_keeps_torch_s_tie_and_nan_rule(largest: bool, n: int) -> None:
    rng = numpy.random.default_rng(5)
    whole = rng.integers(0, 3, (2, n)).astype(numpy.float64)  # many ties
    if n > 5:
        whole[1, 4] = whole[1, n - 1] = numpy.nan  # a later NaN takes the index
    counts = balanced(n, SIZE)
    lo, hi = offsets(counts)[RANK], offsets(counts)[RANK + 1]
    with count_collectives() as calls:
        values, indices = arg_scan(whole[:, lo:hi], comm, 1, largest, lo)
    want_v, want_i = _torch_arg_scan(whole, largest)
    assert_array_equal(values, want_v[:, lo:hi])
    assert_array_equal(indices, want_i[:, lo:hi])
    assert dict(calls) == ({"all_gather": 1} if SIZE > 1 else {})
