"""torch.distributed on CUDA tensors through the "mpiflow" backend (needs a GPU).

Marked ``gpu`` (scripts/test-gpu runs it) and skipped, saying why, where torch sees no CUDA
device. Each rank builds every rank's input from the rank number, so the expected values are
computed with torch on the full logical data, on the CPU.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

import mpiflow.torch  # noqa: E402,F401 - registers the backend
from mpiflow.communication.mpi.group import world_comm  # noqa: E402

RANK, WORLD = world_comm.rank, world_comm.size

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device"),
    pytest.mark.filterwarnings("ignore:mpiflow.*noted once:RuntimeWarning"),
]


@pytest.fixture(scope="module", autouse=True)
def default_group() -> Any:
    """The default group on the mpiflow backend for this module; destroyed at its end."""
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("mpiflow", timeout=timedelta(seconds=120))
    yield dist.group.WORLD
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def dev() -> Any:
    from mpiflow import cuda

    index = cuda.current_device() if cuda.is_available() else 0
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def data(rank: int, dtype: Any, n: int = 7) -> Any:
    """Rank ``rank``'s input: small integers that keep every sum exact."""
    return ((torch.arange(n) * 5 + rank * 3) % 4 + 1).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.float16])
def test_all_reduce_in_place(dev: Any, dtype: Any) -> None:
    x = data(RANK, dtype).to(dev)
    ptr = x.data_ptr()
    dist.all_reduce(x)
    assert x.data_ptr() == ptr and x.device == dev
    expected = sum(data(r, torch.float64) for r in range(WORLD)).to(dtype)
    torch.testing.assert_close(x.cpu(), expected)


def test_all_reduce_after_a_kernel_on_the_current_stream(dev: Any) -> None:
    # The backend must wait for the kernels that produce the tensor (torch's current stream)
    # before MPI or NCCL read it.
    x = torch.ones(1 << 20, device=dev)
    for _ in range(20):
        x = x * 1.0 + 1.0          # queued, maybe not yet run, when all_reduce starts
    dist.all_reduce(x)
    assert float(x[0]) == float(x[-1]) == 21.0 * WORLD


def test_broadcast_of_a_strided_tensor_and_async(dev: Any) -> None:
    y = data(RANK, torch.float32, 12).reshape(3, 4).to(dev)[:, ::2]
    work = dist.broadcast(y, src=WORLD - 1, async_op=True)
    assert work is not None
    work.wait()
    torch.testing.assert_close(y.cpu(), data(WORLD - 1, torch.float32, 12).reshape(3, 4)[:, ::2])


def test_all_gather_and_reduce_scatter(dev: Any) -> None:
    out = torch.zeros(WORLD * 7, device=dev)
    dist.all_gather_into_tensor(out, data(RANK, torch.float32).to(dev))
    torch.testing.assert_close(out.cpu(), torch.cat([data(r, torch.float32)
                                                      for r in range(WORLD)]))
    mine = torch.zeros(3, device=dev)
    dist.reduce_scatter_tensor(mine, data(RANK, torch.float32, 3 * WORLD).to(dev))
    total = sum(data(r, torch.float32, 3 * WORLD) for r in range(WORLD))
    torch.testing.assert_close(mine.cpu(), total[3 * RANK:3 * RANK + 3])


def test_send_and_recv(dev: Any) -> None:
    if WORLD < 2:
        pytest.skip("needs 2 ranks")
    if RANK > 1:
        return
    t = data(RANK, torch.float32).to(dev)
    if RANK == 0:
        dist.send(t, 1)
        dist.recv(t, 1)
        torch.testing.assert_close(t.cpu(), data(1, torch.float32))
    else:
        got = torch.zeros_like(t)
        dist.recv(got, 0)
        torch.testing.assert_close(got.cpu(), data(0, torch.float32))
        dist.send(t, 0)


def test_ddp_step_matches_one_process(dev: Any) -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(5, 3).to(dev)
    reference = torch.nn.Linear(5, 3).double()
    reference.load_state_dict({k: v.double().cpu() for k, v in model.state_dict().items()})
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index])
    batches = [torch.arange(10, dtype=torch.float64).reshape(2, 5) * (r + 1) / 10
               for r in range(WORLD)]
    ddp(batches[RANK].float().to(dev)).square().sum().backward()
    sum(reference(b).square().sum() for b in batches).backward()
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        assert q.grad is not None and p.grad is not None
        torch.testing.assert_close(p.grad.cpu().double(), q.grad / WORLD, rtol=1e-5, atol=1e-5)
