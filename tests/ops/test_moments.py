"""var_mean, std_mean, cov and corrcoef (mpiflow.ops.moments) against torch on the whole value;
reduced split dims combine per-rank moments in one all-gather, observations split in cov give
local products and all-reduces of small results."""

from __future__ import annotations

import warnings
from typing import Any

import numpy
import pytest
import torch
from global_helpers import S0, S1, SIZE, B, N, P, full, make
from numpy.testing import assert_allclose

import mpiflow as flow
from mpiflow.communication import count_collectives


@pytest.mark.mpi
@pytest.mark.parametrize("sbp", [S0, S1, B, P], ids=str)
def test_var_mean_and_std_mean_match_torch(sbp: Any) -> None:
    a = full((N, 3)) + 1e8  # a large mean: a one-pass sum of squares would cancel
    for dim, keepdim, correction in ((0, False, 1), (1, True, 0), (None, False, 2)):
        x = make(a, sbp).requires_grad_()
        t = torch.tensor(a, requires_grad=True)
        with count_collectives() as calls:
            v, m = flow.var_mean(x, dim, keepdim=keepdim, correction=correction)
        tv, tm = torch.var_mean(t, dim, keepdim=keepdim, correction=correction)
        # exact: the variance of a - 1e8 (small integers), which torch's rounds off
        n = a.size if dim is None else a.shape[dim]
        exact = numpy.var(a - 1e8, axis=dim, keepdims=keepdim) * n / (n - correction)
        assert_allclose(v.numpy(), exact, rtol=1e-13)
        assert_allclose(v.numpy(), tv.detach().numpy(), rtol=1e-7)
        assert_allclose(m.numpy(), tm.detach().numpy(), rtol=1e-15)
        if sbp == S0 and dim in (0, None):    # reduced split dim: one all-gather of moments
            assert dict(calls) == ({"all_gather": 1} if SIZE > 1 else {}), calls
            assert v.sbp == m.sbp == (B,)
        (v.sum() + m.sum() * 3).backward()
        (tv.sum() + tm.sum() * 3).backward()
        assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-6, atol=1e-9)
        s, _ = flow.std_mean(make(a, sbp), dim, correction=correction)
        ts, _ = torch.std_mean(torch.tensor(a), dim, correction=correction)
        assert_allclose(s.numpy(), ts.numpy(), rtol=1e-7)


@pytest.mark.mpi
@pytest.mark.parametrize("sbp", [S1, S0, B], ids=str)
def test_cov_and_corrcoef_match_torch(sbp: Any) -> None:
    a = full((3, N))
    rng = numpy.random.default_rng(2)
    fw, aw = rng.integers(0, 3, N), rng.uniform(0.1, 2.0, N)
    for kwargs in ({}, {"correction": 0}, {"fweights": fw}, {"aweights": aw, "correction": 2},
                   {"fweights": fw, "aweights": aw}):
        x = make(a, sbp).requires_grad_()
        t = torch.tensor(a, requires_grad=True)
        ours = {k: make(v, S0) if isinstance(v, numpy.ndarray) else v for k, v in kwargs.items()}
        theirs = {k: torch.tensor(v) if isinstance(v, numpy.ndarray) else v
                  for k, v in kwargs.items()}
        with count_collectives() as calls:
            c = flow.cov(x, **ours)
        want = torch.cov(t, **theirs)
        assert_allclose(c.numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12)
        if sbp == S1:  # observations split: all-reduces of small results only
            assert set(calls) <= {"all_reduce"}, calls
        c.sum().backward()
        want.sum().backward()
        assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-12)
    with count_collectives() as calls:
        r = flow.corrcoef(make(a, sbp))
    assert_allclose(r.numpy(), torch.corrcoef(torch.tensor(a)).numpy(), rtol=1e-12)
    if sbp == S1:
        assert set(calls) <= {"all_reduce"}, calls
    one = flow.cov(make(a[0], S0))                     # one variable: a 0-d result
    assert_allclose(one.numpy(), torch.cov(torch.tensor(a[0])).numpy(), rtol=1e-12)


@pytest.mark.mpi
def test_bad_input_is_refused_on_every_rank() -> None:
    x = make(full((3, N)), S1)
    with pytest.raises(RuntimeError, match="fweights cannot be negative"):  # agreed: all-reduce
        flow.cov(x, fweights=make(-numpy.arange(N), S0))
    with pytest.raises(RuntimeError, match="aweights to have floating point"):
        flow.cov(x, aweights=make(numpy.arange(N), S0))
    with pytest.raises(RuntimeError, match="two or fewer dimensions"):
        flow.cov(make(full((2, 2, N)), S0))
    with pytest.raises(TypeError, match="floating point"):
        flow.var_mean(make(numpy.arange(N), S0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        v, _ = flow.var_mean(make(numpy.ones(1), B), correction=1)
    assert numpy.isnan(v.item()) and "degrees of freedom" in str(caught[0].message)


@pytest.mark.mpi(min_size=4)
def test_two_dimensional_mesh() -> None:
    mesh = flow.placement("cpu", [[0, 1], [2, 3]])
    a = full((7, 5))
    for sbp in ((S0, S1), (S0, S0), (S1, P)):
        x = flow.tensor(a, placement=mesh, sbp=tuple(B if s == P else s for s in sbp))
        x = x.to_global(sbp=sbp)
        for dim in (0, 1, None):
            v, m = flow.var_mean(x, dim)
            assert_allclose(v.numpy(), a.var(axis=dim, ddof=1), rtol=1e-12)
            assert_allclose(m.numpy(), a.mean(axis=dim), rtol=1e-12)
