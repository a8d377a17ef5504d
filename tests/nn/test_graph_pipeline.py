"""nn.Graph pipeline stages (mpiflow/nn/graph/pipeline.py): a GPipe replay of the micro-batches
gives the bits of the eager program run micro-batch by micro-batch, at 1-4 ranks.

Stage placements by world size: 1 rank: both stages on rank 0; 2: ranks 0 | 1; 3: 0 | 1, 2 (a
sub-mesh); 4: 0, 1 | 2, 3 (two sub-meshes).
"""

from __future__ import annotations

import numpy
import pytest

import mpiflow as flow
from mpiflow.nn.graph import GraphModule

SIZE = flow.env.get_world_size()
STAGES = {1: ([0], [0]), 2: ([0], [1]), 3: ([0], [1, 2]), 4: ([0, 1], [2, 3])}
MICRO = 4


def _placements() -> tuple[flow.placement, flow.placement]:
    r0, r1 = STAGES[min(SIZE, 4)]
    return flow.placement("cpu", r0), flow.placement("cpu", r1)


class Stage0(flow.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = flow.nn.Linear(6, 8)
        self.act = flow.nn.ReLU()

    def forward(self, x: flow.Tensor) -> flow.Tensor:
        return self.act(self.fc(x))


class Stage1(flow.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = flow.nn.Linear(8, 3)

    def forward(self, x: flow.Tensor) -> flow.Tensor:
        return self.fc(x)


class Pipe(flow.nn.Module):
    def __init__(self, explicit_move: bool) -> None:
        super().__init__()
        p0, p1 = _placements()
        rng = numpy.random.default_rng(7)
        self.s0, self.s1 = Stage0(), Stage1()
        for m in (self.s0, self.s1):
            for p in m.parameters():
                p.data = flow.tensor(rng.standard_normal(tuple(p.shape)).astype("float32"))
        self.s0.to_global(placement=p0, sbp=flow.sbp.broadcast)
        self.s1.to_global(placement=p1, sbp=flow.sbp.broadcast)
        self.p1 = p1
        self.explicit_move = explicit_move

    def forward(self, x: flow.Tensor) -> flow.Tensor:
        out = self.s0(x)
        if self.explicit_move:
            out = out.to_global(placement=self.p1, sbp=out.sbp)
        return self.s1(out)


def _data(sbp: object) -> tuple[flow.Tensor, flow.Tensor]:
    p0, p1 = _placements()
    rng = numpy.random.default_rng(11)
    x = flow.tensor(rng.standard_normal((16, 6)).astype("float32"))
    y = flow.tensor(rng.standard_normal((16, 3)).astype("float32"))
    return x.to_global(p0, flow.sbp.broadcast).to_global(sbp=sbp), \
        y.to_global(p1, flow.sbp.broadcast).to_global(sbp=sbp)


def _eager(sbp: object, steps: int) -> tuple[list[numpy.ndarray], list[numpy.ndarray]]:
    model = Pipe(explicit_move=True)
    opt = flow.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = _data(sbp)
    m = x.shape[0] // MICRO
    losses = []
    for _ in range(steps):
        for i in range(MICRO):
            loss = ((model(x[i * m:(i + 1) * m]) - y[i * m:(i + 1) * m]) ** 2).mean()
            loss.backward(flow.ones_like(loss) * (1 / MICRO))
            losses.append(loss.to_local().numpy())
        opt.step()
        opt.zero_grad()
    return losses, [p.to_local().numpy() for p in model.parameters()]


class PipeGraph(flow.nn.Graph):
    def __init__(self, model: Pipe, opt: flow.optim.Optimizer, spelling: str) -> None:
        super().__init__()
        p0, p1 = _placements()
        self.model = model
        if spelling == "set_stage":
            self.model.s0.to(GraphModule).set_stage(0, p0)
            self.model.s1.to(GraphModule).set_stage(1, p1)
        elif spelling == "config":
            self.model.s0.config.set_stage(stage_id=0, placement=p0)
            self.model.s1.config.set_stage(stage_id=1, placement=p1)
        else:
            self.model.s0.config.stage_id = 0
            self.model.s1.config.stage_id = 1
        self.add_optimizer(opt)
        self.config.set_gradient_accumulation_steps(MICRO)

    def build(self, x: flow.Tensor, y: flow.Tensor) -> flow.Tensor:
        loss = ((self.model(x) - y) ** 2).mean()
        loss.backward()
        return loss


@pytest.mark.mpi
@pytest.mark.parametrize("spelling", ["set_stage", "config", "stage_id"])
@pytest.mark.parametrize("sbp", ["B", "S0"])
def test_pipeline_is_the_eager_program(spelling: str, sbp: str) -> None:
    layout = flow.sbp.broadcast if sbp == "B" else flow.sbp.split(0)
    steps = 3
    want_losses, want_params = _eager(layout, steps)
    # With set_stage's placement, the graph moves stage 1's input itself.
    model = Pipe(explicit_move=spelling == "stage_id")
    graph = PipeGraph(model, flow.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                      spelling)
    x, y = _data(layout)
    losses = []
    for _ in range(steps):
        out = graph(x, y)
        assert tuple(out.shape) == (MICRO,)
        local = out.to_local().numpy()
        losses += [local[i] if local.size else local for i in range(MICRO)]
    for got, want in zip(losses, want_losses):
        assert numpy.array_equal(got, want), (got, want)
    for got, want in zip([p.to_local().numpy() for p in model.parameters()], want_params):
        assert numpy.array_equal(got, want)
    assert graph.plans[0] is not None and graph.plans[0].backward_at is not None
    assert graph._replays == steps * MICRO - 1  # all but the traced micro-batch replayed


def test_set_stage_errors() -> None:
    block = flow.nn.graph.Block("m", flow.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="stage_id"):
        block.to(GraphModule).set_stage(-1)
    with pytest.raises(TypeError, match="placement"):
        block.to(GraphModule).set_stage(0, "cpu:0")
    block.to(GraphModule).set_stage(2)
    assert "stage_id=2" in repr(block.to(GraphModule))


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_pipeline_with_zero_stage3_is_the_eager_program() -> None:
    # Stage placements of 2 ranks (3-4 ranks) shard their B parameters; 2 values add in one
    # order, so the reduce-scatter gives the eager all-reduce's bits.
    from mpiflow.nn.graph.zero3 import is_sharded

    steps = 2
    want_losses, want_params = _eager(flow.sbp.split(0), steps)
    model = Pipe(explicit_move=False)
    graph = PipeGraph(model, flow.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                      "set_stage")
    graph.config.enable_zero(True, stage=3, shard_min_size=1)
    x, y = _data(flow.sbp.split(0))
    losses = []
    for _ in range(steps):
        local = graph(x, y).to_local().numpy()
        losses += [local[i] if local.size else local for i in range(MICRO)]
    assert is_sharded(model.s1.fc.weight) == (SIZE >= 3)
    for got, want in zip(losses, want_losses):
        assert numpy.array_equal(got, want), (got, want)
    for got, want in zip([p.to_local().numpy() for p in model.parameters()], want_params):
        assert numpy.array_equal(got, want)
