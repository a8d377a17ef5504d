"""Distributed 1-D FFTs along a split axis against numpy.fft on the whole axis, at every rank
count: composite and prime lengths, padding and cutting, skewed and empty parts, any axis."""

from __future__ import annotations

import numpy
import pytest
from numpy.testing import assert_allclose

from mpiflow.algorithms.ranges import balanced, offsets
from mpiflow.algorithms.spectral import factor, fft_along, irfft_along, rfft_along
from mpiflow.communication import count_collectives
from mpiflow.communication.mpi.group import world_comm as comm

RANK, SIZE = comm.rank, comm.size


def _alltoalls(calls: dict[str, int]) -> int:
    """The all-to-alls counted (plain where every count is the same, else ``_v``), checking
    that nothing else communicated."""
    assert set(calls) <= {"all_to_all", "all_to_all_v"}, dict(calls)
    return calls["all_to_all"] + calls["all_to_all_v"]


def _part(whole: numpy.ndarray, counts: list[int], axis: int = 0) -> numpy.ndarray:
    lo, hi = offsets(counts)[RANK:RANK + 2]
    return numpy.take(whole, numpy.arange(lo, hi), axis=axis)


def _skewed(n: int) -> list[int]:
    """Everything on the last rank but one row on the first (empty parts between)."""
    if SIZE == 1 or n == 0:
        return [n]
    return [1] + [0] * (SIZE - 2) + [n - 1]


def _signal(shape: tuple[int, ...], seed: int) -> numpy.ndarray:
    rng = numpy.random.default_rng(seed)
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def test_factor_is_the_largest_divisor_up_to_the_square_root() -> None:
    assert [factor(n) for n in (1, 2, 4, 12, 13, 36, 2 ** 22, 97 * 89)] == [1, 1, 2, 3, 1, 6,
                                                                           2048, 89]


@pytest.mark.mpi
@pytest.mark.parametrize(("length", "n"), [(12, 12), (7, 7), (13, 13), (10, 6), (5, 16),
                                           (1, 1), (1, 3)])
@pytest.mark.parametrize("forward", [True, False])
def test_fft_along_matches_numpy(length: int, n: int, forward: bool) -> None:
    x = _signal((length, 3), length + n)
    counts, out = balanced(length, SIZE), balanced(n, SIZE)
    for norm in ("backward", "ortho", "forward"):
        got = fft_along(_part(x, counts), comm, 0, counts, n, out, forward=forward, norm=norm)
        want = (numpy.fft.fft if forward else numpy.fft.ifft)(x, n, axis=0, norm=norm)
        assert_allclose(got, _part(want, out), atol=1e-12, err_msg=norm)


@pytest.mark.mpi
def test_fft_along_another_axis_with_skewed_parts_and_fewer_outputs() -> None:
    x = _signal((2, 20, 3), 1)
    counts = _skewed(20)
    out = list(reversed(balanced(9, SIZE)))  # the first 9 outputs only
    got = fft_along(_part(x, counts, 1), comm, 1, counts, 20, out)
    assert_allclose(got, _part(numpy.fft.fft(x, axis=1)[:, :9], out, 1), atol=1e-12)


@pytest.mark.mpi
def test_a_composite_length_costs_three_all_to_alls_and_a_prime_nine() -> None:
    for n, want in ((64, 3), (61, 9)):
        x = _signal((n,), n)
        counts = balanced(n, SIZE)
        with count_collectives() as calls:
            fft_along(_part(x, counts), comm, 0, counts, n, counts)
        assert _alltoalls(calls) == (want if SIZE > 1 else 0)


@pytest.mark.mpi
def test_fft_along_keeps_single_precision() -> None:
    x = _signal((30,), 2).astype(numpy.complex64)
    counts = balanced(30, SIZE)
    got = fft_along(_part(x, counts), comm, 0, counts, 30, counts)
    assert got.dtype == numpy.complex64
    assert_allclose(got, _part(numpy.fft.fft(x), counts), rtol=1e-4, atol=1e-4)


@pytest.mark.mpi
@pytest.mark.parametrize(("length", "n"), [(16, 16), (9, 9), (7, 10), (11, 5)])
def test_rfft_along_is_the_half_spectrum(length: int, n: int) -> None:
    x = numpy.random.default_rng(3).standard_normal((length, 2))
    counts, out = balanced(length, SIZE), balanced(n // 2 + 1, SIZE)
    got = rfft_along(_part(x, counts), comm, 0, counts, n, out, norm="ortho")
    assert_allclose(got, _part(numpy.fft.rfft(x, n, axis=0, norm="ortho"), out), atol=1e-12)


@pytest.mark.mpi
@pytest.mark.parametrize(("length", "n"), [(9, 16), (9, 17), (5, 6), (8, 4), (3, 20), (2, 1)])
def test_irfft_along_builds_the_hermitian_spectrum(length: int, n: int) -> None:
    x = _signal((length, 2), 4)
    counts = _skewed(length)
    out = balanced(n, SIZE)
    for norm in ("backward", "forward"):
        got = irfft_along(_part(x, counts), comm, 0, counts, n, out, norm=norm)
        want = numpy.fft.irfft(x, n, axis=0, norm=norm)
        assert_allclose(got, _part(want, out), atol=1e-12, err_msg=norm)


@pytest.mark.mpi
def test_bad_counts_are_refused_before_anything_moves() -> None:
    with pytest.raises(ValueError, match="one count per rank"):
        fft_along(numpy.ones(2, complex), comm, 0, [2], 2, [1] * (SIZE + 1))
    with pytest.raises(ValueError, match="at least 1"):
        fft_along(numpy.ones(1, complex), comm, 0, [1] * SIZE, 0, [0] * SIZE)
