"""take_along_dim (mpiflow.ops.gathers) against torch on the whole value, and the gathers'
communication: only the rows asked for move."""

from __future__ import annotations

from typing import Any

import numpy
import pytest
import torch
from global_helpers import S0, S1, SIZE, B, N, P, full, make
from numpy.testing import assert_array_equal

import mpiflow as flow
from mpiflow.communication import count_collectives

GATHERS = {"all_gather", "all_gather_v"}


@pytest.mark.mpi
@pytest.mark.parametrize("sbp", [S0, S1, B, P], ids=str)
@pytest.mark.parametrize("isbp", [S0, B], ids=str)
def test_take_along_dim_matches_torch(sbp: Any, isbp: Any) -> None:
    a = full((N, 3))
    rng = numpy.random.default_rng(3)
    cases = [(rng.integers(-N, N, (2 * N, 3)), 0), (rng.integers(-3, 3, (N, 2)), 1),
             (rng.integers(-N, N, (N + 2, 1)), 0), (rng.integers(-3 * N, 3 * N, (5,)), None)]
    for index, dim in cases:
        x = make(a, sbp).requires_grad_()
        t = torch.tensor(a, requires_grad=True)
        with count_collectives() as calls:
            got = flow.take_along_dim(x, make(index, isbp), dim)
        n = a.size if dim is None else a.shape[dim]   # negative entries count from the end,
        want = torch.take_along_dim(t, torch.tensor(index % n), dim)  # as numpy's (torch: UB)
        assert_array_equal(got.numpy(), want.detach().numpy(), err_msg=f"{dim}")
        if sbp == S0 and dim == 0:
            assert got.sbp == (S0,)
            assert not GATHERS & set(calls), calls   # rows asked for, not the array
        cotangent = numpy.random.default_rng(4).standard_normal(tuple(want.shape))
        got.backward(make(cotangent, B))
        want.backward(torch.tensor(cotangent))
        assert_array_equal(x.grad.numpy(), t.grad.numpy())


@pytest.mark.mpi
def test_take_along_dim_refuses_bad_input_on_every_rank() -> None:
    x = make(full((N, 3)), S0)
    with pytest.raises(IndexError, match=f"index {N} is out of bounds"):
        flow.take_along_dim(x, make(numpy.full((2, 3), N), S0), 0)
    with pytest.raises(TypeError, match="integer"):
        flow.take_along_dim(x, make(numpy.zeros((2, 3)), S0), 0)
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        flow.take_along_dim(x, make(numpy.zeros(2, int), S0), 0)


@pytest.mark.mpi
def test_fancy_rows_of_a_split_tensor_move_only_the_rows_asked_for() -> None:
    a = full((N, 4))
    index = numpy.array([N - 1, 0, N - 1, 1])
    with count_collectives() as calls:
        got = make(a, S0)[make(index, S0)]
    assert_array_equal(got.numpy(), a[index])
    assert got.sbp == (S0,)
    assert not GATHERS & set(calls), calls
    if SIZE > 1:  # the owners asked (one all-to-all of counts) and answering (two of rows)
        assert calls["all_to_all_v"] == 2 and calls["all_to_all"] == 1, calls
    x = make(a, S0).requires_grad_()
    x[make(index, B)].sum().backward()
    want = numpy.zeros_like(a)
    numpy.add.at(want, index, 1.0)
    assert_array_equal(x.grad.numpy(), want)


@pytest.mark.mpi
def test_a_short_table_taken_by_many_indices_is_made_whole() -> None:
    classes = numpy.array([2.0, 5.0, 7.0])
    labels = numpy.random.default_rng(3).integers(0, 3, 5 * N)
    with count_collectives() as calls:        # predict's classes_[argmax]: no label moves
        got = make(classes, S0)[make(labels, S0)]
    assert_array_equal(got.numpy(), classes[labels])
    assert got.sbp == (S0,) and calls["all_to_all_v"] == 0, calls


@pytest.mark.mpi(min_size=4)
def test_two_dimensional_mesh() -> None:
    mesh = flow.placement("cpu", [[0, 1], [2, 3]])
    a = full((7, 5))
    order = numpy.argsort(a, 0)
    index = numpy.array([6, 0, 3, 3, -1])
    for sbp in ((S0, S1), (S0, S0), (S1, S0), (P, S0)):
        x = flow.tensor(a, placement=mesh, sbp=tuple(B if s == P else s for s in sbp))
        x = x.to_global(sbp=sbp)
        got = flow.take_along_dim(x, flow.tensor(order, placement=mesh, sbp=(S0, S1)), 0)
        assert_array_equal(got.numpy(), numpy.take_along_axis(a, order, 0))
        assert_array_equal(x[flow.tensor(index, placement=mesh, sbp=(S0, B))].numpy(), a[index])
        assert_array_equal(x[:, [4, 0, 4]].numpy(), a[:, [4, 0, 4]])
        y, want = flow.tensor(a, placement=mesh, sbp=(S0, S1)), a.copy()
        y[[1, -1]] = 7.0
        want[[1, -1]] = 7.0
        assert_array_equal(y.numpy(), want)
