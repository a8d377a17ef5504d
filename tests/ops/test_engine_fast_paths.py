"""The engine's fast paths give the numbers of the slow ones: cached op metadata, gradients
adopted without a copy, the one-op ``linear``, matmul's gradients computed only where needed,
and the optimizers' in-place and flat (``foreach``) updates, bitwise equal to the update
through mpiflow ops, on local and global parameters."""

from __future__ import annotations

import gc
import weakref

import numpy
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from rounding_helpers import assert_same_sums

import mpiflow as flow
import mpiflow.nn as nn
import mpiflow.nn.functional as F
import mpiflow.optim as optim
from mpiflow.ops import engine
from mpiflow.ops.linear import LINEAR
from mpiflow.ops.shape import t

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()


def rng(seed: int = 0) -> numpy.random.Generator:
    return numpy.random.default_rng(seed)


# -- the engine's caches ----------------------------------------------------------------------
def test_cache_keys_tell_number_types_apart() -> None:
    x = flow.tensor([1, 2, 3])
    assert (x * 2).dtype == flow.int64
    assert (x * 2.0).dtype == flow.float32   # a float over ints: float32, not the int result
    assert (x * True).dtype == flow.int64
    assert (x * 2).tolist() == [2, 4, 6]


def test_cache_keys_tell_attribute_types_apart() -> None:
    x = flow.ones(2, 3)
    assert tuple(flow.sum(x, dim=1).shape) == (2,)
    assert tuple(flow.sum(x, dim=(0, 1)).shape) == ()
    assert tuple(flow.sum(x, dim=1, keepdim=True).shape) == (2, 1)
    assert tuple(flow.sum(x, dim=1, keepdim=False).shape) == (2,)


def test_shape_errors_still_raised_after_a_cached_success() -> None:
    a, b = flow.ones(2, 3), flow.ones(3, 4)
    assert tuple((a @ b).shape) == (2, 4)
    with pytest.raises(ValueError, match="cannot be multiplied"):
        b @ a
    with pytest.raises(ValueError, match="cannot be broadcast"):
        flow.ones(2) + flow.ones(3)


def test_cache_holds_no_tensor_alive() -> None:
    index = flow.tensor([0, 1])
    ref = weakref.ref(index)
    flow.ones(3, 2)[index]
    del index
    gc.collect()
    assert ref() is None


def test_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "_CACHE_LIMIT", 8)
    for n in range(1, 30):
        flow.ones(n) + 1.0
    assert len(engine._META) <= 8


# -- gradients adopted without a copy -------------------------------------------------------------
def test_weight_gradient_is_adopted_not_copied() -> None:
    layer = nn.Linear(4, 3)
    layer(flow.ones(2, 4)).sum().backward()
    assert layer.weight.grad is not None
    assert layer.weight.grad._data.flags.owndata


def test_one_gradient_for_two_leaves_is_not_shared() -> None:
    a = flow.ones(3, requires_grad=True)
    b = flow.ones(3, requires_grad=True)
    (a + b).backward(flow.tensor([1.0, 2.0, 3.0]))
    assert a.grad is not None and b.grad is not None
    assert not numpy.shares_memory(a.grad._data, b.grad._data)
    (a + b).sum().backward()
    assert a.grad.tolist() == [2.0, 3.0, 4.0]
    assert b.grad.tolist() == [2.0, 3.0, 4.0]


def test_user_gradient_is_not_adopted() -> None:
    c = flow.ones(3, requires_grad=True)
    g = flow.tensor([1.0, 2.0, 3.0])
    c.clone().backward(g)
    c.clone().backward(g)
    assert g.tolist() == [1.0, 2.0, 3.0]
    assert c.grad is not None and c.grad.tolist() == [2.0, 4.0, 6.0]


def test_gradient_kept_by_a_hook_is_not_adopted() -> None:
    w = flow.ones(2, 2, requires_grad=True)
    seen = []
    w.register_hook(lambda g: seen.append(g))
    (w * 3.0).sum().backward()
    (w * 3.0).sum().backward()
    assert seen[0].tolist() == [[3.0, 3.0], [3.0, 3.0]]
    assert w.grad is not None and w.grad.tolist() == [[6.0, 6.0], [6.0, 6.0]]


