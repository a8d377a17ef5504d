"""Searching a split sorted sequence (routed values) against numpy, at 1-4 ranks."""

from __future__ import annotations

import numpy
import pytest
from numpy.testing import assert_array_equal
from stats_helpers import SIZE, part, received

from mpiflow.algorithms import balanced, isin, searchsorted
from mpiflow.communication.mpi.group import world_comm as comm

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("n", [0, 1, 3, 7, 40])
def test_searchsorted_matches_numpy(n: int) -> None:
    rng = numpy.random.default_rng(n)
    sequence = numpy.sort(rng.integers(0, 6, n)).astype(numpy.float64)
    values = rng.integers(-1, 8, (9, 2)) + 0.5 * (rng.random((9, 2)) < 0.3)
    for right in (False, True):
        got = searchsorted(part(sequence), comm, balanced(n, SIZE), part(values), right=right)
        assert_array_equal(got, part(numpy.searchsorted(sequence, values,
                                                        "right" if right else "left")))


@pytest.mark.parametrize("n", [0, 1, 7, 40])
def test_isin_matches_numpy_with_split_test_elements(n: int) -> None:
    rng = numpy.random.default_rng(n)
    elements = rng.integers(-1, 8, (9, 2)).astype(numpy.float64)
    elements[0, 0] = numpy.nan
    test = rng.integers(0, 6, (n, 2))
    for invert in (False, True):
        got = isin(part(elements), part(test), comm, invert=invert)
        assert_array_equal(got, part(numpy.isin(elements, test, invert=invert)))


def test_only_the_values_move() -> None:
    n = 20000
    sequence = numpy.arange(n, dtype=numpy.float64)
    values = numpy.random.default_rng(0).uniform(0, n, 50)
    with received() as sizes:
        got = searchsorted(part(sequence), comm, balanced(n, SIZE), values)
    assert_array_equal(got, numpy.searchsorted(sequence, values))
    assert max(sizes) <= 50 * SIZE
