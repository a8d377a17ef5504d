"""fetch, rebalance and halo against the whole axis, at every rank count, empty parts included."""

from __future__ import annotations

import numpy
import pytest
from numpy.testing import assert_array_equal

from mpiflow.algorithms import fetch, gather_counts, halo, rebalance
from mpiflow.algorithms.ranges import balanced, offsets
from mpiflow.communication import count_collectives
from mpiflow.communication.mpi.group import world_comm as comm

pytestmark = pytest.mark.mpi
RANK, SIZE = comm.rank, comm.size


def _parts(n: int, skew: bool) -> list[int]:
    """Row counts: balanced, or everything on the last rank but one row on the first."""
    if not skew or SIZE == 1 or n == 0:
        return balanced(n, SIZE)
    return [1] + [0] * (SIZE - 2) + [n - 1]


def _mine(whole: numpy.ndarray, counts: list[int], axis: int = 0) -> numpy.ndarray:
    starts = offsets(counts)
    return numpy.take(whole, numpy.arange(starts[RANK], starts[RANK + 1]), axis=axis)


@pytest.mark.parametrize("n", [0, 1, 7, 20])
@pytest.mark.parametrize("skew", [False, True])
def test_rebalance_keeps_the_order(n: int, skew: bool) -> None:
    whole = numpy.arange(n * 3, dtype=numpy.float32).reshape(n, 3)
    counts = _parts(n, skew)
    new = balanced(n, SIZE)[::-1]
    got = rebalance(_mine(whole, counts), comm, 0, counts, new)
    assert_array_equal(got, _mine(whole, new))


def test_rebalance_of_equal_counts_is_the_same_array_and_silent() -> None:
    local = numpy.ones((2, 2))
    with count_collectives() as calls:
        assert rebalance(local, comm, 0, [2] * SIZE, [2] * SIZE) is local
    assert not calls


def test_fetch_along_another_axis_in_any_order() -> None:
    n = 3 * SIZE + 1
    whole = numpy.arange(2 * n).reshape(2, n)
    counts = balanced(n, SIZE)
    wants = [[(n - 1, n), (0, min(2, n))] for _ in range(SIZE)]
    got = fetch(_mine(whole, counts, axis=1), comm, 1, counts, wants)
    assert_array_equal(got, whole[:, [n - 1, 0, 1]])


def test_fetch_refuses_a_local_array_of_the_wrong_length() -> None:
    with pytest.raises(ValueError, match="rows along axis 0"):
        fetch(numpy.ones(3), comm, 0, [2] * SIZE, [[]] * SIZE)


@pytest.mark.parametrize("n", [1, 2, 9])
@pytest.mark.parametrize("periodic", [False, True])
def test_halo_rows_come_from_whichever_ranks_hold_them(n: int, periodic: bool) -> None:
    whole = numpy.arange(n) * 10
    counts = _parts(n, skew=True)
    lo, hi = offsets(counts)[RANK], offsets(counts)[RANK + 1]
    before, after = halo(_mine(whole, counts), comm, 0, counts, 2, 3, periodic=periodic)
    if periodic:
        assert_array_equal(before, whole[numpy.arange(lo - min(2, n), lo) % n])
        assert_array_equal(after, whole[numpy.arange(hi, hi + min(3, n)) % n])
    else:
        assert_array_equal(before, whole[max(0, lo - 2):lo])
        assert_array_equal(after, whole[hi:hi + 3])


def test_gather_counts() -> None:
    assert gather_counts(comm, RANK + 1) == list(range(1, SIZE + 1))
