"""ZeRO stage 2 of nn.Graph (mpiflow/nn/graph/zero.py): the gradients of data-parallel
parameters reduce-scattered into their shards; the bits of stage 0 (no ZeRO) where the two
reductions add in the same order (2 ranks; any rank count with deterministic algorithms),
rounding-close otherwise; each rank holding about 1/N of the gradients."""

from __future__ import annotations

import numpy
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import mpiflow as flow
from mpiflow import nn

SIZE = flow.env.get_world_size()


class Train(nn.Graph):
    def __init__(self, m: nn.Module, opt: flow.optim.Optimizer, stage: int, steps: int) -> None:
        super().__init__()
        self.m = m
        self.add_optimizer(opt)
        if stage:
            self.config.enable_zero(True, stage=stage, shard_min_size=1)
        if steps > 1:
            self.config.set_gradient_accumulation_steps(steps)

    def build(self, x: flow.Tensor, y: flow.Tensor) -> flow.Tensor:
        loss = ((self.m(x) - y) ** 2).mean()
        loss.backward()
        return loss


def _run(stage: int, steps: int, optimizer: str, clip: bool) -> tuple[list[numpy.ndarray],
                                                                       list[numpy.ndarray], int]:
    placement = flow.placement("cpu", list(range(SIZE)))
    rng = numpy.random.default_rng(3)
    x, y = (flow.tensor(rng.standard_normal((4 * SIZE + 4, n)).astype(numpy.float32))
            .to_global(placement, flow.sbp.broadcast).to_global(placement, flow.sbp.split(0))
            for n in (5, 3))
    flow.manual_seed(0)
    m = nn.Sequential(nn.Linear(5, 3 * SIZE + 1), nn.ReLU(), nn.Linear(3 * SIZE + 1, 3))
    m.to_global(placement, flow.sbp.broadcast)
    group: dict[str, object] = {"params": list(m.parameters())}
    if clip:
        group["clip_grad_max_norm"] = 0.3
    opt = (flow.optim.SGD([group], lr=0.1, momentum=0.9) if optimizer == "sgd"
           else flow.optim.Adam([group], lr=0.01))
    graph = Train(m, opt, stage, steps)
    losses = [graph(x, y).to_local().numpy() for _ in range(3)]
    return losses, [p.to_local().numpy() for p in m.parameters()], graph.grad_bytes


@pytest.mark.mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("steps", [1, 2])
def test_stage2_gives_stage0_bits(optimizer: str, steps: int) -> None:
    deterministic = SIZE > 2  # MPI may add 3-4 ranks' values in another order per collective
    flow.use_deterministic_algorithms(deterministic)
    try:
        want_losses, want_params, whole = _run(0, steps, optimizer, False)
        got_losses, got_params, sharded = _run(2, steps, optimizer, False)
    finally:
        flow.use_deterministic_algorithms(False)
    for got, want in zip(got_losses + got_params, want_losses + want_params):
        assert_array_equal(got, want)
    if SIZE > 1:  # every parameter is sharded (shard_min_size=1): rows of 1/N each
        assert sharded <= whole * (1 / SIZE + 0.2), (sharded, whole)
    else:
        assert sharded == whole


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_stage2_without_exact_sums_and_with_clipping_is_close() -> None:
    for clip in (False, True):
        want_losses, want_params, _ = _run(0, 2, "sgd", clip)
        got_losses, got_params, _ = _run(2, 2, "sgd", clip)
        for got, want in zip(got_losses + got_params, want_losses + want_params):
            assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_stage3_is_not_implemented() -> None:
    config = nn.Graph().config
    with pytest.raises(NotImplementedError, match="stage 3"):
        config.enable_zero(True, stage=3)
    config.enable_zero(False, stage=3)  # off: nothing to refuse
    assert config.zero_stage == 0


@pytest.mark.mpi(min_size=2)
@pytest.mark.timeout(60)
def test_stage2_redirects_gradients_during_its_calls_only() -> None:
    placement = flow.placement("cpu", list(range(SIZE)))
    m = nn.Linear(4, 2 * SIZE).to_global(placement, flow.sbp.broadcast)
    graph = Train(m, flow.optim.SGD(m.parameters(), lr=0.1), 2, 1)
    x = flow.ones(2 * SIZE, 4).to_global(placement, flow.sbp.broadcast)
    y = flow.zeros(2 * SIZE, 2 * SIZE).to_global(placement, flow.sbp.broadcast)
    graph(x, y)
    ((m(x) - y) ** 2).mean().backward()  # eager, between calls: the parameter's own .grad
    assert m.weight.grad is not None and m.weight.grad.sbp == (flow.sbp.broadcast,)
    m.weight.grad = None
    m.bias.grad = None
    graph(x, y)
    assert m.weight.grad is None
