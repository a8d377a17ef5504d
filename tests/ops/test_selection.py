"""masked_select and nonzero (mpiflow.ops.selection) against torch on the whole value: results
split along dim 0 and balanced, nothing gathered."""

from __future__ import annotations

from typing import Any

import numpy
import pytest
import torch
from global_helpers import ALL, RANK, S0, S1, SIZE, B, N, P, full, make
from numpy.testing import assert_array_equal

import mpiflow as flow
from mpiflow.communication import count_collectives


def _balanced(t: flow.Tensor) -> bool:
    n = t.shape[0]
    return t.to_local().shape[0] == len(numpy.array_split(numpy.arange(n), SIZE)[RANK])


@pytest.mark.mpi
@pytest.mark.parametrize("sbp", [S0, S1, B, P], ids=str)
def test_masked_select_matches_torch(sbp: Any) -> None:
    a = full((N, 3))
    for mask, msbp in ((a > 0, S0), (a > 100, S0), (a[0] > 0, B), (a[:, :1] < 2, S1)):
        x = make(a, sbp).requires_grad_()
        t = torch.tensor(a, requires_grad=True)
        with count_collectives() as calls:
            got = flow.masked_select(x, make(mask, msbp if msbp != S1 or mask.ndim > 1 else B))
        want = torch.masked_select(t, torch.tensor(mask))
        assert_array_equal(got.numpy(), want.detach().numpy())
        if sbp == S0 and msbp == S0:
            assert got.sbp == (S0,) and _balanced(got)
            # a count (all-reduce), the counts (all-gather), the rows that move (all-to-all)
            assert set(calls) <= {"all_reduce", "all_gather", "all_to_all_v"}, calls
            assert calls.get("all_gather", 0) <= 1
        cotangent = numpy.random.default_rng(5).standard_normal(tuple(want.shape))
        got.backward(make(cotangent, B))
        want.backward(torch.tensor(cotangent))
        assert_array_equal(x.grad.numpy(), t.grad.numpy())


@pytest.mark.mpi
@pytest.mark.parametrize("sbp", [S0, S1, B], ids=str)
def test_nonzero_matches_torch(sbp: Any) -> None:
    a = full((N, 3)) * (numpy.arange(N)[:, None] % 3 != 1)
    for value in (a, a[:, 0], numpy.zeros((N, 2))):
        s = sbp if value.ndim > 1 or sbp != S1 else S0
        got = flow.nonzero(make(value, s))
        assert_array_equal(got.numpy(), torch.nonzero(torch.tensor(value)).numpy())
        assert got.sbp == ((S0,) if s != B else (B,)) and got.dtype == flow.int64
        if s != B:
            assert _balanced(got)
        for mine, theirs in zip(flow.nonzero(make(value, s), as_tuple=True),
                                torch.nonzero(torch.tensor(value), as_tuple=True)):
            assert_array_equal(mine.numpy(), theirs.numpy())


@pytest.mark.mpi
def test_empty_shards_and_errors() -> None:
    a = numpy.arange(float(max(SIZE - 1, 1))) - 0.5   # 4 ranks: empty shards
    x = make(a, S0)
    assert_array_equal(flow.masked_select(x, x > 0).numpy(), a[a > 0])
    assert_array_equal(flow.nonzero(x > 0).numpy(), numpy.argwhere(a > 0))
    assert_array_equal(x.masked_select(make(numpy.array(True), B)).numpy(), a)  # broadcast
    with pytest.raises(RuntimeError, match="BoolTensor"):
        flow.masked_select(x, make(numpy.ones_like(a), S0))
    with pytest.raises(RuntimeError, match="broadcast"):
        flow.masked_select(make(full((3,)), S0),
                           flow.tensor(numpy.ones(4, bool), placement=ALL, sbp=S0))


@pytest.mark.mpi(min_size=4)
def test_two_dimensional_mesh() -> None:
    mesh = flow.placement("cpu", [[0, 1], [2, 3]])
    a = full((7, 5))
    for sbp in ((S0, S1), (S0, S0), (S1, S0), (S1, B)):
        x = flow.tensor(a, placement=mesh, sbp=sbp)
        assert_array_equal(flow.masked_select(x, x > 0).numpy(), a[a > 0])
        assert_array_equal(x[x > 0].numpy(), a[a > 0])
        assert_array_equal(flow.nonzero(x > 0).numpy(), numpy.argwhere(a > 0))
        y, want = flow.tensor(a, placement=mesh, sbp=sbp), a.copy()
        y[y > 0] = 0.5
        want[want > 0] = 0.5
        assert_array_equal(y.numpy(), want)
