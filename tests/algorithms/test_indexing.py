"""take and put by global row number against numpy on the whole axis."""

from __future__ import annotations

import numpy
import pytest
from numpy.testing import assert_array_equal

from mpiflow.algorithms import put, put_along, take, take_along
from mpiflow.algorithms.ranges import balanced, offsets
from mpiflow.communication.mpi.group import world_comm as comm

pytestmark = pytest.mark.mpi
RANK, SIZE = comm.rank, comm.size


def _part(counts: list[int]) -> slice:
    starts = offsets(counts)
    return slice(starts[RANK], starts[RANK + 1])


@pytest.mark.parametrize("axis", [0, 1])
def test_take_reads_rows_wherever_they_lie(axis: int) -> None:
    n = 3 * SIZE + 1
    whole = numpy.arange(2 * n * 3).reshape(n, 2, 3) if axis == 0 else \
        numpy.arange(2 * n * 3).reshape(2, n, 3)
    counts = balanced(n, SIZE)
    local = whole[_part(counts)] if axis == 0 else whole[:, _part(counts)]
    rng = numpy.random.default_rng(RANK)  # each rank asks for its own rows
    rows = rng.integers(0, n, (4, 5))
    got = take(local, comm, axis, counts, rows)
    assert_array_equal(got, numpy.take(whole, rows, axis=axis))


def test_take_of_nothing_and_out_of_bounds() -> None:
    counts = balanced(4, SIZE)
    local = numpy.arange(4)[_part(counts)]
    assert take(local, comm, 0, counts, numpy.zeros(0, dtype=numpy.int64)).shape == (0,)
    if SIZE == 1:
        with pytest.raises(IndexError, match="row 4 is out of bounds"):
            take(local, comm, 0, counts, numpy.array([4]))


@pytest.mark.parametrize("accumulate", [True, False])
def test_put_writes_rows_to_their_owners(accumulate: bool) -> None:
    n = 2 * SIZE + 3
    out_counts = balanced(n, SIZE)[::-1]
    # every rank writes rows 0, 2, 4, ... and one row twice
    rows = numpy.array([*range(0, n, 2), 1, 1])
    values = numpy.stack([rows * 10.0 + RANK, rows * 10.0 - RANK], axis=1)
    got = put(values, comm, 0, rows, out_counts, accumulate=accumulate)
    want = numpy.zeros((n, 2))
    for r in range(SIZE):
        vals = numpy.stack([rows * 10.0 + r, rows * 10.0 - r], axis=1)
        if accumulate:
            numpy.add.at(want, rows, vals)
        else:
            want[rows] = vals
    assert_array_equal(got, want[_part(out_counts)])


def test_put_into_an_existing_part_along_axis_1() -> None:
    n = SIZE + 1
    counts = balanced(n, SIZE)
    out = numpy.ones((2, counts[RANK]))
    rows = numpy.array([n - 1])
    got = put(numpy.full((2, 1), 5.0), comm, 1, rows, counts, out=out)
    assert got is out
    want = numpy.ones((2, n))
    want[:, n - 1] += 5.0 * SIZE
    assert_array_equal(out, want[:, _part(counts)])


@pytest.mark.parametrize("axis", [0, 1])
def test_take_along_and_put_along_are_numpy_s_and_adjoint(axis: int) -> None:
    n = 3 * SIZE + 1
    whole = numpy.arange(n * 3.0).reshape(n, 3) if axis == 0 else \
        numpy.arange(n * 3.0).reshape(3, n)
    counts = balanced(n, SIZE)
    local = whole[_part(counts)] if axis == 0 else whole[:, _part(counts)]
    m = 2 * SIZE + 1  # each rank its own rows of the indices, any number
    all_idx = numpy.random.default_rng(0).integers(0, n, (m, 3) if axis == 0 else (3, m))
    mine = _part(balanced(m, SIZE))
    idx = all_idx[mine] if axis == 0 else all_idx[:, mine]
    got = take_along(local, comm, axis, counts, idx)
    want = numpy.take_along_axis(whole, all_idx, axis=axis)
    assert_array_equal(got, want[mine] if axis == 0 else want[:, mine])
    g = numpy.ones(idx.shape)
    back = put_along(g, comm, axis, idx, counts, (3,))
    whole_back = numpy.zeros_like(whole)
    for c in range(3):  # the count of times each element was taken
        col = all_idx[:, c] if axis == 0 else all_idx[c]
        numpy.add.at(whole_back[:, c] if axis == 0 else whole_back[c], col, 1.0)
    assert_array_equal(back, whole_back[_part(counts)] if axis == 0 else
                       whole_back[:, _part(counts)])
