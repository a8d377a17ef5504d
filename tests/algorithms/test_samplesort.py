"""The distributed sample sort against numpy's stable sort of the whole axis."""

from __future__ import annotations

import numpy
import pytest
from numpy.testing import assert_array_equal

from mpiflow.algorithms import sort
from mpiflow.algorithms.ranges import balanced, offsets
from mpiflow.communication.mpi.group import world_comm as comm

pytestmark = pytest.mark.mpi
RANK, SIZE = comm.rank, comm.size


def _reference(x: numpy.ndarray, descending: bool) -> numpy.ndarray:
    """torch's stable order: ascending NaN last; descending NaN first, ties in input order."""
    if not descending:
        return numpy.argsort(x, kind="stable")
    rows = numpy.arange(x.size)
    if x.dtype.kind == "f":
        return numpy.lexsort((rows, numpy.where(numpy.isnan(x), -numpy.inf, -x),
                              ~numpy.isnan(x)))
    key = ~x if x.dtype.kind == "b" else -x.astype(numpy.int64)
    return numpy.lexsort((rows, key))


def _data(n: int, kind: str) -> numpy.ndarray:
    rng = numpy.random.default_rng(n)
    if kind == "float":
        x = rng.standard_normal(n)
        x[::7] = numpy.nan
        x[1::5] = 0.0
        x[2::11] = -0.0
        return x
    if kind == "ties":  # few distinct values: splitters fall inside runs of equal values
        return rng.integers(0, 3, n).astype(numpy.int32)
    if kind == "bool":
        return rng.integers(0, 2, n).astype(bool)
    return numpy.zeros(n, dtype=numpy.float32)  # all equal


def _out_counts(n: int, kind: str) -> list[int]:
    return balanced(n, SIZE) if kind != "skewed" else [n] + [0] * (SIZE - 1)


@pytest.mark.parametrize("n", [0, 1, 5, 13, 3000])
@pytest.mark.parametrize("kind", ["float", "ties", "bool", "zeros"])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("indices", [False, True])
def test_sort_matches_numpy_stable_sort(n: int, kind: str, descending: bool,
                                        indices: bool) -> None:
    x = _data(n, kind)
    counts = balanced(n, SIZE)
    lo, hi = offsets(counts)[RANK], offsets(counts)[RANK + 1]
    for layout in ("balanced", "skewed"):
        out = _out_counts(n, layout)
        a, b = offsets(out)[RANK], offsets(out)[RANK + 1]
        values, rows = sort(x[lo:hi], comm, 0, counts, out_counts=out, descending=descending,
                            indices=indices)
        order = _reference(x, descending)
        assert_array_equal(values, x[order][a:b])
        assert values.dtype == x.dtype
        if indices:
            assert_array_equal(rows, order[a:b])
        else:
            assert rows is None


def test_equal_values_spread_evenly() -> None:
    n = 1000 * SIZE
    x = numpy.zeros(1000)
    values, rows = sort(x, comm, 0, [1000] * SIZE, indices=True)
    assert values.shape == (1000,)
    assert_array_equal(rows, numpy.arange(1000 * RANK, 1000 * (RANK + 1)))
    assert n == 1000 * SIZE


def test_columns_sort_on_their_own() -> None:
    x = numpy.random.default_rng(1).integers(0, 4, (3 * SIZE + 1, 3))
    counts = balanced(x.shape[0], SIZE)
    lo, hi = offsets(counts)[RANK], offsets(counts)[RANK + 1]
    values, rows = sort(x[lo:hi], comm, 0, counts, indices=True)
    assert_array_equal(values, numpy.sort(x, axis=0, kind="stable")[lo:hi])
    assert_array_equal(rows, numpy.argsort(x, axis=0, kind="stable")[lo:hi])


def test_wrong_output_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="out_counts"):
        sort(numpy.ones(2), comm, 0, [2] * SIZE, out_counts=[1] * SIZE)
