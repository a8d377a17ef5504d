"""The exact accumulator (mpiflow.core.exact_sum) against fractions, adversarial inputs."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy
import pytest

from mpiflow.core import exact_sum as xs

DTYPES = [numpy.float16, numpy.float32, numpy.float64]


def exact(x: numpy.ndarray) -> Fraction:
    return sum((Fraction(float(v)) for v in numpy.asarray(x, numpy.float64).ravel()), Fraction(0))


def rounded(value: Fraction, dtype: type) -> numpy.generic:
    return numpy.dtype(dtype).type(xs.round_ratio(value.numerator, value.denominator, dtype))


def bits(v: object) -> bytes:
    return numpy.asarray(v).tobytes()


def cases(dtype: type) -> list[numpy.ndarray]:
    rng = numpy.random.default_rng(7)
    info = numpy.finfo(dtype)
    tiny = float(info.smallest_subnormal)
    out = [
        rng.random(3000) - 0.3,
        rng.standard_normal(200_000) * numpy.exp(rng.uniform(-60, 60, 200_000)),
        numpy.array([1e16, 1.0, -1e16, 1.0]),
        numpy.array([tiny, -tiny, tiny, tiny]),
        numpy.array([float(info.max), float(info.max), -float(info.max)]),
        numpy.array([float(info.max)] * 3),
        numpy.array([]),
        numpy.array([-0.0, -0.0]),
        numpy.array([-0.0, 0.0]),
        numpy.array([2.0 ** 900, 1.0, -(2.0 ** 900)]),
    ]
    if dtype is numpy.float64:
        out.append(rng.standard_normal(70_000) * 2.0 ** rng.integers(-1074, 1000, 70_000))
        out.append(numpy.concatenate([numpy.full(1000, 1.7e308), numpy.full(1000, -1.7e308),
                                      numpy.full(3, 5e-324)]))
    with numpy.errstate(all="ignore"):
        return [c.astype(dtype) for c in out]


@pytest.mark.parametrize("dtype", DTYPES)
def test_sum_state_is_exact_and_correctly_rounded(dtype: type) -> None:
    for x in cases(dtype):
        finite = numpy.isfinite(x).all()
        state = xs.sum_state(x)
        value = xs.state_value(state, dtype)
        if not finite:
            continue
        total = exact(x)
        assert Fraction(xs.state_to_int(state), 1 << 1074) == total
        want = rounded(total, dtype)
        if total == 0:
            negzero = x.size > 0 and bool(numpy.all(numpy.signbit(x)))
            want = numpy.dtype(dtype).type(-0.0 if negzero else 0.0)
        assert bits(value) == bits(want), (x[:4], value, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_any_split_gives_the_same_state(dtype: type) -> None:
    rng = numpy.random.default_rng(3)
    x = cases(dtype)[1]
    whole = xs.sum_state(x)
    for parts in (2, 3, 7):
        cuts = numpy.sort(rng.integers(0, x.size, parts - 1))
        pieces = numpy.split(x[rng.permutation(x.size)], cuts)
        total = sum(xs.sum_state(p) for p in pieces)
        xs.normalize(total[xs.HEADER:])
        assert xs.state_to_int(total) == xs.state_to_int(whole)
        assert bits(xs.state_value(total, dtype)) == bits(xs.state_value(whole, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_rows_state_matches_sum_state(dtype: type) -> None:
    rng = numpy.random.default_rng(4)
    with numpy.errstate(all="ignore"):
        x = (rng.standard_normal((6, 999)) * numpy.exp(rng.uniform(-20, 20, (6, 999)))
             ).astype(dtype)
    x[2] = 0.0
    x[3] = -0.0
    values = xs.state_values(xs.rows_state(x), dtype)
    for row, value in zip(x, values):
        assert bits(value) == bits(xs.state_value(xs.sum_state(row), dtype))


def test_special_values() -> None:
    inf, nan = math.inf, math.nan

    def v(a: list[float], **kw: Any) -> float:
        return float(xs.state_value(xs.sum_state(numpy.array(a)), numpy.float64, **kw))

    assert v([1.0, inf, 2.0]) == inf
    assert v([1.0, -inf]) == -inf
    assert math.isnan(v([inf, -inf]))
    assert math.isnan(v([1.0, nan]))
    assert v([1.0, nan], nan_as_zero=True) == 1.0
    assert v([1.7e308, 1.7e308]) == inf            # overflow of the exact sum
    assert math.copysign(1.0, v([-0.0, -0.0])) == -1.0
    assert math.copysign(1.0, v([-0.0, 0.0])) == 1.0
    assert math.copysign(1.0, v([])) == 1.0
    assert math.isnan(float(xs.state_value(xs.sum_state(numpy.array([])), numpy.float64,
                                           divisor=0)))
    rows = xs.state_values(xs.rows_state(numpy.array([[inf, 1.0], [nan, 0.0], [inf, -inf]])),
                           numpy.float64)
    assert rows[0] == inf and math.isnan(rows[1]) and math.isnan(rows[2])


def test_round_ratio_against_fractions() -> None:
    rng = numpy.random.default_rng(9)
    for _ in range(300):
        num = int(rng.integers(-(2 ** 62), 2 ** 62)) << int(rng.integers(0, 80))
        den = int(rng.integers(1, 2 ** 40))
        f = Fraction(num, den)
        assert xs.round_ratio(num, den, numpy.float64) == float(f)  # Fraction rounds correctly
        # float32: compare with a brute-force choice between the two neighbours
        got = numpy.float32(xs.round_ratio(num, den, numpy.float32))
        lo = numpy.float32(float(f))
        cands = {lo, numpy.nextafter(lo, numpy.float32(-numpy.inf)),
                 numpy.nextafter(lo, numpy.float32(numpy.inf))}
        best = min(cands, key=lambda c: (abs(Fraction(float(c)) - f),
                                         int(numpy.float32(c).view(numpy.int32)) & 1))
        assert got == best


@pytest.mark.parametrize("dtype", DTYPES)
def test_vectorized_rounding_matches_the_scalar_one(dtype: type) -> None:
    rng = numpy.random.default_rng(11)
    for scale in (1.0, 1e-300, 1e300, 1e-310):
        with numpy.errstate(all="ignore"):
            x = (rng.standard_normal((500, 5)) * numpy.exp(rng.uniform(-40, 40, (500, 5)))
                 * scale).astype(dtype)
        x[5] = 0.0
        x[6] = -0.0
        x[7, :2] = [numpy.inf, 1.0]
        x[8, :2] = [numpy.inf, -numpy.inf]
        x[9, 0] = numpy.nan
        x[10] = [1.0, -1.0, 2.0 ** -12, 0.0, 0.0]
        states = xs.rows_state(x)
        states[11] = 7 * states[12]   # unnormalised limbs, as after an all-reduce
        for divisor in (1, 3, 7, 10):
            got = xs.state_values(states, dtype, divisor=divisor)
            want = numpy.array([xs.state_value(s, dtype, divisor=divisor) for s in states],
                               dtype)
            assert bits(got) == bits(want), (scale, divisor)


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_input_is_left_unchanged(dtype: type) -> None:
    for x in cases(dtype):
        before = x.copy()
        xs.sum_state(x)
        xs.rows_state(x.reshape(1, -1))
        assert bits(x) == bits(before)


# -- the fast paths (float64: two fused levels; float16/32: exact float64 group sums) ----------
def fast_path_cases(dtype: type) -> list[numpy.ndarray]:
    """Blocks that take each path: narrow and wide ranges, zeros, uneven tails, tiny groups."""
    rng = numpy.random.default_rng(11)
    n = 3 * xs.CHUNK + 123                      # full blocks and a partial last block
    normal = rng.standard_normal(n)
    zeros = normal.copy()
    zeros[rng.random(n) < 0.3] = 0.0            # the smallest non-zero decides, not the zeros
    spread = normal * 2.0 ** rng.integers(-20, 4, n)    # narrow-format groups of few elements
    wide = normal * 2.0 ** rng.integers(-40, 40, n)     # too wide for the fast paths
    offset = rng.random(n) * 1e-3 + 1e3         # many equal exponents: long groups
    tail = normal[:xs.CHUNK + 5]
    with numpy.errstate(all="ignore"):
        return [c.astype(dtype) for c in (normal, zeros, spread, wide, offset, tail)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_fast_paths_are_exact(dtype: type) -> None:
    for x in fast_path_cases(dtype):
        x = x[numpy.isfinite(x)]
        state = xs.sum_state(x)
        assert Fraction(xs.state_to_int(state), 1 << 1074) == exact(x)
        assert bits(xs.state_value(state, dtype)) == bits(rounded(exact(x), dtype))


def test_each_fast_path_is_taken_and_declined() -> None:
    rng = numpy.random.default_rng(5)
    bufs = xs._Buffers()
    x = rng.standard_normal(1000)
    got = xs._fast64(x, float(abs(x).max()), float(abs(x).min()), bufs)
    assert got is not None and Fraction(got, 1 << 1074) == exact(x)
    # a smallest magnitude whose last bit lies below the second level's grid: declined
    y = numpy.array([1.0, 2.0 ** -60])
    assert xs._fast64(y, 1.0, 2.0 ** -60, bufs) is None
    z = numpy.array([1.0, 2.0 ** -40], numpy.float32)
    assert xs._rows_narrow(z, 1.0, 2.0 ** -40, 24, -126, bufs) is None
    # magnitudes 2**-12 .. 2**12 allow groups of 64 (strided columns); a narrow range allows
    # one group of the whole block (rows); both give exact partial sums, a short tail its own
    sign = numpy.where(rng.random(5000) < 0.5, -1.0, 1.0)
    wide = (sign * 2.0 ** rng.integers(-12, 12, 5000) * 1.5).astype(numpy.float32)
    narrow = (sign * (1.0 + rng.random(5000))).astype(numpy.float32)
    for w, groups in ((wide, 5000 // 64 + 1), (narrow, 5000 // 2 ** 15 + 1)):
        a = numpy.abs(w)
        part = xs._rows_narrow(w, float(a.max()), float(a.min()), 24, -126, bufs)
        assert part is not None and part.size == groups
        assert sum(map(Fraction, part.tolist())) == exact(w)


@pytest.mark.parametrize("dtype", DTYPES)
def test_smallest_nonzero(dtype: type) -> None:
    tiny = numpy.finfo(dtype).smallest_subnormal
    assert xs._smallest_nonzero(numpy.array([0.0, 3.0, tiny, 0.0], dtype)) == float(tiny)
    assert xs._smallest_nonzero(numpy.array([2.0, 0.5], dtype)) == 0.5
    assert xs._smallest_nonzero(numpy.zeros(4, dtype)) == 0.0
