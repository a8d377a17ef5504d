"""Scans of mpiflow.ops.scans (cumsum, cumprod, cummax, cummin, logcumsumexp) against torch on
the whole value, split along the scanned dim and another, broadcast and partial, at 1-4 ranks."""

from __future__ import annotations

from typing import Any

import numpy
import pytest
import torch
from global_helpers import ALL, S0, S1, SIZE, B, N, P, make
from numpy.testing import assert_allclose, assert_array_equal

import mpiflow as flow
from mpiflow.communication import count_collectives

SCANS = ["cumsum", "cumprod", "logcumsumexp", "cummax", "cummin"]


def _values(shape: tuple[int, ...]) -> numpy.ndarray:
    a = numpy.random.default_rng(1).uniform(0.5, 1.5, shape)
    a[min(2, shape[0] - 1), 0] = 0.0      # a zero: cumprod's gradient, ties of cummin
    a[shape[0] - 1, -1] = a[0, -1]         # a tie: cummax's later index wins
    return a


def _run(name: str, x: Any, dim: int) -> list[Any]:
    out = getattr(x, name)(dim) if isinstance(x, torch.Tensor) else getattr(flow, name)(x, dim)
    return list(out) if name in ("cummax", "cummin") else [out]


@pytest.mark.mpi
@pytest.mark.parametrize("name", SCANS)
@pytest.mark.parametrize("sbp", [S0, S1, B, P], ids=str)
def test_scans_match_torch_and_keep_the_layout(name: str, sbp: Any) -> None:
    a = _values((N, 3))
    for dim in (0, 1):
        x = make(a, sbp).requires_grad_()
        t = torch.tensor(a, requires_grad=True)
        with count_collectives() as calls:
            got = _run(name, x, dim)
        want = _run(name, t, dim)
        for g, w in zip(got, want):
            assert_allclose(g.numpy(), w.detach().numpy(), rtol=1e-12, err_msg=f"{dim}")
        if sbp != P:
            assert got[0].sbp == (sbp,)
        if sbp in (S0, S1) and sbp.dim == dim:  # along the split dim: one all-gather of totals
            assert dict(calls) == ({"all_gather": 1} if SIZE > 1 else {}), calls
        elif sbp in (S0, S1, B):
            assert not calls, calls
        cotangent = numpy.random.default_rng(2).standard_normal(a.shape)
        got[0].backward(make(cotangent, B))
        want[0].backward(torch.tensor(cotangent))
        assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.mpi
def test_long_1d_scans_with_empty_shards_and_nan() -> None:
    a = numpy.array([3.0, 1.0, numpy.nan, 2.0, 2.0])[: max(2, SIZE - 1)]
    x = make(a, S0)
    for name in ("cummax", "cummin"):
        v, i = getattr(flow, name)(x, 0)
        wv, wi = getattr(torch, name)(torch.tensor(a), 0)
        assert_array_equal(v.numpy(), wv.numpy())
        assert_array_equal(i.numpy(), wi.numpy())
        assert v.sbp == i.sbp == (S0,)
    ints = make(numpy.arange(1, 2 * SIZE + 2), S0)
    assert_array_equal(flow.cumprod(ints, 0).numpy(), numpy.cumprod(numpy.arange(1, 2 * SIZE + 2)))
    assert flow.cumprod(ints, 0).dtype == flow.int64


@pytest.mark.mpi
def test_scans_refuse_bad_input_on_every_rank() -> None:
    x = make(numpy.arange(N), S0)
    with pytest.raises(TypeError, match="floating-point"):
        flow.logcumsumexp(x, 0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        flow.cumprod(x, 1)
    with pytest.raises(TypeError, match="complex"):
        flow.cummax(flow.tensor(numpy.ones(3, complex), placement=ALL, sbp=S0), 0)


@pytest.mark.mpi(min_size=4)
def test_two_dimensional_mesh() -> None:
    mesh = flow.placement("cpu", [[0, 1], [2, 3]])
    a = _values((7, 5))
    for sbp in ((S0, S1), (S0, S0), (S1, B)):
        x = flow.tensor(a, placement=mesh, sbp=sbp)
        for dim in (0, 1):
            assert_allclose(flow.cumprod(x, dim).numpy(), numpy.cumprod(a, dim), rtol=1e-12)
            v, i = flow.cummax(x, dim)
            assert_array_equal(i.numpy(), torch.cummax(torch.tensor(a), dim).indices.numpy())
            assert v.sbp == sbp
