"""OneFlow's nn.Graph tests (python/oneflow/test/graph/), on mpiflow: see README.md's table.

Graph ports compare the graph with the eager program, as OneFlow's do; mpiflow's graphs replay
the eager kernels, so where OneFlow asserts ``allclose`` the values here are also equal.
"""

from __future__ import annotations

import numpy
import pytest
from oneflow_case import RANK, SIZE, exactly

import mpiflow as flow
from mpiflow.nn.graph import Block, GraphModule

# -- test_graph_linear_train.py -----------------------------------------------------------------
X8 = [[-0.94630778, -0.83378579, -0.87060891], [2.0289922, -0.28708987, -2.18369248],
      [0.35217619, -0.67095644, -1.58943879], [0.08086036, -1.81075924, 1.20752494],
      [0.8901075, -0.49976737, -1.07153746], [-0.44872912, -1.07275683, 0.06256855],
      [-0.22556897, 0.74798368, 0.90416439], [0.48339456, -2.32742195, -0.59321527]]


def _linear_sgd(bias: float) -> tuple[flow.nn.Linear, flow.optim.SGD]:
    linear = flow.nn.Linear(3, 8).to(flow.device("cpu"))
    flow.nn.init.constant_(linear.weight, 2.068758)
    flow.nn.init.constant_(linear.bias, bias)
    return linear, flow.optim.SGD(linear.parameters(), lr=0.001, momentum=0.9)


@exactly(1)
def test_linear_train_graph() -> None:
    x = flow.tensor(X8, dtype=flow.float32, device="cpu", requires_grad=False)
    linear, sgd = _linear_sgd(0.23)
    module_checks = []
    for _ in range(3):
        out = linear(x).sum()
        out.backward()
        sgd.step()
        sgd.zero_grad()
        module_checks.append((out.numpy(), linear.weight.numpy().copy()))  # (shares memory)

    graph_linear, graph_sgd = _linear_sgd(0.23)

    class LinearTrainGraph(flow.nn.Graph):
        def __init__(self) -> None:
            super().__init__()
            self.linear = graph_linear
            self.add_optimizer(graph_sgd)

        def build(self, x: flow.Tensor) -> flow.Tensor:
            out = self.linear(x).sum()
            out.backward()
            return out

    g = LinearTrainGraph()
    for want_out, want_weight in module_checks:
        out = g(x)
        assert numpy.array_equal(want_out, out.numpy())
        assert numpy.array_equal(want_weight, g.linear.weight.origin.numpy())


# -- test_graph_grad_acc.py ---------------------------------------------------------------------
@exactly(1)
def test_grad_acc_graph() -> None:
    x = flow.tensor(X8, device="cpu", requires_grad=False)
    eager_linear, eager_sgd = _linear_sgd(1.23)
    eager_out = []
    for i in range(12):
        index = (i % 4) * 2
        out = eager_linear(x[index:index + 2]).sum()
        out.backward()
        if (i + 1) % 4 == 0:
            eager_sgd.step()
            eager_sgd.zero_grad()
        eager_out.append(out.numpy())

    graph_linear, graph_sgd = _linear_sgd(1.23)

    class LinearTrainGraph(flow.nn.Graph):
        def __init__(self) -> None:
            super().__init__()
            self.linear = graph_linear
            self.add_optimizer(graph_sgd)
            self.config.set_gradient_accumulation_steps(4)

        def build(self, x: flow.Tensor) -> flow.Tensor:
            out = self.linear(x).sum()
            out.backward()
            return out

    g = LinearTrainGraph()
    graph_out = [g(x).numpy() for _ in range(3)]
    # OneFlow prints both and asserts nothing (its checks are commented out). Here: one
    # output per micro-batch, the first step's outputs are the eager ones (same weights).
    assert all(o.shape == (4,) for o in graph_out)
    numpy.testing.assert_array_equal(graph_out[0], numpy.array(eager_out[:4]))


# -- test_graph_clip_grad_norm.py ---------------------------------------------------------------
class ClipModule1(flow.nn.Module):
    def __init__(self, param: flow.Tensor) -> None:
        super().__init__()
        self.param = flow.nn.Parameter(param)

    def forward(self, input: flow.Tensor) -> flow.Tensor:
        return flow.nn.functional.gelu(flow.matmul(input, self.param.T))


