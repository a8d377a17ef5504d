"""Selection of rows by a mask (and its adjoint) against numpy on the whole axis."""

from __future__ import annotations

import numpy
import pytest
from numpy.testing import assert_array_equal

from mpiflow.algorithms import compress, concatenate, expand
from mpiflow.algorithms.ranges import balanced, offsets
from mpiflow.communication import count_collectives
from mpiflow.communication.mpi.group import world_comm as comm

pytestmark = pytest.mark.mpi
RANK, SIZE = comm.rank, comm.size


def _part(counts: list[int]) -> slice:
    starts = offsets(counts)
    return slice(starts[RANK], starts[RANK + 1])


@pytest.mark.parametrize("density", [0.0, 0.3, 1.0])
def test_compress_is_numpy_s_selection_balanced(density: float) -> None:
    n = 3 * SIZE + 1
    rng = numpy.random.default_rng(4)
    x = rng.standard_normal((2, n))
    keep = rng.random(n) < density
    counts = balanced(n, SIZE)
    with count_collectives() as calls:
        got = compress(x[:, _part(counts)], keep[_part(counts)], comm, 1)
    want = x[:, keep]
    assert_array_equal(got, want[:, _part(balanced(want.shape[1], SIZE))])
    assert set(calls) <= {"all_gather", "all_to_all_v"} and calls.get("all_gather", 0) <= 1
    # the adjoint puts the selection back
    sel_counts = balanced(want.shape[1], SIZE)
    back = expand(want[:, _part(sel_counts)], keep[_part(counts)], comm, 1, sel_counts,
                  fill=-1.0)
    whole = numpy.full_like(x, -1.0)
    whole[:, keep] = want
    assert_array_equal(back, whole[:, _part(counts)])


def test_concatenate_joins_uneven_parts_in_rank_order() -> None:
    local = numpy.full(RANK % 3, RANK)
    got = concatenate(local, comm, 0)
    whole = numpy.concatenate([numpy.full(r % 3, r) for r in range(SIZE)])
    assert_array_equal(got, whole[_part(balanced(whole.size, SIZE))])


def test_compress_refuses_a_mask_of_another_length() -> None:
    with pytest.raises(ValueError, match="mask of shape"):
        compress(numpy.arange(3), numpy.ones(2, bool), comm, 0)