# -- linear and matmul --------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(16, 8), (3, 5, 8)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_matches_the_composite(shape: tuple[int, ...], bias: bool) -> None:
    r = rng()
    x0 = r.standard_normal(shape, dtype=numpy.float32)
    w0 = r.standard_normal((6, 8), dtype=numpy.float32)
    b0 = r.standard_normal(6, dtype=numpy.float32)
    results = []
    for fused in (True, False):
        x, w, b = (flow.tensor(a, requires_grad=True) for a in (x0, w0, b0))
        out = F.linear(x, w, b if bias else None) if fused else x @ t(w)
        if not fused and bias:
            out = out + b
        assert (out.grad_fn.name == "LinearBackward") == fused
        (out * out).sum().backward()
        results.append([out.numpy(), x.grad.numpy(), w.grad.numpy(),
                        b.grad.numpy() if bias else None])
    fused_r, plain_r = results
    # Bitwise where both sides make the same call on the same operands:
    assert_array_equal(fused_r[0], plain_r[0])       # forward: the same BLAS call and add
    assert_array_equal(fused_r[1], plain_r[1])       # dx = g @ w either way
    # g^T @ x against (x^T @ g)^T, and over a batch one product of the flattened batch against
    # one per entry then summed: the same sums in an order each BLAS call picks (by CPU kernel,
    # version and shape), so equal up to that order's rounding.
    g = 2 * fused_r[0].reshape(-1, 6).astype(numpy.float64)  # (out * out).sum()'s gradient
    x2 = x0.reshape(-1, 8).astype(numpy.float64)
    assert_same_sums(fused_r[2], plain_r[2], terms=abs(g).T @ abs(x2), length=g.shape[0])
    if bias:  # numpy's own sum over the same axes (no BLAS): the same additions in one order
        assert_array_equal(fused_r[3], plain_r[3])
    assert fused_r[2].flags.c_contiguous


@pytest.mark.parametrize("shape", [(32, 512, 1024), (64, 300, 257), (1, 1024, 64),
                                   (65, 512, 1024)])
def test_linear_swapped_product_matches(shape: tuple[int, int, int]) -> None:
    rows, k, n = shape
    r = rng(11)
    x = flow.tensor(r.standard_normal((rows, k), dtype=numpy.float32))
    w = flow.tensor(r.standard_normal((n, k), dtype=numpy.float32))
    b = flow.tensor(r.standard_normal(n, dtype=numpy.float32))
    out = F.linear(x, w, b).numpy()
    assert out.flags.c_contiguous
    want = x.numpy() @ w.numpy().T + b.numpy()
    # (w @ x^T)^T and x @ w^T: the same products (and the bias), summed in an order each BLAS
    # call picks per CPU kernel and version
    terms = abs(x.numpy()).astype(numpy.float64) @ abs(w.numpy()).T + abs(b.numpy())
    assert_same_sums(out, want, terms=terms, length=k + 1)


@pytest.mark.parametrize("shape", [(32, 512, 1024), (64, 300, 257), (65, 512, 1024)])
def test_linear_swapped_input_gradient_matches(shape: tuple[int, int, int]) -> None:
    rows, k, n = shape
    r = rng(12)
    x = flow.tensor(r.standard_normal((rows, k), dtype=numpy.float32), requires_grad=True)
    w = flow.tensor(r.standard_normal((n, k), dtype=numpy.float32))
    g = r.standard_normal((rows, n), dtype=numpy.float32)
    F.linear(x, w).backward(flow.tensor(g))
    assert x.grad.numpy().flags.c_contiguous
    want = g.astype(numpy.float64) @ w.numpy().astype(numpy.float64)  # as good as exact here
    terms = abs(g).astype(numpy.float64) @ abs(w.numpy())
    assert_same_sums(x.grad.numpy(), want, terms=terms, length=n, computations=1)
    assert_same_sums(x.grad.numpy(), g @ w.numpy(), terms=terms, length=n)


def test_linear_falls_back_where_it_does_not_apply() -> None:
    x = flow.ones(2, 3, dtype=flow.float64)
    w = flow.ones(4, 3)
    assert F.linear(x, w).dtype == flow.float64     # mixed dtypes: promotion, as before
    with pytest.raises(ValueError, match="cannot be multiplied"):
        F.linear(flow.ones(2, 5), w)
    assert F.linear(flow.ones(3), w).tolist() == [3.0] * 4  # a 1-D input
    assert LINEAR.name == "linear"


