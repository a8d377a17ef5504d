"""DistributedDataParallel and the sync helpers on mpiflow modules."""

from __future__ import annotations

import numpy
import pytest
from helpers import run_job
from numpy.testing import assert_allclose

import mpiflow as flow
import mpiflow.distributed as dist
from mpiflow import nn
from mpiflow.communication import count_collectives
from mpiflow.nn.parallel import DistributedDataParallel as ddp

pytestmark = pytest.mark.mpi

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
MEAN_RANK_PLUS_1 = (SIZE + 1) / 2


class Scale(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(flow.tensor([1.0, 1.0]))

    def forward(self, x: flow.Tensor) -> flow.Tensor:
        return x * self.w


def test_gradients_are_averaged_and_accumulate_like_oneflow() -> None:
    m = ddp(Scale())
    assert isinstance(m, Scale) and m.w.shape == (2,)
    x = flow.tensor([RANK + 1.0, RANK + 1.0])
    m(x).sum().backward()
    assert_allclose(m.w.grad.numpy(), [MEAN_RANK_PLUS_1] * 2)
    m(x).sum().backward()  # no zero_grad: accumulates, then averages again
    assert_allclose(m.w.grad.numpy(), [2 * MEAN_RANK_PLUS_1] * 2)


def test_parameters_are_broadcast_from_rank_0_at_wrap_time() -> None:
    flow.manual_seed(100 + RANK)  # a different model on every rank
    net = nn.Linear(3, 2)
    net.weight.data.add_(RANK)
    ddp(net)
    everyone: list = [None] * SIZE
    dist.all_gather_object(everyone, net.weight.numpy().tolist())
    assert all(e == everyone[0] for e in everyone)


class TwoBranches(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.shared = nn.Parameter(flow.ones(3))
        self.only_rank0 = nn.Parameter(flow.ones(3))
        self.never = nn.Parameter(flow.ones(3))
        self.frozen = nn.Parameter(flow.ones(3), requires_grad=False)

    def forward(self, x: flow.Tensor) -> flow.Tensor:
        out = x * self.shared + self.frozen
        if RANK == 0:
            out = out + x * self.only_rank0
        return out


def test_unused_parameters_neither_hang_nor_crash() -> None:
    m = ddp(TwoBranches(), bucket_size_mb=1e-5)  # one bucket per parameter
    x = flow.full((3,), float(RANK + 1))
    m(x).sum().backward()
    assert_allclose(m.shared.grad.numpy(), [MEAN_RANK_PLUS_1] * 3)
    assert_allclose(m.only_rank0.grad.numpy(), [1.0 / SIZE] * 3)  # averaged over all ranks
    assert_allclose(m.never.grad.numpy(), [0.0] * 3)
    assert m.frozen.grad is None


def test_no_sync_accumulates_locally_then_reduces_the_sum() -> None:
    m = ddp(Scale())
    x = flow.tensor([RANK + 1.0, RANK + 1.0])
    with m.no_sync():
        m(x).sum().backward()
    assert_allclose(m.w.grad.numpy(), [RANK + 1.0] * 2)  # local only
    m(x).sum().backward()
    assert_allclose(m.w.grad.numpy(), [2 * MEAN_RANK_PLUS_1] * 2)


def test_buckets_become_few_collectives() -> None:
    net = nn.Sequential(*[nn.Linear(8, 8) for _ in range(10)])
    m = ddp(net, bucket_size_mb=1)
    x = flow.randn(4, 8)
    with count_collectives() as counts:
        m(x).sum().backward()
    assert counts["all_reduce"] == 1  # 20 parameters, 2880 bytes: one bucket


def test_buckets_are_all_reduced_while_backward_runs() -> None:
    # One parameter per bucket: 6 buckets, the first layer's last. The input's gradient is
    # the last one backward computes; by then the buckets of the layers behind it (at least
    # the last two layers' 4) have started their all-reduce. Only the last bucket waits for
    # the end of backward.
    net = nn.Sequential(*[nn.Linear(8, 8) for _ in range(3)])
    m = ddp(net, bucket_size=1)
    x = flow.randn(4, 8).requires_grad_()
    started_before_the_end = []
    with count_collectives() as counts:
        x.register_hook(lambda grad: started_before_the_end.append(counts["all_reduce"]))
        m(x).sum().backward()
    assert len(started_before_the_end) == 1
    assert started_before_the_end[0] >= 4, started_before_the_end
    assert counts["all_reduce"] == 6


def full_batch_reference(steps: int) -> numpy.ndarray:
    flow.manual_seed(7)
    net = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 1))
    opt = flow.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    x, y = flow.randn(4 * SIZE, 4), flow.randn(4 * SIZE, 1)
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.mse_loss(net(x), y).backward()
        opt.step()
    return net[0].weight.numpy()


def test_ddp_training_matches_one_process_on_the_whole_batch() -> None:
    expected = full_batch_reference(3)
    flow.manual_seed(7)
    net = ddp(nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 1)))
    opt = flow.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    x, y = flow.randn(4 * SIZE, 4), flow.randn(4 * SIZE, 1)
    mine = slice(4 * RANK, 4 * RANK + 4)
    for _ in range(3):
        opt.zero_grad()
        nn.functional.mse_loss(net(x[mine]), y[mine]).backward()
        opt.step()
    assert_allclose(net[0].weight.numpy(), expected, rtol=1e-5, atol=1e-6)


class WithBuffer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("running", flow.full((2,), float(RANK)))
        self.w = nn.Parameter(flow.ones(2))

    def forward(self, x: flow.Tensor) -> flow.Tensor:
        return x * self.w + self.running


def test_buffers_follow_rank_0_before_each_forward() -> None:
    m = ddp(WithBuffer(), broadcast_parameters=False)
    m.running.fill_(float(RANK + 5))
    m(flow.ones(2))
    assert_allclose(m.running.numpy(), [5.0, 5.0])


def test_bad_uses_raise() -> None:
    m = ddp(Scale())
    with pytest.raises(RuntimeError, match="already wrapped"):
        ddp(m)
    g = Scale().to_global(flow.placement("cpu", list(range(SIZE))), flow.sbp.broadcast)
    with pytest.raises(ValueError, match="local parameters"):
        ddp(g)


def test_sync_helpers_on_a_module() -> None:
    flow.manual_seed(RANK)
    net = nn.Linear(3, 2)
    dist.sync_initial_weights(net)
    net(flow.full((1, 3), float(RANK))).sum().backward()
    dist.sync_gradients(net)
    assert_allclose(net.bias.grad.numpy(), [1.0, 1.0])
    assert_allclose(net.weight.grad.numpy(), numpy.full((2, 3), (SIZE - 1) / 2))


@pytest.mark.single_process
def test_the_seed_ddp_example_converges_to_2_3() -> None:
    import pathlib

    script = pathlib.Path(__file__).resolve().parents[2] / "examples" / "seed_ddp.py"
    job = run_job(2, script.read_text(), timeout=120)
    assert job.returncode == 0, job.stderr
    w = [float(v) for v in job.stdout.split("w:")[-1].replace("[", " ").replace("]", " ")
         .replace(",", " ").split() if v.replace(".", "").replace("-", "").isdigit()]
    assert_allclose(w[:2], [2.0, 3.0], atol=1e-3)
