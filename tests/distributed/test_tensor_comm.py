"""mpiflow.comm and mpiflow.distributed take tensors as well as arrays, in place."""

from __future__ import annotations

import numpy
import pytest
from numpy.testing import assert_array_equal

import mpiflow as flow
import mpiflow.distributed as dist

pytestmark = pytest.mark.mpi

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()


def test_collectives_write_into_tensors_in_place() -> None:
    x = flow.tensor([float(RANK)] * 3)
    dist.all_reduce(x)
    assert_array_equal(x.numpy(), [SIZE * (SIZE - 1) / 2] * 3)
    flow.comm.all_reduce(x)
    assert_array_equal(x.numpy(), [SIZE * SIZE * (SIZE - 1) / 2] * 3)
    out = [flow.zeros(2) for _ in range(SIZE)]
    dist.all_gather(out, flow.full((2,), float(RANK)))
    assert [o.tolist() for o in out] == [[float(r)] * 2 for r in range(SIZE)]
    big = flow.zeros(SIZE * 2, dtype=flow.int64)
    flow.comm.all_gather_into_tensor(big, flow.tensor([RANK, RANK]))
    assert big.tolist() == [r for r in range(SIZE) for _ in range(2)]
    b = flow.tensor([RANK + 1.0])
    work = dist.broadcast(b, src=SIZE - 1, async_op=True)
    work.wait()
    assert b.item() == SIZE


def test_point_to_point_with_tensors() -> None:
    if SIZE == 1:
        return
    if RANK == 0:
        flow.comm.send(flow.tensor([[1, 2], [3, 4]]), 1)
        dist.send(flow.tensor([5.0]), 1)
    elif RANK == 1:
        got = flow.comm.recv(0)
        assert_array_equal(got, numpy.array([[1, 2], [3, 4]]))
        t = flow.zeros(1)
        assert dist.recv(t, 0) == 0
        assert t.item() == 5.0


def test_a_global_tensor_passes_its_local_shard() -> None:
    p = flow.placement("cpu", list(range(SIZE)))
    g = flow.tensor(numpy.arange(2.0 * SIZE), placement=p, sbp=flow.sbp.split(0))
    dist.all_reduce(g)  # reduces the shards elementwise, in place
    shard_sum = sum(numpy.arange(2.0 * SIZE)[2 * r:2 * r + 2] for r in range(SIZE))
    assert_array_equal(g.to_local().numpy(), shard_sum)
