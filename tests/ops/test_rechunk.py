"""Reshapes across a split dim (mpiflow.ops.rechunk): the flat order re-chunked by one fetch,
never gathered; the result split along the output's first dim of extent > 1, balanced."""

from __future__ import annotations

from typing import Any

import numpy
import pytest
from global_helpers import RANK, S0, S1, SIZE, B, N, P, full, make
from numpy.testing import assert_array_equal

from mpiflow.communication import count_collectives
from mpiflow.ops.rechunk import first_dim


def test_first_dim_is_the_first_of_extent_other_than_one() -> None:
    assert (first_dim((1, 1, 4)), first_dim((5, 1)), first_dim((1, 1)), first_dim(())) == \
        (2, 0, 0, 0)


@pytest.mark.mpi
@pytest.mark.parametrize("sbp", [S0, S1, P], ids=str)
def test_reshapes_across_the_split_dim_match_numpy(sbp: Any) -> None:
    a = full((N, 4))
    for size in ((4, N), (-1,), (1, 2, 2 * N), (2, 2, N, 1)):
        x = make(a, sbp).requires_grad_()
        with count_collectives() as calls:
            y = x.reshape(*size)
        want = a.reshape(size)
        assert_array_equal(y.numpy(), want)
        if sbp == S0 and SIZE > 1:  # one all-to-all of the elements that change rank
            assert set(calls) <= {"all_to_all_v"} and sum(calls.values()) <= 1, calls
            d = first_dim(want.shape)
            assert y.sbp == (type(S0)(d),)
            parts = numpy.array_split(numpy.arange(want.shape[d]), SIZE)
            assert y.to_local().shape[d] == len(parts[RANK])
        elif sbp == P:
            assert y.sbp == (P,) and not calls, calls
        cotangent = numpy.random.default_rng(1).standard_normal(want.shape)
        y.backward(make(cotangent, B))
        assert_array_equal(x.grad.numpy(), cotangent.reshape(a.shape))
