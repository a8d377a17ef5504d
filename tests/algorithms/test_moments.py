"""Moments of a distributed axis against numpy's two-pass variance of the whole."""

from __future__ import annotations

import numpy
import pytest
from numpy.testing import assert_allclose

from mpiflow.algorithms import moments
from mpiflow.algorithms.ranges import balanced, offsets
from mpiflow.communication import count_collectives
from mpiflow.communication.mpi.group import world_comm as comm

pytestmark = pytest.mark.mpi
RANK, SIZE = comm.rank, comm.size


@pytest.mark.parametrize("n", [1, 2, 3 * 4 + 1])
def test_combined_moments_match_numpy(n: int) -> None:
    # a large offset: a one-pass sum of squares would cancel, the combination does not
    whole = 1e8 + numpy.random.default_rng(3).standard_normal((3, n))
    counts = balanced(n, SIZE)
    lo, hi = offsets(counts)[RANK], offsets(counts)[RANK + 1]
    with count_collectives() as calls:
        count, mean, m2 = moments(whole[:, lo:hi], (1,), comm)
    assert count == n
    assert_allclose(mean[:, 0], whole.mean(axis=1), rtol=1e-15)
    assert_allclose(m2[:, 0], whole.var(axis=1) * n, rtol=1e-7, atol=1e-9)
    assert dict(calls) == ({"all_gather": 1} if SIZE > 1 else {})
