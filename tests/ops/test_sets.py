"""unique, unique_consecutive and isin on local and global tensors against torch, 1-4 ranks."""

from __future__ import annotations

import numpy
import pytest
import torch
from global_helpers import ALL, S0, S1, SIZE, B, N, P, make
from numpy.testing import assert_array_equal
from stats_helpers import received

import mpiflow as flow

pytestmark = pytest.mark.mpi


def _check(got: tuple[flow.Tensor, ...], want: tuple[torch.Tensor, ...]) -> None:
    for g, w in zip(got, want, strict=True):
        assert_array_equal(g.numpy(), w.numpy())


@pytest.mark.parametrize("sbp", [S0, S1, B, P], ids=str)
def test_unique_and_unique_consecutive_match_torch(sbp: object) -> None:
    value = numpy.random.default_rng(0).integers(0, 5, (N, 3)).astype(numpy.float64)
    x, t = make(value, sbp), torch.tensor(value)
    got = flow.unique(x, return_inverse=True, return_counts=True)
    _check(got, torch.unique(t, return_inverse=True, return_counts=True))
    if sbp == S0 and SIZE > 1:
        assert got[0].sbp == (S0,) and got[1].sbp == (S0,) and got[2].sbp == (S0,)
    _check((flow.unique(x),), (torch.unique(t),))
    runs = make(numpy.sort(value, axis=None).reshape(N, 3), sbp)
    want = torch.unique_consecutive(torch.tensor(runs.numpy()), return_inverse=True,
                                    return_counts=True)
    _check(flow.unique_consecutive(runs, return_inverse=True, return_counts=True), want)


def test_nan_is_unique_each_time_and_empty_shards() -> None:
    value = numpy.array([2.0, numpy.nan, 1.0, numpy.nan, 2.0])  # 5 rows: 4 ranks, one empty
    x, t = flow.tensor(value, placement=ALL, sbp=S0), torch.tensor(value)
    _check(flow.unique(x, return_counts=True), torch.unique(t, return_counts=True))
    _check(flow.unique_consecutive(x, return_counts=True),
           torch.unique_consecutive(t, return_counts=True))
    empty = flow.tensor(numpy.zeros(0), placement=ALL, sbp=S0)
    values, inverse = flow.unique(empty, return_inverse=True)
    assert tuple(values.shape) == (0,) and tuple(inverse.shape) == (0,)


def test_unique_of_a_split_array_is_not_gathered() -> None:
    n = 20000
    value = numpy.random.default_rng(1).integers(0, 3000, n)
    x = flow.tensor(value, placement=ALL, sbp=S0)
    with received() as sizes:
        values, inverse, counts = flow.unique(x, return_inverse=True, return_counts=True)
    want = numpy.unique(value, return_inverse=True, return_counts=True)
    for g, w in zip((values, inverse, counts), want, strict=True):
        assert_array_equal(g.numpy(), w)
    if SIZE > 1:
        assert max(sizes) < 0.8 * n, max(sizes)


@pytest.mark.parametrize("sbp", [S0, S1, B, P], ids=str)
def test_isin_matches_torch(sbp: object) -> None:
    rng = numpy.random.default_rng(2)
    elements = rng.integers(0, 9, (N, 3)).astype(numpy.float64)
    tests = rng.integers(0, 9, (N, 2)).astype(numpy.float64)
    for test_sbp in (S0, B):
        a, b = make(elements, sbp), make(tests, test_sbp)
        for invert in (False, True):
            got = flow.isin(a, b, invert=invert)
            want = torch.isin(torch.tensor(elements), torch.tensor(tests), invert=invert)
            assert_array_equal(got.numpy(), want.numpy())
    assert flow.isin(3, flow.tensor([1, 3])).item() is True
    assert_array_equal(flow.isin(flow.tensor([1, 2]), 2).numpy(), [False, True])


def test_unique_with_a_dim_is_refused_before_anything_moves() -> None:
    with pytest.raises(NotImplementedError, match="dim=None"):
        flow.unique(make(numpy.zeros((N, 2)), S0), dim=0)
