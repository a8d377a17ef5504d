"""The "mpiflow" torch.distributed backend: every operation and dtype against torch's own math.

Each rank builds every rank's input from the rank number, so the expected value is computed
with torch on the full logical data. Runs at 1-4 ranks like the rest of the suite.
"""

from __future__ import annotations

import threading

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

import mpiflow.torch  # noqa: E402 - registers the backend
from mpiflow.communication.mpi.group import world_comm  # noqa: E402
from mpiflow.communication.watchdog import monitor as watchdog  # noqa: E402

pytestmark = pytest.mark.mpi
RANK, SIZE = world_comm.rank, world_comm.size

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.uint8, torch.bool, torch.complex64]
OPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]


@pytest.fixture(scope="module", autouse=True)
def default_group():
    """The default group on the mpiflow backend, made by the env:// rendezvous with no
    MASTER_ADDR (MPI's), for this module; destroyed at its end."""
    if dist.is_initialized():
        dist.destroy_process_group()
    before = watchdog.get_timeout()
    dist.init_process_group("mpiflow", timeout=__import__("datetime").timedelta(seconds=321))
    yield dist.group.WORLD
    dist.destroy_process_group()
    watchdog.set_timeout(before)


def data(rank: int, dtype, n: int = 6, salt: int = 0):
    """Rank ``rank``'s input: small values that keep every sum and product exact."""
    base = (torch.arange(n) * 7 + rank * 3 + salt) % 3 + 1
    if dtype == torch.bool:
        return (base + rank) % 2 == 0
    if dtype.is_complex:
        return torch.complex(base.float(), (base % 2).float()).to(dtype)
    return base.to(dtype)


def expected_reduce(op: str, dtype, n: int = 6):
    stack = torch.stack([data(r, dtype, n) for r in range(SIZE)])
    if dtype == torch.bool:
        any_, all_ = stack.any(0), stack.all(0)
        return {"SUM": any_, "MAX": any_, "BOR": any_, "PRODUCT": all_, "MIN": all_,
                "BAND": all_, "BXOR": (stack.sum(0) % 2).bool()}[op]
    wide = stack if dtype in (torch.float64, torch.complex64) or not dtype.is_floating_point \
        else stack.float()
    if op in ("BAND", "BOR", "BXOR"):
        fn = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor}[op]
        out = wide[0]
        for row in wide[1:]:
            out = fn(out, row)
        return out.to(dtype)
    if op == "SUM":
        return wide.sum(0).to(dtype)
    if op == "AVG" and not (dtype.is_floating_point or dtype.is_complex):
        return torch.div(wide.sum(0), SIZE, rounding_mode="trunc").to(dtype)
    if op == "AVG":
        return (wide.sum(0) / SIZE).to(dtype)
    if op == "PRODUCT":
        return wide.prod(0).to(dtype)
    return (wide.amin(0) if op == "MIN" else wide.amax(0)).to(dtype)


def valid(op: str, dtype) -> bool:
    if dtype == torch.bool:
        return op != "AVG"
    if op in ("BAND", "BOR", "BXOR"):
        return not (dtype.is_floating_point or dtype.is_complex)
    if dtype.is_complex:
        return op in ("SUM", "AVG")  # torch itself refuses the others on complex tensors
    return True


def test_the_default_group_runs_on_mpi() -> None:
    assert dist.get_backend() == "mpiflow"
    assert (dist.get_rank(), dist.get_world_size()) == (RANK, SIZE)
    assert isinstance(dist.group.WORLD, mpiflow.torch.ProcessGroupMPIFlow)
    assert watchdog.get_timeout() == 321  # init_process_group(timeout=) is the watchdog's


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", OPS)
def test_all_reduce(op: str, dtype) -> None:
    t = data(RANK, dtype)
    if not valid(op, dtype):
        with pytest.raises((TypeError, ValueError)):
            dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        return
    ptr = t.data_ptr()
    dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
    assert t.data_ptr() == ptr
    torch.testing.assert_close(t, expected_reduce(op, dtype), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int8])
