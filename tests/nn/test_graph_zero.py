"""ZeRO stages 2 and 3 of nn.Graph (mpiflow/nn/graph/zero.py, zero3.py): the gradients of
data-parallel parameters reduce-scattered into their shards (and with stage 3 the parameters
stored as their shards, gathered where read); the bits of stage 0 (no ZeRO) where the two
reductions add in the same order (2 ranks; any rank count with deterministic algorithms),
rounding-close otherwise, and stage 3 always stage 2's bits; each rank holding about 1/N of the
gradients (and of the parameters between stage-3 calls). The hidden layer's 3N+1 rows split
unevenly at every rank count."""

from __future__ import annotations

import copy
import gc
import pickle
import tracemalloc

import numpy
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import mpiflow as flow
from mpiflow import nn
from mpiflow.nn.graph import GraphModule
from mpiflow.nn.graph.zero3 import is_materialized, is_sharded

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


def _run(stage: int, steps: int, optimizer: str, clip: bool
         ) -> tuple[list[numpy.ndarray], list[numpy.ndarray], tuple[int, int]]:
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
    held = (graph.grad_bytes, graph.param_bytes)  # before reading the parameters gathers them
    return losses, [p.to_local().numpy() for p in m.parameters()], held


@pytest.mark.mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("steps", [1, 2])
@pytest.mark.parametrize("stage", [2, 3])
def test_stages_2_and_3_give_stage0_bits(stage: int, optimizer: str, steps: int) -> None:
    deterministic = SIZE > 2  # MPI may add 3-4 ranks' values in another order per collective
    flow.use_deterministic_algorithms(deterministic)
    try:
        want_losses, want_params, whole = _run(0, steps, optimizer, False)
        got_losses, got_params, sharded = _run(stage, steps, optimizer, False)
    finally:
        flow.use_deterministic_algorithms(False)
    for got, want in zip(got_losses + got_params, want_losses + want_params):
        assert_array_equal(got, want)
    # (gradient, parameter) bytes held: every parameter is sharded (shard_min_size=1), rows
    # of 1/N each; stage 3 holds the parameters' rows only, stage 2 them and the whole.
    if SIZE > 1:
        assert sharded[0] <= whole[0] * (1 / SIZE + 0.2), (sharded, whole)
        extra = 0 if stage == 3 else whole[1]
        assert extra < sharded[1] <= extra + whole[1] * (1 / SIZE + 0.2), (sharded, whole)
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
        # Stage 3: the same reduce-scatter, clipping and update as stage 2, so its bits.
        third_losses, third_params, _ = _run(3, 2, "sgd", clip)
        for got, want in zip(third_losses + third_params, got_losses + got_params):
            assert_array_equal(got, want)


def test_enable_zero_stages() -> None:
    config = nn.Graph().config
    config.enable_zero(True, stage=3)
    assert config.zero_stage == 3
    config.enable_zero(False, stage=3)
    assert config.zero_stage == 0
    with pytest.raises(ValueError, match="1, 2 or 3"):
        config.enable_zero(True, stage=4)


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


class _Mixed(nn.Module):
    """A shardable weight (B, 6(2N+1) elements), a bias under shard_min_size, a model-parallel
    (S(0)) Linear and a small B parameter: only the first is sharded."""

    def __init__(self, placement: flow.placement) -> None:
        super().__init__()
        self.dp = nn.Linear(6, 2 * SIZE + 1).to_global(placement, flow.sbp.broadcast)
        # Each rank's (2, 2N+1) weight is its shard of the (2N, 2N+1) global one.
        self.mp = nn.Linear(2 * SIZE + 1, 2).to_global(placement, flow.sbp.split(0))
        self.scale = nn.Parameter(flow.ones(2 * SIZE).to_global(placement, flow.sbp.broadcast))

    def forward(self, x: flow.Tensor) -> flow.Tensor:
        return self.mp(flow.relu(self.dp(x))).to_global(sbp=flow.sbp.broadcast) * self.scale


class _Eval(nn.Graph):
    def __init__(self, m: nn.Module) -> None:
        super().__init__()
        self.m = m

    def build(self, x: flow.Tensor) -> flow.Tensor:
        return self.m(x)


