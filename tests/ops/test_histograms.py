"""bincount, histc, histogram and count_nonzero against torch, at 1-4 ranks: split inputs give
partial sums, bins agreed by one all-reduce, errors on every rank."""

from __future__ import annotations

import numpy
import pytest
import torch
from global_helpers import ALL, S0, S1, SIZE, B, N, P, make
from numpy.testing import assert_allclose, assert_array_equal

import mpiflow as flow
from mpiflow.communication import count_collectives

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("sbp", [S0, B, P], ids=str)
def test_bincount_matches_torch(sbp: object) -> None:
    value = numpy.random.default_rng(0).integers(0, 7, 3 * N)
    weights = numpy.random.default_rng(1).standard_normal(3 * N)
    x, w = make(value, sbp if sbp != P else B), make(weights, sbp)
    assert_array_equal(flow.bincount(x).numpy(), torch.bincount(torch.tensor(value)))
    got = flow.bincount(x, w, minlength=10)
    assert_allclose(got.numpy(), torch.bincount(torch.tensor(value), torch.tensor(weights),
                                                minlength=10))
    if sbp != B and SIZE > 1:
        assert got.sbp == (P,)  # local counts; one all-reduce when read


def test_bincount_errors_on_every_rank() -> None:
    negative = numpy.arange(N) - (N - 1)  # the only negative value lies on rank 0
    with pytest.raises(RuntimeError, match="non-negative"):
        flow.bincount(make(negative, S0))
    with pytest.raises(RuntimeError, match="1-d non-negative integral"):
        flow.bincount(make(numpy.zeros((N, 2), dtype=numpy.int64), S0))
    with pytest.raises(RuntimeError, match="1-d non-negative integral"):
        flow.bincount(make(numpy.zeros(N), S0))
    with pytest.raises(RuntimeError, match="same length"):
        flow.bincount(make(numpy.zeros(N, dtype=numpy.int64), S0), flow.ones(2))
    assert_array_equal(flow.bincount(make(numpy.zeros(0, dtype=numpy.int64), S0),
                                     minlength=3).numpy(), [0, 0, 0])


@pytest.mark.parametrize("sbp", [S0, S1, B, P], ids=str)
def test_histc_and_histogram_match_torch(sbp: object) -> None:
    # continuous values: none on a bin edge (torch's edges may differ in the last bit, by
    # whether its linspace used a fused multiply-add)
    value = numpy.random.default_rng(2).standard_normal((N, 3)) * 3
    weight = numpy.abs(numpy.random.default_rng(3).standard_normal((N, 3)))
    x, t = make(value, sbp), torch.tensor(value)
    assert_allclose(flow.histc(x, 7).numpy(), torch.histc(t, 7).numpy())
    assert_allclose(flow.histc(x, 5, min=-2, max=3).numpy(), torch.histc(t, 5, -2, 3).numpy())
    for kwargs in ({}, {"range": (-3.0, 2.0)}, {"density": True}):
        got = flow.histogram(x, 6, **kwargs)
        want = torch.histogram(t, 6, **kwargs)
        assert_allclose(got.hist.numpy(), want.hist.numpy(), rtol=1e-12)
        assert_allclose(got.bin_edges.numpy(), want.bin_edges.numpy(), atol=1e-12)
    edges = numpy.array([-4.0, -1.0, 0.0, 0.5, 5.0])
    w = make(weight, sbp if sbp != P else B)
    got = flow.histogram(x, flow.tensor(edges), weight=w)  # local edges: the same everywhere
    want = torch.histogram(t, torch.tensor(edges), weight=torch.tensor(weight))
    assert_allclose(got.hist.numpy(), want.hist.numpy(), rtol=1e-12)


def test_the_range_is_one_all_reduce_and_errors_agree() -> None:
    value = numpy.arange(3 * N, dtype=numpy.float64)
    x = make(value, S0)
    with count_collectives() as calls:
        hist = flow.histc(x, 4)
    assert sum(calls.values()) == 1 and calls["all_reduce"] == 1  # the range; hist stays P
    assert_allclose(hist.numpy(), torch.histc(torch.tensor(value), 4).numpy())
    value[-1] = numpy.nan  # on the last rank only
    with pytest.raises(RuntimeError, match="not finite"):
        flow.histc(make(value, S0))
    with pytest.raises(RuntimeError, match="not finite"):
        flow.histogram(make(value, S0), 3)
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        flow.histc(x, 3, min=2, max=1)
    with pytest.raises(NotImplementedError, match="floating point only"):
        flow.histc(make(numpy.arange(N), S0))


@pytest.mark.parametrize("sbp", [S0, S1, B], ids=str)
def test_count_nonzero_matches_torch(sbp: object) -> None:
    value = numpy.random.default_rng(4).integers(-1, 2, (N, 3))
    x, t = make(value, sbp), torch.tensor(value)
    for dim in (None, 0, 1, (0, 1)):
        assert_array_equal(flow.count_nonzero(x, dim).numpy(), torch.count_nonzero(t, dim))
    assert ALL is not None