def test_integer_avg_is_ncclavg_the_sum_truncated_toward_zero(dtype) -> None:
    # Lightning averages int64 counters with AVG; torch's NCCL backend divides the sum as C
    # does. Rank 0 adds -1 and the type's minimum, every rank r adds -(2r+1) (sum -n*n) and 1.
    def row(r: int) -> list[int]:
        return [-1 if r == 0 else 0, -(2 * r + 1), 1,
                int(torch.iinfo(dtype).min) if r == 0 else 0]

    sums = torch.tensor([sum(col) for col in zip(*[row(r) for r in range(SIZE)])])
    expected = torch.div(sums, SIZE, rounding_mode="trunc").to(dtype)
    t = torch.tensor(row(RANK), dtype=dtype)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    torch.testing.assert_close(t, expected, rtol=0, atol=0)
    out = torch.empty(2, dtype=dtype)
    dist.reduce_scatter_tensor(out, torch.tensor(row(RANK) * SIZE, dtype=dtype)[:2 * SIZE],
                               op=dist.ReduceOp.AVG)
    torch.testing.assert_close(out, expected.repeat(SIZE)[2 * RANK:2 * RANK + 2], rtol=0, atol=0)


def test_bfloat16_sums_are_rounded_once_not_reduced_as_integers() -> None:
    # 1 + 2^-8 is not a bfloat16; every rank adds it: float32 sums, one rounding.
    t = torch.full((3,), 1 + 2 ** -7, dtype=torch.bfloat16)
    dist.all_reduce(t)
    exact = torch.full((3,), (1 + 2 ** -7) * SIZE, dtype=torch.float32).to(torch.bfloat16)
    assert torch.equal(t, exact)


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16], ids=str)
def test_small_integer_sums_wrap_as_torch_on_every_mpi(dtype) -> None:
    """Issue #23: Open MPI saturates these sums from ~16 elements; torch wraps."""
    t = torch.full((64,), 100 + RANK, dtype=torch.int64).to(dtype)
    dist.all_reduce(t)
    want = torch.full((64,), sum(100 + r for r in range(SIZE)), dtype=torch.int64).to(dtype)
    assert torch.equal(t, want)


def test_premul_sum_and_async_future_without_wait() -> None:
    t = data(RANK, torch.float32)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(2.0))
    torch.testing.assert_close(t, 2 * expected_reduce("SUM", torch.float32))
    t = data(RANK, torch.float32)
    work = dist.all_reduce(t, async_op=True)
    done = threading.Event()
    work.get_future().then(lambda fut: done.set())
    assert done.wait(30), "the future never completed without wait()"
    assert work.is_completed()
    torch.testing.assert_close(t, expected_reduce("SUM", torch.float32))


def test_non_contiguous_tensors_are_reduced_and_received_in_place() -> None:
    base = torch.stack([data(RANK, torch.float32, 4, salt=s) for s in range(3)])  # 3 x 4
    view = base.t()  # 4 x 3, transposed
    dist.all_reduce(view)
    full = torch.stack([torch.stack([data(r, torch.float32, 4, salt=s) for s in range(3)])
                        for r in range(SIZE)]).sum(0)
    torch.testing.assert_close(base, full)
    row = torch.zeros(2, 8)
    strided = row[:, ::2]
    if RANK == 0:
        strided.copy_(torch.arange(8.0).reshape(2, 4))
    dist.broadcast(strided, src=0)
    torch.testing.assert_close(row[:, ::2], torch.arange(8.0).reshape(2, 4))
    assert torch.count_nonzero(row[:, 1::2]) == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool],
                         ids=str)
def test_broadcast_reduce_gather_scatter(dtype) -> None:
    for root in range(SIZE):
        t = data(RANK, dtype)
        dist.broadcast(t, src=root)
        assert torch.equal(t, data(root, dtype))
        if dtype != torch.bool:
            t = data(RANK, dtype)
            dist.reduce(t, dst=root, op=dist.ReduceOp.MAX)
            assert torch.equal(t, expected_reduce("MAX", dtype) if RANK == root
                               else data(RANK, dtype))
        out = [torch.empty(6, dtype=dtype) for _ in range(SIZE)] if RANK == root else None
        dist.gather(data(RANK, dtype), out, dst=root)
        if RANK == root:
            assert all(torch.equal(o, data(r, dtype)) for r, o in enumerate(out))
        recv = torch.empty(6, dtype=dtype)
        chunks = [data(r, dtype, salt=1) for r in range(SIZE)] if RANK == root else None
        dist.scatter(recv, chunks, src=root)
        assert torch.equal(recv, data(RANK, dtype, salt=1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.uint8],
                         ids=str)