def _run_mixed(stage: int) -> dict[str, numpy.ndarray]:
    placement = flow.placement("cpu", list(range(SIZE)))
    rng = numpy.random.default_rng(5)
    x, y = (flow.tensor(rng.standard_normal((4 * SIZE, n)).astype(numpy.float32))
            .to_global(placement, flow.sbp.broadcast).to_global(placement, flow.sbp.split(0))
            for n in (6, 2 * SIZE))
    flow.manual_seed(1)
    m = _Mixed(placement)
    graph = Train(m, flow.optim.Adam(m.parameters(), lr=0.01), 0, 1)
    graph.m.dp.to(GraphModule).activation_checkpointing = True
    if stage:
        graph.config.enable_zero(True, stage=stage, shard_min_size=6 * 3)
    out = {f"loss{i}": graph(x, y).to_local().numpy() for i in range(2)}
    weight = m.dp.weight
    if stage == 3:
        assert is_sharded(weight) == (SIZE > 1)
        assert not any(is_sharded(p) for p in (m.dp.bias, m.mp.weight, m.mp.bias, m.scale))
        assert is_materialized(weight) == (SIZE == 1)  # let go after the update
        # Its dtype and repr read no value: no gather (a rank could print alone).
        assert weight.dtype == flow.float32 and "tensor(" in repr(weight)
        assert is_materialized(weight) == (SIZE == 1)
        assert all(plan.frees is not None for plan in graph.plans) == (SIZE > 1)
    out["held"] = numpy.array(graph.param_bytes)
    # Eager views after a call: the module, its state_dict, the graph's, a second graph's.
    out["eager"] = m(x).to_local().numpy()
    out["eval"] = _Eval(m)(x).to_local().numpy()
    assert_array_equal(out["eval"], out["eager"])
    for key, value in m.state_dict().items():
        out[key] = value.to_local().numpy().copy()
    for key, value in graph.state_dict()["m"].items():
        assert_array_equal(value.to_local().numpy(), out[key])
    # Copies (deepcopy, pickle: flow.save) are whole parameters of the parameter's own class.
    for copied in (copy.deepcopy(m).dp.weight, pickle.loads(pickle.dumps(weight))):
        assert type(copied) is nn.Parameter and not is_sharded(copied)
        assert_array_equal(copied.to_local().numpy(), out["dp.weight"])
    # Eager writes between calls reach the next call: an init, and load_state_dict.
    saved = {k: v.clone() for k, v in m.state_dict().items()}
    nn.init.constant_(m.dp.weight, 0.05)
    out["loss2"] = graph(x, y).to_local().numpy()
    m.load_state_dict(saved)
    out["loss3"] = graph(x, y).to_local().numpy()
    out["weight"] = weight.to_local().numpy()
    return out


@pytest.mark.mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("stage", [2, 3])
def test_mixed_parameters_checkpointing_and_eager_views(stage: int) -> None:
    flow.use_deterministic_algorithms(SIZE > 2)
    try:
        want = _run_mixed(0)
        got = _run_mixed(stage)
    finally:
        flow.use_deterministic_algorithms(False)
    held, whole = int(got.pop("held")), int(want.pop("held"))
    assert set(got) == set(want)
    for key in want:
        assert_array_equal(got[key], want[key], err_msg=key)
    if stage < 3:  # the parameters whole, and the shard's rows of the sharded weight
        assert held > whole or SIZE == 1
        return
    # Between calls only the sharded weight is down to its rows.
    rows = (2 * SIZE + 1) // SIZE + 1
    weight_bytes = 6 * (2 * SIZE + 1) * 4
    assert whole - weight_bytes < held <= whole - weight_bytes + 6 * rows * 4, (held, whole)


def _held_after_steps(stage: int) -> tuple[int, int, nn.Module, nn.Graph]:
    """Bytes numpy holds (tracemalloc) after 2 calls of a stage-``stage`` graph, beyond what it
    held before the model was made; and the model's parameter bytes."""
    placement = flow.placement("cpu", list(range(SIZE)))
    x = flow.ones(2 * SIZE, 64).to_global(placement, flow.sbp.split(0))
    y = flow.zeros(2 * SIZE, 64).to_global(placement, flow.sbp.split(0))
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    m = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64))
    m.to_global(placement, flow.sbp.broadcast)
    graph = Train(m, flow.optim.SGD(m.parameters(), lr=0.1), stage, 1)
    graph(x, y)
    graph(x, y)
    gc.collect()
    whole = sum(p.numel() * 4 for p in m.parameters())
    return tracemalloc.get_traced_memory()[0] - before, whole, m, graph


