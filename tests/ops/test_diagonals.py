"""diagonal and trace (mpiflow.ops.diagonals) against torch on the whole value, split along each
dim, broadcast and partial, at 1-4 ranks: a split of either matrix dim stays split, with at
most one all-to-all and nothing gathered; gradients equal torch's."""

from __future__ import annotations

import numpy
import pytest
import torch
from global_helpers import S0, S1, S2, SIZE, B, N, P, full, make
from numpy.testing import assert_allclose, assert_array_equal

import mpiflow as flow
from mpiflow.communication import count_collectives

CASES = [(0, 0, 1), (2, 1, 2), (-3, 1, 2), (1, 2, 1), (-1, 0, 2), (N + 5, 1, 2), (4, -1, -2)]


@pytest.mark.mpi
@pytest.mark.parametrize(("offset", "dim1", "dim2"), CASES)
def test_diagonal_matches_torch_on_every_layout(offset: int, dim1: int, dim2: int) -> None:
    a = full((2 * SIZE + 1, N, N + 2))
    for sbp in (S0, S1, S2, B, P):
        x = make(a, sbp).requires_grad_()
        t = torch.tensor(a, requires_grad=True)
        with count_collectives() as calls:
            got = flow.diagonal(x, offset, dim1, dim2)
        want = torch.diagonal(t, offset, dim1, dim2)
        assert_array_equal(got.numpy(), want.detach().numpy(), err_msg=str(sbp))
        split = sbp.dim if isinstance(sbp, type(S0)) else None
        if split is not None and SIZE > 1:
            moved = split in (dim1 % 3, dim2 % 3)
            assert got.sbp == ((S1,) if moved else (S0,)), (sbp, got.sbp)
            assert set(calls) <= {"all_to_all_v"} and sum(calls.values()) <= int(moved), calls
        g = numpy.random.default_rng(3).standard_normal(tuple(want.shape))
        got.backward(make(g, B))
        want.backward(torch.tensor(g))
        assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=0, atol=0)


@pytest.mark.mpi
def test_trace_and_linalg_diagonal_of_split_matrices() -> None:
    a = full((N, N))
    for sbp in (S0, S1, B):
        x = make(a, sbp)
        assert_allclose(flow.trace(x).item(), numpy.trace(a), rtol=1e-14)
        assert_array_equal(flow.linalg.diagonal(x, offset=-1).numpy(), numpy.diagonal(a, -1))
        assert_array_equal(x.diagonal(2).numpy(), numpy.diagonal(a, 2))
    assert flow.trace(flow.tensor([[1, 2], [3, 4]])).dtype == flow.int64


def test_bad_arguments_say_what_is_wrong() -> None:
    with pytest.raises(RuntimeError, match="identical"):
        flow.diagonal(flow.ones(2, 3), 0, 1, -1)
    with pytest.raises(RuntimeError, match="at least 2 dims"):
        flow.diagonal(flow.ones(3))
    with pytest.raises(RuntimeError, match="expected a matrix"):
        flow.trace(flow.ones(2, 2, 2))
    with pytest.raises(IndexError):
        flow.diagonal(flow.ones(2, 3), 0, 0, 2)
