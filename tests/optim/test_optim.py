"""mpiflow.optim: SGD, Adam and AdamW against numpy implementations of PyTorch's algorithms
(several steps, every option), parameter groups, state dicts, global parameters, and the
learning-rate schedulers' sequences."""

from __future__ import annotations

import copy
import math

import numpy
import pytest
from numpy.testing import assert_allclose

import mpiflow as flow
import mpiflow.nn as nn
import mpiflow.optim as optim
from mpiflow.optim import lr_scheduler

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
ALL = flow.placement("cpu", list(range(SIZE)))
S0, B = flow.sbp.split(0), flow.sbp.broadcast
SHAPE = (3 * SIZE + 1, 3)
STEPS = 4


def grads(steps: int = STEPS, shape: tuple[int, ...] = SHAPE) -> list[numpy.ndarray]:
    rng = numpy.random.default_rng(1)
    return [rng.standard_normal(shape) for _ in range(steps)]


def start(shape: tuple[int, ...] = SHAPE) -> numpy.ndarray:
    return numpy.random.default_rng(0).standard_normal(shape)


# -- numpy references: PyTorch's single-tensor algorithms ----------------------------------------
def np_sgd(p: numpy.ndarray, gs: list[numpy.ndarray], lr: float, momentum: float = 0.0,
           dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
           maximize: bool = False) -> list[numpy.ndarray]:
    p, buf, out = p.copy(), None, []
    for g in gs:
        g = -g if maximize else g
        if weight_decay:
            g = g + weight_decay * p
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
        out.append(p)
    return out


def np_adam(p: numpy.ndarray, gs: list[numpy.ndarray], lr: float = 1e-3,
            betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
            weight_decay: float = 0.0, amsgrad: bool = False, maximize: bool = False,
            decoupled: bool = False) -> list[numpy.ndarray]:
    b1, b2 = betas
    p, m, v, vmax, out = p.copy(), 0.0, 0.0, 0.0, []
    for t, g in enumerate(gs, 1):
        g = -g if maximize else g
        if decoupled:
            p = p * (1 - lr * weight_decay)
        elif weight_decay:
            g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        vmax = numpy.maximum(vmax, v)
        denom = numpy.sqrt(vmax if amsgrad else v) / math.sqrt(1 - b2 ** t) + eps
        p = p - lr / (1 - b1 ** t) * m / denom
        out.append(p)
    return out


def run(make: object, p0: numpy.ndarray, gs: list[numpy.ndarray], placement: object = None,
        sbp: object = None) -> tuple[nn.Parameter, object, list[numpy.ndarray]]:
    """Steps of an optimizer on one parameter (local, or global with ``sbp``)."""
    def tensor(value: numpy.ndarray) -> flow.Tensor:
        if placement is None:
            return flow.tensor(value)
        return flow.tensor(value, placement=placement, sbp=sbp)

    p = nn.Parameter(tensor(p0))
    opt = make([p])  # type: ignore[operator]
    out = []
    for g in gs:
        p.grad = tensor(g)
        opt.step()
        out.append(p.numpy().copy())
    return p, opt, out


SGD_CASES = [
    {"lr": 0.1},
    {"lr": 0.1, "momentum": 0.9},
    {"lr": 0.05, "momentum": 0.8, "dampening": 0.3, "weight_decay": 0.01},
    {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.1},
    {"lr": 0.1, "momentum": 0.5, "maximize": True},
]
ADAM_CASES = [
    {},
    {"lr": 0.01, "betas": (0.8, 0.99), "eps": 1e-6},
    {"lr": 0.01, "weight_decay": 0.1},
    {"lr": 0.01, "amsgrad": True, "weight_decay": 0.05},
    {"lr": 0.01, "maximize": True},
]


@pytest.mark.mpi
@pytest.mark.parametrize("options", SGD_CASES)
def test_sgd_matches_pytorch_formulas(options: dict) -> None:
    p0, gs = start(), grads()
    _, _, got = run(lambda ps: optim.SGD(ps, **options), p0, gs)
    for step, (a, b) in enumerate(zip(got, np_sgd(p0, gs, **options))):
        assert_allclose(a, b, rtol=1e-12, atol=1e-14, err_msg=f"step {step}")


@pytest.mark.mpi
@pytest.mark.parametrize("options", ADAM_CASES)
def test_adam_and_adamw_match_pytorch_formulas(options: dict) -> None:
    p0, gs = start(), grads()
    _, _, got = run(lambda ps: optim.Adam(ps, **options), p0, gs)
    for a, b in zip(got, np_adam(p0, gs, **options)):
        assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    decoupled = dict(options, weight_decay=options.get("weight_decay", 0.01))
    _, _, got = run(lambda ps: optim.AdamW(ps, **decoupled), p0, gs)
    for a, b in zip(got, np_adam(p0, gs, **decoupled, decoupled=True)):
        assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    assert optim.AdamW([nn.Parameter(flow.zeros(1))]).defaults["weight_decay"] == 0.01


