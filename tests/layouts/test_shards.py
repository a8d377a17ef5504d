"""Which part of the logical value each rank holds (pure), and counting collectives."""

from __future__ import annotations

import numpy
import pytest
from boxing_helpers import fake_world  # noqa: F401 - a fixture
from numpy.testing import assert_array_equal

from mpiflow.boxing import local_shape, scatter_value, shard_slices
from mpiflow.communication import MPICommunicator, ReduceOp, count_collectives
from mpiflow.communication.mpi.group import world_comm
from mpiflow.layouts.shards import fill_op, shard_bounds
from mpiflow.placement import Placement
from mpiflow.sbp import broadcast, partial_max, partial_min, partial_sum, split

pytestmark = pytest.mark.mpi

S0, S1, B, P, PM = split(0), split(1), broadcast, partial_sum, partial_max


@pytest.mark.usefixtures("fake_world")
class TestShards:
    def test_nested_split_of_four_rows_gives_rank_i_j_row_2i_plus_j(self) -> None:
        for i in range(2):
            for j in range(2):
                assert shard_slices((4, 3), (2, 2), (S0, S0), (i, j))[0] == slice(2 * i + j,
                                                                                 2 * i + j + 1)

    def test_nested_split_of_five_rows(self) -> None:
        rows = [shard_bounds((5,), (2, 2), (S0, S0), c)[0] for c in [(0, 0), (0, 1), (1, 0),
                                                                      (1, 1)]]
        assert rows == [(0, 2), (2, 3), (3, 4), (4, 5)]  # axis 0: [3 | 2], then [2 | 1], [1 | 1]

    def test_two_axes_splitting_two_dims(self) -> None:
        assert shard_slices((5, 7), (2, 2), (S1, S0), (1, 0)) == (slice(0, 3), slice(4, 7))
        assert shard_slices((5, 7), (2, 2), (B, S1), (1, 1)) == (slice(0, 5), slice(4, 7))
        assert shard_slices((5, 7), (2, 2), (P, PM), (1, 1)) == (slice(0, 5), slice(0, 7))

    def test_local_shapes_with_more_ranks_than_rows(self) -> None:
        p = Placement("cpu", [0, 1, 2, 3, 4])
        assert [local_shape((3, 2), p, (S0,), r) for r in range(5)] == [
            (1, 2), (1, 2), (1, 2), (0, 2), (0, 2)]
        assert local_shape((3, 2), p, (S0,), 7) == (0,)  # outside the placement
        assert local_shape((), p, (P,), 4) == ()

    def test_bad_arguments(self) -> None:
        with pytest.raises(ValueError, match="one entry per mesh axis"):
            shard_slices((4,), (2, 2), (S0,), (0, 0))

    def test_scatter_value_splits_and_copies(self) -> None:
        full = numpy.arange(20.0).reshape(5, 4)
        m = Placement("cpu", [[0, 1], [2, 3]])
        part = scatter_value(full, m, (S0, S1), 3)
        assert_array_equal(part, full[3:, 2:])
        part[...] = -1
        assert full[4, 3] == 19  # a copy
        assert scatter_value(full, m, (B, B), 9).shape == (0,)
        assert_array_equal(scatter_value(full, m, (B, S0), 1), full[3:])

    def test_scatter_value_partial_puts_data_on_coordinate_zero(self) -> None:
        full = numpy.arange(6).reshape(2, 3).astype(numpy.int32)
        p = Placement("cpu", [0, 1, 2])
        assert_array_equal(scatter_value(full, p, (P,), 0), full)
        assert_array_equal(scatter_value(full, p, (P,), 1), numpy.zeros((2, 3)))
        assert (scatter_value(full, p, (PM,), 2) == numpy.iinfo(numpy.int32).min).all()
        assert (scatter_value(full.astype(float), p, (partial_min,), 2) == numpy.inf).all()
        assert scatter_value(numpy.full((), 3.0), p, (P,), 1).shape == ()

    def test_mixed_partial_ops_fill_with_the_innermost_nonzero_axis(self) -> None:
        m = Placement("cpu", [[0, 1], [2, 3]])
        sbp = (PM, P)  # the value is max over axis 0 of (sum over axis 1)
        assert fill_op(sbp, (1, 0), 0) is ReduceOp.MAX
        assert fill_op(sbp, (1, 1), 0) is ReduceOp.SUM
        full = numpy.array([5, -7], dtype=numpy.int64)
        shards = {m.coordinates(r): scatter_value(full, m, sbp, r) for r in range(4)}
        inner = [shards[(i, 0)] + shards[(i, 1)] for i in range(2)]  # no overflow anywhere
        assert_array_equal(numpy.maximum(*inner), full)


def test_count_collectives_counts_every_operation_and_unpatches() -> None:
    original = MPICommunicator.__dict__["all_reduce"]
    x = numpy.ones(3)
    with count_collectives() as outer:
        world_comm.all_reduce(x)
        with count_collectives() as inner:
            world_comm.barrier()
            recv = numpy.empty(3 * world_comm.size)
            world_comm.all_gather(x, recv)
        world_comm.all_reduce(x, ReduceOp.MAX)
    assert dict(outer) == {"all_reduce": 2, "barrier": 1, "all_gather": 1}
    assert dict(inner) == {"barrier": 1, "all_gather": 1}
    assert MPICommunicator.__dict__["all_reduce"] is original
    world_comm.all_reduce(x)
    assert outer["all_reduce"] == 2


def test_split_by_color_makes_line_communicators() -> None:
    rank, size = world_comm.rank, world_comm.size
    odd = world_comm.split_by_color(rank % 2, key=-rank)
    none = world_comm.split_by_color(None)
    assert none is None and odd is not None
    assert odd.size == len(range(rank % 2, size, 2))
    value = numpy.array([float(rank)])
    odd.all_reduce(value)
    assert value[0] == sum(range(rank % 2, size, 2))
    assert odd.rank == len([r for r in range(rank % 2, size, 2) if r > rank])  # key orders