class ClipModule2(flow.nn.Module):
    def __init__(self, param: flow.Tensor) -> None:
        super().__init__()
        self.param = flow.nn.Parameter(param)

    def forward(self, input: flow.Tensor, target: flow.Tensor) -> flow.Tensor:
        x = flow.matmul(input, self.param)
        return flow.nn.functional.cross_entropy(x, target, reduction="none").mean()


def _clip_optimizer(params: list[flow.Tensor], norm_type: float, max_norm: float
                    ) -> flow.optim.SGD:
    return flow.optim.SGD([{"params": params, "lr": 1.0, "momentum": 0.0,
                            "clip_grad_max_norm": max_norm, "clip_grad_norm_type": norm_type}])


class ClipGraph(flow.nn.Graph):
    def __init__(self, m1: flow.nn.Module, m2: flow.nn.Module, opt: flow.optim.SGD,
                 acc: int) -> None:
        super().__init__()
        self.m1 = m1
        self.m2 = m2
        if m1.param.is_global and m2.param.is_global and m1.param.placement != m2.param.placement:
            self.m1.to(GraphModule).set_stage(0)
            self.m2.to(GraphModule).set_stage(1)
        self.add_optimizer(opt)
        if acc > 1:
            self.config.set_gradient_accumulation_steps(acc)

    def build(self, input: flow.Tensor, target: flow.Tensor) -> flow.Tensor:
        x = self.m1(input)
        if x.is_global and target.is_global and x.placement != target.placement:
            x = x.to_global(placement=target.placement)
        loss = self.m2(x, target)
        loss.backward()
        return loss


def _clip_layouts(modes: list[str]) -> tuple[object, object, object, object, object, object]:
    """OneFlow's TensorGenerator: (placement1, placement2, input/target sbp, param sbp) for
    the parallel modes ("DP": split the batch; "MP": split the parameters; "PP": the two
    modules on the two halves of the ranks; two modes without PP: a 2 x n/2 mesh)."""
    ranks = numpy.arange(SIZE)
    b, s0 = flow.sbp.broadcast, flow.sbp.split(0)
    data = [s0 if m == "DP" else b for m in modes if m != "PP"]
    params = [s0 if m == "MP" else b for m in modes if m != "PP"]
    if "PP" in modes:
        halves = ranks.reshape(2, -1)
        p1, p2 = flow.placement("cpu", halves[0].tolist()), flow.placement("cpu",
                                                                             halves[1].tolist())
    elif len(modes) > 1:
        p1 = p2 = flow.placement("cpu", ranks.reshape(2, -1).tolist())
    else:
        p1 = p2 = flow.placement("cpu", ranks.tolist())
    return p1, p2, data or [b], data or [b], params or [b], params or [b]


def _compare_clip_with_eager(batch_size: int = 8, acc: int = 1, norm_type: float = 2.0,
                             max_norm: float = 1.0, parallel_mode: str | list[str] | None = None,
                             rtol: float = 1e-3, atol: float = 1e-5) -> None:
    placement = flow.placement("cpu", list(range(SIZE)))
    b = flow.sbp.broadcast
    flow.manual_seed(0)
    input = flow.randn(batch_size, 10).to_global(placement, b)
    param1 = flow.randn(8, 10).to_global(placement, b)
    param2 = flow.randn(8, 10).to_global(placement, b)
    target = flow.randint(0, 10, (batch_size,)).to_global(placement, b)

    m1, m2 = ClipModule1(param1.to_local().clone()), ClipModule2(param2.to_local().clone())
    opt = _clip_optimizer([m1.param, m2.param], norm_type, max_norm)
    loss = m2(m1(input.to_local()), target.to_local())
    opt.zero_grad()
    loss.backward()
    opt.clip_grad()
    opt.step()
    loss_a, w1_a, w2_a = loss.numpy(), m1.param.numpy(), m2.param.numpy()

    modes = [] if parallel_mode is None else (
        [parallel_mode] if isinstance(parallel_mode, str) else list(parallel_mode))
    p1, p2, in_sbp, tgt_sbp, w1_sbp, w2_sbp = _clip_layouts(modes)
    g1 = ClipModule1(param1.to_global(p1, w1_sbp))
    g2 = ClipModule2(param2.to_global(p2, w2_sbp))
    graph = ClipGraph(g1, g2, _clip_optimizer([g1.param, g2.param], norm_type, max_norm), acc)
    graph_loss = graph(input.to_global(p1, in_sbp), target.to_global(p2, tgt_sbp))
    if acc > 1 and graph_loss.numel() == acc:
        graph_loss = graph_loss.mean()
    loss_b = graph_loss.to_global(placement, b).to_local().numpy()
    w1_b = graph.m1.to(flow.nn.Module).param.to_global(placement, b).to_local().numpy()
    w2_b = graph.m2.to(flow.nn.Module).param.to_global(placement, b).to_local().numpy()
    numpy.testing.assert_allclose(loss_b, loss_a, rtol=rtol, atol=atol)
    numpy.testing.assert_allclose(w1_b, w1_a, rtol=rtol, atol=atol)
    numpy.testing.assert_allclose(w2_b, w2_a, rtol=rtol, atol=atol)


