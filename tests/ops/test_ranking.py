"""topk, kthvalue, median, nanmedian, mode on local and global tensors against torch.

Split along the op's dim (a distributed selection), split along another dim (local), broadcast
and partial inputs, at 1-4 ranks with uneven and empty shards; errors on every rank; and that
a selection along a split dim, and the sort's gradient, never gather the array.
"""

from __future__ import annotations

import numpy
import pytest
import torch
from global_helpers import ALL, S0, S1, SIZE, B, N, P, make
from numpy.testing import assert_array_equal
from stats_helpers import received

import mpiflow as flow

pytestmark = pytest.mark.mpi
LAYOUTS = [S0, S1, B, P]


def _distinct(shape: tuple[int, ...], seed: int = 0) -> numpy.ndarray:
    """Distinct integers as float64 (exact partial sums; indices without ties)."""
    n = int(numpy.prod(shape))
    return numpy.random.default_rng(seed).permutation(n).reshape(shape).astype(numpy.float64)


def _check(got: tuple[flow.Tensor, flow.Tensor], want: tuple[torch.Tensor, torch.Tensor]
           ) -> None:
    assert_array_equal(got[0].numpy(), want[0].numpy())
    assert_array_equal(got[1].numpy(), want[1].numpy())


@pytest.mark.parametrize("sbp", LAYOUTS, ids=str)
def test_topk_and_kthvalue_match_torch(sbp: object) -> None:
    value = _distinct((N, 3))
    x, t = make(value, sbp), torch.tensor(value)
    for dim in (0, 1):
        for largest in (True, False):
            k = min(3, value.shape[dim])
            got = flow.topk(x, k, dim, largest)
            _check(got, torch.topk(t, k, dim, largest))
            if sbp == S0 and dim == 0 and SIZE > 1:
                assert got.values.sbp == (S0,)  # kept split: balanced parts of k rows
        for keepdim in (False, True):
            got = flow.kthvalue(x, 2, dim, keepdim)
            _check(got, torch.kthvalue(t, 2, dim, keepdim))


@pytest.mark.parametrize("sbp", LAYOUTS, ids=str)
def test_median_nanmedian_mode_match_torch(sbp: object) -> None:
    value = _distinct((N, 3), 1)
    x, t = make(value, sbp), torch.tensor(value)
    for dim in (0, 1):
        _check(flow.median(x, dim), torch.median(t, dim))
        _check(flow.nanmedian(x, dim, keepdim=True), torch.nanmedian(t, dim, keepdim=True))
        _check(flow.mode(x, dim), torch.mode(t, dim))
    assert_array_equal(flow.median(x).numpy(), torch.median(t).numpy())
    ties = make(value % 3, sbp)
    got = flow.mode(ties, 0)
    assert_array_equal(got.values.numpy(), torch.mode(torch.tensor(value % 3), 0).values)


def test_nan_rules_match_torch_on_a_split_dim() -> None:
    value = _distinct((N, 2), 2)
    value[1, 0] = value[N - 1, 1] = numpy.nan
    x, t = make(value, S0), torch.tensor(value)
    assert_array_equal(flow.median(x, 0).values.numpy(), torch.median(t, 0).values)
    _check(flow.median(x, 0), torch.median(t, 0))  # the index of the NaN
    _check(flow.nanmedian(x, 0), torch.nanmedian(t, 0))
    assert_array_equal(flow.nanmedian(x).numpy(), torch.nanmedian(t).numpy())
    _check(flow.topk(x, 2, 0), torch.topk(t, 2, 0))  # NaN largest
    assert_array_equal(flow.kthvalue(x, N, 0).values.numpy(), torch.kthvalue(t, N, 0).values)


def test_local_and_zero_dim_tensors() -> None:
    value = _distinct((5, 4), 3)
    _check(flow.topk(flow.tensor(value), 2), torch.topk(torch.tensor(value), 2))
    _check(flow.tensor(value).kthvalue(3, 0), torch.tensor(value).kthvalue(3, 0))
    _check(flow.tensor(value).mode(1), torch.tensor(value).mode(1))
    scalar = flow.tensor(4.0)
    assert flow.median(scalar, 0).values.item() == 4.0 and flow.topk(scalar, 1)[1].item() == 0


def test_bad_arguments_raise_on_every_rank() -> None:
    x = make(_distinct((N, 2)), S0)
    with pytest.raises(RuntimeError, match="k out of range"):
        flow.topk(x, N + 1, 0)
    with pytest.raises(RuntimeError, match="out of range for dimension 0"):
        flow.kthvalue(x, 0, 0)
    with pytest.raises(IndexError, match="non-zero size"):
        flow.median(make(numpy.zeros((0, 2)), B), 0)
    with pytest.raises(TypeError, match="real tensor"):
        flow.mode(flow.tensor([True, False]))


def test_selection_along_a_split_dim_never_gathers() -> None:
    n = 40000
    value = numpy.random.default_rng(4).standard_normal(n)
    x = flow.tensor(value, placement=ALL, sbp=S0)
    with received() as sizes:
        median = flow.median(x, 0)
        top = flow.topk(x, 5)
        kth = flow.kthvalue(x, 1234)
    assert median.values.item() == numpy.sort(value)[(n - 1) // 2]
    assert_array_equal(top.indices.numpy(), numpy.argsort(-value)[:5])
    assert kth.indices.item() == numpy.argsort(value)[1233]
    if SIZE > 1:
        assert max(sizes) < n // 4, max(sizes)


def test_the_sorts_gradient_is_scattered_not_gathered() -> None:
    n = 6000
    value = numpy.random.default_rng(5).standard_normal(n)
    x = flow.tensor(value, placement=ALL, sbp=S0).requires_grad_()
    values, order = flow.sort(x)
    cotangent = numpy.random.default_rng(6).standard_normal(n)
    with received() as sizes:
        values.backward(flow.tensor(cotangent, placement=ALL, sbp=S0))
    grad = numpy.empty(n)
    grad[order.numpy()] = cotangent
    assert x.grad is not None and x.grad.sbp == (S0,)
    assert_array_equal(x.grad.numpy(), grad)
    if SIZE > 1:
        assert max(sizes) < 0.8 * n, max(sizes)


def test_topk_gradient_goes_to_the_indices() -> None:
    value = _distinct((N, 2), 7)
    x = make(value, S0).requires_grad_()
    t = torch.tensor(value, requires_grad=True)
    flow.topk(x, 2, 0).values.sum().backward()
    torch.topk(t, 2, 0).values.sum().backward()
    assert x.grad is not None
    assert_array_equal(x.grad.numpy(), t.grad.numpy())