def test_all_gather_and_reduce_scatter(dtype) -> None:
    everyone = torch.cat([data(r, dtype) for r in range(SIZE)])
    out = [torch.empty(6, dtype=dtype) for _ in range(SIZE)]
    dist.all_gather(out, data(RANK, dtype))
    assert torch.equal(torch.cat(out), everyone)
    flat = torch.empty(6 * SIZE, dtype=dtype)
    dist.all_gather_into_tensor(flat, data(RANK, dtype))
    assert torch.equal(flat, everyone)
    stacked = torch.empty(SIZE, 6, dtype=dtype)
    dist.all_gather_into_tensor(stacked, data(RANK, dtype))
    assert torch.equal(stacked.reshape(-1), everyone)
    # reduce_scatter: rank r gets the sum over ranks of their chunk r
    inputs = [data(RANK, dtype, salt=c) for c in range(SIZE)]
    mine = torch.empty(6, dtype=dtype)
    dist.reduce_scatter(mine, inputs)
    want = torch.stack([data(r, dtype, salt=RANK) for r in range(SIZE)]).float().sum(0).to(dtype)
    assert torch.equal(mine, want)
    mine = torch.empty(6, dtype=dtype)
    dist.reduce_scatter_tensor(mine, torch.cat(inputs))
    assert torch.equal(mine, want)


def test_all_gather_into_an_output_that_holds_the_input_uses_in_place() -> None:
    # FSDP2's layout: the input is this rank's chunk of the output.
    out = torch.zeros(SIZE * 5)
    chunk = out[RANK * 5:(RANK + 1) * 5]
    chunk.copy_(torch.full((5,), float(RANK)))
    dist.all_gather_into_tensor(out, chunk)
    assert torch.equal(out, torch.arange(SIZE).float().repeat_interleave(5))
    work = dist.all_gather_into_tensor(out, chunk, async_op=True)
    work.wait()
    assert torch.equal(out, torch.arange(SIZE).float().repeat_interleave(5))


def test_all_to_all_even_and_uneven() -> None:
    inp = torch.arange(SIZE * 2, dtype=torch.float32) + 100 * RANK
    out = torch.empty(SIZE * 2)
    dist.all_to_all_single(out, inp)
    want = torch.cat([torch.arange(RANK * 2, RANK * 2 + 2).float() + 100 * r
                      for r in range(SIZE)])
    assert torch.equal(out, want)
    # rank r sends (r + d + 1) rows of width 3 to rank d
    send_splits = [RANK + d + 1 for d in range(SIZE)]
    recv_splits = [s + RANK + 1 for s in range(SIZE)]
    rows = torch.cat([torch.full((n, 3), float(10 * RANK + d)) for d, n in enumerate(send_splits)])
    got = torch.empty(sum(recv_splits), 3)
    dist.all_to_all_single(got, rows, recv_splits, send_splits)
    want = torch.cat([torch.full((n, 3), float(10 * s + RANK)) for s, n in enumerate(recv_splits)])
    assert torch.equal(got, want)
    # the list form, sizes differing per peer
    ins = [torch.full((RANK + d + 1,), float(RANK)) for d in range(SIZE)]
    outs = [torch.empty(s + RANK + 1) for s in range(SIZE)]
    dist.all_to_all(outs, ins)
    assert all(torch.equal(o, torch.full((s + RANK + 1,), float(s))) for s, o in enumerate(outs))


