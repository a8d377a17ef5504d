"""``backend="mpi"`` on a torch without MPI of its own: torch's MPI branch makes mpiflow groups.

Stock wheels have no ``ProcessGroupMPI``; ``import mpiflow.torch`` (and, under an MPI launcher,
torch's auto-load hook) stands in for it (:func:`mpiflow.torch.install_mpi`). Runs at 1-4 ranks
in the suite's sessions; the switch (``MPIFLOW_TORCH_MPI=0``) and the seed's unchanged
``ptdist.py`` need their own jobs: test_torch_jobs.py.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

import mpiflow.torch  # noqa: E402 - stands in for torch's MPI
from mpiflow.communication.mpi.group import world_comm  # noqa: E402

pytestmark = pytest.mark.mpi
RANK, SIZE = world_comm.rank, world_comm.size
OWN_MPI = hasattr(torch._C._distributed_c10d, "ProcessGroupMPI")


@pytest.fixture(scope="module", autouse=True)
def mpi_group():
    """The default group made by ``init_process_group("mpi")``, for this module."""
    if OWN_MPI:
        pytest.skip("this torch has MPI of its own: mpiflow leaves its 'mpi' backend alone")
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group(backend="mpi")
    yield dist.group.WORLD
    dist.destroy_process_group()


def test_mpi_is_available_and_the_default_group_runs_on_mpiflow() -> None:
    assert dist.is_mpi_available()
    assert mpiflow.torch.install_mpi() is True  # idempotent
    assert dist.get_backend() == "mpi"  # what torch records for the group
    assert isinstance(dist.group.WORLD, mpiflow.torch.ProcessGroupMPIFlow)
    assert (dist.get_rank(), dist.get_world_size()) == (RANK, SIZE)


def test_collectives_and_point_to_point() -> None:
    t = torch.full((3,), float(RANK + 1))
    dist.all_reduce(t)
    torch.testing.assert_close(t, torch.full((3,), SIZE * (SIZE + 1) / 2))
    counter = torch.tensor([-RANK - 1])  # Lightning's int64 counter: AVG truncates toward 0
    dist.all_reduce(counter, op=dist.ReduceOp.AVG)
    assert counter.item() == int(-SIZE * (SIZE + 1) / 2 / SIZE)
    got = [torch.empty(2) for _ in range(SIZE)]
    dist.all_gather(got, torch.full((2,), float(RANK)))
    assert [g[0].item() for g in got] == [float(r) for r in range(SIZE)]
    if SIZE > 1:
        ring = torch.tensor([float(RANK)])
        ops = [dist.P2POp(dist.isend, ring, (RANK + 1) % SIZE),
               dist.P2POp(dist.irecv, received := torch.empty(1), (RANK - 1) % SIZE)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        assert received.item() == (RANK - 1) % SIZE


def test_new_group_with_backend_mpi_on_members_only() -> None:
    members = list(range(0, SIZE, 2))  # ranks 0, 2: rank 1 and 3 are outside
    group = dist.new_group(members, backend="mpi")
    if RANK not in members:
        assert group is dist.GroupMember.NON_GROUP_MEMBER
        return
    assert isinstance(group, mpiflow.torch.ProcessGroupMPIFlow)
    assert dist.get_backend(group) == "mpi"
    assert dist.get_world_size(group) == len(members)
    t = torch.tensor([RANK + 10])
    dist.all_reduce(t, group=group)
    assert t.item() == sum(r + 10 for r in members)
    dist.broadcast(t, src=members[-1], group=group)
    assert t.item() == sum(r + 10 for r in members)
    dist.destroy_process_group(group)
