"""nn.Graph: the traced plan and its replays give the eager program's bits, local and global."""

from __future__ import annotations

import numpy
import pytest
from numpy.testing import assert_array_equal

import mpiflow as flow
import mpiflow.nn as nn
from mpiflow.nn.graph import GraphModule, trace_function
from mpiflow.nn.graph.plan import Plan
from mpiflow.tensors.trace import DataDependentError

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
STEPS = 4


def _data(rows: int = 6, seed: int = 0) -> tuple[flow.Tensor, flow.Tensor]:
    rng = numpy.random.default_rng(seed)
    return (flow.tensor(rng.standard_normal((rows, 4)).astype(numpy.float32)),
            flow.tensor(rng.standard_normal((rows, 2)).astype(numpy.float32)))


def _model(**group: float) -> tuple[nn.Module, flow.optim.Optimizer]:
    flow.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = flow.optim.SGD([{"params": list(m.parameters()), **group}], lr=0.1, momentum=0.9)
    return m, opt


def _loss(m: nn.Module, x: flow.Tensor, y: flow.Tensor) -> flow.Tensor:
    return ((m(x) - y) ** 2).mean()


class TrainGraph(nn.Graph):
    def __init__(self, m: nn.Module, opt: flow.optim.Optimizer, lr_sch: object = None,
                 steps: int = 1) -> None:
        super().__init__()
        self.m = m
        self.add_optimizer(opt, lr_sch=lr_sch)
        if steps > 1:
            self.config.set_gradient_accumulation_steps(steps)

    def build(self, x: flow.Tensor, y: flow.Tensor) -> flow.Tensor:
        loss = _loss(self.m, x, y)
        loss.backward()
        return loss


def _eager(m: nn.Module, opt: flow.optim.Optimizer, x: flow.Tensor, y: flow.Tensor,
           steps: int = 1, lr_sch: object = None) -> flow.Tensor:
    rows = x.shape[0] // steps
    losses = []
    for i in range(steps):
        loss = _loss(m, x[i * rows:(i + 1) * rows], y[i * rows:(i + 1) * rows])
        loss.backward(flow.ones_like(loss) * (1.0 / steps) if steps > 1 else None)
        losses.append(loss.detach())
    opt.clip_grad()
    opt.step()
    opt.zero_grad()
    if lr_sch is not None:
        lr_sch.step()
    return losses[0] if steps == 1 else flow.stack(losses)


def _same(a: nn.Module, b: nn.Module) -> None:
    for p, q in zip(a.parameters(), b.parameters()):
        assert_array_equal(p.numpy(), q.numpy())


@pytest.mark.timeout(60)
def test_graph_replays_give_the_eager_bits() -> None:
    x, y = _data()
    (m1, o1), (m2, o2) = _model(), _model()
    graph = TrainGraph(m2, o2)
    for _ in range(STEPS):
        assert_array_equal(graph(x, y).numpy(), _eager(m1, o1, x, y).numpy())
        _same(m1, m2)
    assert graph._replays == STEPS - 1
    assert len(graph.plans) == 1 and graph.plans[0] is not None


@pytest.mark.timeout(60)
def test_graph_retraces_on_a_new_signature() -> None:
    (m1, o1), (m2, o2) = _model(), _model()
    graph = TrainGraph(m2, o2)
    for rows in (6, 4, 6, 4):
        x, y = _data(rows, seed=rows)
        assert_array_equal(graph(x, y).numpy(), _eager(m1, o1, x, y).numpy())
    _same(m1, m2)
    assert len(graph.plans) == 2


@pytest.mark.timeout(60)
@pytest.mark.parametrize("steps", [2, 3])
def test_gradient_accumulation_is_the_mean_over_micro_batches(steps: int) -> None:
    x, y = _data(6)
    (m1, o1), (m2, o2) = _model(), _model()
    graph = TrainGraph(m2, o2, steps=steps)
    for _ in range(3):
        out = graph(x, y)
        assert tuple(out.shape) == (steps,)
        assert_array_equal(out.numpy(), _eager(m1, o1, x, y, steps).numpy())
        _same(m1, m2)
    with pytest.raises(ValueError, match="divide"):
        graph(*_data(5))


@pytest.mark.timeout(60)
def test_clip_grad_from_the_optimizer_groups_and_lr_scheduler() -> None:
    x, y = _data()
    (m1, o1), (m2, o2) = _model(clip_grad_max_norm=0.1), _model(clip_grad_max_norm=0.1)
    s1 = flow.optim.lr_scheduler.StepLR(o1, step_size=1, gamma=0.5)
    s2 = flow.optim.lr_scheduler.StepLR(o2, step_size=1, gamma=0.5)
    graph = TrainGraph(m2, o2, lr_sch=s2)
    for _ in range(3):
        assert_array_equal(graph(x, y).numpy(), _eager(m1, o1, x, y, lr_sch=s1).numpy())
        _same(m1, m2)
    assert o2.param_groups[0]["lr"] == o1.param_groups[0]["lr"] == 0.1 * 0.5 ** 3


