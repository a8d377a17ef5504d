"""SBP layout values (mpiflow/layouts/sbp.py): construction, equality, reprs, the balanced rule."""

from __future__ import annotations

import dataclasses

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpiflow.communication import ReduceOp
from mpiflow.sbp import (
    Broadcast,
    Partial,
    Split,
    balanced_bounds,
    balanced_sizes,
    broadcast,
    normalize_sbp,
    partial_max,
    partial_min,
    partial_sum,
    sbp,
    split,
)


def test_reprs_and_short_strings() -> None:
    assert repr(split(1)) == "mpiflow.sbp.split(dim=1)" and str(split(1)) == "S(1)"
    assert repr(broadcast) == "mpiflow.sbp.broadcast" and str(broadcast) == "B"
    assert repr(partial_sum) == "mpiflow.sbp.partial_sum" and str(partial_sum) == "P"
    assert (str(partial_max), str(partial_min)) == ("P(max)", "P(min)")
    assert repr(partial_min) == "mpiflow.sbp.partial_min"


def test_values_compare_and_hash_by_content() -> None:
    assert split(0) == Split(0) and hash(split(0)) == hash(Split(0))
    assert split(0) != split(1) and Broadcast() == broadcast
    assert Partial() == partial_sum and partial_sum != partial_max
    assert len({split(0), Split(0), broadcast, Broadcast(), partial_sum, partial_max}) == 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        split(0).dim = 1  # type: ignore[misc]


def test_kind_predicates_and_type_alias() -> None:
    assert split(2).is_split() and not split(2).is_broadcast() and not split(2).is_partial()
    assert broadcast.is_broadcast() and partial_max.is_partial()
    assert all(isinstance(s, sbp) for s in (split(0), broadcast, partial_sum))
    assert partial_max.op is ReduceOp.MAX


@pytest.mark.parametrize("dim", [-1, 1.5, True, "0", None])
def test_split_needs_a_non_negative_int(dim: object) -> None:
    with pytest.raises(ValueError, match="non-negative int"):
        split(dim)  # type: ignore[arg-type]


@pytest.mark.parametrize("op", [ReduceOp.AVG, ReduceOp.PRODUCT, ReduceOp.BAND])
def test_partial_reduces_with_sum_max_or_min_only(op: ReduceOp) -> None:
    with pytest.raises(ValueError, match="SUM, MAX or MIN"):
        Partial(op)


def test_normalize_sbp() -> None:
    assert normalize_sbp(split(0), 1) == (split(0),)
    assert normalize_sbp([broadcast, split(1)], 2) == (broadcast, split(1))
    with pytest.raises(ValueError, match=r"2 mesh dimension\(s\) but 1 sbp entries.*\(S\(0\)\)"):
        normalize_sbp(split(0), 2)
    with pytest.raises(TypeError, match=r"mpiflow\.sbp layouts"):
        normalize_sbp(["S0"], 1)


def test_balanced_rule_gives_the_first_ranks_one_more() -> None:
    assert balanced_sizes(5, 2) == [3, 2]
    assert balanced_sizes(2, 4) == [1, 1, 0, 0]
    assert balanced_sizes(0, 3) == [0, 0, 0]
    assert [balanced_bounds(5, 2, i) for i in range(2)] == [(0, 3), (3, 5)]


@settings(derandomize=True, max_examples=200, deadline=None, database=None)
@given(st.integers(0, 100), st.integers(1, 17))
def test_balanced_bounds_partition_like_numpy_array_split(n: int, k: int) -> None:
    sizes = balanced_sizes(n, k)
    assert sizes == [len(part) for part in numpy.array_split(numpy.arange(n), k)]
    bounds = [balanced_bounds(n, k, i) for i in range(k)]
    assert [b - a for a, b in bounds] == sizes
    assert bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(bounds[i][1] == bounds[i + 1][0] for i in range(k - 1))