def test_matmul_computes_only_needed_gradients() -> None:
    a = flow.tensor(rng().standard_normal((3, 4)), requires_grad=True)
    b = flow.tensor(rng(1).standard_normal((4, 2)))
    (a @ b).sum().backward()
    assert b.grad is None
    assert_allclose(a.grad.numpy(), numpy.ones((3, 2)) @ b.numpy().T)


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("ignore_index", [-100, 2])
def test_cross_entropy_op_matches_the_composite(dtype: type, reduction: str,
                                                ignore_index: int,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from mpiflow.nn import cross_entropy as _cross_entropy

    r = rng(7)
    x0 = (r.standard_normal((16, 10)) * 3).astype(dtype)
    t0 = r.integers(0, 10, 16)
    t0[3] = 2
    results = []
    for fused in (True, False):
        if not fused:
            monkeypatch.setattr(_cross_entropy, "fits", lambda *a: False)
        x = flow.tensor(x0, requires_grad=True)
        loss = F.cross_entropy(x, flow.tensor(t0), reduction=reduction,
                               ignore_index=ignore_index)
        assert (loss.grad_fn.name == "CrossEntropyBackward") == fused
        loss.backward()
        results.append((loss.numpy(), x.grad.numpy()))
    assert_array_equal(results[0][0], results[1][0])
    assert_array_equal(results[0][1], results[1][1])


def test_cross_entropy_op_edge_cases() -> None:
    x = flow.zeros(2, 3, requires_grad=True)
    every_target_ignored = F.cross_entropy(x, flow.tensor([-100, -100]))
    assert numpy.isnan(every_target_ignored.item())
    with pytest.raises(IndexError, match="out of bounds"):
        F.cross_entropy(x, flow.tensor([0, 3]))
    half = F.cross_entropy(flow.zeros(2, 3, dtype=flow.float16), flow.tensor([0, 1]))
    assert half.grad_fn is None and half.dtype == flow.float16  # the composite
    assert F.cross_entropy(x, flow.tensor([0, 1]), reduction="none").shape == (2,)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # log(0) of the all -inf row, both paths
def test_cross_entropy_op_rows_with_infinities_match_the_composite(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from mpiflow.nn import cross_entropy as _cross_entropy

    x0 = rng(3).standard_normal((4, 5)).astype(numpy.float32)
    x0[1, 2] = -numpy.inf  # finite row maximum: the lean kernel
    x0[2, :] = -numpy.inf  # infinite row maximum: the reduction kernel
    target = flow.tensor([0, 1, 3, 4])
    results = []
    for fused in (True, False):
        if not fused:
            monkeypatch.setattr(_cross_entropy, "fits", lambda *a: False)
        x = flow.tensor(x0, requires_grad=True)
        loss = F.cross_entropy(x, target, reduction="sum")
        loss.backward()
        results.append((loss.numpy(), x.grad.numpy()))
    assert_array_equal(results[0][0], results[1][0])
    assert_array_equal(results[0][1], results[1][1])


@pytest.mark.parametrize("dtype", [numpy.float16, numpy.float32, numpy.float64])
def test_relu_gradient_is_the_masked_upstream_gradient(dtype: type) -> None:
    x0 = rng(5).standard_normal((6, 7)).astype(dtype)
    x0[0, :3] = 0  # relu'(0) is 0, as in PyTorch
    g0 = rng(6).standard_normal((6, 7)).astype(dtype)
    x = flow.tensor(x0, requires_grad=True)
    F.relu(x).backward(flow.tensor(g0))
    assert x.grad.dtype == x.dtype
    assert_array_equal(x.grad.numpy(), g0 * (x0 > 0).astype(dtype))


# -- optimizers ---------------------------------------------------------------------------------
SGD_CASES = [
    {},
    {"momentum": 0.9},
    {"momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01},
    {"momentum": 0.9, "nesterov": True, "maximize": True},
    {"weight_decay": 0.1, "maximize": True},
]
ADAM_CASES = [
    (optim.Adam, {}),
    (optim.Adam, {"weight_decay": 0.01, "amsgrad": True}),
    (optim.Adam, {"maximize": True}),
    (optim.AdamW, {}),
    (optim.AdamW, {"amsgrad": True, "weight_decay": 0.1}),
]
SHAPES = [(300, 500), (7, 3), (11,), (1,)]  # one over the piece size: cut into pieces


def _params(placement: object = None, sbps: object = None) -> list[nn.Parameter]:
    r = rng(3)
    out = []
    for i, shape in enumerate(SHAPES):
        value = r.standard_normal(shape, dtype=numpy.float32)
        if placement is None:
            out.append(nn.Parameter(flow.tensor(value)))
        else:
            assert isinstance(sbps, list)
            out.append(nn.Parameter(flow.tensor(value, placement=placement, sbp=sbps[i])))
    return out


def _run(make: object, options: dict, mode: str, placement: object = None,
         sbps: object = None, steps: int = 3) -> list[numpy.ndarray]:
    params = _params(placement, sbps)
    opt = make(params, lr=0.01, foreach=(mode == "foreach"), **options)  # type: ignore[operator]
    if mode == "ops":
        opt._in_place = lambda p, *s: False  # the mpiflow-ops path, as before the fast paths
    r = rng(5)
    for _ in range(steps):
        for p in params:
            g = r.standard_normal(tuple(p.shape), dtype=numpy.float32)
            p.grad = (flow.tensor(g) if placement is None
                      else flow.tensor(g, placement=p.placement, sbp=p.sbp))
        opt.step()
    return [p.numpy() for p in params]


def _same(a: list[numpy.ndarray], b: list[numpy.ndarray]) -> None:
    for x, y in zip(a, b, strict=True):
        assert_array_equal(x, y)


@pytest.mark.parametrize("options", SGD_CASES)
def test_sgd_paths_give_the_same_bits(options: dict) -> None:
    ops = _run(optim.SGD, options, "ops")
    _same(ops, _run(optim.SGD, options, "per_param"))
    _same(ops, _run(optim.SGD, options, "foreach"))


@pytest.mark.parametrize(("make", "options"), ADAM_CASES)
def test_adam_paths_give_the_same_bits(make: object, options: dict) -> None:
    ops = _run(make, options, "ops")
    _same(ops, _run(make, options, "per_param"))
    _same(ops, _run(make, options, "foreach"))


def test_foreach_and_fused_not_both() -> None:
    with pytest.raises(RuntimeError, match="cannot be `True` together"):
        optim.Adam(_params(), foreach=True, fused=True)
    _same(_run(optim.SGD, {"momentum": 0.5}, "ops"),
          _run(lambda ps, **kw: optim.SGD(ps, fused=kw.pop("foreach") or True, **kw),
               {"momentum": 0.5}, "per_param"))


def test_foreach_moves_parameters_into_one_buffer() -> None:
    params = _params()
    opt = optim.Adam(params, lr=0.1, foreach=True)
    for p in params:
        p.grad = flow.ones(*p.shape)
    opt.step()
    flat = opt._flat[id(opt.param_groups[0])][1][0]
    assert flat.moved
    assert all(p._data.base is flat.flat for p in params)
    assert all(opt.state[p]["exp_avg"]._data.base is flat.state["exp_avg"][0] for p in params)


def test_foreach_leaves_a_parameter_others_view_in_place() -> None:
    params = _params()
    alias = params[1].detach()      # shares the parameter's array
    opt = optim.SGD(params, lr=0.5, foreach=True)
    for p in params:
        p.grad = flow.ones(*p.shape)
    before = params[1].numpy().copy()
    opt.step()
    flat = opt._flat[id(opt.param_groups[0])][1][0]
    assert not flat.moved
    assert_array_equal(alias.numpy(), before - 0.5)  # the alias sees the update


def test_foreach_handles_missing_gradients_and_loaded_state() -> None:
    params = _params()
    opt = optim.Adam(params, lr=0.1, foreach=True)
    ref_params = _params()
    ref = optim.Adam(ref_params, lr=0.1)
    for step in range(4):
        for i, (p, q) in enumerate(zip(params, ref_params)):
            missing = step == 1 and i == 2
            p.grad = None if missing else flow.full(tuple(p.shape), 0.1 * (step + i))
            q.grad = None if missing else flow.full(tuple(q.shape), 0.1 * (step + i))
        opt.step()
        ref.step()
        if step == 2:
            opt.load_state_dict(ref.state_dict())
    _same([p.numpy() for p in params], [q.numpy() for q in ref_params])


@pytest.mark.mpi
@pytest.mark.parametrize("mode", ["per_param", "foreach"])
def test_global_parameters_same_bits(mode: str) -> None:
    placement = flow.placement("cpu", list(range(SIZE)))
    s0, b = flow.sbp.split(0), flow.sbp.broadcast
    sbps = [s0, b, s0, b]
    for make, options in [(optim.SGD, {"momentum": 0.9}), (optim.AdamW, {"amsgrad": True})]:
        ops = _run(make, options, "ops", placement, sbps)
        _same(ops, _run(make, options, mode, placement, sbps))
    local = _run(optim.AdamW, {"amsgrad": True}, "ops")
    glob = _run(optim.AdamW, {"amsgrad": True}, mode, placement, sbps)
    _same(local, glob)
