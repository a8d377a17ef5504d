"""Gradient rules of every differentiable op, local and global, checked by finite differences.

Local: ``gradcheck`` (float64, central differences) of each case. Global: the same case on
global inputs of each 1-D layout (S(0), S(1), B, P over all ranks, uneven sizes ``3*N+1``) and
on a 2x2 mesh at 4 ranks must give the local case's gradients, each leaf's gradient in the
leaf's own placement and sbp; a subset also runs ``gradcheck`` on global inputs. Every rank
runs every test with the same values (collective-safe).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy
import pytest
from numpy.testing import assert_allclose

import mpiflow as flow
from mpiflow.autograd import gradcheck
from mpiflow.autograd.gradcheck import GradcheckError
from mpiflow.ops.pointwise_defs import BINARY_GRADS, UNARY_GRADS

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
ALL = flow.placement("cpu", list(range(SIZE)))
S0, S1, B, P = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.broadcast, flow.sbp.partial_sum
ODD = 3 * SIZE + 1  # no rank count divides it evenly
Shape = tuple[int, ...]


# -- input values ------------------------------------------------------------------------------
def away(shape: Shape, rng: numpy.random.Generator) -> numpy.ndarray:
    """Values in +-[0.3, 1.5]: away from the kinks of abs, relu, sign at 0, and distinct."""
    return rng.uniform(0.3, 1.5, shape) * rng.choice([-1.0, 1.0], shape)


def positive(shape: Shape, rng: numpy.random.Generator) -> numpy.ndarray:
    return rng.uniform(0.3, 1.5, shape)


def off_integers(shape: Shape, rng: numpy.random.Generator) -> numpy.ndarray:
    """Values 0.3 away from integers and half-integers: floor/ceil/round are flat there."""
    return rng.integers(-3, 3, shape) + 0.2 + 0.1 * rng.uniform(size=shape)


def const(like: flow.Tensor, value: Any) -> flow.Tensor:
    """A constant beside ``like``: local, or global and broadcast on its placement."""
    value = numpy.asarray(value)
    if not like.is_global:
        return flow.tensor(value)
    # (a 0-d global value is built as one element: flow.tensor gives its shard shape (1,))
    one = flow.tensor(value.reshape(value.shape or (1,)), placement=like.placement,
                      sbp=(B,) * like.placement.ndim)
    return one if value.ndim else one.reshape(())


@dataclass(frozen=True)
class Case:
    fn: Callable[..., Any]
    shapes: tuple[Shape, ...]
    make: Callable[[Shape, numpy.random.Generator], numpy.ndarray] = away

    def values(self, seed: int = 0) -> list[numpy.ndarray]:
        rng = numpy.random.default_rng(seed)
        return [self.make(s, rng) for s in self.shapes]


X = (ODD, 3)
MASK = numpy.arange(ODD * 3).reshape(X) % 3 != 1
CASES: dict[str, Case] = {}


def case(name: str, fn: Callable[..., Any], *shapes: Shape,
         make: Callable[[Shape, numpy.random.Generator], numpy.ndarray] = away) -> None:
    CASES[name] = Case(fn, shapes, make)


# elementwise: every op with a gradient rule
DOMAIN = {"log": positive, "log1p": positive, "log2": positive, "sqrt": positive,
          "rsqrt": positive, "reciprocal": positive, "floor": off_integers,
          "ceil": off_integers, "round": off_integers}
for _name in UNARY_GRADS:
    case(_name, lambda x, n=_name: getattr(flow, n)(x), X, make=DOMAIN.get(_name, away))
for _name in BINARY_GRADS:
    _make = positive if _name == "pow" else away
    _op = getattr(flow, _name)
    case(f"{_name}-same", lambda x, y, op=_op: op(x, y), X, X, make=_make)
    case(f"{_name}-row", lambda x, y, op=_op: op(x, y), X, (3,), make=_make)
    case(f"{_name}-outer", lambda x, y, op=_op: op(x, y), (ODD, 1), (1, 3), make=_make)
    case(f"{_name}-scalar-right", lambda x, op=_op: op(x, 1.7), X, make=_make)
    case(f"{_name}-scalar-left", lambda y, op=_op: op(1.3, y), X, make=_make)
case("where", lambda x, y: flow.where(const(x, MASK), x, y), X, X)
case("where-bcast", lambda x, y: flow.where(const(x, MASK), x, y), X, (3,))
case("where-scalar", lambda x: flow.where(const(x, MASK), x, 0.5), X)
case("clamp", lambda x: x.clamp(-0.9, 0.9), X)
case("clamp-tensor", lambda x, y: flow.clamp(x, min=y), X, (3,))
case("clone", lambda x: x.clone() * 2, X)
case("expand", lambda x: x.expand(ODD, 4), (ODD, 1))
case("expand-new", lambda y: y.expand(2, ODD, 3), (3,))
# reductions
case("sum", lambda x: x.sum(), X)
case("sum0", lambda x: x.sum(0), X)
case("sum1-keep", lambda x: x.sum(1, keepdim=True), X)
case("sum01", lambda x: flow.sum(x, (0, -1)), X)
case("mean", lambda x: x.mean(), X)
case("mean0", lambda x: x.mean(0), X)
case("mean1-keep", lambda x: x.mean(1, keepdim=True), X)
case("prod", lambda x: x.prod(), (ODD,), make=positive)
case("prod0", lambda x: x.prod(0), X, make=positive)
case("prod1-keep", lambda x: x.prod(1, keepdim=True), X)
case("amax", lambda x: x.amax(), X)
case("amax0", lambda x: x.amax(0), X)
case("amin1-keep", lambda x: x.amin(1, keepdim=True), X)
case("max", lambda x: flow.max(x), X)
case("max0", lambda x: x.max(0), X)
case("min1-keep", lambda x: flow.min(x, 1, keepdim=True).values, X)
case("logsumexp1", lambda x: flow.logsumexp(x, 1), X)
case("logsumexp01", lambda x: flow.logsumexp(x, (0, 1), keepdim=True), X)
case("softmax0", lambda x: flow.softmax(x, 0), X)
case("softmax1", lambda x: x.softmax(1), X)
case("log_softmax0", lambda x: flow.log_softmax(x, 0), X)
case("log_softmax1", lambda x: x.log_softmax(-1), X)
case("cumsum0", lambda x: x.cumsum(0), X)
case("cumsum1", lambda x: flow.cumsum(x, 1), X)
case("var0", lambda x: x.var(0), X)
case("std1", lambda x: x.std(1, unbiased=False), X)
case("var", lambda x: flow.var(x), X)
case("norm", lambda x: x.norm(), X)
case("norm1", lambda x: flow.norm(x, 1, dim=1), X)
case("norm-inf", lambda x: flow.norm(x, math.inf, dim=0), X)
case("norm3", lambda x: flow.norm(x, 3, dim=0), X)
# matrix products
case("matmul", lambda a, b: a @ b, X, (3, 2))
case("matmul-vec", lambda a, b: flow.matmul(a, b), X, (3,))
case("vec-matmul", lambda a, b: a @ b, (ODD,), X)
case("dot", lambda a, b: flow.dot(a, b), (ODD,), (ODD,))
case("batched", lambda a, b: a @ b, (2, ODD, 3), (3, 2))
case("batched-bcast", lambda a, b: a @ b, (2, 1, ODD, 3), (3, 3, 2))
case("batched-vec", lambda a, b: a @ b, (3,), (2, 3, ODD))
case("bmm", lambda a, b: flow.bmm(a, b), (2, ODD, 3), (2, 3, 2))
case("mm", lambda a, b: flow.mm(a, b), (3, ODD), X)
case("mv", lambda a, b: flow.mv(a, b), X, (3,))
case("outer", lambda a, b: flow.outer(a, b), (ODD,), (3,))
# shapes
case("reshape", lambda x: x.reshape(3, ODD), X)
case("view", lambda x: x.view(-1, 1), X)
case("flatten", lambda x: x.reshape(ODD, 3, 1).flatten(1), X)
case("permute", lambda x: x.reshape(ODD, 3, 1).permute(2, 0, 1), X)
case("transpose", lambda x: x.transpose(0, 1), X)
case("t", lambda x: x.t(), X)
case("T", lambda x: x.T, X)
case("squeeze", lambda x: x.reshape(ODD, 1, 3, 1).squeeze(), X)
case("squeeze-dim", lambda x: x.unsqueeze(1).squeeze(1), X)
case("unsqueeze", lambda x: x.unsqueeze(-1), X)
case("cat0", lambda x, y: flow.cat([x, y], 0), X, (2, 3))
case("cat1", lambda x, y: flow.cat([x, y * 2, x], dim=1), X, (ODD, 2))
case("stack", lambda x, y: flow.stack([x, y], 1), X, X)
case("split", lambda x: x.split(2, 0), X)
case("split-sections", lambda x: flow.split(x, [1, 2], 1), X)
case("chunk", lambda x: x.chunk(2, 1), X)
case("flip", lambda x: x.flip(0), X)
case("flip01", lambda x: flow.flip(x, (0, 1)), X)
case("contiguous", lambda x: x.contiguous() * 1, X)
# indexing
case("slice", lambda x: x[1:3], X)
case("step", lambda x: x[::2, 1:], X)
case("negative-step", lambda x: x[::-2], X)
case("int", lambda x: x[1], X)
case("column", lambda x: x[:, -1], X)
case("none-ellipsis", lambda x: x[None, ..., 0], X)
case("repeated", lambda x: x[[0, 0, 2]], X)
case("repeated-pairs", lambda x: x[[0, 2, 0], [1, 1, 1]], X)
case("bool-mask", lambda x: x[const(x, MASK)], X)
case("mixed", lambda x: x[[2, 0], 1:], X)
case("tensor-index", lambda x: x[flow.tensor([1, 1, 0])], X)


def _set(x: flow.Tensor, index: Any, value: Any) -> flow.Tensor:
    t = x * 1  # a non-leaf: its old value keeps the gradient outside the region
    t[index] = value
    return t * 1


case("setitem", lambda x, v: _set(x, slice(1, 3), v), X, (2, 3))
case("setitem-bcast", lambda x, v: _set(x, (slice(None), 1), v), X, (1,))
case("setitem-row", lambda x, v: _set(x, slice(0, 2), v), X, (3,))
case("setitem-advanced", lambda x, v: _set(x, [2, 0], v), X, (2, 3))
case("setitem-scalar", lambda x: _set(x, 0, 0.5), X)


def float64(values: list[numpy.ndarray]) -> list[flow.Tensor]:
    return [flow.tensor(v, dtype=flow.float64, requires_grad=True) for v in values]


# -- local: gradcheck of every case ---------------------------------------------------------
@pytest.mark.parametrize("name", list(CASES))
def test_gradcheck_local(name: str) -> None:
    c = CASES[name]
    assert gradcheck(c.fn, float64(c.values()))


def test_every_rule_is_covered() -> None:
    covered = {n.split("-")[0] for n in CASES}
    assert set(UNARY_GRADS) | set(BINARY_GRADS) <= covered


# -- global: the same cases on every layout ----------------------------------------------------
def _weighted_grads(fn: Callable[..., Any], inputs: list[flow.Tensor]) -> list[numpy.ndarray]:
    """The gradients of ``sum(fn(*inputs) * w)`` with fixed weights, as whole numpy values."""
    result = fn(*inputs)
    outputs = [t for t in (result if isinstance(result, tuple) else (result,))
               if t.dtype.is_floating_point]
    rng = numpy.random.default_rng(7)
    loss = None
    for t in outputs:
        term = (t * const(t, rng.standard_normal(tuple(t.shape)))).sum()
        loss = term if loss is None else loss + term
    assert loss is not None
    loss.backward()
    return [x.grad.numpy() if x.grad is not None else numpy.zeros(x.shape) for x in inputs]


def _global_inputs(values: list[numpy.ndarray], sbp: Any, placement: flow.placement = ALL
                   ) -> list[flow.Tensor]:
    """The first input, and any of its shape, laid out by ``sbp``; the others broadcast."""
    first = values[0].shape
    out = []
    for v in values:
        layout = sbp if v.shape == first and _fits(sbp, v.ndim) else (B,) * placement.ndim
        out.append(flow.tensor(v, placement=placement, sbp=layout, requires_grad=True))
    return out


def _fits(sbp: Any, ndim: int) -> bool:
    items = sbp if isinstance(sbp, tuple) else (sbp,)
    return all(not s.is_split() or s.dim < ndim for s in items)


def check_global(name: str, sbp: Any, placement: flow.placement = ALL) -> None:
    c = CASES[name]
    values = c.values()
    want = _weighted_grads(c.fn, float64(values))
    inputs = _global_inputs(values, sbp, placement)
    got = _weighted_grads(c.fn, inputs)
    for x, g, w in zip(inputs, got, want, strict=True):
        assert x.grad is not None
        assert x.grad.placement == x.placement and x.grad.sbp == x.sbp, (x.grad.sbp, x.sbp)
        assert_allclose(g, w, rtol=1e-9, atol=1e-12)


GLOBAL_SKIP = {"tensor-index"}  # a local index tensor of a global input: covered by "repeated"


@pytest.mark.mpi
@pytest.mark.parametrize("sbp", [S0, S1, B, P], ids=str)
@pytest.mark.parametrize("name", [n for n in CASES if n not in GLOBAL_SKIP])
def test_global_matches_local(name: str, sbp: Any) -> None:
    check_global(name, sbp)


@pytest.mark.mpi(min_size=4)
@pytest.mark.parametrize("sbp", [(S0, S1), (B, S0), (P, S1), (S1, P)], ids=str)
@pytest.mark.parametrize("name", ["mul-row", "sum0", "softmax1", "max0", "matmul", "batched",
                                  "reshape", "cat1", "split", "repeated", "step", "setitem"])
def test_global_2d_mesh(name: str, sbp: Any) -> None:
    check_global(name, sbp, flow.placement("cpu", [[0, 1], [2, 3]]))


@pytest.mark.mpi
@pytest.mark.parametrize("sbp", [S0, S1, P], ids=str)
@pytest.mark.parametrize("name", ["div-row", "prod0", "amax0", "max0", "logsumexp1", "cumsum0",
                                  "matmul", "cat0", "chunk", "repeated-pairs", "setitem"])
def test_gradcheck_global(name: str, sbp: Any) -> None:
    c = CASES[name]
    assert gradcheck(c.fn, _global_inputs(c.values(), sbp))


# -- values worth spelling out -----------------------------------------------------------------
def test_prod_with_zeros() -> None:
    x = flow.tensor([[2.0, 0.0, 3.0], [0.0, 0.0, 4.0], [1.0, 2.0, 3.0]], requires_grad=True)
    x.prod(1).sum().backward()
    # one zero: it gets the product of the others; two zeros: all zero; none: prod / x
    assert x.grad.tolist() == [[0.0, 6.0, 0.0], [0.0, 0.0, 0.0], [6.0, 3.0, 2.0]]


def test_amax_splits_ties_and_max_dim_picks_the_index() -> None:
    x = flow.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], requires_grad=True)
    x.amax(1).sum().backward()
    assert x.grad.tolist() == [[0.0, 0.5, 0.5], [0.5, 0.5, 0.0]]
    y = flow.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], requires_grad=True)
    y.max(1).values.sum().backward()   # PyTorch: the gradient goes to the returned index
    assert y.grad.tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
    z = flow.tensor([1.0, 3.0, 3.0, 3.0], requires_grad=True)
    flow.max(z).backward()             # the full reduction splits equally, as PyTorch
    assert_allclose(z.grad.numpy(), [0.0, 1 / 3, 1 / 3, 1 / 3])


def test_repeated_indices_accumulate() -> None:
    x = flow.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x[[0, 0, 2, 0]] * flow.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    assert x.grad.tolist() == [7.0, 0.0, 3.0]


def test_setitem_on_non_leaf() -> None:
    a = flow.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    v = flow.tensor([10.0, 20.0], requires_grad=True)
    x = a * 2
    x[1:3] = v * 3
    (x * flow.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    assert a.grad.tolist() == [2.0, 0.0, 0.0, 8.0]  # the overwritten region gets nothing
    assert v.grad.tolist() == [6.0, 9.0]
    assert x.tolist() == [2.0, 30.0, 60.0, 8.0]


def test_setitem_into_a_constant_and_leaf_error() -> None:
    v = flow.tensor(5.0, requires_grad=True)
    x = flow.zeros(3)
    x[1] = v
    assert x.requires_grad and x.grad_fn is not None
    (x * flow.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert v.grad.item() == 2.0
    leaf = flow.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        leaf[0] = 1.0
    with flow.no_grad():
        leaf[0] = 1.0  # allowed outside grad mode
    assert leaf.tolist() == [1.0, 0.0, 0.0]


@pytest.mark.mpi
def test_setitem_global_value_and_target() -> None:
    full = numpy.arange(ODD * 3, dtype=numpy.float64).reshape(ODD, 3)
    a = flow.tensor(full, placement=ALL, sbp=S0, requires_grad=True)
    v = flow.tensor(numpy.ones(3), placement=ALL, sbp=S0, requires_grad=True)
    x = a * 1
    x[2] = v
    x.sum().backward()
    grad = numpy.ones((ODD, 3))
    grad[2] = 0
    assert a.grad.sbp == (S0,) and v.grad.sbp == (S0,)
    assert_allclose(a.grad.numpy(), grad)
    assert_allclose(v.grad.numpy(), numpy.ones(3))


def test_cast_gradient_keeps_the_source_dtype() -> None:
    x = flow.tensor([1.5, -2.0], dtype=flow.float32, requires_grad=True)
    y = x.to(flow.float64) * flow.tensor([2.0, 3.0], dtype=flow.float64)
    y.sum().backward()
    assert x.grad.dtype == flow.float32 and x.grad.tolist() == [2.0, 3.0]
    n = flow.tensor([1.5, 2.5], requires_grad=True)
    assert not n.to(flow.int64).requires_grad  # integer results carry no gradient


def test_integer_outputs_have_no_gradient() -> None:
    x = flow.tensor([[1.0, 3.0], [2.0, 0.0]], requires_grad=True)
    for result in (x.argmax(1), x > 1, flow.all(x > 0), flow.any(x > 2), x.max(0).indices):
        assert not result.requires_grad and result.grad_fn is None


# -- the global facts of REFERENCE.md ("Autograd with global tensors") -------------------------
@pytest.mark.mpi
def test_data_parallel_weight_gradient_is_broadcast_full_batch() -> None:
    rng = numpy.random.default_rng(3)
    xv, wv = rng.standard_normal((ODD, 3)), rng.standard_normal((3, 2))
    x = flow.tensor(xv, placement=ALL, sbp=S0, requires_grad=True)
    w = flow.tensor(wv, placement=ALL, sbp=B, requires_grad=True)
    (x @ w).sum().backward()
    assert w.grad.placement == ALL and w.grad.sbp == (B,)
    assert_allclose(w.grad.to_local().numpy(), xv.T @ numpy.ones((ODD, 2)))  # every rank
    assert x.grad.sbp == (S0,)
    assert_allclose(x.grad.numpy(), numpy.ones((ODD, 2)) @ wv.T)


def _local_rows() -> numpy.ndarray:
    return numpy.arange(6, dtype=numpy.float64).reshape(2, 3) + 10 * RANK


@pytest.mark.mpi
def test_local_to_global_split_gives_each_rank_its_shard() -> None:
    x = flow.tensor(_local_rows(), requires_grad=True)
    g = x.to_global(ALL, S0)
    weights = numpy.arange(2 * SIZE * 3, dtype=numpy.float64).reshape(2 * SIZE, 3)
    (g * const(g, weights)).sum().backward()
    assert x.grad.is_local
    assert_allclose(x.grad.numpy(), weights[2 * RANK:2 * RANK + 2])


@pytest.mark.mpi
def test_local_to_global_broadcast_gives_rank0_the_gradient() -> None:
    x = flow.tensor(_local_rows(), requires_grad=True)
    (x.to_global(ALL, B) * 2).sum().backward()
    assert_allclose(x.grad.numpy(), numpy.full((2, 3), 2.0 if RANK == 0 else 0.0))


@pytest.mark.mpi
def test_local_to_global_partial_gives_every_rank_the_gradient() -> None:
    x = flow.tensor(_local_rows(), requires_grad=True)
    (x.to_global(ALL, P) * 2).sum().backward()
    assert_allclose(x.grad.numpy(), numpy.full((2, 3), 2.0))


@pytest.mark.mpi
def test_grad_sbp_is_honoured() -> None:
    # local -> global B with grad_sbp=B: the gradient is made whole on every rank instead of
    # being given to rank 0 (the default, P).
    x = flow.tensor(_local_rows(), requires_grad=True)
    (x.to_global(ALL, B, grad_sbp=B) * 2).sum().backward()
    assert_allclose(x.grad.numpy(), numpy.full((2, 3), 2.0))
    # global -> global: the gradient passes through grad_sbp on its way back to the source
    # layout; the leaf's gradient keeps the leaf's layout and its value.
    full = numpy.arange(ODD * 3, dtype=numpy.float64).reshape(ODD, 3)
    for grad_sbp in (B, P, S1):
        y = flow.tensor(full, placement=ALL, sbp=S0, requires_grad=True)
        (y.to_global(sbp=B, grad_sbp=grad_sbp) * const(y, full)).sum().backward()
        assert y.grad.sbp == (S0,)
        assert_allclose(y.grad.numpy(), full)


@pytest.mark.mpi
def test_to_local_backward_is_the_shard() -> None:
    full = numpy.arange(ODD * 3, dtype=numpy.float64).reshape(ODD, 3)
    x = flow.tensor(full, placement=ALL, sbp=S0, requires_grad=True)
    local = x.to_local()
    (local * 3).sum().backward()
    assert x.grad.sbp == (S0,)
    assert_allclose(x.grad.numpy(), numpy.full((ODD, 3), 3.0))


# -- gradcheck itself --------------------------------------------------------------------------
@pytest.mark.mpi
def test_gradcheck_reports_the_worst_element() -> None:
    x = flow.tensor([[1.0, 2.0], [3.0, -4.0]], dtype=flow.float64, requires_grad=True)
    with pytest.raises(GradcheckError, match=r"input 0 of shape \(2, 2\).*index \(1, 1\)"):
        gradcheck(lambda t: t * t.detach(), [x])  # analytic t, numerical 2t
    g = flow.tensor(numpy.ones((ODD, 2)), placement=ALL, sbp=S0, requires_grad=True)
    with pytest.raises(GradcheckError, match="global"):
        gradcheck(lambda t: t * t.detach(), [g])
    with pytest.raises(ValueError, match="requires grad"):
        gradcheck(lambda t: t * 2, [flow.tensor([1.0])])


def test_gradcheck_non_tensor_arguments_and_float32_inputs() -> None:
    x = flow.tensor([0.5, 1.5], requires_grad=True)  # float32: checked in float64
    assert gradcheck(lambda t, k: t ** k, [x, 3])
    assert x.grad is None  # the inputs are copied


def test_gradcheck_passes_integer_and_bool_tensors_as_they_are() -> None:
    # an index tensor cast to float64 could not index (found by tests/test_op_sweep.py)
    x = flow.tensor([[0.5, 1.5], [2.0, -1.0], [3.0, 0.25]], requires_grad=True)
    index, mask = flow.tensor([2, 0, 2]), flow.tensor([True, False])
    assert gradcheck(lambda t, i, m: t[i][:, m] * 2, [x, index, mask])


# -- PyTorch, where it happens to be installed ------------------------------------------------
def test_against_torch() -> None:
    torch = pytest.importorskip("torch")
    rng = numpy.random.default_rng(5)
    xv, wv = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))
    fns = [
        (lambda m, a, b: m.log_softmax(a @ b, 1).sum()),
        (lambda m, a, b: (m.amax(a, 0) * b[:, 0]).sum()),
        (lambda m, a, b: m.cumsum(a, 0)[1:, ::2].prod()),
    ]
    for fn in fns:
        a, b = flow.tensor(xv, requires_grad=True), flow.tensor(wv, requires_grad=True)
        fn(flow, a, b).backward()
        ta = torch.tensor(xv, requires_grad=True)
        tb = torch.tensor(wv, requires_grad=True)
        fn(torch, ta, tb).backward()
        for mine, theirs in ((a.grad, ta.grad), (b.grad, tb.grad)):
            # an input the function does not use has no gradient in either (the third)
            assert (mine is None) == (theirs is None)
            if mine is not None:
                assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-6)
