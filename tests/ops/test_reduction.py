"""Reductions of mpiflow.ops.reduction, local and global, checked against numpy on the full value.

Every rank runs every test: global inputs are built from the same full value on every rank, and
``numpy()`` (a collective) of each result must equal numpy's answer on the full value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import mpiflow as flow
from mpiflow.communication import count_collectives

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
ALL = flow.placement("cpu", list(range(SIZE)))
S0, S1, B, P = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.broadcast, flow.sbp.partial_sum
PMAX, PMIN = flow.sbp.partial_max, flow.sbp.partial_min
ODD = 3 * SIZE + 1  # no rank count divides it evenly


def full(shape: tuple[int, ...], dtype: Any = numpy.float32, seed: int = 0) -> numpy.ndarray:
    """The same random value on every rank."""
    return numpy.random.default_rng(seed).standard_normal(shape).astype(dtype)


def glob(value: numpy.ndarray, sbp: Any, placement: flow.placement = ALL) -> flow.Tensor:
    return flow.tensor(value, placement=placement, sbp=sbp)


def values(result: Any) -> list[numpy.ndarray]:
    """The numpy values of a tensor or a tuple of tensors (collective for global ones)."""
    if isinstance(result, flow.Tensor):
        return [result.numpy()]
    return [r.numpy() for r in result]


def check(got: Any, want: Any, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    wants = list(want) if isinstance(want, tuple) else [want]
    gots = values(got)
    assert len(gots) == len(wants)
    for g, w in zip(gots, wants, strict=True):
        w = numpy.asarray(w)
        assert g.shape == w.shape, (g.shape, w.shape)
        if w.dtype.kind in "biu":
            assert_array_equal(g, w)
        else:
            assert_allclose(g, w, rtol=rtol, atol=atol)


def np_softmax(v: numpy.ndarray, axis: int) -> numpy.ndarray:
    e = numpy.exp(v - v.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_logsumexp(v: numpy.ndarray, axis: Any, keepdims: bool = False) -> numpy.ndarray:
    top = v.max(axis=axis, keepdims=True)
    out = numpy.log(numpy.exp(v - top).sum(axis=axis, keepdims=True)) + top
    return out if keepdims else numpy.squeeze(out, axis=axis)


Case = tuple[Callable[[flow.Tensor], Any], Callable[[numpy.ndarray], Any]]
# name -> (mpiflow call, numpy reference); applied to a float32 matrix of shape (ODD, 5).
CASES: dict[str, Case] = {
    "sum": (lambda t: t.sum(), lambda v: v.sum()),
    "sum0": (lambda t: flow.sum(t, 0), lambda v: v.sum(0)),
    "sum1": (lambda t: t.sum(dim=1), lambda v: v.sum(1)),
    "sum-1-keep": (lambda t: t.sum(-1, keepdim=True), lambda v: v.sum(-1, keepdims=True)),
    "sum01": (lambda t: t.sum((0, -1)), lambda v: v.sum((0, 1))),
    "mean": (lambda t: t.mean(), lambda v: v.mean()),
    "mean0-keep": (lambda t: t.mean(0, keepdim=True), lambda v: v.mean(0, keepdims=True)),
    "mean1": (lambda t: flow.mean(t, [1]), lambda v: v.mean(1)),
    "prod0": (lambda t: t.prod(0), lambda v: v.prod(0)),
    "prod1": (lambda t: flow.prod(t, 1, keepdim=True), lambda v: v.prod(1, keepdims=True)),
    "amax0": (lambda t: t.amax(0), lambda v: v.max(0)),
    "amax1": (lambda t: flow.amax(t, -1, keepdim=True), lambda v: v.max(1, keepdims=True)),
    "amin": (lambda t: t.amin(), lambda v: v.min()),
    "amin0": (lambda t: flow.amin(t, (0,)), lambda v: v.min(0)),
    "max": (lambda t: t.max(), lambda v: v.max()),
    "max0": (lambda t: t.max(0), lambda v: (v.max(0), v.argmax(0))),
    "min1-keep": (lambda t: flow.min(t, 1, keepdim=True),
                  lambda v: (v.min(1, keepdims=True), v.argmin(1, keepdims=True))),
    "argmax": (lambda t: t.argmax(), lambda v: v.argmax()),
    "argmax0": (lambda t: flow.argmax(t, 0), lambda v: v.argmax(0)),
    "argmin1-keep": (lambda t: t.argmin(-1, keepdim=True), lambda v: v.argmin(1, keepdims=True)),
    "all0": (lambda t: (t > -1).all(0), lambda v: (v > -1).all(0)),
    "any1": (lambda t: flow.any(t > 1, 1), lambda v: (v > 1).any(1)),
    "all": (lambda t: (t > -2).all(), lambda v: (v > -2).all()),
    "var": (lambda t: t.var(), lambda v: v.var(ddof=1)),
    "var0": (lambda t: flow.var(t, 0), lambda v: v.var(0, ddof=1)),
    "var1-biased": (lambda t: t.var(1, unbiased=False), lambda v: v.var(1)),
    "std0-keep": (lambda t: t.std(0, keepdim=True), lambda v: v.std(0, ddof=1, keepdims=True)),
    "std-c0": (lambda t: flow.std(t, correction=0), lambda v: v.std()),
    "logsumexp0": (lambda t: t.logsumexp(0), lambda v: np_logsumexp(v, 0)),
    "logsumexp1-keep": (lambda t: flow.logsumexp(t, -1, keepdim=True),
                        lambda v: np_logsumexp(v, 1, keepdims=True)),
    "logsumexp01": (lambda t: flow.logsumexp(t, (0, 1)), lambda v: np_logsumexp(v, (0, 1))),
    "softmax0": (lambda t: t.softmax(0), lambda v: np_softmax(v, 0)),
    "softmax1": (lambda t: flow.softmax(t, -1), lambda v: np_softmax(v, 1)),
    "log_softmax0": (lambda t: t.log_softmax(0), lambda v: numpy.log(np_softmax(v, 0))),
    "log_softmax1": (lambda t: flow.log_softmax(t, 1), lambda v: numpy.log(np_softmax(v, 1))),
    "cumsum0": (lambda t: t.cumsum(0), lambda v: v.cumsum(0)),
    "cumsum1": (lambda t: flow.cumsum(t, -1), lambda v: v.cumsum(1)),
    "norm": (lambda t: t.norm(), lambda v: numpy.linalg.norm(v)),
    "norm0": (lambda t: flow.norm(t, dim=0), lambda v: numpy.linalg.norm(v, axis=0)),
    "norm1-p1": (lambda t: t.norm(1, 1), lambda v: numpy.abs(v).sum(1)),
    "norm-inf": (lambda t: t.norm(math.inf), lambda v: numpy.abs(v).max()),
    "norm-p3": (lambda t: t.norm(3, dim=0, keepdim=True),
                lambda v: (numpy.abs(v) ** 3).sum(0, keepdims=True) ** (1 / 3)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_local(name: str) -> None:
    fn, ref = CASES[name]
    value = full((ODD, 5))
    check(fn(flow.tensor(value)), ref(value))


@pytest.mark.mpi
@pytest.mark.parametrize("sbp", [S0, S1, B, P], ids=str)
@pytest.mark.parametrize("name", list(CASES))
def test_global_matches_numpy(name: str, sbp: Any) -> None:
    fn, ref = CASES[name]
    value = full((ODD, 5), seed=1)
    check(fn(glob(value, sbp)), ref(value))


SMALL = ["sum0", "mean0-keep", "prod0", "amax0", "amin0", "max0", "argmax0", "all0",
         "var0", "logsumexp0", "softmax0", "cumsum0", "norm0", "min1-keep", "softmax1"]


@pytest.mark.mpi
@pytest.mark.filterwarnings("ignore:.*:RuntimeWarning")  # numpy's var of one row
@pytest.mark.parametrize("name", SMALL)
def test_global_with_empty_shards(name: str) -> None:
    """Fewer rows than ranks: some ranks hold empty shards of the split dim."""
    fn, ref = CASES[name]
    value = full((2, 3), seed=2)
    check(fn(glob(value, S0)), ref(value))
    check(fn(glob(value[:1], S0)), ref(value[:1]))


@pytest.mark.mpi
@pytest.mark.parametrize("name", ["sum0", "amax0", "argmax0", "softmax1", "var0", "norm"])
def test_global_on_part_of_the_world(name: str) -> None:
    """Ranks outside the placement take part in collectives but hold empty shards."""
    fn, ref = CASES[name]
    value = full((ODD, 5), seed=3)
    check(fn(glob(value, S0, flow.placement("cpu", [SIZE - 1]))), ref(value))
    check(fn(glob(value, S0, flow.placement("cpu", sorted({0, SIZE - 1})))), ref(value))


# -- layouts of the results ----------------------------------------------------------------
def sbp_of(t: flow.Tensor) -> tuple[Any, ...]:
    return tuple(t.sbp)


@pytest.mark.mpi
def test_sum_over_a_split_dim_is_partial_and_elsewhere_stays_split() -> None:
    x = glob(full((ODD, 4, 3)), S0)
    assert sbp_of(x.sum()) == (P,)
    assert sbp_of(x.sum(0)) == (P,)
    assert sbp_of(x.mean((0, 2))) == (P,)
    assert sbp_of(x.sum(2)) == (S0,)
    y = glob(full((2, ODD, 3)), S1)
    assert sbp_of(y.sum(0)) == (S0,)  # the split dim shifts down
    assert sbp_of(y.sum(0, keepdim=True)) == (S1,)
    assert sbp_of(y.sum(-1)) == (S1,)
    p = glob(full((3, 4)), P)
    assert sbp_of(p.sum(1)) == (P,)
    assert sbp_of(p.mean()) == (P,)


@pytest.mark.mpi
def test_partial_results_finish_on_conversion() -> None:
    value = full((ODD, 3))
    x = glob(value, S0)
    assert x.sum().item() == pytest.approx(float(value.sum()), rel=1e-5)
    assert x.mean().item() == pytest.approx(float(value.mean()), rel=1e-5, abs=1e-6)
    assert_allclose(x.sum(0).to_global(sbp=B).to_local().numpy(), value.sum(0), rtol=1e-5)


@pytest.mark.mpi
def test_max_and_min_over_a_split_dim_are_partial_max_and_min() -> None:
    x = glob(full((ODD, 3)), S0)
    assert sbp_of(x.amax(0)) == (PMAX,)
    assert sbp_of(x.max()) == (PMAX,)
    assert sbp_of(x.amin()) == (PMIN,)
    assert sbp_of(x.amax(1)) == (S0,)
    values_, indices = x.max(0)
    assert sbp_of(values_) == (PMAX,)
    assert not indices.sbp[0].is_partial()  # indices need the whole reduced dim
    assert sbp_of(x.amax(0).amax()) == (PMAX,)  # P(max) -> P(max)


@pytest.mark.mpi
def test_ops_along_a_dim_never_split_it() -> None:
    x = glob(full((ODD, 4)), S0)
    assert sbp_of(x.softmax(1)) == (S0,)
    assert sbp_of(x.log_softmax(-1)) == (S0,)
    assert sbp_of(x.cumsum(1)) == (S0,)
    assert sbp_of(x.logsumexp(1)) == (S0,)
    assert sbp_of(x.prod(1)) == (S0,)
    assert sbp_of(x.argmax(1)) == (S0,)
    assert sbp_of((x > 0).any(1)) == (S0,)
    for out in (x.softmax(0), x.argmax(0, keepdim=True), x.prod(0, keepdim=True),
                x.logsumexp(0, keepdim=True), x.max(0, keepdim=True).indices):
        assert out.sbp[0] not in (S0, P)
    # a scan along the split dim keeps it split: each rank sends one row of totals
    with count_collectives() as calls:
        assert sbp_of(x.cumsum(0)) == (S0,)
    assert dict(calls) == ({"all_gather": 1} if SIZE > 1 else {})
    assert sbp_of(glob(full((3, 4)), P).cumsum(0)) == (P,)


@pytest.mark.mpi
def test_sum_over_a_split_dim_communicates_nothing() -> None:
    x = glob(full((ODD, 3)), S0)
    with count_collectives() as calls:
        out = x.sum(0)
        x.amax(0)
        x.softmax(1)
    assert sum(calls.values()) == 0
    assert_allclose(out.numpy(), full((ODD, 3)).sum(0), rtol=1e-5)


# -- a 2-D mesh ----------------------------------------------------------------------------
MESH_CASES = ["sum", "sum0", "sum1", "mean1", "amax0", "max0", "argmax", "softmax0", "var",
              "cumsum1", "logsumexp1-keep", "norm"]
MESH_SBPS = [(S0, S1), (S0, S0), (B, S0), (P, S1), (S1, P)]


@pytest.mark.mpi(min_size=4)
@pytest.mark.parametrize("sbp", MESH_SBPS, ids=lambda s: "".join(map(str, s)))
@pytest.mark.parametrize("name", MESH_CASES)
def test_global_on_a_2d_mesh(name: str, sbp: tuple[Any, ...]) -> None:
    fn, ref = CASES[name]
    value = full((9, 5), seed=4)
    check(fn(glob(value, sbp, flow.placement("cpu", [[0, 1], [2, 3]]))), ref(value))


@pytest.mark.mpi(min_size=4)
def test_2d_mesh_layouts_per_axis() -> None:
    x = glob(full((9, 5)), (S0, S1), flow.placement("cpu", [[0, 1], [2, 3]]))
    assert sbp_of(x.sum(0)) == (P, S0)
    assert sbp_of(x.sum(1)) == (S0, P)
    assert sbp_of(x.sum()) == (P, P)
    assert sbp_of(x.amax(1)) == (S0, PMAX)


# -- dtypes --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["bool", "int8", "int32", "uint8", "int64"])
def test_sum_prod_cumsum_of_integers_and_bools_give_int64(dtype: str) -> None:
    value = (numpy.arange(6).reshape(2, 3) % 3).astype(dtype)
    t = flow.tensor(value)
    for out, want in ((t.sum(), value.sum(dtype=numpy.int64)),
                      (t.sum(0), value.sum(0, dtype=numpy.int64)),
                      (t.prod(1), value.prod(1, dtype=numpy.int64)),
                      (t.cumsum(1), value.cumsum(1, dtype=numpy.int64))):
        assert out.dtype == flow.int64
        assert_array_equal(out.numpy(), want)


def test_dtype_rules() -> None:
    f16 = flow.tensor(numpy.array([1.0, 2.0, 4.0], numpy.float16))
    assert f16.mean().dtype == flow.float16 and f16.mean().item() == pytest.approx(7 / 3, 1e-3)
    assert f16.sum().dtype == flow.float16
    ints = flow.tensor([[1, 2], [3, 4]])
    with pytest.raises(TypeError, match="floating point"):
        ints.mean()
    with pytest.raises(TypeError, match="floating point"):
        ints.var()
    with pytest.raises(TypeError, match="floating point"):
        ints.softmax(0)
    mean = ints.mean(dtype=flow.float64)
    assert mean.dtype == flow.float64 and mean.item() == 2.5
    assert ints.sum(dtype=flow.float32).dtype == flow.float32
    assert ints.amax().dtype == flow.int64 and ints.amax(0).tolist() == [3, 4]
    assert ints.argmax().dtype == flow.int64 and ints.argmax().item() == 3
    assert ints.logsumexp(0).dtype == flow.float32
    assert ints.all().dtype == flow.bool and ints.any(0).dtype == flow.bool
    u8 = flow.tensor(numpy.array([1, 0], numpy.uint8))
    assert u8.all().dtype == flow.uint8  # PyTorch keeps uint8
    assert flow.tensor([1.0, 2.0], dtype=flow.float64).softmax(0).dtype == flow.float64
    assert ints.softmax(0, dtype=flow.float64).dtype == flow.float64


@pytest.mark.mpi
def test_integer_reductions_are_exact_on_global_tensors() -> None:
    value = numpy.arange(ODD * 3, dtype=numpy.int32).reshape(ODD, 3)
    for sbp in (S0, S1, P):
        x = glob(value, sbp)
        check(x.sum(0), value.sum(0, dtype=numpy.int64))
        check(x.amax(0), value.max(0))
        check(x.amin(), value.min())
        check(x.argmin(0), value.argmin(0))


# -- dims, shapes, errors ------------------------------------------------------------------
def test_dims_negative_tuples_and_keepdim() -> None:
    value = full((2, 3, 4))
    t = flow.tensor(value)
    check(t.sum((-1, 0)), value.sum((0, 2)))
    check(t.sum((), keepdim=True), value.sum(keepdims=True))  # () means every dim
    check(t.amax((-3, -2), keepdim=True), value.max((0, 1), keepdims=True))
    check(t.mean([2, 1]), value.mean((1, 2)))
    assert t.argmax(keepdim=True).shape == ()  # keepdim is ignored without a dim
    with pytest.raises(IndexError, match="range"):
        t.sum(3)
    with pytest.raises(IndexError, match="range"):
        t.amax(-4)
    with pytest.raises(ValueError, match="more than once"):
        t.sum((1, -2))
    with pytest.raises(TypeError, match="one int"):
        t.max((0, 1))


def test_zero_dim_tensors() -> None:
    t = flow.tensor(3.0)
    for out in (t.sum(), t.sum(0), t.mean(-1), t.amax(0), t.max(), t.logsumexp(0), t.cumsum(0),
                t.prod(0), t.norm()):
        assert out.shape == () and out.item() == pytest.approx(3.0)
    assert t.max(0).indices.item() == 0
    assert t.argmax(0).item() == 0 and t.softmax(0).item() == 1.0
    assert t.log_softmax(0).item() == 0.0


def test_empty_reductions() -> None:
    empty = flow.tensor(numpy.zeros((0, 3), numpy.float32))
    assert empty.sum().item() == 0.0
    assert empty.sum(0).tolist() == [0.0, 0.0, 0.0]
    assert empty.amax(1).shape == (0,)
    assert empty.logsumexp(0).tolist() == [-math.inf] * 3
    with pytest.raises(RuntimeError, match="numel"):
        flow.tensor(numpy.zeros((2, 0))).max()
    with pytest.raises(IndexError, match="non-zero size"):
        empty.argmax(0)


def test_max_with_a_tensor_is_elementwise_and_results_are_named() -> None:
    a, b = flow.tensor([1.0, 5.0]), flow.tensor([3.0, 2.0])
    assert flow.max(a, b).tolist() == [3.0, 5.0] and a.min(b).tolist() == [1.0, 2.0]
    result = flow.tensor([[1, 9], [7, 2]]).max(1)
    values_, indices = result
    assert result.values is values_ and result.indices is indices
    assert values_.tolist() == [9, 7] and indices.tolist() == [1, 0]


# -- numerics ------------------------------------------------------------------------------
@pytest.mark.mpi
@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # log(0) of all -inf
def test_softmax_and_logsumexp_are_stable() -> None:
    big = numpy.array([[1000.0, 1000.0, -1000.0], [-1e4, 0.0, 1e4]], numpy.float32)
    for t in (flow.tensor(big), glob(big, S0), glob(big, S1)):
        assert_allclose(t.softmax(1).numpy(), [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
        assert numpy.isfinite(t.log_softmax(1).numpy()[0, :2]).all()
        assert_allclose(t.logsumexp(1).numpy(), [1000 + math.log(2), 1e4], rtol=1e-6)
    neg = flow.tensor([-math.inf, -math.inf])
    assert neg.logsumexp(0).item() == -math.inf


@pytest.mark.mpi
def test_var_is_two_pass_and_handles_small_counts() -> None:
    shifted = full((ODD,), numpy.float64) + 1e8
    for t in (flow.tensor(shifted), glob(shifted, S0)):
        assert t.var().item() == pytest.approx(float(shifted.var(ddof=1)), rel=1e-6)
    one = flow.tensor([2.0])
    assert math.isnan(one.var().item()) and one.var(correction=0).item() == 0.0
    assert flow.tensor([1.0, 2.0]).var(correction=0).item() == 0.25