@exactly(1)
@pytest.mark.parametrize("acc", [1, 8])
def test_clip_grad_norm_local_and_acc(acc: int) -> None:
    _compare_clip_with_eager(acc=acc)


@exactly(1)
def test_clip_grad_norm_inf_local_and_acc() -> None:
    _compare_clip_with_eager(norm_type=float("inf"))
    _compare_clip_with_eager(batch_size=8, acc=8, norm_type=-float("inf"), atol=1e-6)


@exactly(2)
@pytest.mark.parametrize("mode,acc", [("DP", 1), ("MP", 1), ("PP", 1), ("PP", 8)])
def test_clip_grad_norm_dp_mp_pp(mode: str, acc: int) -> None:
    _compare_clip_with_eager(parallel_mode=mode, acc=acc)


@exactly(2)
def test_clip_grad_norm_inf_dp_mp_pp() -> None:
    _compare_clip_with_eager(norm_type=float("inf"), max_norm=2.0, parallel_mode="DP",
                             atol=1e-6)
    _compare_clip_with_eager(norm_type=-float("inf"), max_norm=3.0, parallel_mode="MP",
                             atol=1e-6)
    _compare_clip_with_eager(norm_type=float("inf"), max_norm=4.0, parallel_mode="PP",
                             atol=1e-6)
    _compare_clip_with_eager(acc=8, norm_type=-float("inf"), max_norm=5.0, parallel_mode="PP",
                             atol=1e-6)


@exactly(4)
@pytest.mark.parametrize("modes,acc", [(["DP", "MP"], 1), (["MP", "PP"], 1), (["DP", "PP"], 1),
                                       (["MP", "PP"], 8), (["DP", "PP"], 4)])
def test_clip_grad_norm_2d(modes: list[str], acc: int) -> None:
    _compare_clip_with_eager(parallel_mode=modes, acc=acc)


@exactly(4)
def test_clip_grad_norm_inf_2d() -> None:
    for modes, acc, norm, max_norm in [(["DP", "MP"], 1, float("inf"), 1.1),
                                       (["MP", "PP"], 1, -float("inf"), 1.2),
                                       (["DP", "PP"], 1, float("inf"), 1.3),
                                       (["MP", "PP"], 8, float("inf"), 2.1),
                                       (["DP", "PP"], 4, -float("inf"), 2.2)]:
        _compare_clip_with_eager(acc=acc, norm_type=norm, max_norm=max_norm,
                                 parallel_mode=modes, atol=1e-6)