class ClipInBuild(TrainGraph):
    def build(self, x: flow.Tensor, y: flow.Tensor) -> flow.Tensor:
        loss = _loss(self.m, x, y)
        loss.backward()
        nn.utils.clip_grad_norm_(self.m.to(nn.Module).parameters(), 0.05)
        return loss


@pytest.mark.timeout(60)
def test_clip_grad_norm_inside_build() -> None:
    x, y = _data()
    (m1, o1), (m2, o2) = _model(), _model()
    graph = ClipInBuild(m2, o2)
    for _ in range(3):
        loss = _loss(m1, x, y)
        loss.backward()
        nn.utils.clip_grad_norm_(m1.parameters(), 0.05)
        o1.step()
        o1.zero_grad()
        assert_array_equal(graph(x, y).numpy(), loss.numpy())
        _same(m1, m2)


class Branchy(nn.Graph):
    def __init__(self) -> None:
        super().__init__()
        self.m = nn.Linear(4, 2)

    def build(self, x: flow.Tensor) -> flow.Tensor:
        if x.sum() > 0:  # control flow on data: not traceable
            return self.m(x)
        return x


def test_control_flow_on_data_is_a_clear_error() -> None:
    with pytest.raises(DataDependentError, match="control flow") as info:
        Branchy()(flow.ones(3, 4))
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, ValueError)


class DropoutGraph(nn.Graph):
    def __init__(self, m: nn.Module) -> None:
        super().__init__()
        self.m = m

    def build(self, x: flow.Tensor) -> flow.Tensor:
        return self.m(x)


def test_random_ops_replay_with_eager_bits() -> None:
    # Each replay draws the generator's next numbers, as the eager calls do.
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    graph = DropoutGraph(m)
    x = _data()[0]
    flow.manual_seed(3)
    eager = [m(x).numpy() for _ in range(3)]
    flow.manual_seed(3)
    for want in eager:
        assert_array_equal(graph(x).numpy(), want)
    assert graph.plans[0] is not None and graph._replays == 2
    assert not (eager[1] == eager[2]).all()


def test_random_leaves_that_require_grad_run_eagerly() -> None:
    plan, out = trace_function(lambda x: x + flow.rand(2, requires_grad=True), (flow.ones(2),))
    assert plan is None and out.shape == (2,)


def test_state_dict_round_trip_and_repr() -> None:
    x, y = _data()
    m, o = _model()
    graph = TrainGraph(m, o)
    graph(x, y)
    state = graph.state_dict()
    assert set(state) == {"m", "optimizer_0"}
    m2, o2 = _model()
    other = TrainGraph(m2, o2)
    other.load_state_dict(state)
    _same(m, m2)
    assert_array_equal(other(x, y).numpy(), graph(x, y).numpy())
    text = repr(graph)
    assert text.startswith("(GRAPH:") and "(MODULE:m:Sequential" in text
    assert "(OPTIMIZER:optimizer_0:SGD)" in text


def test_config_switches_and_blocks() -> None:
    m, o = _model()
    graph = TrainGraph(m, o)
    graph.config.enable_amp(True)
    graph.config.allow_fuse_add_to_output(True)
    assert "enable_amp(ignored on CPU)" in repr(graph.config)
    with pytest.raises(AttributeError):
        graph.config.no_such_switch(True)
    with pytest.raises(ValueError):
        graph.config.set_gradient_accumulation_steps(0)
    assert graph.m.to(nn.Module) is m
    assert isinstance(graph.m.to(GraphModule), GraphModule)
    graph.m.to(GraphModule).set_stage(0)
    assert graph.m.config.stage_id == 0
    with pytest.raises(NotImplementedError, match="build"):
        nn.Graph()()


@pytest.mark.timeout(60)
def test_activation_checkpointing_gives_the_same_bits() -> None:
    x, y = _data()
    (m1, o1), (m2, o2) = _model(), _model()
    graph = TrainGraph(m2, o2)
    graph.m.to(GraphModule).activation_checkpointing = True
    for _ in range(3):
        assert_array_equal(graph(x, y).numpy(), _eager(m1, o1, x, y).numpy())
        _same(m1, m2)


