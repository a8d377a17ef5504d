"""Groups over the program's own mpi4py communicators (mpiflow.comm.from_mpi4py,
mpiflow.distributed.new_group(comm=...)), against numpy on the full data; 1-4 ranks."""

from __future__ import annotations

import numpy
import pytest
from mpi4py import MPI

import mpiflow as flow
import mpiflow.distributed as dist

pytestmark = pytest.mark.mpi
WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.Get_rank(), WORLD.Get_size()


def test_a_split_communicator_in_its_own_rank_order() -> None:
    # Halves by parity, ranked in reverse: the group's rank order is the communicator's.
    mine = WORLD.Split(RANK % 2, key=-RANK)
    group = flow.comm.from_mpi4py(mine)
    members = sorted((r for r in range(SIZE) if r % 2 == RANK % 2), reverse=True)
    assert list(group.ranks) == members
    assert group.rank() == mine.Get_rank() == members.index(RANK)
    x = numpy.full(3 * SIZE + 1, float(RANK + 1))
    dist.all_reduce(x, group=group)
    numpy.testing.assert_array_equal(x, numpy.full(3 * SIZE + 1, sum(r + 1 for r in members)))
    got = [numpy.zeros(2) for _ in members]
    dist.all_gather(got, numpy.array([RANK, 2.0 * RANK]), group=group)
    numpy.testing.assert_array_equal(numpy.stack(got), [[r, 2.0 * r] for r in members])
    root = members[-1]
    y = numpy.array([float(RANK)])
    dist.broadcast(y, src=root, group=group)  # src is a world rank, as everywhere
    assert y[0] == root
    # The program's own messages on its communicator do not mix with mpiflow's.
    assert mine.allreduce(1) == len(members)
    mine.Free()


def test_new_group_with_comm_and_errors() -> None:
    group = dist.new_group(comm=WORLD)
    assert list(group.ranks) == list(range(SIZE))
    x = numpy.ones(2)
    dist.all_reduce(x, group=group)
    assert x.tolist() == [float(SIZE)] * 2
    with pytest.raises(ValueError, match="not those of the given communicator"):
        dist.new_group([SIZE + 5], comm=MPI.COMM_SELF)  # checked before anything collective
    with pytest.raises(TypeError, match="intracommunicator"):
        flow.comm.from_mpi4py("world")
