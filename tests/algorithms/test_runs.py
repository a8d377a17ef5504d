"""Runs of equal values along a distributed axis against torch on the whole axis, 1-4 ranks."""

from __future__ import annotations

import numpy
import pytest
import torch
from numpy.testing import assert_array_equal
from stats_helpers import SIZE, part

from mpiflow.algorithms import balanced, compact_runs, mode, run_ids, run_starts
from mpiflow.algorithms.runs import local_mode
from mpiflow.communication.mpi.group import world_comm as comm

pytestmark = pytest.mark.mpi


def _runs(n: int, kind: str) -> numpy.ndarray:
    rng = numpy.random.default_rng(n)
    x = numpy.sort(rng.integers(0, 4, n)).astype(numpy.float64)
    if kind == "nan":
        x[::3] = numpy.nan  # NaN differs from everything, NaN too
    elif kind == "equal":
        x[:] = 2.0
    return x


@pytest.mark.parametrize("n", [0, 1, 2, 5, 13, 300])
@pytest.mark.parametrize("kind", ["sorted", "nan", "equal"])
def test_runs_match_unique_consecutive(n: int, kind: str) -> None:
    x = _runs(n, kind)
    counts = balanced(n, SIZE)
    starts = run_starts(part(x), comm, counts)
    values, inverse, lengths = torch.unique_consecutive(
        torch.tensor(x), return_inverse=True, return_counts=True)
    got_values, got_lengths = compact_runs(part(x), starts, comm, counts,
                                           balanced(len(values), SIZE))
    assert_array_equal(got_values, part(values.numpy()))  # balanced parts
    assert_array_equal(got_lengths, part(lengths.numpy()))
    assert_array_equal(run_ids(starts, comm), part(inverse.numpy()))


@pytest.mark.parametrize("n", [1, 2, 13, 300])
def test_mode_matches_torch(n: int) -> None:
    x = numpy.random.default_rng(n).integers(0, 4, (n, 3)).astype(numpy.float64)
    x[:, 2] = numpy.arange(n) % 2  # two values: ties broken by the smaller
    want = torch.mode(torch.tensor(x), 0)
    values, rows = mode(part(x), comm, 0)
    assert_array_equal(values, want.values.numpy())
    if n <= 16:  # torch's index is the last occurrence where its sort is an insertion sort
        assert_array_equal(rows, want.indices.numpy())
    assert_array_equal(x[rows, [0, 1, 2]], values)
    assert_array_equal(rows, [numpy.nonzero(x[:, j] == values[j])[0][-1] for j in range(3)])


def test_mode_with_nan_counts_each_nan_once() -> None:
    x = numpy.array([[numpy.nan, 1.0], [numpy.nan, numpy.nan], [3.0, numpy.nan],
                     [numpy.nan, numpy.nan], [3.0, numpy.nan]])
    values, rows = mode(part(x), comm, 0)
    want_values, want_rows = local_mode(numpy, x)
    assert_array_equal(values, want_values)
    assert_array_equal(rows, want_rows)
    assert values[0] == 3.0 and rows[0] == 4 and values[1] == 1.0 and rows[1] == 0