class _Counted(nn.Module):
    """A block whose forward notes, per call, whether autograd was recording (a recomputation
    runs in backward with it on; the checkpointed forward runs without)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 64), nn.Linear(64, 4)
        self.calls: list[bool] = []

    def forward(self, x: flow.Tensor) -> flow.Tensor:
        self.calls.append(flow.is_grad_enabled())
        return self.b(flow.relu(self.a(x)))


def _checkpointed(on: bool) -> tuple[TrainGraph, _Counted]:
    flow.manual_seed(0)
    block = _Counted()
    m = nn.Sequential(block, nn.Linear(4, 2))
    graph = TrainGraph(m, flow.optim.SGD(m.parameters(), lr=0.1))
    graph.m[0].to(GraphModule).activation_checkpointing = on
    return graph, block


def _kept_for_backward(plan: Plan) -> list[tuple[int, ...]]:
    """The shapes of the slots a plan makes before its backward and still holds when the
    backward starts: the activations kept for it."""
    steps, release, start = plan.steps, plan.release, plan.backward_at
    made: dict[int, int] = {}
    for index, (_, _args, out, _opaque) in enumerate(steps):
        for slot in out if isinstance(out, tuple) else (out,):
            made.setdefault(slot, index)
    freed = {slot: index for index, slots in enumerate(release) for slot in slots}
    return [tuple(plan.meta[s][2]) for s, index in made.items()
            if s >= 0 and index < start and freed.get(s, len(steps)) >= start]


@pytest.mark.timeout(60)
def test_activation_checkpointing_recomputes_in_backward() -> None:
    x, y = _data(8)
    graph, block = _checkpointed(True)
    graph(x, y)  # traced: the forward without autograd, then its recomputation in backward
    assert block.calls == [False, True]
    graph(x, y)  # replayed: the forward's kernels from the plan, the recomputation again
    graph(x, y)
    assert block.calls == [False, True, True, True]
    plain, counted = _checkpointed(False)
    plain(x, y), plain(x, y)
    assert counted.calls == [True]  # the control: once, traced, never recomputed


@pytest.mark.timeout(60)
def test_activation_checkpointing_keeps_no_activation_of_the_block() -> None:
    # The block's hidden layer (64 wide) is what checkpointing drops: its two activations
    # (before and after the ReLU) are kept for backward without it, and none is with it.
    x, y = _data(8)
    kept = {}
    for on in (False, True):
        graph, _ = _checkpointed(on)
        graph(x, y)
        kept[on] = _kept_for_backward(graph.plans[0])
    assert kept[False].count((8, 64)) == 2, kept[False]
    assert (8, 64) not in kept[True], kept[True]
    assert len(kept[True]) == len(kept[False]) - 2


def test_trace_function_replays_with_new_inputs_and_state() -> None:
    w = flow.ones(3)
    plan, out = trace_function(lambda x: (x * w).sum(), (flow.ones(3),), state=(w,))
    assert out.item() == 3.0 and plan is not None
    w.fill_(2.0)
    assert plan.run((flow.full((3,), 2.0),)).item() == 12.0


def _global_case(sbp_w: object) -> None:
    placement = flow.placement("cpu", list(range(SIZE)))
    rows = 2 * SIZE
    x, y = _data(rows)
    gx, gy = (t.to_global(placement, flow.sbp.broadcast).to_global(placement, flow.sbp.split(0))
              for t in (x, y))

    def make() -> tuple[nn.Module, flow.optim.Optimizer]:
        m, _ = _model()
        m.to_global(placement, flow.sbp.broadcast)  # one value, then its layouts
        m.to_global(placement, lambda name, t: sbp_w if name.endswith("0.weight")
                    else flow.sbp.broadcast)
        return m, flow.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    (m1, o1), (m2, o2) = make(), make()
    graph = TrainGraph(m2, o2)
    for _ in range(3):
        assert_array_equal(graph(gx, gy).numpy(), _eager(m1, o1, gx, gy).numpy())
        _same(m1, m2)
    assert graph._replays == 2


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_global_data_parallel_graph_gives_the_eager_bits() -> None:
    _global_case(flow.sbp.broadcast)


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_global_model_parallel_graph_gives_the_eager_bits() -> None:
    _global_case(flow.sbp.split(0))


@pytest.mark.mpi(min_size=2)
@pytest.mark.timeout(120)
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_zero_stage1_shards_the_optimizer_state_with_the_same_bits(optimizer: str) -> None:
    from mpiflow.nn.graph.zero import state_bytes

    placement = flow.placement("cpu", list(range(SIZE)))
    x, y = (t.to_global(placement, flow.sbp.broadcast).to_global(placement, flow.sbp.split(0))
            for t in _data(2 * SIZE))

    def make() -> tuple[nn.Module, flow.optim.Optimizer]:
        m, _ = _model()
        m.to_global(placement, flow.sbp.broadcast)
        if optimizer == "sgd":
            return m, flow.optim.SGD([{"params": list(m.parameters()),
                                       "clip_grad_max_norm": 0.5}], lr=0.1, momentum=0.9)
        return m, flow.optim.Adam(m.parameters(), lr=0.01)

    (m1, o1), (m2, o2) = make(), make()
    graph = TrainGraph(m2, o2)
    graph.config.enable_zero(True, stage=1, shard_min_size=1)
    for _ in range(3):
        assert_array_equal(graph(x, y).numpy(), _eager(m1, o1, x, y).numpy())
        _same(m1, m2)
    whole, sharded = state_bytes(o1), state_bytes(o2)
    assert sharded < whole * (1.0 / SIZE + 0.25), (sharded, whole)


def test_values_computed_outside_the_engine_are_not_replayed() -> None:
    # A view made on the arrays (not by an op) cannot be replayed: the graph runs eagerly.
    def fn(x: flow.Tensor) -> flow.Tensor:
        y = x * 2
        return flow.Tensor(y._data.reshape(-1)) + 1

    plan, out = trace_function(fn, (flow.ones(2, 2),))
    assert plan is None
    assert out.tolist() == [3.0] * 4
