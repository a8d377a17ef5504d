"""The reproducibility switch: every rank count and layout gives the correctly rounded exact
result, so the bits agree across 1-4 ranks (run this file at each)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy
import pytest

import mpiflow as flow
import mpiflow.distributed as dist
from mpiflow.core.exact_sum import round_ratio

pytestmark = pytest.mark.mpi

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
ALL = flow.placement("cpu", list(range(SIZE)))
S0, S1, B = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.broadcast
DTYPES = [numpy.float16, numpy.float32, numpy.float64]


def F(v: Any) -> Fraction:
    return Fraction(float(v))


def rnd(value: Fraction, dtype: Any) -> numpy.generic:
    return numpy.dtype(dtype).type(round_ratio(value.numerator, value.denominator, dtype))


def same(got: Any, want: Any) -> None:
    g, w = numpy.asarray(got), numpy.asarray(want, dtype=numpy.asarray(got).dtype)
    assert g.shape == w.shape and g.tobytes() == w.tobytes(), (g, w)


def data(dtype: Any, shape: tuple[int, int] = (7, 13), seed: int = 0, huge: bool = True
         ) -> numpy.ndarray:
    """Mixed signs and magnitudes with huge cancellations and subnormals (same on all ranks)."""
    rng = numpy.random.default_rng(seed)
    info = numpy.finfo(dtype)
    spread = 6 if huge else 2   # without huge values, squares must stay finite in float16
    x = rng.standard_normal(shape) * numpy.exp(rng.uniform(-spread, spread, shape))
    big = float(info.max) / 4 if huge else 30.0
    x[0, :3] = [big, 1.0, -big]
    x[1, :2] = [float(info.smallest_subnormal), -3 * float(info.smallest_subnormal)]
    with numpy.errstate(all="ignore"):
        return x.astype(dtype)


def layouts(value: numpy.ndarray) -> list[flow.Tensor]:
    return [flow.tensor(value, placement=ALL, sbp=s) for s in (B, S0, S1)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_sum_mean_over_dims_are_correctly_rounded(dtype: Any) -> None:
    x = data(dtype)
    with flow.deterministic():
        for t in layouts(x):
            for dims in ((0, 1), (0,), (1,)):
                kept = [d for d in range(2) if d not in dims]
                rows = numpy.moveaxis(x, kept, list(range(len(kept)))).reshape(
                    -1 if kept else 1, math.prod(x.shape[d] for d in dims))
                exact = [sum(map(F, row), Fraction(0)) for row in rows]
                n = rows.shape[1]
                want = numpy.array([rnd(e, dtype) for e in exact]).reshape(
                    [x.shape[d] for d in kept])
                same(flow.sum(t, dim=dims).numpy(), want)
                same(flow.mean(t, dim=dims).numpy(),
                     numpy.array([rnd(e / n, dtype) for e in exact]).reshape(want.shape))
            s = flow.sum(t)
            assert s.sbp == (B,)


@pytest.mark.parametrize("dtype", DTYPES)
def test_var_std_norm_dot_nansum(dtype: Any) -> None:
    x = data(dtype, (5, 11), seed=1, huge=False)
    flat = x.ravel()
    n = flat.size
    mu = rnd(sum(map(F, flat), Fraction(0)) / n, dtype)
    with numpy.errstate(all="ignore"):
        sq = (flat - mu) * (flat - mu)
    var = rnd(sum(map(F, sq), Fraction(0)) / (n - 1), dtype)
    norm2 = numpy.sqrt(rnd(sum((F(v) ** 2 for v in flat), Fraction(0)), numpy.float64))
    norm1 = rnd(sum((abs(F(v)) for v in flat), Fraction(0)), dtype)
    y = data(dtype, (5, 11), seed=2, huge=False).ravel()
    dot = rnd(sum((F(a) * F(b) for a, b in zip(flat, y)), Fraction(0)), dtype)
    with_nan = x.copy()
    with_nan[2, 3] = numpy.nan
    nansum = rnd(sum((F(v) for v in with_nan.ravel() if not numpy.isnan(v)), Fraction(0)), dtype)
    with flow.deterministic(), numpy.errstate(all="ignore"):
        for t, tn in zip(layouts(x), layouts(with_nan)):
            same(flow.var(t).numpy(), var)
            same(flow.std(t).numpy(), numpy.sqrt(var))
            same(flow.norm(t).numpy(), numpy.asarray(norm2).astype(dtype))
            same(flow.norm(t, 1).numpy(), norm1)
            same(flow.nansum(tn).numpy(), nansum)
            same(flow.sum(tn).numpy(), numpy.dtype(dtype).type(numpy.nan))
        for sbp in (B, S0):
            a = flow.tensor(flat, placement=ALL, sbp=sbp)
            b = flow.tensor(y, placement=ALL, sbp=sbp)
            same(flow.dot(a, b).numpy(), dot)
            same(flow.vdot(a, b).numpy(), dot)


def test_gradient_and_switch_off() -> None:
    x = data(numpy.float64, huge=False)
    t = flow.tensor(x, placement=ALL, sbp=S0, requires_grad=True)
    with flow.deterministic():
        flow.mean(t).backward()
    numpy.testing.assert_array_equal(t.grad.numpy(), numpy.full(x.shape, 1 / x.size))
    assert not flow.are_deterministic_algorithms_enabled()
    off = flow.sum(flow.tensor(x, placement=ALL, sbp=S0))
    numpy.testing.assert_allclose(off.numpy(), x.sum(), rtol=1e-12)


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64, numpy.complex128])
def test_collectives_are_exact(dtype: Any) -> None:
    # rank r holds column r of a fixed table; ranks beyond it hold zeros
    table = numpy.array([[1e16, 1.0, -1e16, 1.0], [0.1, 0.2, 0.3, -0.6],
                         [3.0, 2.0 ** -60, -3.0, 2.0 ** -60]] * 4)
    mine = (table[:, RANK] if RANK < 4 else numpy.zeros(len(table))).astype(dtype)
    if dtype == numpy.complex128:
        mine = mine + 1j * mine[::-1]
    cols = [(table[:, r] if r < 4 else numpy.zeros(len(table))).astype(dtype)
            for r in range(SIZE)]
    if dtype == numpy.complex128:
        cols = [c + 1j * c[::-1] for c in cols]
    stacked = numpy.stack(cols)

    def exact(avg: bool) -> numpy.ndarray:
        part = numpy.float64 if dtype == numpy.complex128 else dtype
        out = []
        for j in range(stacked.shape[1]):
            vals = stacked[:, j]
            re = sum(map(F, vals.real), Fraction(0)) / (SIZE if avg else 1)
            im = sum(map(F, vals.imag), Fraction(0)) / (SIZE if avg else 1)
            out.append(rnd(re, part) + 1j * rnd(im, part) if dtype == numpy.complex128
                       else rnd(re, part))
        return numpy.array(out, dtype)

    with flow.deterministic():
        for op, avg in ((dist.ReduceOp.SUM, False), (dist.ReduceOp.AVG, True)):
            buf = mine.copy()
            dist.all_reduce(buf, op=op)
            same(buf, exact(avg))
            buf = mine.copy()
            dist.reduce(buf, dst=SIZE - 1, op=op)
            same(buf, exact(avg) if RANK == SIZE - 1 else mine)
            per = len(table) // SIZE
            out = numpy.empty(per, dtype)
            dist.reduce_scatter_tensor(out, mine[:per * SIZE].copy(), op=op)
            same(out, exact(avg)[RANK * per:(RANK + 1) * per])


def test_partial_to_broadcast_is_exact() -> None:
    vals = [1e16, 1.0, -1e16, 1.0]
    local = flow.tensor(numpy.array([vals[RANK] if RANK < 4 else 0.0, 0.5]))
    with flow.deterministic():
        p = local.to_global(placement=ALL, sbp=flow.sbp.partial_sum)
        b = p.to_global(sbp=B).to_local().numpy()
    want_first = {1: 1e16, 2: 1e16 + 1.0, 3: 1.0}.get(SIZE, 2.0)
    same(b, numpy.array([want_first, 0.5 * SIZE]))


def test_oneflow_comm_all_reduce_is_exact() -> None:
    vals = [1e16, 1.0, -1e16, 1.0]
    buf = numpy.array([vals[RANK] if RANK < 4 else 0.0])
    with flow.deterministic():
        flow.comm.all_reduce(buf)
    want = {1: 1e16, 2: 1e16 + 1.0, 3: 1.0}.get(SIZE, 2.0)
    same(buf, numpy.array([want]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_shards_and_empty_tensors(dtype: Any) -> None:
    x = numpy.array([0.5, -0.25], dtype)        # fewer elements than ranks: empty shards
    empty = numpy.zeros((0, 3), dtype)
    with flow.deterministic():
        t = flow.tensor(x, placement=ALL, sbp=S0)
        same(flow.sum(t).numpy(), numpy.dtype(dtype).type(0.25))
        same(flow.mean(t).numpy(), numpy.dtype(dtype).type(0.125))
        e = flow.tensor(empty, placement=ALL, sbp=S1)
        same(flow.sum(e).numpy(), numpy.dtype(dtype).type(0.0))
        assert numpy.isnan(flow.mean(e).numpy())
        same(flow.sum(e, dim=0).numpy(), numpy.zeros(3, dtype))
        neg = flow.tensor(numpy.array([-0.0, -0.0, -0.0], dtype), placement=ALL, sbp=S0)
        same(flow.sum(neg).numpy(), numpy.dtype(dtype).type(-0.0))


def test_var_over_a_dim_dtype_argument_and_gradients() -> None:
    x = data(numpy.float32, (6, 9), seed=3, huge=False)
    with flow.deterministic(), numpy.errstate(all="ignore"):
        for t in layouts(x):
            got = flow.var(t, dim=1, keepdim=True).numpy()
            for i in range(x.shape[0]):
                row = x[i]
                mu = rnd(sum(map(F, row), Fraction(0)) / row.size, numpy.float32)
                sq = (row - mu) * (row - mu)
                same(got[i, 0], rnd(sum(map(F, sq), Fraction(0)) / (row.size - 1),
                                    numpy.float32))
            total = sum(map(F, x.ravel()), Fraction(0))
            same(flow.sum(t, dtype=flow.float64).numpy(), rnd(total, numpy.float64))
            same(flow.mean(t, dtype=flow.float64).numpy(), rnd(total / x.size, numpy.float64))
        ints = flow.tensor(numpy.arange(10), placement=ALL, sbp=S0)
        assert flow.sum(ints).numpy() == 45
        g = flow.tensor(x.astype(numpy.float64), placement=ALL, sbp=S1, requires_grad=True)
        flow.var(g).backward()
        xd = x.astype(numpy.float64)
        numpy.testing.assert_allclose(g.grad.numpy(), 2 * (xd - xd.mean()) / (xd.size - 1),
                                      rtol=1e-10, atol=1e-12)


@pytest.mark.mpi(min_size=4)
def test_two_dimensional_meshes() -> None:
    mesh = flow.placement("cpu", [[0, 1], [2, 3]])
    x = data(numpy.float32, (9, 7), seed=4)
    exact = sum(map(F, x.ravel()), Fraction(0))
    cols = [sum(map(F, x[:, j]), Fraction(0)) for j in range(x.shape[1])]
    with flow.deterministic():
        for sbp in ((S0, S1), (S1, S0), (B, S0), (S1, B), (S0, S0)):
            t = flow.tensor(x, placement=mesh, sbp=sbp)
            same(flow.sum(t).numpy(), rnd(exact, numpy.float32))
            same(flow.sum(t, dim=0).numpy(),
                 numpy.array([rnd(c, numpy.float32) for c in cols]))


def test_async_groups_lists_and_torch_tensors() -> None:
    vals = [1e16, 1.0, -1e16, 1.0]
    mine = numpy.array([vals[RANK] if RANK < 4 else 0.0, 0.1 * (RANK + 1)])
    stacked = [numpy.array([vals[r] if r < 4 else 0.0, 0.1 * (r + 1)]) for r in range(SIZE)]
    want = numpy.array([rnd(sum((F(s[j]) for s in stacked), Fraction(0)), numpy.float64)
                        for j in range(2)])
    with flow.deterministic():
        buf = mine.copy()
        work = dist.all_reduce(buf, async_op=True)
        assert work is not None and work.wait()
        same(buf, want)
        group = dist.new_group(list(range(SIZE)))
        buf = mine.copy()
        dist.all_reduce(buf, group=group)
        same(buf, want)
        out = numpy.empty(2)
        dist.reduce_scatter(out, [mine.copy() for _ in range(SIZE)])
        same(out, want)
        torch = pytest.importorskip("torch")
        tt = torch.tensor(mine)
        dist.all_reduce(tt)
        same(tt.numpy(), want)


def test_partial_to_split_is_exact() -> None:
    vals = [1e16, 1.0, -1e16, 1.0]
    mine = numpy.full(2 * SIZE + 1, vals[RANK] if RANK < 4 else 0.0)
    want_value = {1: 1e16, 2: 1e16 + 1.0, 3: 1.0}.get(SIZE, 2.0)
    with flow.deterministic():
        p = flow.tensor(mine).to_global(placement=ALL, sbp=flow.sbp.partial_sum)
        s = p.to_global(sbp=S0)
        same(s.numpy(), numpy.full(2 * SIZE + 1, want_value))
