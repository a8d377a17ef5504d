"""quantile and nanquantile on local and global tensors against torch, at 1-4 ranks."""

from __future__ import annotations

import numpy
import pytest
import torch
from global_helpers import ALL, S0, S1, SIZE, B, N, P, make
from numpy.testing import assert_allclose
from stats_helpers import received

import mpiflow as flow

pytestmark = pytest.mark.mpi
HOWS = ("linear", "lower", "higher", "midpoint", "nearest")


@pytest.mark.parametrize("sbp", [S0, S1, B, P], ids=str)
def test_quantiles_match_torch(sbp: object) -> None:
    value = numpy.random.default_rng(0).integers(-50, 50, (N, 3)).astype(numpy.float64)
    x, t = make(value, sbp), torch.tensor(value)
    q = numpy.array([0.0, 0.3, 0.5, 1.0])
    for how, dim, keepdim in zip(HOWS, (None, 0, 1, 0, None), (False, True, False, False, True)):
        got = flow.quantile(x, flow.tensor(q), dim, keepdim, interpolation=how)
        want = torch.quantile(t, torch.tensor(q), dim, keepdim, interpolation=how)
        assert_allclose(got.numpy(), want.numpy(), rtol=1e-14, err_msg=how)
        one = flow.quantile(x, 0.3, dim, keepdim, interpolation=how)
        assert_allclose(one.numpy(), torch.quantile(t, 0.3, dim, keepdim, interpolation=how))
        if SIZE > 1 and ((sbp in (S0, S1) and dim is None) or (sbp == S0 and dim == 0)):
            assert got.sbp == (B,)  # selected where it lay: the result is broadcast


def test_nan_rules_and_nanquantile() -> None:
    value = numpy.random.default_rng(1).standard_normal((N, 3)).astype(numpy.float32)
    value[::2, 0] = numpy.nan
    value[:, 1] = numpy.nan
    x, t = make(value, S0), torch.tensor(value)
    for how in HOWS:
        for fn, tfn in ((flow.quantile, torch.quantile), (flow.nanquantile, torch.nanquantile)):
            got = fn(x, flow.tensor(numpy.float32([0.25, 0.9])), 0, interpolation=how)
            want = tfn(t, torch.tensor([0.25, 0.9]), 0, interpolation=how)
            assert got.dtype == flow.float32
            assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, equal_nan=True)


def test_the_gradient_matches_torch() -> None:
    value = numpy.random.default_rng(2).standard_normal((N, 2))
    x = make(value, S0).requires_grad_()
    t = torch.tensor(value, requires_grad=True)
    flow.quantile(x, flow.tensor([0.2, 0.7], dtype=flow.float64), 0).sum().backward()
    torch.quantile(t, torch.tensor([0.2, 0.7], dtype=torch.float64), 0).sum().backward()
    assert x.grad is not None
    assert_allclose(x.grad.numpy(), t.grad.numpy(), atol=1e-14)


def test_bad_arguments_raise_on_every_rank() -> None:
    x = make(numpy.arange(N, dtype=numpy.float64), S0)
    with pytest.raises(RuntimeError, match=r"in the range \[0, 1\]"):
        flow.quantile(x, 1.5)
    with pytest.raises(RuntimeError, match="scalar or 1D"):
        flow.quantile(x, flow.tensor([[0.5]], dtype=flow.float64))
    with pytest.raises(RuntimeError, match="same dtype"):
        flow.quantile(x, flow.tensor([0.5], dtype=flow.float32))
    with pytest.raises(RuntimeError, match="float or double"):
        flow.quantile(x.long(), 0.5)
    with pytest.raises(RuntimeError, match="interpolation must be one of"):
        flow.nanquantile(x, 0.5, interpolation="cubic")
    with pytest.raises(RuntimeError, match="non-empty"):
        flow.quantile(make(numpy.zeros(0), B), 0.5)


def test_a_quantile_of_a_split_array_moves_samples_not_the_data() -> None:
    n = 200000
    value = numpy.random.default_rng(3).standard_normal(n)
    x = flow.tensor(value, placement=ALL, sbp=S0)
    with received() as sizes:
        got = flow.quantile(x, flow.tensor([0.1, 0.5, 0.99], dtype=flow.float64))
    assert_allclose(got.numpy(), numpy.quantile(value, [0.1, 0.5, 0.99]), rtol=1e-14)
    if SIZE > 1:
        assert max(sizes) < n // 4, max(sizes)