@pytest.mark.mpi
@pytest.mark.parametrize("sbp", [S0, B])
def test_global_parameters_keep_their_layout_and_match_local(sbp: object) -> None:
    p0, gs = start(), grads()
    for make, reference in [
        (lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
         np_sgd(p0, gs, 0.1, 0.9, nesterov=True)),
        (lambda ps: optim.Adam(ps, lr=0.01, amsgrad=True, weight_decay=0.1),
         np_adam(p0, gs, 0.01, amsgrad=True, weight_decay=0.1)),
    ]:
        p, opt, got = run(make, p0, gs, ALL, sbp)
        assert p.sbp == (sbp,) and p.is_leaf
        for value in opt.state[p].values():  # type: ignore[attr-defined]
            if isinstance(value, flow.Tensor):
                assert value.placement == ALL and value.sbp == (sbp,)
        for a, b in zip(got, reference):
            assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_param_groups_zero_grad_and_closure() -> None:
    a, b = nn.Parameter(flow.ones(2)), nn.Parameter(flow.ones(3))
    opt = optim.SGD([{"params": [a]}, {"params": b, "lr": 1.0}], lr=0.1, momentum=0.5)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 1.0]
    assert opt.param_groups[1]["momentum"] == 0.5

    def closure() -> flow.Tensor:
        opt.zero_grad()
        loss = (a * 2).sum() + (b * 3).sum()
        loss.backward()
        return loss

    assert opt.step(closure).item() == 13.0
    assert_allclose(a.numpy(), [0.8, 0.8], rtol=1e-6)
    assert_allclose(b.numpy(), [-2.0, -2.0, -2.0])
    opt.zero_grad(set_to_none=False)
    assert a.grad.tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert a.grad is None and b.grad is None
    c = nn.Parameter(flow.ones(1))
    opt.add_param_group({"params": [c], "lr": 0.5})
    assert opt.param_groups[2]["momentum"] == 0.5 and opt.param_groups[2]["nesterov"] is False
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    assert "Parameter Group 2" in repr(opt)


def test_bad_arguments() -> None:
    p = nn.Parameter(flow.ones(1))
    with pytest.raises(ValueError, match="Invalid learning rate"):
        optim.SGD([p], lr=-1.0)
    with pytest.raises(ValueError, match="Nesterov momentum requires"):
        optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1"):
        optim.Adam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Invalid epsilon"):
        optim.AdamW([p], eps=-1.0)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.Adam([])
    with pytest.raises(TypeError, match="iterable of Tensors"):
        optim.SGD(p, lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([p * 2], lr=0.1)
    with pytest.raises(TypeError, match="ordered collections"):
        optim.SGD([{"params": {p}}], lr=0.1)


def test_state_dict_structure_and_resume() -> None:
    p0, gs = start(), grads(6)
    a, b = nn.Parameter(flow.tensor(p0)), nn.Parameter(flow.tensor(p0[0] * 2))
    opt = optim.Adam([{"params": [a]}, {"params": [b], "lr": 0.05}], lr=0.01, amsgrad=True)
    for g in gs[:3]:
        a.grad, b.grad = flow.tensor(g), flow.tensor(g[0])
        opt.step()
    state = opt.state_dict()
    assert sorted(state) == ["param_groups", "state"]
    assert [g["params"] for g in state["param_groups"]] == [[0], [1]]
    assert state["param_groups"][1]["lr"] == 0.05 and state["param_groups"][0]["amsgrad"]
    assert sorted(state["state"][0]) == ["exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"]
    assert state["state"][1]["step"] == 3
    a2, b2 = nn.Parameter(a.detach().clone()), nn.Parameter(b.detach().clone())
    resumed = optim.Adam([{"params": [a2]}, {"params": [b2]}], lr=0.5)
    resumed.load_state_dict(copy.deepcopy(state))
    assert resumed.param_groups[1]["lr"] == 0.05 and resumed.param_groups[0]["params"][0] is a2
    for g in gs[3:]:
        a.grad, b.grad = flow.tensor(g), flow.tensor(g[0])
        a2.grad, b2.grad = flow.tensor(g), flow.tensor(g[0])
        opt.step()
        resumed.step()
    assert_allclose(a2.numpy(), a.numpy(), rtol=1e-14)
    assert_allclose(b2.numpy(), b.numpy(), rtol=1e-14)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        optim.Adam([a]).load_state_dict(state)


@pytest.mark.mpi
def test_state_dict_moves_between_local_and_global_parameters() -> None:
    p0, gs = start(), grads()
    local, opt, _ = run(lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9), p0, gs[:2])
    glob = nn.Parameter(flow.tensor(local.numpy(), placement=ALL, sbp=S0))
    moved = optim.SGD([glob], lr=0.1, momentum=0.9)
    moved.load_state_dict(opt.state_dict())  # local state -> this rank's shard
    buf = moved.state[glob]["momentum_buffer"]
    assert buf.sbp == (S0,)
    assert_allclose(buf.numpy(), opt.state[local]["momentum_buffer"].numpy())
    back = optim.SGD([nn.Parameter(flow.tensor(p0))], lr=0.1, momentum=0.9)
    back.load_state_dict(moved.state_dict())  # global state -> gathered
    assert back.state[back.param_groups[0]["params"][0]]["momentum_buffer"].is_local