def test_point_to_point_ring_any_source_and_batches() -> None:
    right, left = (RANK + 1) % SIZE, (RANK - 1) % SIZE
    got = torch.empty(3)
    send = dist.isend(torch.full((3,), float(RANK)), dst=right)
    dist.recv(got, src=left)
    send.wait()
    assert torch.equal(got, torch.full((3,), float(left)))
    ops = [dist.P2POp(dist.isend, torch.full((2,), float(RANK)), right),
           dist.P2POp(dist.irecv, got2 := torch.empty(2), left)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    assert torch.equal(got2, torch.full((2,), float(left)))
    if SIZE > 1:
        if RANK == 0:
            for _ in range(SIZE - 1):
                z = torch.empty(1)
                sender = dist.recv(z)  # from any source
                assert z.item() == sender * 10
        else:
            dist.send(torch.tensor([RANK * 10.0]), dst=0)
    dist.barrier()


def test_object_collectives() -> None:
    gathered = [None] * SIZE
    dist.all_gather_object(gathered, {"rank": RANK, "name": "x" * RANK})
    assert gathered == [{"rank": r, "name": "x" * r} for r in range(SIZE)]
    objs = [f"from {RANK}", [RANK]] if RANK == SIZE - 1 else [None, None]
    dist.broadcast_object_list(objs, src=SIZE - 1)
    assert objs == [f"from {SIZE - 1}", [SIZE - 1]]
    out = [None]
    dist.scatter_object_list(out, [r * r for r in range(SIZE)] if RANK == 0 else None, src=0)
    assert out == [RANK * RANK]


def test_subgroups_device_mesh_and_functional_collectives() -> None:
    import torch.distributed._functional_collectives as funcol
    from torch.distributed.device_mesh import init_device_mesh

    evens = [r for r in range(SIZE) if r % 2 == 0]
    group = dist.new_group(evens, backend="mpiflow")
    t = torch.ones(2)
    dist.all_reduce(t, group=group)  # a no-op off the group
    assert torch.equal(t, torch.full((2,), float(len(evens) if RANK in evens else 1)))
    if RANK in evens:
        assert dist.get_rank(group) == evens.index(RANK)
    shape = (2, SIZE // 2) if SIZE % 2 == 0 and SIZE > 2 else (SIZE,)
    names = ("dp", "tp")[:len(shape)]
    mesh = init_device_mesh("cpu", shape, mesh_dim_names=names)
    for name in names:
        sub = mesh.get_group(name)
        x = torch.full((3,), float(RANK))
        dist.all_reduce(x, group=sub)
        members = dist.get_process_group_ranks(sub)
        assert torch.equal(x, torch.full((3,), float(sum(members))))
        y = funcol.all_reduce(torch.full((2,), float(RANK)), "sum", sub)
        assert torch.equal(y, torch.full((2,), float(sum(members))))
    gathered = funcol.all_gather_tensor(torch.full((2,), float(RANK)), 0, dist.group.WORLD)
    assert torch.equal(gathered, torch.arange(SIZE).float().repeat_interleave(2))


def test_coalesced_operations() -> None:
    a, b = data(RANK, torch.float32), data(RANK, torch.float64, 4)
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.all_reduce(a)
        dist.all_reduce(b)
    cm.wait()
    torch.testing.assert_close(a, expected_reduce("SUM", torch.float32))
    torch.testing.assert_close(b, expected_reduce("SUM", torch.float64, 4))
    outs = [torch.empty(6 * SIZE), torch.empty(4 * SIZE)]
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.all_gather_into_tensor(outs[0], data(RANK, torch.float32))
        dist.all_gather_into_tensor(outs[1], data(RANK, torch.float32, 4))
    cm.wait()
    assert torch.equal(outs[1], torch.cat([data(r, torch.float32, 4) for r in range(SIZE)]))


def test_bad_input_raises_on_the_calling_rank_before_anything_is_sent() -> None:
    with pytest.raises(ValueError, match="elements"):
        dist.all_gather_into_tensor(torch.empty(SIZE * 6 + 1), torch.ones(6))
    with pytest.raises(ValueError, match="split"):
        dist.all_to_all_single(torch.empty(3), torch.empty(3), [1] * (SIZE + 1), [1] * (SIZE + 1))
    with pytest.raises(TypeError, match="AVG"):
        dist.all_reduce(torch.ones(2, dtype=torch.bool), op=dist.ReduceOp.AVG)
    with pytest.raises((ValueError, RuntimeError)):
        dist.broadcast(torch.ones(2), src=SIZE)
    # nothing was left half-done: the next collective still matches on every rank
    t = torch.ones(1)
    dist.all_reduce(t)
    assert t.item() == SIZE
