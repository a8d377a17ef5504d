"""cdist (mpiflow.ops.distance) against torch on the whole value: rows split stay split, both
split all-gather the smaller operand."""

from __future__ import annotations

from typing import Any

import numpy
import pytest
import torch
from global_helpers import S0, S1, SIZE, B, N, full, make
from numpy.testing import assert_allclose

import mpiflow as flow
from mpiflow.communication import count_collectives


@pytest.mark.mpi
@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, float("inf"), 3.0])
@pytest.mark.parametrize("sbps", [(S0, B), (B, S0), (S0, S0), (S1, S1), (B, B)],
                         ids=lambda s: "".join(map(str, s)))
def test_cdist_matches_torch(p: float, sbps: tuple[Any, Any]) -> None:
    a, b = full((N, 3), seed=1) / 3, full((4 * SIZE + 3, 3), seed=2) / 3  # x1 the smaller
    x, y = make(a, sbps[0]).requires_grad_(), make(b, sbps[1]).requires_grad_()
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    with count_collectives() as calls:
        d = flow.cdist(x, y, p=p)
    want = torch.cdist(tx, ty, p=p)
    assert_allclose(d.numpy(), want.detach().numpy(), rtol=1e-12)
    if sbps == (S0, B):
        assert d.sbp == (S0,) and not calls
    if sbps == (S0, S0) and SIZE > 1 and p in (2.0, 3.0):  # the smaller (x1) all-gathered
        assert d.sbp == (S1,), d.sbp                  # (x2's rows stay where they are)
        assert set(calls) <= {"all_gather", "all_gather_v"} and sum(calls.values()) == 1, calls
    if p == 0:
        return
    cotangent = numpy.random.default_rng(3).standard_normal(tuple(want.shape))
    d.backward(make(cotangent, B))
    want.backward(torch.tensor(cotangent))
    assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)
    assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.mpi
def test_batched_cdist_and_errors() -> None:
    a, b = full((2, N, 3)), full((1, 4, 3), seed=1)
    got = flow.cdist(make(a, S0), make(b, B))
    assert_allclose(got.numpy(), torch.cdist(torch.tensor(a), torch.tensor(b)).numpy(),
                    rtol=1e-12)
    with pytest.raises(RuntimeError, match="same number of columns"):
        flow.cdist(make(a, S0), make(full((4, 2)), B))
    with pytest.raises(RuntimeError, match="non-negative"):
        flow.cdist(make(a, S0), make(b, B), p=-1)
    with pytest.raises(RuntimeError, match="floating-point"):
        flow.cdist(make(numpy.ones((2, 2), int), S0), make(numpy.ones((2, 2), int), B))
