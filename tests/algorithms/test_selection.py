"""Order statistics by distributed selection against torch on the whole axis, at 1-4 ranks."""

from __future__ import annotations

import numpy
import pytest
import torch
from numpy.testing import assert_allclose, assert_array_equal
from stats_helpers import RANK, SIZE, part, received

from mpiflow.algorithms import kth_values, order_statistics, quantiles, topk
from mpiflow.communication.mpi.group import world_comm as comm

pytestmark = pytest.mark.mpi


def _data(n: int, kind: str) -> numpy.ndarray:
    rng = numpy.random.default_rng(n)
    if kind == "ties":  # few values: runs of equal values hold the targets
        return rng.integers(0, 3, (n, 2)).astype(numpy.float64)
    x = rng.standard_normal((n, 2))
    if kind == "nan":
        x[::3, 0] = numpy.nan
        x[: n // 2, 1] = numpy.nan
    return x


@pytest.mark.parametrize("n", [1, 5, 13, 3001])
@pytest.mark.parametrize("kind", ["normal", "ties", "nan"])
def test_kth_values_and_medians_match_torch(n: int, kind: str) -> None:
    x = _data(n, kind)
    t = torch.tensor(x)
    for k in sorted({1, (n + 1) // 2, n}):
        values, rows = kth_values(part(x), comm, 0, numpy.array([k, k]))
        assert_array_equal(values, torch.kthvalue(t, k, 0).values.numpy())
        # the row: the element a stable sort puts k-th
        order = numpy.argsort(numpy.where(numpy.isnan(x), numpy.inf, x), axis=0, kind="stable")
        assert_array_equal(rows, order[k - 1])
    for rule, fn in (("median", torch.median), ("nanmedian", torch.nanmedian)):
        values, rows = kth_values(part(x), comm, 0, rule=rule)
        assert_array_equal(values, fn(t, 0).values.numpy())
        picked = x[rows, [0, 1]]
        assert_array_equal(picked, values)  # NaN where NaN (assert_array_equal: NaN == NaN)


@pytest.mark.parametrize("kind", ["normal", "ties", "nan"])
@pytest.mark.parametrize("ignore_nan", [False, True])
def test_quantiles_match_torch_for_every_interpolation(kind: str, ignore_nan: bool) -> None:
    x = _data(501, kind)
    q = numpy.array([0.0, 0.1, 0.5, 0.77, 1.0])
    fn = torch.nanquantile if ignore_nan else torch.quantile
    for how in ("linear", "lower", "higher", "midpoint", "nearest"):
        got = quantiles(part(x), comm, 0, q, how, ignore_nan=ignore_nan)
        want = fn(torch.tensor(x), torch.tensor(q), dim=0, interpolation=how).numpy()
        assert_allclose(got, want, rtol=1e-14, equal_nan=True, err_msg=how)


@pytest.mark.parametrize("n", [1, 13, 3001])
@pytest.mark.parametrize("kind", ["normal", "ties", "nan"])
def test_topk_matches_torch_with_ties_in_row_order(n: int, kind: str) -> None:
    x = _data(n, kind)
    for k in sorted({0, 1, (n + 1) // 2, n}):
        for largest in (True, False):
            values, rows = topk(part(x), comm, 0, k, largest=largest)
            want = torch.topk(torch.tensor(x), k, 0, largest=largest)
            assert_array_equal(values, part(want.values.numpy()))
            key = numpy.where(numpy.isnan(x), numpy.inf, x)
            order = numpy.argsort(-key if largest else key, axis=0, kind="stable")[:k]
            assert_array_equal(rows, part(order))


def test_bracketing_narrows_runs_of_ties_and_finishes_small() -> None:
    # tiny samples and a tiny exact limit: many rounds, runs of equal values at the targets
    rng = numpy.random.default_rng(3)
    whole = numpy.concatenate([rng.integers(0, 1000, 400), numpy.full(600, 500),
                               rng.integers(0, 5, 200)])
    mine = part(rng.permutation(whole))
    sizes = numpy.empty((SIZE, 1), dtype=numpy.int64)
    comm.all_gather(numpy.array([mine.shape[0]]), sizes)
    ranks = [0, 1, 399, 599, 600, 1000, 1199]
    targets = [(0, r, min(r + 1, 1199)) for r in ranks]
    got = order_statistics([mine], comm, sizes, targets, sample=16, exact=8)
    ordered = numpy.sort(whole)
    for (_, lo, hi), values in zip(targets, got):
        assert_array_equal(values, ordered[lo:hi + 1])


def test_a_median_of_many_moves_samples_not_the_data() -> None:
    n = 60000
    x = numpy.random.default_rng(1).standard_normal((n, 1))
    with received() as sizes:
        values, _ = kth_values(part(x), comm, 0, rule="median")
    assert values[0] == numpy.sort(x[:, 0])[(n - 1) // 2]
    if SIZE > 1:
        assert max(sizes) < n // 4, sizes  # samples and a few thousand candidates
    assert RANK < SIZE
