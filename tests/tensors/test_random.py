"""Random tensors: one logical value whatever the layout, seeds and state, dtypes, quality.

Every rank runs every test (SPMD), so all ranks make the same random calls and their
generators stay in step; ``.numpy()`` of a global tensor is collective.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any

import numpy
import pytest
from helpers import run_job
from numpy.testing import assert_allclose, assert_array_equal

import mpiflow as flow
from mpiflow.layouts.shards import shard_slices
from mpiflow.sbp import broadcast, partial_sum, split

RANK, WORLD = flow.env.get_rank(), flow.env.get_world_size()
ODD = 3 * WORLD + 1  # no rank count divides it evenly
ALL = flow.placement("cpu", list(range(WORLD)))

Factory = Callable[..., flow.Tensor]

# name -> f(shape, **layout): every random creation function, on a 2-d shape
FACTORIES: dict[str, Factory] = {
    "rand": lambda shape, **kw: flow.rand(*shape, **kw),
    "randn": lambda shape, **kw: flow.randn(*shape, **kw),
    "randn_float64": lambda shape, **kw: flow.randn(*shape, dtype=flow.float64, **kw),
    "rand_float16": lambda shape, **kw: flow.rand(*shape, dtype=flow.float16, **kw),
    "normal": lambda shape, **kw: flow.normal(3.0, 0.5, shape, **kw),
    "randint": lambda shape, **kw: flow.randint(-7, 100, shape, **kw),
}


def _twice(make: Callable[[], flow.Tensor], seed: int = 1234) -> tuple[flow.Tensor, ...]:
    """``make()`` after the same seed and the same earlier calls, twice."""
    out = []
    for _ in range(2):
        flow.manual_seed(seed)
        flow.rand(2)  # a call before: the counter is not at 0
        out.append(make())
    return tuple(out)


def _check_layout(name: str, shape: tuple[int, ...], placement: flow.placement,
                  sbp: Any) -> None:
    make = FACTORIES[name]
    flow.manual_seed(1234)
    flow.rand(2)
    g = make(shape, placement=placement, sbp=sbp)
    flow.manual_seed(1234)
    flow.rand(2)
    expected = make(shape).numpy()
    assert g.is_global and tuple(g.shape) == shape and g.dtype == flow.tensor(expected).dtype
    assert_array_equal(g.numpy(), expected)
    coords = placement.coordinates(RANK)
    if coords is not None:  # this rank's shard is its region of the logical value
        sbp_tuple = (sbp,) if isinstance(sbp, flow.sbp.sbp) else tuple(sbp)
        region = shard_slices(shape, placement.mesh_shape, sbp_tuple, coords)
        assert_array_equal(g.to_local().numpy(), expected[region])


# -- one logical value whatever the layout ----------------------------------------------------
@pytest.mark.mpi
@pytest.mark.parametrize("name", list(FACTORIES))
@pytest.mark.parametrize("sbp", [split(0), split(1), broadcast], ids=str)
@pytest.mark.parametrize("shape", [(ODD, 5), (4, ODD), (1, 3)], ids=str)
def test_global_value_equals_local_value(name: str, sbp: Any, shape: tuple[int, ...]) -> None:
    _check_layout(name, shape, ALL, sbp)


@pytest.mark.mpi(min_size=4)
@pytest.mark.parametrize("name", ["randn", "rand", "randint"])
@pytest.mark.parametrize("sbp", [(split(0), split(1)), (broadcast, split(0)),
                                 (split(0), split(0)), (split(1), broadcast),
                                 (broadcast, broadcast)], ids=lambda s: ",".join(map(str, s)))
def test_global_value_on_a_2d_mesh(name: str, sbp: tuple[Any, ...]) -> None:
    mesh = flow.placement("cpu", [[0, 1], [2, 3]])
    _check_layout(name, (2 * ODD + 1, 7), mesh, sbp)


@pytest.mark.mpi(min_size=4)
def test_ranks_along_a_broadcast_axis_hold_equal_shards() -> None:
    # OneFlow's example: 4 rows, (B, S0) on [[0, 1], [2, 3]]: ranks 0, 2 rows 0-1; 1, 3 rows 2-3
    mesh = flow.placement("cpu", [[0, 1], [2, 3]])
    g = _twice(lambda: flow.randn(4, 3, placement=mesh, sbp=(broadcast, split(0))))[0]
    local = _twice(lambda: flow.randn(4, 3))[0].numpy()
    rows = slice(0, 2) if RANK in (0, 2) else slice(2, 4)
    assert_array_equal(g.to_local().numpy(), local[rows])


@pytest.mark.mpi
@pytest.mark.parametrize("sbp", [split(0), broadcast], ids=str)
def test_randperm_is_the_same_permutation_on_every_layout(sbp: Any) -> None:
    g = _twice(lambda: flow.randperm(ODD, placement=ALL, sbp=sbp))[0]
    local = _twice(lambda: flow.randperm(ODD))[0].numpy()
    assert_array_equal(g.numpy(), local)
    assert_array_equal(numpy.sort(local), numpy.arange(ODD))
    assert local.dtype == numpy.int64


@pytest.mark.mpi
def test_a_placement_on_some_ranks_keeps_every_counter_in_step() -> None:
    last = flow.placement("cpu", [WORLD - 1])
    flow.manual_seed(7)
    g = flow.rand(ODD, placement=last, sbp=broadcast)
    after = flow.rand(5).numpy()  # every rank, inside the placement or not, took one call
    flow.manual_seed(7)
    expected = flow.rand(ODD).numpy()
    assert_array_equal(flow.rand(5).numpy(), after)
    assert_array_equal(g.numpy(), expected)
    if RANK != WORLD - 1:
        assert g.to_local().numel() == 0


@pytest.mark.mpi
@pytest.mark.parametrize("shape", [(0, 3), (ODD, 0), (0,)], ids=str)
@pytest.mark.parametrize("sbp", [split(0), broadcast], ids=str)
def test_zero_size_dims(shape: tuple[int, ...], sbp: Any) -> None:
    g = flow.randn(*shape, placement=ALL, sbp=sbp)
    assert tuple(g.shape) == shape and g.numpy().shape == shape
    assert flow.rand(*shape).numpy().shape == shape


@pytest.mark.mpi
def test_zero_dim_tensor() -> None:
    g = _twice(lambda: flow.rand((), placement=ALL, sbp=broadcast))[0]
    local = _twice(lambda: flow.rand(()))[0]
    assert local.shape == () and g.shape == ()
    assert g.numpy() == local.numpy()


@pytest.mark.mpi
@pytest.mark.parametrize("make", [
    lambda **kw: flow.rand(3, 4, **kw),
    lambda **kw: flow.randn(3, 4, **kw),
    lambda **kw: flow.randint(5, (3, 4), **kw),
    lambda **kw: flow.normal(0.0, 1.0, (3, 4), **kw),
    lambda **kw: flow.randperm(4, **kw),
], ids=["rand", "randn", "randint", "normal", "randperm"])
def test_a_partial_sbp_is_refused_and_takes_no_call(make: Factory) -> None:
    flow.manual_seed(5)
    with pytest.raises(ValueError, match="partial"):
        make(placement=ALL, sbp=partial_sum)
    state = flow.get_rng_state().numpy()
    assert state.tolist() == [5, 0]


# -- seeds and state --------------------------------------------------------------------------
def test_same_seed_same_values_different_seed_different_values() -> None:
    a, b = _twice(lambda: flow.randn(ODD, 3), seed=11)
    assert_array_equal(a.numpy(), b.numpy())
    c = _twice(lambda: flow.randn(ODD, 3), seed=12)[0]
    assert not numpy.array_equal(a.numpy(), c.numpy())


def test_each_call_advances_the_counter_by_one() -> None:
    g = flow.manual_seed(3)
    assert isinstance(g, flow.Generator) and g is flow.default_generator
    first, second = flow.rand(100).numpy(), flow.rand(100).numpy()
    assert not numpy.array_equal(first, second)
    assert flow.get_rng_state().numpy().tolist() == [3, 2]
    assert flow.initial_seed() == 3


def test_state_round_trips() -> None:
    flow.manual_seed(9)
    flow.randn(4)
    state = flow.get_rng_state()
    a = flow.randn(4).numpy()
    flow.manual_seed(100)
    flow.set_rng_state(state)
    assert_array_equal(flow.randn(4).numpy(), a)
    with pytest.raises(ValueError, match="seed, counter"):
        flow.set_rng_state([1, 2, 3])


@pytest.mark.mpi
def test_a_generator_is_independent_of_the_default_one() -> None:
    flow.manual_seed(1)
    g = flow.Generator().manual_seed(1)
    from_g = flow.rand(6, generator=g).numpy()
    assert flow.get_rng_state().numpy().tolist() == [1, 0]  # the default did not move
    assert_array_equal(flow.rand(6).numpy(), from_g)
    assert g.get_state().numpy().tolist() == [1, 1]
    assert g.initial_seed() == 1
    h = flow.Generator().manual_seed(1)
    for make in (lambda: flow.zeros(6).uniform_(generator=h),
                 lambda: flow.rand(6, generator=h, placement=ALL, sbp=split(0))):
        h.manual_seed(1)
        assert_array_equal(make().numpy(), from_g)
    assert flow.get_rng_state().numpy().tolist() == [1, 1]


def test_seed_values() -> None:
    assert flow.manual_seed(-1).initial_seed() == 2**64 - 1
    assert flow.manual_seed(2**64 - 1).initial_seed() == 2**64 - 1
    assert flow.manual_seed(numpy.int64(4)).initial_seed() == 4
    with pytest.raises(TypeError, match="int"):
        flow.manual_seed(1.5)
    with pytest.raises(ValueError, match="64 bits"):
        flow.manual_seed(2**64)


@pytest.mark.mpi
def test_seed_is_the_same_on_every_rank(comm: Any) -> None:
    value = flow.seed()
    assert flow.initial_seed() == value and 0 <= value < 2**63
    mine = numpy.array([value], dtype=numpy.uint64)
    everyone = numpy.zeros(WORLD, dtype=numpy.uint64)
    comm.all_gather(mine, everyone)
    assert (everyone == value).all()


def test_stream_is_stable_across_versions() -> None:
    # A regression guard: the generator's numbers are part of its contract.
    flow.manual_seed(0)
    assert_allclose(flow.rand(3, dtype=flow.float64).numpy(), GOLDEN_RAND, rtol=0, atol=1e-15)
    assert_allclose(flow.randn(3, dtype=flow.float64).numpy(), GOLDEN_RANDN, rtol=0,
                    atol=1e-12)
    assert flow.randint(0, 1000, (3,)).tolist() == GOLDEN_RANDINT


GOLDEN_RAND = [0.3080551292981967, 0.09251465010470794, 0.5724518940360095]
GOLDEN_RANDN = [0.9454963348334755, 0.41908284533170764, 0.8481408860734961]
GOLDEN_RANDINT = [56, 252, 608]


# -- dtypes -----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [flow.float16, flow.float32, flow.float64], ids=str)
def test_float_dtypes(dtype: flow.DType) -> None:
    for make in (flow.rand, flow.randn):
        x = make(ODD, 3, dtype=dtype)
        assert x.dtype is dtype
    assert flow.rand(3).dtype is flow.float32
    assert flow.normal(0.0, 1.0, (2,), dtype=dtype).dtype is dtype


def test_float32_and_float16_uniforms_are_truncated_float64_uniforms() -> None:
    u64 = _twice(lambda: flow.rand(1000, dtype=flow.float64))[0].numpy()
    u32 = _twice(lambda: flow.rand(1000, dtype=flow.float32))[0].numpy()
    u16 = _twice(lambda: flow.rand(1000, dtype=flow.float16))[0].numpy()
    assert_array_equal(u32, numpy.floor(u64 * 2**24) / 2**24)
    assert_array_equal(u16, numpy.floor(u64 * 2**11) / 2**11)
    n64 = _twice(lambda: flow.randn(1000, dtype=flow.float64))[0].numpy()
    n32 = _twice(lambda: flow.randn(1000, dtype=flow.float32))[0].numpy()
    assert_array_equal(n32, n64.astype(numpy.float32))


def test_integer_dtypes_are_refused_for_floats() -> None:
    with pytest.raises(TypeError, match="floating"):
        flow.rand(3, dtype=flow.int64)
    with pytest.raises(TypeError, match="floating"):
        flow.randn(3, dtype=flow.int32)
    with pytest.raises(TypeError, match="floating"):
        flow.zeros(3, dtype=flow.int64).uniform_()


@pytest.mark.parametrize("dtype", [flow.int8, flow.int32, flow.int64, flow.uint8, flow.uint64,
                                   flow.float32], ids=str)
def test_randint_dtypes(dtype: flow.DType) -> None:
    low = 0 if dtype.numpy.kind == "u" else -5
    x = flow.randint(low, 100, (ODD, 7), dtype=dtype)
    assert x.dtype is dtype
    v = x.numpy()
    assert v.min() >= low and v.max() < 100


def test_randint_at_the_ends_of_int64() -> None:
    x = flow.randint(-(2**63), 2**63 - 1, (1000,)).numpy()
    assert x.min() < -(2**61) and x.max() > 2**61
    b = flow.randint(0, 2, (100,), dtype=flow.bool).numpy()
    assert b.dtype == numpy.bool_ and b.any() and not b.all()
    with pytest.raises(ValueError, match="does not fit"):
        flow.randint(0, 300, (2,), dtype=flow.uint8)
    with pytest.raises(ValueError, match="low < high"):
        flow.randint(5, 5, (2,))


def test_randint_signatures() -> None:
    assert flow.randint(10, (3,)).shape == (3,)
    assert flow.randint(3, 10, (3, 2)).shape == (3, 2)
    assert flow.randint(10, size=(4,)).shape == (4,)
    assert flow.randint(high=5, size=(2,)).shape == (2,)
    assert (flow.randint(3, 4, (5,)).numpy() == 3).all()
    with pytest.raises(TypeError, match="size"):
        flow.randint(10)


def test_requires_grad() -> None:
    x = flow.randn(3, requires_grad=True)
    assert x.requires_grad and x.is_leaf
    with pytest.raises(RuntimeError, match="floating"):
        flow.randint(3, (2,), requires_grad=True)


# -- like forms and in place ------------------------------------------------------------------
@pytest.mark.mpi
def test_like_forms_keep_shape_dtype_and_layout() -> None:
    t = flow.zeros(ODD, 3, dtype=flow.float64, placement=ALL, sbp=split(0))
    for like in (flow.rand_like(t), flow.randn_like(t)):
        assert like.dtype is flow.float64 and like.sbp == (split(0),) and like.shape == t.shape
    r = flow.randint_like(t, 4)
    assert r.dtype is flow.float64 and r.numpy().max() < 4
    r = flow.randint_like(flow.zeros(5, dtype=flow.int32), 2, 4)
    assert r.dtype is flow.int32 and set(r.numpy().tolist()) <= {2, 3}
    assert flow.rand_like(t, dtype=flow.float16, sbp=broadcast, placement=ALL).sbp == (broadcast,)


@pytest.mark.mpi
@pytest.mark.parametrize("sbp", [split(0), split(1), broadcast], ids=str)
def test_in_place_fills_match_the_local_value(sbp: Any) -> None:
    shape = (ODD, 4)
    for method, args in (("uniform_", (-2.0, 3.0)), ("normal_", (1.0, 2.0))):
        g = flow.zeros(*shape, placement=ALL, sbp=sbp)
        version = g._version
        flow.manual_seed(21)
        out = getattr(g, method)(*args)
        flow.manual_seed(21)
        local = getattr(flow.zeros(*shape), method)(*args)
        assert out is g and g._version == version + 1
        assert_array_equal(g.numpy(), local.numpy())
        assert g.sbp == (sbp,)


def test_in_place_uniform_matches_rand_and_stays_below_the_bound() -> None:
    flow.manual_seed(2)
    a = flow.zeros(ODD, 3, dtype=flow.float64).uniform_()
    flow.manual_seed(2)
    assert_array_equal(a.numpy(), flow.rand(ODD, 3, dtype=flow.float64).numpy())
    for dtype in (flow.float16, flow.float32):
        x = flow.zeros(20000, dtype=dtype).uniform_(1.0, 1.001).numpy()
        assert x.min() >= 1.0 and x.max() < 1.001 + 1e-12


@pytest.mark.mpi
def test_in_place_on_a_partial_tensor_is_refused() -> None:
    t = flow.zeros(3, placement=ALL, sbp=partial_sum)
    with pytest.raises(ValueError, match="partial"):
        t.normal_()
    with pytest.raises(ValueError, match="partial"):
        t.uniform_()


# -- quality ----------------------------------------------------------------------------------
N = 100_000


def _lag1(x: numpy.ndarray) -> float:
    return float(numpy.corrcoef(x[:-1], x[1:])[0, 1])


def test_uniform_quality() -> None:
    flow.manual_seed(0)
    for dtype in (flow.float16, flow.float32, flow.float64):
        u = flow.rand(N, dtype=dtype).numpy().astype(numpy.float64)
        assert u.min() >= 0.0 and u.max() < 1.0
        assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005
        assert abs(_lag1(u)) < 0.01
        counts = numpy.histogram(u, bins=10, range=(0, 1))[0]
        assert (abs(counts - N / 10) < 0.05 * N / 10).all(), counts


def test_normal_quality() -> None:
    flow.manual_seed(0)
    z = flow.randn(N, dtype=flow.float64).numpy()
    assert abs(z.mean()) < 0.02 and abs(z.var() - 1) < 0.02
    assert abs(_lag1(z)) < 0.01
    assert abs((z < 1).mean() - 0.8413) < 0.01  # the CDF at one standard deviation
    assert abs((z**4).mean() - 3) < 0.1  # kurtosis of a normal
    y = flow.normal(3.0, 0.5, (N,), dtype=flow.float64).numpy()
    assert abs(y.mean() - 3) < 0.01 and abs(y.std() - 0.5) < 0.01


def test_randint_quality() -> None:
    flow.manual_seed(0)
    v = flow.randint(0, 7, (N,)).numpy()
    counts = numpy.bincount(v, minlength=7)
    assert (abs(counts - N / 7) < 0.05 * N / 7).all(), counts
    assert abs(_lag1(v.astype(numpy.float64))) < 0.01


def test_neighbouring_calls_rows_and_seeds_are_uncorrelated() -> None:
    flow.manual_seed(0)
    a, b = flow.rand(N).numpy(), flow.rand(N).numpy()
    assert abs(numpy.corrcoef(a, b)[0, 1]) < 0.01
    flow.manual_seed(1)
    c = flow.rand(N).numpy()
    assert abs(numpy.corrcoef(a, c)[0, 1]) < 0.01
    m = flow.rand(2, N).numpy()
    assert abs(numpy.corrcoef(m[0], m[1])[0, 1]) < 0.01
    flow.manual_seed(0)
    z = flow.randn(N).numpy()  # randn of the same call does not reuse rand's bits
    assert abs(numpy.corrcoef(a, z)[0, 1]) < 0.01


def test_randperm_quality() -> None:
    flow.manual_seed(0)
    first = numpy.array([flow.randperm(5).numpy()[0] for _ in range(5000)])
    counts = numpy.bincount(first, minlength=5)
    assert (abs(counts - 1000) < 150).all(), counts
    assert flow.randperm(0).shape == (0,)


# -- the same numbers from separate jobs of 1 and 3 ranks -------------------------------------
_CHECKSUM_JOB = textwrap.dedent("""
    import numpy
    import mpiflow as flow
    from mpiflow.sbp import broadcast, split
    world = flow.env.get_world_size()
    p = flow.placement("cpu", list(range(world)))
    flow.manual_seed(2024)
    a = flow.randn(10, 7, placement=p, sbp=split(0)).numpy()
    b = flow.rand(5, 11, placement=p, sbp=split(1)).numpy()
    c = flow.randint(0, 1000, (9,), placement=p, sbp=broadcast).numpy()
    d = flow.zeros(7, 3, placement=p, sbp=split(0)).normal_(1.0, 2.0).numpy()
    e = flow.randperm(13, placement=p, sbp=split(0)).numpy()
    if flow.env.get_rank() == 0:
        parts = [a.astype(numpy.float64), b.astype(numpy.float64), c, d, e]
        print("CHECKSUM", " ".join(repr(float(numpy.sum(x * numpy.arange(x.size).reshape(x.shape))))
                                   for x in parts))
""")


def test_a_job_of_three_ranks_reproduces_a_job_of_one() -> None:
    sums = []
    for ranks in (1, 3):
        job = run_job(ranks, _CHECKSUM_JOB, timeout=120)
        assert job.returncode == 0, job.stderr
        lines = [ln for ln in job.stdout.splitlines() if ln.startswith("CHECKSUM")]
        assert len(lines) == 1, job.stdout
        sums.append(lines[0])
    assert sums[0] == sums[1]
