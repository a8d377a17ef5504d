"""Real PyTorch training code on the "mpiflow" backend: DDP, its hooks, Join, FSDP2, DCP.

Every distributed gradient is compared with the single-process gradient of the full batch
(each rank computes it too, from the same seed), at 1-4 ranks.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

import mpiflow.torch  # noqa: E402, F401 - registers the backend
from mpiflow.communication.mpi.group import world_comm  # noqa: E402

nn = torch.nn
DDP = torch.nn.parallel.DistributedDataParallel
pytestmark = pytest.mark.mpi
RANK, SIZE = world_comm.rank, world_comm.size
PER_RANK = 4


@pytest.fixture(scope="module", autouse=True)
def default_group():
    """The default group on the mpiflow backend (``mpi://`` rendezvous) for this module."""
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("mpiflow", init_method="mpi://")
    yield
    dist.destroy_process_group()


def make_model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                         nn.Linear(16, 4))


def batch(step: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(100 + step)
    return torch.randn(PER_RANK * SIZE, 8, generator=gen), torch.randn(PER_RANK * SIZE, 4,
                                                                         generator=gen)


def mine(t: torch.Tensor) -> torch.Tensor:
    return t[RANK * PER_RANK:(RANK + 1) * PER_RANK]


def full_batch_grads(steps: int = 1) -> list[torch.Tensor]:
    """Gradients of the mean loss over the full batch, accumulated over ``steps`` batches."""
    ref = make_model()
    for step in range(steps):
        x, y = batch(step)
        nn.functional.mse_loss(ref(x), y).backward()
    return [p.grad for p in ref.parameters()]


def local_step(model: nn.Module, step: int = 0) -> None:
    x, y = batch(step)
    nn.functional.mse_loss(model(mine(x)), mine(y)).backward()


@pytest.mark.parametrize("options", [
    {}, {"bucket_cap_mb": 0.0005}, {"gradient_as_bucket_view": True}, {"static_graph": True},
    {"find_unused_parameters": True}, {"bucket_cap_mb": 0.0005, "gradient_as_bucket_view": True},
], ids=lambda o: ",".join(o) or "default")
def test_ddp_gives_the_full_batch_gradients(options: dict) -> None:
    model = DDP(make_model(), **options)
    for step in range(2):
        local_step(model, step)
    for p, want in zip(model.parameters(), full_batch_grads(2)):
        torch.testing.assert_close(p.grad, want, rtol=1e-5, atol=1e-6)


def test_ddp_no_sync_accumulates_locally_then_syncs() -> None:
    model = DDP(make_model())
    with model.no_sync():
        local_step(model, 0)
    local_step(model, 1)
    for p, want in zip(model.parameters(), full_batch_grads(2)):
        torch.testing.assert_close(p.grad, want, rtol=1e-5, atol=1e-6)


def test_ddp_broadcasts_rank_zeros_parameters_at_wrap_time() -> None:
    model = DDP(make_model(seed=RANK))  # different weights on every rank
    reference = make_model(seed=0)
    for p, q in zip(model.parameters(), reference.parameters()):
        assert torch.equal(p.detach(), q.detach())


@pytest.mark.parametrize("hook", ["fp16", "bf16"])
def test_ddp_compression_hooks(hook: str) -> None:
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    model = DDP(make_model())
    compress = getattr(default_hooks, f"{hook}_compress_hook")
    # torch refuses the hook by its name unless CUDA/NCCL is there; the hook itself only
    # needs a backend that reduces bfloat16, as this one does (through float32).
    model.register_comm_hook(None, lambda state, bucket: compress(state, bucket))
    local_step(model)
    tol = 2e-3 if hook == "fp16" else 2e-2
    for p, want in zip(model.parameters(), full_batch_grads()):
        torch.testing.assert_close(p.grad, want, rtol=tol, atol=tol)


def test_ddp_powersgd_hook_gives_every_rank_the_same_gradients() -> None:
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd

    model = DDP(make_model())
    state = powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=2,
                                   start_powerSGD_iter=2, min_compression_rate=0.1)
    model.register_comm_hook(state, powersgd.powerSGD_hook)
    for step in range(4):  # two plain all-reduces, then compressed ones
        model.zero_grad()
        local_step(model, step)
    for p in model.parameters():
        assert torch.isfinite(p.grad).all()
        copies = [torch.empty_like(p.grad) for _ in range(SIZE)]
        dist.all_gather(copies, p.grad)
        assert all(torch.equal(c, copies[0]) for c in copies)


