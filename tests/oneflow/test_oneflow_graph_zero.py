"""OneFlow's graph/test_graph_zero.py on mpiflow (see README.md's table).

Linear(800, 400) data parallel (``B``) and Linear(400, 500) model parallel (``S(0)``) on 2 ranks,
weights 2.068758, SGD momentum 0.9, a (6, 800) ``S(0)`` batch of integers in [1, 100),
``enable_zero(True, stage=..., min_shard_size=1)``, one training call, then an evaluation graph
over the same modules; on 4 ranks the 2-D case: two MixedLinear blocks ((B, S0) and (S0, B)
weights 1.068758 on a 2 x 2 mesh, ReLUs, activation checkpointing), a (2, 800) [S0, B] batch,
the mean as loss. Both 2-D Linears are OneFlow's (800, 400): local weights made global with a
split take each rank's tensor as its shard, as in OneFlow, so the (B, S0) layer has 800 outputs.
As in OneFlow, ZeRO shards the 2-D weights along their B axis: both become (S0, S0).

OneFlow asserts that its compiled job rewrote the data-parallel weight's sbp to ``S(0)``;
mpiflow keeps the parameter ``B`` and updates it through an ``S(0)`` shard (docs/graph.md),
an expected difference: here the weights after the step are compared with the same graph
without ZeRO (``array_equal``), and the shard's layout is checked. Stages 1, 2 and 3 run; at
stage 3 the shard is the weight's storage between calls (checked: the whole value let go after
the step, gathered again when the evaluation graph and the comparison read it). ``enable_amp``
is a no-op on CPU; OneFlow's ``StaticGradScaler(200)`` is left out (mpiflow has no AMP grad
scaler).
"""

from __future__ import annotations

import numpy
import pytest
from oneflow_case import exactly

import mpiflow as flow
from mpiflow.nn.graph import GraphModule
from mpiflow.nn.graph.zero3 import is_materialized, is_sharded

B, S0 = flow.sbp.broadcast, flow.sbp.split(0)


def _train(zero_stage: int) -> tuple[list[numpy.ndarray], numpy.ndarray, object]:
    P = flow.placement("cpu", ranks=[0, 1])
    linear_dp = flow.nn.Linear(800, 400, bias=False).to_global(placement=P, sbp=B)
    flow.nn.init.constant_(linear_dp.weight, 2.068758)
    linear_mp = flow.nn.Linear(400, 500, bias=False).to_global(placement=P, sbp=S0)
    flow.nn.init.constant_(linear_mp.weight, 2.068758)
    sgd = flow.optim.SGD([{"params": linear_dp.parameters()},
                          {"params": linear_mp.parameters()}], lr=0.001, momentum=0.9)
    flow.manual_seed(1)
    x = flow.randint(1, 100, (6, 800), dtype=flow.float32, placement=P, sbp=S0)

    def forward(x: flow.Tensor) -> flow.Tensor:
        return linear_mp(linear_dp(x).to_global(placement=P, sbp=B))

    class TrainGraph(flow.nn.Graph):
        def __init__(self) -> None:
            super().__init__()
            self.linear_dp = linear_dp
            self.linear_mp = linear_mp
            self.add_optimizer(sgd)
            self.config.enable_amp(True)
            if zero_stage:
                self.config.enable_zero(True, stage=zero_stage, min_shard_size=1)

        def build(self, x: flow.Tensor) -> flow.Tensor:
            out = forward(x)
            out.sum().backward()
            return out

    class EvalGraph(flow.nn.Graph):
        def __init__(self) -> None:
            super().__init__()
            self.linear_dp = linear_dp
            self.linear_mp = linear_mp
            self.config.enable_amp(True)

        def build(self, x: flow.Tensor) -> flow.Tensor:
            return forward(x)

    TrainGraph()(x)
    if zero_stage == 3:  # the data-parallel weight is stored as its shard between calls
        assert is_sharded(linear_dp.weight) and not is_materialized(linear_dp.weight)
        assert not is_sharded(linear_mp.weight)
    out = EvalGraph()(x)  # reads the trained weights; the modules' own output
    assert numpy.array_equal(out.to_local().numpy(), forward(x).to_local().numpy())
    weights = [linear_dp.weight.to_local().numpy(), linear_mp.weight.to_local().numpy()]
    return weights, out.to_local().numpy(), sgd