@pytest.mark.mpi
def test_training_a_global_data_parallel_model_matches_local_training() -> None:
    n = 2 * SIZE + 3
    rng = numpy.random.default_rng(4)
    x, y = rng.standard_normal((n, 5)).astype(numpy.float32), rng.integers(0, 3, n)
    flow.manual_seed(2)
    net = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3))
    twin = copy.deepcopy(net).to_global(ALL, B)
    opts = [optim.AdamW(m.parameters(), lr=0.05) for m in (net, twin)]
    batches = [(flow.tensor(x), flow.tensor(y)),
               (flow.tensor(x, placement=ALL, sbp=S0), flow.tensor(y, placement=ALL, sbp=S0))]
    losses: list[list[float]] = [[], []]
    for _ in range(3):
        for model, opt, (xb, yb), out in zip((net, twin), opts, batches, losses):
            opt.zero_grad()
            loss = nn.CrossEntropyLoss()(model(xb), yb)
            loss.backward()
            opt.step()
            out.append(loss.item())
    assert losses[0][-1] < losses[0][0]
    assert_allclose(losses[1], losses[0], rtol=1e-5)
    for a, b in zip(twin.parameters(), net.parameters()):
        assert a.sbp == (B,)
        assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


# -- schedulers ----------------------------------------------------------------------------------
def lrs(make: object, epochs: int, base: tuple[float, ...] = (1.0, 0.5)) -> list[list[float]]:
    opt = optim.SGD([{"params": [nn.Parameter(flow.ones(1))], "lr": lr} for lr in base], lr=1.0)
    sched = make(opt)  # type: ignore[operator]
    out = []
    for _ in range(epochs):
        out.append(sched.get_last_lr())
        assert out[-1] == [g["lr"] for g in opt.param_groups]
        opt.step()
        sched.step()
    return out


def test_step_multistep_exponential_and_lambda_schedules() -> None:
    got = lrs(lambda o: lr_scheduler.StepLR(o, step_size=3, gamma=0.5), 10)
    assert_allclose(got, [[0.5 ** (e // 3), 0.5 * 0.5 ** (e // 3)] for e in range(10)])
    got = lrs(lambda o: lr_scheduler.MultiStepLR(o, milestones=[2, 5, 5], gamma=0.1), 8)
    assert_allclose([g[0] for g in got], [1, 1, 0.1, 0.1, 0.1, 1e-3, 1e-3, 1e-3])
    got = lrs(lambda o: lr_scheduler.ExponentialLR(o, gamma=0.9), 5)
    assert_allclose([g[1] for g in got], [0.5 * 0.9 ** e for e in range(5)])
    got = lrs(lambda o: lr_scheduler.LambdaLR(o, [lambda e: 1 / (e + 1), lambda e: e]), 4)
    assert_allclose(got, [[1 / (e + 1), 0.5 * e] for e in range(4)])


@pytest.mark.parametrize("eta_min", [0.0, 0.05])
def test_cosine_annealing_matches_the_closed_form_for_two_periods(eta_min: float) -> None:
    t_max = 5
    got = lrs(lambda o: lr_scheduler.CosineAnnealingLR(o, T_max=t_max, eta_min=eta_min),
              2 * t_max + 1)
    want = [[eta_min + (base - eta_min) * (1 + math.cos(math.pi * e / t_max)) / 2
             for base in (1.0, 0.5)] for e in range(2 * t_max + 1)]
    assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    assert abs(got[t_max][0] - eta_min) < 1e-15 and abs(got[2 * t_max][0] - 1.0) < 1e-12


def test_scheduler_state_resume_and_explicit_epochs() -> None:
    opt = optim.SGD([nn.Parameter(flow.ones(1))], lr=1.0)
    sched = lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    for _ in range(2):
        sched.step()
    saved = sched.state_dict()
    assert "optimizer" not in saved and saved["last_epoch"] == 2
    opt2 = optim.SGD([nn.Parameter(flow.ones(1))], lr=1.0)
    opt2.load_state_dict(opt.state_dict())
    resumed = lr_scheduler.CosineAnnealingLR(opt2, T_max=4)
    resumed.load_state_dict(saved)
    sched.step()
    resumed.step()
    assert resumed.get_last_lr() == sched.get_last_lr()
    step = lr_scheduler.StepLR(optim.SGD([nn.Parameter(flow.ones(1))], lr=1.0), 2)
    step.step(epoch=5)
    assert_allclose(step.get_last_lr(), [0.01])
    with pytest.raises(KeyError, match="initial_lr"):
        lr_scheduler.StepLR(optim.SGD([nn.Parameter(flow.ones(1))], lr=1.0), 2, last_epoch=3)