# -- test_graph_lr_scheduler.py -----------------------------------------------------------------
class LrModule(flow.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.param = flow.nn.Parameter(flow.ones(3, 4))

    def forward(self, input: flow.Tensor) -> flow.Tensor:
        return self.param + input


class LrGraph(flow.nn.Graph):
    def __init__(self, module: flow.nn.Module, optimizer: flow.optim.SGD, lr_sch: object) -> None:
        super().__init__()
        self.m = module
        self.add_optimizer(optimizer, lr_sch=lr_sch)

    def build(self, input: flow.Tensor) -> flow.Tensor:
        out = self.m(input)
        out.mean().backward()
        return out


def _rand_input() -> flow.Tensor:
    return flow.Tensor(numpy.random.rand(3, 4).astype(numpy.float32))


def _compare_lr_with_eager(scheduler: type, base_lr: float, iters: int, rtol: float = 1e-5,
                           atol: float = 1e-8, **kwargs: object) -> None:
    # OneFlow reads the graph's learning rates from its debug log (train_step2lr.csv); here
    # the rate each step used is read from the optimizer. OneFlow's graph compiles its own
    # copy of the scheduler, so its eager half reuses the scheduler object; mpiflow's graph
    # steps the scheduler itself, so the eager half gets a fresh one with the same arguments.
    module = LrModule()
    optimizer = flow.optim.SGD([module.param], lr=base_lr)
    graph = LrGraph(module, optimizer, scheduler(optimizer, **kwargs))
    lrs = []
    for _ in range(iters + 1):
        lrs.append(optimizer.param_groups[0]["lr"])
        graph(_rand_input()).numpy()
    eager_module = LrModule()
    eager_opt = flow.optim.SGD([eager_module.param], lr=base_lr)
    eager_sch = scheduler(eager_opt, **kwargs)
    eager_lrs = [eager_sch.get_last_lr()[0]]
    for _ in range(iters):
        eager_module(_rand_input()).numpy()
        eager_opt.step()
        eager_sch.step()
        eager_lrs.append(eager_sch.get_last_lr()[0])
    numpy.testing.assert_allclose(lrs[:iters], eager_lrs[:iters], rtol=rtol, atol=atol)


@exactly(1)
def test_step_lr() -> None:
    _compare_lr_with_eager(flow.optim.lr_scheduler.StepLR, 0.1, 30, step_size=10, gamma=0.1)


@exactly(1)
def test_multi_step_lr() -> None:
    _compare_lr_with_eager(flow.optim.lr_scheduler.MultiStepLR, 0.1, 20, milestones=[5, 15],
                           gamma=0.2)


@exactly(1)
def test_exponential_lr() -> None:
    _compare_lr_with_eager(flow.optim.lr_scheduler.ExponentialLR, 0.1, 10, gamma=0.5,
                           atol=1e-5)


@exactly(1)
def test_cosine_annealing_lr() -> None:
    _compare_lr_with_eager(flow.optim.lr_scheduler.CosineAnnealingLR, 0.1, 20, T_max=10,
                           eta_min=1e-4, atol=1e-5)


# -- test_graph_optimizer.py --------------------------------------------------------------------
class ParaModule(flow.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.para0 = flow.nn.Parameter(flow.Tensor(10, 4))

    def forward(self, x: flow.Tensor) -> flow.Tensor:
        return flow.matmul(x, self.para0)


@exactly(1)
@pytest.mark.parametrize("clip", [False, True])
def test_optimizer(clip: bool) -> None:
    # OneFlow compiles with the private g._compile(x) and prints the job proto; here the
    # graph is called, and its repr and result checked.
    m = ParaModule()
    flow.nn.init.uniform_(m.para0, a=-1.0, b=1.0)
    group: dict[str, object] = {"params": [m.para0], "lr": 0.1, "momentum": 0.2,
                                "weight_decay": 0.7}
    if clip:
        group.update(clip_grad_max_norm=1.0, clip_grad_norm_type=2.0)
    sgd0 = flow.optim.SGD([group])

    class CustomGraph0(flow.nn.Graph):
        def __init__(self) -> None:
            super().__init__()
            self.m = m
            self.add_optimizer(sgd0)

        def build(self, x: flow.Tensor) -> flow.Tensor:
            out = self.m(x)
            out.sum().backward()
            return out

    g = CustomGraph0()
    x = flow.Tensor(4, 10)
    flow.nn.init.uniform_(x, a=-1.0, b=1.0)
    before = m.para0.numpy().copy()
    z = g(x)
    numpy.testing.assert_allclose(z.numpy(), x.numpy() @ before, rtol=1e-5)
    assert "(OPTIMIZER:optimizer_0:SGD)" in repr(g) and g.config.training


# -- test_graph.py ------------------------------------------------------------------------------
class SubModule(flow.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc0 = flow.nn.Linear(100, 36)  # OneFlow: Conv2d(1, 1, 5) (mpiflow has no conv)
        self.relu = flow.nn.ReLU()

    def forward(self, x: flow.Tensor) -> flow.Tensor:
        return self.relu(self.fc0(x))


class CustomModule(flow.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = SubModule()
        self.fc1 = flow.nn.Linear(36, 4)
        self.register_buffer("dummy_buff", flow.Tensor(1, 4))

    def forward(self, x: flow.Tensor) -> flow.Tensor:
        x = self.layer(flow.flatten(x, 1))
        return self.fc1(x) + self.dummy_buff


@exactly(1)
def test_add_nested_module() -> None:
    x = flow.Tensor(1, 1, 10, 10)
    flow.nn.init.uniform_(x, a=-1.0, b=1.0)
    m = CustomModule()
    flow.nn.init.uniform_(m.dummy_buff, a=-1.0, b=1.0)
    y = m(x)

    class CustomGraphNestedModule(flow.nn.Graph):
        def __init__(self) -> None:
            super().__init__()
            self.m = m

        def build(self, x: flow.Tensor) -> flow.Tensor:
            return self.m(x)

    g = CustomGraphNestedModule()
    assert isinstance(g.m, Block) and g.m.type == "MODULE" and g.m.name == "m"
    assert isinstance(g.m.dummy_buff, Block) and g.m.dummy_buff.type == "BUFFER"
    assert isinstance(g.m.layer.fc0, Block) and g.m.layer.fc0.name == "fc0"
    assert g.m.layer.fc0.name_prefix == "m.layer."
    assert isinstance(g.m.layer.fc0.weight, Block) and g.m.layer.fc0.weight.type == "PARAMETER"
    assert g.m.layer.fc0.in_features == 100  # OneFlow: conv1.kernel_size == (5, 5)
    z = g.build(x)
    assert numpy.array_equal(y.numpy(), z.numpy())
    assert numpy.array_equal(y.numpy(), g(x).numpy())


@exactly(1)
def test_graph_config() -> None:
    class CustomGraphConfig(flow.nn.Graph):
        def __init__(self) -> None:
            super().__init__()
            self.m = CustomModule()
            self.config.enable_auto_mixed_precision(True)

        def build(self, x: flow.Tensor) -> flow.Tensor:
            return self.m(x)

    g = CustomGraphConfig()
    assert g.config.training is False
    g.config.enable_fuse_add_to_output(True)
    g.config.enable_fuse_add_to_output(False)
    assert len(g._state()) == 5
    assert "CONFIG" in repr(g)


@exactly(1)
def test_graph_name() -> None:
    class ACustomGraph(flow.nn.Graph):
        def build(self, x: flow.Tensor) -> flow.Tensor:
            return x

    class BCustomGraph(flow.nn.Graph):
        def build(self, x: flow.Tensor) -> flow.Tensor:
            return x

    class CBCustomGraph(BCustomGraph):
        pass

    def create_graph(cnt: int) -> None:
        assert ACustomGraph().name == f"ACustomGraph_{cnt}"
        assert BCustomGraph().name == f"BCustomGraph_{cnt}"
        assert CBCustomGraph().name == f"CBCustomGraph_{cnt}"

    for _ in range(2):
        flow.nn.Graph._child_init_cnt.clear()
        for i in range(3):
            create_graph(i)


# -- test_graph_activation_checkpoint.py (the idea: same results with checkpointing) -------------
@pytest.mark.mpi
def test_activation_checkpointing_trains_as_eager() -> None:
    placement = flow.placement("cpu", list(range(SIZE)))
    rng = numpy.random.default_rng(RANK * 0 + 1)
    data = flow.tensor(rng.standard_normal((2 * SIZE, 6)).astype(numpy.float32))
    x = data.to_global(placement, flow.sbp.broadcast).to_global(placement, flow.sbp.split(0))

    def make() -> tuple[flow.nn.Module, flow.optim.SGD]:
        flow.manual_seed(1)
        m = flow.nn.Sequential(flow.nn.Linear(6, 6), flow.nn.ReLU(), flow.nn.Linear(6, 1))
        m.to_global(placement, flow.sbp.broadcast)
        return m, flow.optim.SGD(m.parameters(), lr=0.1)

    (m1, o1), (m2, o2) = make(), make()

    class CheckpointGraph(flow.nn.Graph):
        def __init__(self) -> None:
            super().__init__()
            self.m = m2
            self.m[0].to(GraphModule).activation_checkpointing = True
            self.add_optimizer(o2)

        def build(self, x: flow.Tensor) -> flow.Tensor:
            loss = self.m(x).sum()
            loss.backward()
            return loss

    g = CheckpointGraph()
    for _ in range(3):
        loss = m1(x).sum()
        loss.backward()
        o1.step()
        o1.zero_grad()
        assert numpy.array_equal(g(x).numpy(), loss.numpy())
    for p, q in zip(m1.parameters(), m2.parameters()):
        assert numpy.array_equal(p.numpy(), q.numpy())
