"""Pencils, their transfers and the plan of a transform: bookkeeping without MPI, transfers at
every rank count (uneven and empty parts included) against slices of the whole array."""

from __future__ import annotations

import numpy
import pytest
from numpy.testing import assert_array_equal

from mpiflow.algorithms.pencil import Pencil, exchange, plan
from mpiflow.algorithms.ranges import balanced, offsets
from mpiflow.communication import count_collectives
from mpiflow.communication.mpi.group import world_comm as comm

RANK, SIZE = comm.rank, comm.size


def _alltoalls(calls: dict[str, int]) -> int:
    """The all-to-alls counted (plain where every count is the same, else ``_v``), checking
    that nothing else communicated."""
    assert set(calls) <= {"all_to_all", "all_to_all_v"}, dict(calls)
    return calls["all_to_all"] + calls["all_to_all_v"]


# -- pure ---------------------------------------------------------------------------------------
def test_a_pencil_knows_its_block_and_its_aligned_dims() -> None:
    p = Pencil.of((7, 4, 3), dims=(0, 1), sizes=(3, 2), coords=(2, 1))
    assert p.counts == ((3, 2, 2), (2, 2))
    assert p.local_shape == (2, 2, 3)
    assert p.aligned == (2,)
    q = p.pencil(1, 2)
    assert q.dims == (0, 2) and q.counts[1] == (2, 1) and q.local_shape == (2, 4, 1)
    t = p.transfer(q)
    assert (t.group, t.src_dim, t.dst_dim, t.src_counts, t.dst_counts) == (1, 1, 2, (2, 2),
                                                                         (2, 1))
    assert p.pencil(0, 2, counts=[0, 0, 3]).counts[0] == (0, 0, 3)
    assert q.resized(1, 9).shape == (7, 9, 3)


def test_a_pencil_refuses_what_is_not_a_decomposition() -> None:
    with pytest.raises(ValueError, match="its own dim"):
        Pencil((4, 4), (0, 0), ((2, 2), (2, 2)), (0, 0))
    with pytest.raises(ValueError, match="counts"):
        Pencil((4, 4), (0,), ((2, 1),), (0,))
    p = Pencil.of((4, 4), dims=(0,), sizes=(2,), coords=(0,))
    with pytest.raises(ValueError, match="aligned"):
        p.pencil(0, 0)
    with pytest.raises(ValueError, match="aligned dim changes"):
        p.resized(0, 3)
    with pytest.raises(ValueError, match="one group"):
        p.transfer(p)


def test_plan_of_fft2_of_a_row_slab_is_one_transpose_ending_split_along_columns() -> None:
    got = plan((8, 6), (0, 1), "c2c", splits=(0,), sizes=(2,))
    assert got.steps == (("transform", (1,)), ("move", 0, 1), ("transform", (0,)))
    assert (got.splits, got.alltoalls) == ((1,), 1)
    back = plan((8, 6), (0, 1), "c2c", splits=(1,), sizes=(2,))
    assert back.splits == (0,) and back.alltoalls == 1


def test_plan_keeps_the_order_of_real_transforms() -> None:
    # rfftn halves its last dim first: split along it, it moves away before anything runs
    r2c = plan((4, 8, 6), (1, 2), "r2c", splits=(2,), sizes=(2,))
    assert r2c.steps == (("move", 0, 0), ("transform", (1, 2)))
    # irfftn restores its last dim last: a slab split along the other dim moves twice
    c2r = plan((8, 6), (0, 1), "c2r", splits=(0,), sizes=(2,))
    assert c2r.steps[-1] == ("transform", (1,)) and c2r.alltoalls == 2
    # ... and its half spectrum split along the last dim moves once, to S(0)
    assert plan((8, 4), (0, 1), "c2r", splits=(1,), sizes=(2,), lengths=(8, 6)).splits == (0,)


def test_plan_of_a_pencil_moves_each_group_once() -> None:
    got = plan((8, 6, 5), (0, 1, 2), "c2c", splits=(0, 1), sizes=(2, 2))
    assert got.splits == (1, 2) and got.alltoalls == 2
    assert [s[0] for s in got.steps] == ["transform", "move", "transform", "move",
                                         "transform"]


def test_plan_of_a_1d_array_transforms_along_the_split() -> None:
    got = plan((16,), (0,), "c2c", splits=(0,), sizes=(4,))
    assert got.steps == (("along", 0, 0),) and got.splits == (0,)


def test_plan_avoids_busy_dims_short_dims_and_honours_a_final_layout() -> None:
    assert plan((8, 6, 5), (0,), "c2c", splits=(0,), sizes=(2,), busy=(1,)).splits == (2,)
    # a dim shorter than the group is avoided where another serves
    assert plan((3, 8, 8), (1,), "c2c", splits=(1,), sizes=(4,)).splits == (2,)
    forced = plan((8, 6), (0, 1), "c2c", splits=(0,), sizes=(2,), final=(0,))
    assert forced.splits == (0,) and forced.alltoalls == 2
    with pytest.raises(ValueError, match="no schedule"):
        plan((8, 6), (0,), "c2c", splits=(0,), sizes=(2,), busy=(1,), final=(1,))


# -- transfers at every rank count ----------------------------------------------------------------
def _part(whole: numpy.ndarray, dim: int, counts: list[int]) -> numpy.ndarray:
    lo, hi = offsets(counts)[RANK:RANK + 2]
    return numpy.take(whole, numpy.arange(lo, hi), axis=dim)


@pytest.mark.mpi
@pytest.mark.parametrize(("shape", "split", "whole"), [((5, 7), 0, 1), ((5, 7), 1, 0),
                                                       ((3, 5, 2), 2, 0), ((4, 3, 5), 0, 2)])
def test_a_transfer_matches_the_slices_of_the_whole(shape: tuple[int, ...], split: int,
                                                    whole: int) -> None:
    full = numpy.arange(numpy.prod(shape), dtype=numpy.complex128).reshape(shape)
    p = Pencil.of(shape, dims=(split,), sizes=(SIZE,), coords=(RANK,))
    q = p.pencil(0, whole)
    mine = _part(full, split, list(p.counts[0]))
    with count_collectives() as calls:
        got = p.transfer(q).forward(mine, comm)
    assert_array_equal(got, _part(full, whole, list(q.counts[0])))
    assert _alltoalls(calls) == (1 if SIZE > 1 else 0)
    assert_array_equal(p.transfer(q).backward(got, comm), mine)


@pytest.mark.mpi
def test_exchange_with_skewed_counts_and_empty_parts() -> None:
    full = numpy.arange(6 * 4.0).reshape(6, 4)
    rows = [6] + [0] * (SIZE - 1)
    cols = list(reversed(balanced(4, SIZE)))
    got = exchange(_part(full, 0, rows), comm, 0, 1, rows, cols)
    assert_array_equal(got, _part(full, 1, cols))


@pytest.mark.mpi
def test_exchange_refuses_a_block_of_the_wrong_shape() -> None:
    with pytest.raises(ValueError, match="this rank holds"):
        exchange(numpy.ones((3, 2)), comm, 0, 1, [2] * SIZE, [1] * SIZE)