def test_join_with_uneven_inputs_ends_with_identical_models() -> None:
    from torch.distributed.algorithms.join import Join

    model = DDP(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with Join([model]):
        for step in range(2 + RANK):  # rank r has 2 + r batches
            opt.zero_grad()
            local_step(model, step)
            opt.step()
    for p in model.parameters():
        copies = [torch.empty_like(p) for _ in range(SIZE)]
        dist.all_gather(copies, p.detach())
        assert all(torch.equal(c, copies[0]) for c in copies)


def test_distributed_sampler_partitions_the_dataset() -> None:
    from torch.utils.data import DistributedSampler

    data = list(range(10))
    sampler = DistributedSampler(data, shuffle=True, seed=3)
    sampler.set_epoch(1)
    mine_ = list(sampler)
    everyone = [None] * SIZE
    dist.all_gather_object(everyone, mine_)
    flat = sorted(i for part in everyone for i in part)
    assert set(flat) == set(data) and len(flat) == -(-10 // SIZE) * SIZE


def test_fsdp2_fully_shard_gives_the_unsharded_gradients() -> None:
    from torch.distributed.fsdp import fully_shard

    model = make_model()
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    local_step(model)
    for p, want in zip(model.parameters(), full_batch_grads()):
        torch.testing.assert_close(p.grad.full_tensor(), want, rtol=1e-5, atol=1e-6)


def test_distributed_checkpoint_round_trip(mpi_tmp_path) -> None:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.fsdp import fully_shard

    model = make_model()
    fully_shard(model)
    state = {"model": model.state_dict()}
    dcp.save(state, checkpoint_id=str(mpi_tmp_path / "ckpt"))
    other = make_model(seed=7)
    fully_shard(other)
    loaded = {"model": other.state_dict()}
    dcp.load(loaded, checkpoint_id=str(mpi_tmp_path / "ckpt"))
    other.load_state_dict(loaded["model"])
    for p, q in zip(model.parameters(), other.parameters()):
        assert torch.equal(p.full_tensor(), q.full_tensor())


def test_overlap_mode_ddp_and_futures_completed_by_the_progress_thread(monkeypatch) -> None:
    import threading

    monkeypatch.setenv("MPIFLOW_TORCH_OVERLAP", "1")
    group = dist.new_group(backend="mpiflow")  # reads the switch when it is made
    t = torch.full((5,), float(RANK))
    work = dist.all_reduce(t, group=group, async_op=True)
    done = threading.Event()
    work.get_future().then(lambda fut: done.set())
    assert done.wait(30), "the progress thread never completed the future"
    assert torch.equal(t, torch.full((5,), float(sum(range(SIZE)))))
    for options in ({}, {"bucket_cap_mb": 0.0005, "gradient_as_bucket_view": True}):
        model = DDP(make_model(), process_group=group, **options)
        for step in range(2):
            local_step(model, step)
        for p, want in zip(model.parameters(), full_batch_grads(2)):
            torch.testing.assert_close(p.grad, want, rtol=1e-5, atol=1e-6)
    dist.destroy_process_group(group)


@pytest.mark.parametrize("overlap", ["1", "0"])
def test_ddp_buckets_start_their_all_reduce_while_backward_runs(monkeypatch, overlap) -> None:
    # Buckets of about 100 bytes: one per layer (weight and bias), the first layer's last.
    # The input's gradient is the last one backward computes: by then DDP has handed the
    # buckets of the two later layers to the group. In overlap mode each started a
    # non-blocking MPI all-reduce (MPICommunicator.all_reduce returned its pending work);
    # otherwise each completed inside the call (the fast paths are paused by the counting,
    # so every all-reduce goes through the communicator's method).
    from mpiflow.communication import count_collectives
    from mpiflow.communication.mpi.communicator import MPICommunicator

    monkeypatch.setenv("MPIFLOW_TORCH_OVERLAP", overlap)
    group = dist.new_group(backend="mpiflow")  # reads the switch when it is made
    model = DDP(make_model(), process_group=group, bucket_cap_mb=0.0001)
    local_step(model, 0)  # DDP sizes its buckets by bucket_cap_mb from the second step on
    x, y = batch(1)
    x = mine(x).requires_grad_()
    pending: list[bool] = []
    at_last_gradient: list[list[bool]] = []
    x.register_hook(lambda grad: at_last_gradient.append(list(pending)))
    with count_collectives():
        original = MPICommunicator.all_reduce

        def noting(self, *args, **kwargs):
            work = original(self, *args, **kwargs)
            pending.append(work is not None)
            return work

        monkeypatch.setattr(MPICommunicator, "all_reduce", noting)
        try:
            nn.functional.mse_loss(model(x), mine(y)).backward()
        finally:
            monkeypatch.undo()  # before the counting puts the class's own method back
    dist.destroy_process_group(group)
    assert len(at_last_gradient) == 1
    started = at_last_gradient[0]
    assert len(started) == 2, started
    assert all(started) if overlap == "1" else not any(started), started
    assert len(pending) == 3
    for p, want in zip(model.parameters(), full_batch_grads(2)):
        torch.testing.assert_close(p.grad, want, rtol=1e-5, atol=1e-6)