@pytest.mark.mpi(min_size=2)
@pytest.mark.timeout(60)
def test_stage3_lets_the_whole_parameters_go() -> None:
    tracemalloc.start()
    try:
        held2, whole, _, _ = _held_after_steps(2)
        held3, _, m, graph = _held_after_steps(3)
    finally:
        tracemalloc.stop()
    # Stage 2 keeps each whole parameter beside its shard; stage 3 the shard only.
    assert held2 - held3 >= 0.9 * whole, (held2, held3, whole)
    # In a replay each parameter's whole value goes after the step that last reads it: the
    # first layer's in the forward (backward reads a transposed view made there, a slot the
    # replay releases after its own last use).
    plan = graph.plans[0]
    freed = {id(f.args[0]): i for i, fs in enumerate(plan.frees) for f in fs}
    assert set(freed) == {id(p) for p in m.parameters()}
    assert freed[id(m[0].weight)] < plan.backward_at


class _Unreplayable(nn.Graph):
    """A build() with a random leaf that requires grad: traced, not replayed (eager calls)."""

    def __init__(self, m: nn.Module, stage: int) -> None:
        super().__init__()
        self.m = m
        self.add_optimizer(flow.optim.Adam(m.parameters(), lr=0.1))
        if stage:
            self.config.enable_zero(True, stage=stage, shard_min_size=1)

    def build(self, x: flow.Tensor) -> flow.Tensor:
        out = self.m(x)
        noise = flow.rand(*out.shape, placement=out.placement, sbp=out.sbp, requires_grad=True)
        loss = (out + noise * 0).sum()
        loss.backward()
        return loss


@pytest.mark.mpi
@pytest.mark.timeout(60)
def test_stage3_in_a_graph_run_eagerly_on_each_call() -> None:
    placement = flow.placement("cpu", list(range(SIZE)))
    x = flow.ones(4, 4).to_global(placement, flow.sbp.broadcast)
    results = []
    for stage in (0, 3):
        flow.manual_seed(0)
        m = nn.Linear(4, 2 * SIZE + 1).to_global(placement, flow.sbp.broadcast)
        graph = _Unreplayable(m, stage)
        losses = [graph(x).to_local().numpy() for _ in range(3)]
        assert graph.plans == [None]
        results.append(losses + [p.to_local().numpy() for p in m.parameters()])
    for got, want in zip(results[1], results[0]):
        assert_array_equal(got, want)


MESHES = {1: [[0]], 2: [[0, 1]], 3: [[0, 1, 2]], 4: [[0, 1], [2, 3]]}


def _run_2d(stage: int) -> tuple[list[numpy.ndarray], list[object]]:
    """A 2-D mesh (1 x N, or 2 x 2 at 4 ranks), a (B, B) and a (B, S(0)) Linear, the batch
    split over the mesh's data-parallel axis; 3 Adam steps at ZeRO ``stage``."""
    mesh = flow.placement("cpu", MESHES[SIZE])
    B, S0 = flow.sbp.broadcast, flow.sbp.split(0)
    flow.manual_seed(4)
    m = nn.Sequential(nn.Linear(6, 8).to_global(mesh, [B, B]), nn.ReLU(),
                      nn.Linear(8, 2).to_global(mesh, [B, S0]))  # rows: 2 per axis-1 rank
    data = [S0, B] if SIZE == 4 else [B, S0]
    rng = numpy.random.default_rng(9)
    outs = m[2].weight.shape[0]
    x, y = (flow.tensor(rng.standard_normal((12, n)).astype(numpy.float32))
            .to_global(mesh, [B, B]).to_global(mesh, data) for n in (6, outs))
    graph = Train(m, flow.optim.Adam(m.parameters(), lr=0.01), stage, 1)
    losses = [graph(x, y).to_local().numpy() for _ in range(3)]
    shards = [s.sbp for g in graph._optimizers[0][0].param_groups for s in g["params"]]
    return losses + [p.to_local().numpy() for p in m.parameters()], shards


@pytest.mark.mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("stage", [1, 2, 3])
def test_2d_mesh_parameters_shard_along_their_broadcast_axis(stage: int) -> None:
    flow.use_deterministic_algorithms(SIZE > 2)
    try:
        want, _ = _run_2d(0)
        got, shards = _run_2d(stage)
    finally:
        flow.use_deterministic_algorithms(False)
    for g, w in zip(got, want):
        assert_array_equal(g, w)
    B, S0 = flow.sbp.broadcast, flow.sbp.split(0)
    if SIZE == 4:  # 2 x 2: every parameter's first B axis becomes S(0), OneFlow's choice
        assert shards == [(S0, B), (S0, B), (S0, S0), (S0, S0)]
    elif SIZE > 1:  # 1 x N: axis 0 has one rank; the (B, S0) Linear has no B axis to shard
        assert shards == [(B, S0), (B, S0), (B, S0), (B, S0)]
