"""What the probes of issue 24 found in the "mpiflow" backend, each checked against torch's
own contract (gloo's behaviour where torch leaves it to the backend). Runs at 1-4 ranks."""

from __future__ import annotations

import datetime

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from mpiflow.communication.mpi.group import world_comm  # noqa: E402

pytestmark = pytest.mark.mpi
RANK, SIZE = world_comm.rank, world_comm.size


@pytest.fixture(scope="module", autouse=True)
def default_group():
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("mpiflow")
    yield dist.group.WORLD
    dist.destroy_process_group()


@pytest.mark.parametrize("inputs", [1, 2, SIZE, SIZE + 1])
def test_all_gather_coalesced_pairs_outputs_as_torch_documents(inputs: int) -> None:
    # output_tensor_lists[rank][i] receives input i of that rank (gloo's and torch's layout).
    mine = [torch.full((i + 1,), float(10 * RANK + i)) for i in range(inputs)]
    outs = [[torch.zeros(i + 1) for i in range(inputs)] for _ in range(SIZE)]
    dist.all_gather_coalesced(outs, mine)
    for r in range(SIZE):
        for i in range(inputs):
            assert outs[r][i].tolist() == [float(10 * r + i)] * (i + 1), (r, i)


def test_all_gather_coalesced_refuses_a_wrong_number_of_lists() -> None:
    with pytest.raises(ValueError, match="one list per rank"):
        dist.all_gather_coalesced([[torch.zeros(1)]] * (SIZE + 1), [torch.zeros(1)])


def test_recv_from_self_without_a_send_fails_instead_of_hanging() -> None:
    t = torch.zeros(2)
    work = dist.irecv(t, src=RANK)
    with pytest.raises(ValueError, match="this process itself, with no send"):
        work.wait()
    # With its send posted first, a receive from itself works (a one-rank ring, as gloo).
    send = dist.isend(torch.full((2,), 7.0), dst=RANK)
    dist.irecv(t, src=RANK).wait()
    send.wait()
    assert t.tolist() == [7.0, 7.0]
    with pytest.raises(ValueError, match="same as the rank of the current process"):
        dist.send(t, dst=RANK)  # torch's own check


def test_a_destroyed_subgroup_raises() -> None:
    sub = dist.new_group(list(range(SIZE)))
    t = torch.ones(2)
    dist.all_reduce(t, group=sub)
    assert t.tolist() == [float(SIZE)] * 2
    dist.destroy_process_group(sub)
    with pytest.raises(RuntimeError, match="destroyed"):
        dist.all_reduce(t, group=sub)
    dist.barrier()


def test_an_output_that_overlaps_itself_is_refused() -> None:
    out = torch.zeros(1).expand(SIZE * 2)  # stride 0: every element is one memory cell
    with pytest.raises(ValueError, match="overlaps itself"):
        dist.all_gather_into_tensor(out, torch.ones(2))
    with pytest.raises(ValueError, match="overlaps itself"):
        dist.all_reduce(torch.zeros(1).expand(3))
    dist.barrier()


def test_sparse_all_reduce_sums_as_gloo() -> None:
    i = torch.tensor([[RANK % 3, 2], [0, RANK]])
    v = torch.tensor([1.0 + RANK, 2.0])
    t = torch.sparse_coo_tensor(i, v, (3, SIZE + 1))
    dist.all_reduce(t)
    expected = sum(torch.sparse_coo_tensor(torch.tensor([[r % 3, 2], [0, r]]),
                                           torch.tensor([1.0 + r, 2.0]), (3, SIZE + 1)).to_dense()
                   for r in range(SIZE))
    assert t.is_sparse
    assert torch.equal(t.to_dense(), expected)
    with pytest.raises(ValueError, match="sparse"):
        dist.all_reduce(torch.sparse_coo_tensor(i, v, (3, SIZE + 1)), op=dist.ReduceOp.MAX)
    dist.barrier()


def test_bitwise_op_on_bfloat16_names_bfloat16() -> None:
    with pytest.raises((TypeError, ValueError), match="bfloat16"):
        dist.all_reduce(torch.ones(2, dtype=torch.bfloat16), op=dist.ReduceOp.BAND)
    dist.barrier()


def test_a_subgroup_barrier_times_out_with_a_catchable_error() -> None:
    if SIZE < 2:
        pytest.skip("needs a rank that does not arrive")
    sub = dist.new_group(list(range(SIZE)), timeout=datetime.timedelta(seconds=1))
    if RANK == 0:
        with pytest.raises(RuntimeError, match="Timed out"):
            dist.barrier(group=sub)
        with pytest.raises(RuntimeError, match="unusable"):
            dist.all_reduce(torch.ones(1), group=sub)
    dist.barrier()  # the default group still works; rank 0 arrives after its timeout


def test_a_group_with_a_timeout_gives_the_same_results() -> None:
    """Its collectives run non-blocking against the deadline (no fast paths): same values."""
    sub = dist.new_group(list(range(SIZE)), timeout=datetime.timedelta(seconds=30))
    t = torch.arange(4.0) + RANK
    dist.all_reduce(t, group=sub)
    assert t.tolist() == [4.0 * 0 + SIZE * i + SIZE * (SIZE - 1) / 2 for i in range(4)]
    out = torch.zeros(SIZE * 2)
    dist.all_gather_into_tensor(out, torch.full((2,), float(RANK)), group=sub)
    assert out.tolist() == [float(r) for r in range(SIZE) for _ in range(2)]
    b = torch.full((3,), float(RANK))
    dist.broadcast(b, src=SIZE - 1, group=sub)
    assert b.tolist() == [float(SIZE - 1)] * 3
    rs = torch.zeros(2)
    dist.reduce_scatter_tensor(rs, torch.ones(2 * SIZE) * (RANK + 1), group=sub)
    assert rs.tolist() == [SIZE * (SIZE + 1) / 2] * 2
    a2a = torch.zeros(SIZE)
    dist.all_to_all_single(a2a, torch.arange(SIZE, dtype=torch.float32) + 10 * RANK, group=sub)
    assert a2a.tolist() == [float(RANK + 10 * r) for r in range(SIZE)]
    work = dist.all_reduce(torch.ones(1), group=sub, async_op=True)
    assert work.wait()
    dist.destroy_process_group(sub)

