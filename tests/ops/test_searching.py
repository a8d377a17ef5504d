"""searchsorted on local and global tensors against torch: a split sequence with values
broadcast (partial counts) or split (routed), at 1-4 ranks."""

from __future__ import annotations

import numpy
import pytest
import torch
from global_helpers import S0, S1, SIZE, B, N, P, make
from numpy.testing import assert_array_equal

import mpiflow as flow
from mpiflow.communication import count_collectives

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("seq_sbp", [S0, B], ids=str)
@pytest.mark.parametrize("values_sbp", [S0, S1, B], ids=str)
def test_searchsorted_matches_torch(seq_sbp: object, values_sbp: object) -> None:
    rng = numpy.random.default_rng(0)
    sequence = numpy.sort(rng.integers(0, 9, 4 * N)).astype(numpy.float64)  # > the values
    values = rng.integers(-1, 11, (N, 3)).astype(numpy.float64)
    seq, vals = make(sequence, seq_sbp), make(values, values_sbp)
    for right in (False, True):
        got = flow.searchsorted(seq, vals, right=right)
        want = torch.searchsorted(torch.tensor(sequence), torch.tensor(values), right=right)
        assert_array_equal(got.numpy(), want.numpy())
        if SIZE > 1 and seq_sbp == S0:
            assert got.sbp == ((P,) if values_sbp == B else (values_sbp,))
    got = flow.searchsorted(seq, 4.0, side="right", out_int32=True)
    assert got.dtype == flow.int32 and got.item() == numpy.searchsorted(sequence, 4.0, "right")


def test_a_long_split_sequence_routes_the_values_a_short_one_is_made_whole() -> None:
    rng = numpy.random.default_rng(2)
    values = rng.integers(0, 3, 5 * N).astype(numpy.float64)
    for sequence, routed in ((numpy.arange(6.0 * N), True), (numpy.arange(3.0), False)):
        seq, vals = make(sequence, S0), make(values, S0)
        with count_collectives() as calls:
            got = flow.searchsorted(seq, vals)
        assert got.sbp == (S0,)
        assert_array_equal(got.numpy(), numpy.searchsorted(sequence, values))
        if SIZE > 1:   # a few labels: no value moves, the sequence is made whole
            assert (calls["all_to_all_v"] > 0) == routed, calls


def test_batched_rows_and_a_sorter() -> None:
    rng = numpy.random.default_rng(1)
    rows = numpy.sort(rng.standard_normal((N, 5)), axis=1)
    values = rng.standard_normal((N, 4))
    for sbp in (S0, S1, B):
        got = flow.searchsorted(make(rows, sbp), make(values, S0 if sbp == S0 else B))
        assert_array_equal(got.numpy(), torch.searchsorted(torch.tensor(rows),
                                                           torch.tensor(values)).numpy())
    unsorted = rng.standard_normal(7)
    sorter = numpy.argsort(unsorted)
    got = flow.searchsorted(make(unsorted, B), make(values, S0), sorter=make(sorter, B))
    want = torch.searchsorted(torch.tensor(unsorted), torch.tensor(values),
                              sorter=torch.tensor(sorter))
    assert_array_equal(got.numpy(), want.numpy())


def test_bad_arguments_raise_before_anything_moves() -> None:
    seq = make(numpy.arange(N, dtype=numpy.float64), S0)
    with pytest.raises(RuntimeError, match="side and right"):
        flow.searchsorted(seq, seq, right=True, side="left")
    with pytest.raises(RuntimeError, match="first N-1 dimensions"):
        flow.searchsorted(make(numpy.zeros((N, 2)), S0), make(numpy.zeros((2, 2)), B))