@exactly(2)
@pytest.mark.timeout(120)
@pytest.mark.parametrize("zero_stage", [1, 2, 3])
def test_linear_train_graph_with_zero(zero_stage: int) -> None:
    want, want_out, _ = _train(0)
    got, got_out, sgd = _train(zero_stage)
    for g, w in zip(got, want):
        assert numpy.array_equal(g, w)
    assert numpy.array_equal(got_out, want_out)
    # Expected difference: the B weight stays B; its update runs through an S(0) shard.
    shard = sgd.param_groups[0]["params"][0]  # type: ignore[attr-defined]
    assert shard.sbp == (S0,) and tuple(shard.shape) == (400, 800)


def _train_2d(zero_stage: int) -> tuple[list[numpy.ndarray], numpy.ndarray]:
    P = flow.placement("cpu", ranks=[[0, 1], [2, 3]])

    class MixedLinear(flow.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.dp_mp = flow.nn.Linear(800, 400, bias=False).to_global(placement=P,
                                                                         sbp=[B, S0])
            flow.nn.init.constant_(self.dp_mp.weight, 1.068758)
            self.mp_dp = flow.nn.Linear(800, 400, bias=False).to_global(placement=P,
                                                                         sbp=[S0, B])
            flow.nn.init.constant_(self.mp_dp.weight, 1.068758)

        def forward(self, x: flow.Tensor) -> flow.Tensor:
            return flow.relu(self.mp_dp(flow.relu(self.dp_mp(x))))

    mixed0, mixed1 = MixedLinear(), MixedLinear()
    sgd = flow.optim.SGD([{"params": mixed0.parameters()}, {"params": mixed1.parameters()}],
                         lr=0.001, momentum=0.9)
    flow.manual_seed(2)
    x = flow.rand((2, 800), dtype=flow.float32, placement=P, sbp=[S0, B])

    class TrainGraph(flow.nn.Graph):
        def __init__(self) -> None:
            super().__init__()
            self.mixed_linear0 = mixed0
            self.mixed_linear0.to(GraphModule).activation_checkpointing = True
            self.mixed_linear1 = mixed1
            self.mixed_linear1.to(GraphModule).activation_checkpointing = True
            self.add_optimizer(sgd)
            self.config.enable_amp(True)
            if zero_stage:
                self.config.enable_zero(True, stage=zero_stage, shard_min_size=1,
                                        shard_restore_level=1)

        def build(self, x: flow.Tensor) -> flow.Tensor:
            loss = self.mixed_linear1(self.mixed_linear0(x)).mean()
            loss.backward()
            return loss

    class EvalGraph(flow.nn.Graph):
        def __init__(self) -> None:
            super().__init__()
            self.mixed_linear0 = mixed0
            self.mixed_linear1 = mixed1

        def build(self, x: flow.Tensor) -> flow.Tensor:
            return self.mixed_linear1(self.mixed_linear0(x))

    TrainGraph()(x)
    if zero_stage:  # both weights' B axis split: (S0, S0) shards in the optimizer
        shards = [p for g in sgd.param_groups for p in g["params"]]  # type: ignore[attr-defined]
        assert [s.sbp for s in shards] == [(S0, S0)] * 4
    if zero_stage == 3:
        weights = [*mixed0.parameters(), *mixed1.parameters()]
        assert all(is_sharded(w) and not is_materialized(w) for w in weights)
    out = EvalGraph()(x)
    return [p.to_local().numpy() for p in [*mixed0.parameters(), *mixed1.parameters()]], \
        out.to_local().numpy()


@exactly(4)
@pytest.mark.timeout(120)
@pytest.mark.parametrize("zero_stage", [1, 2, 3])
def test_linear_train_graph_2d_with_zero(zero_stage: int) -> None:
    # (B, S0) and (S0, B) weights are sharded along their B axis, as in OneFlow; the values
    # must be those without ZeRO.
    want, want_out = _train_2d(0)
    got, got_out = _train_2d(zero_stage)
    for g, w in zip(got, want):
        assert numpy.array_equal(g, w)
    assert numpy.array_equal(got_out, want_out)
