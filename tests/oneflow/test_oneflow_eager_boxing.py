"""OneFlow's test_eager_boxing.py (modules), run on mpiflow at OneFlow's 4 ranks.

OneFlow writes one function per case; here each case is a row: the per-rank input table, the
source placement and the sbp chain it goes through (the first entry makes the local tensors
global), the target placement and sbp. The expected shards follow OneFlow's rules, which its
literal arrays show (and which the literal checks below repeat for the sums and partial
layouts): split shards are balanced slabs of the logical value; a partial target made from
B or P on *another* placement gives its first rank the value and the others zeros; S(d)->P
keeps each source rank's slab in place in a full-shape tensor of zeros, on the rank itself
when it is in the target placement (on the same placement no data moves), else on the target
rank at its position modulo the target's size. OneFlow's
``{0: [...]}`` placement dicts are ``flow.placement("cpu", [...])``; ``cpu``/``cuda`` pairs
are one ``cpu`` case.
"""

from __future__ import annotations

from typing import Any

import numpy
import pytest
from oneflow_case import FOUR_RANK_DATA, RANK, exactly

import mpiflow as flow
from mpiflow.sbp import Broadcast, Partial, Split

pytestmark = pytest.mark.mpi

S0, S1, B, P = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.broadcast, flow.sbp.partial_sum

# OneFlow's 6x6 inputs of ranks 0..3; its 4x6 cases use the first four rows.
SIX = numpy.array([
    [[4, 6, 5, 20, 8, 9], [6, 8, 9, 0, 4, 6], [3, 7, 5, 0, 3, 5], [6, 8, 9, 0, 8, 7],
     [6, 8, 9, 0, 4, 6], [6, 8, 6, 4, 5, 3]],
    [[2, 10, 10, 7, 10, 3], [3, 9, 10, 5, 5, 6], [4, 6, 6, 9, 8, 6], [6, 8, 6, 4, 5, 3],
     [4, 9, 7, 0, 2, 1], [6, 3, 9, 2, 5, 2]],
    [[9, 6, 5, 8, 3, 6], [4, 9, 7, 0, 2, 1], [2, 5, 7, 9, 4, 8], [6, 8, 10, 0, 4, 9],
     [6, 3, 9, 2, 5, 2], [2, 5, 7, 9, 4, 8]],
    [[9, 4, 5, 8, 9, 6], [7, 2, 9, 5, 4, 1], [6, 3, 9, 2, 5, 2], [3, 7, 5, 8, 9, 3],
     [7, 2, 9, 5, 4, 1], [4, 9, 7, 0, 2, 1]],
], dtype=numpy.float32)
# OneFlow's 4x8 inputs (out_placement_contain_in_placement_s1_to_s1).
EIGHT = numpy.array([
    [[4, 6, 5, 20, 8, 9, 5, 20], [6, 8, 9, 0, 4, 6, 9, 0], [3, 7, 5, 0, 3, 5, 0, 3],
     [6, 8, 9, 0, 8, 7, 8, 9]],
    [[2, 10, 10, 7, 10, 3, 10, 7], [3, 9, 10, 5, 5, 6, 9, 10], [4, 6, 6, 9, 8, 6, 6, 9],
     [6, 8, 6, 4, 5, 3, 8, 6]],
    [[9, 6, 5, 8, 3, 6, 8, 3], [4, 9, 7, 0, 2, 1, 9, 7], [2, 5, 7, 9, 4, 8, 5, 7],
     [6, 8, 10, 0, 4, 9, 8, 10]],
    [[9, 4, 5, 8, 9, 6, 5, 8], [7, 2, 9, 5, 4, 1, 7, 2], [6, 3, 9, 2, 5, 2, 9, 2],
     [3, 7, 5, 8, 9, 3, 7, 5]],
], dtype=numpy.float32)
FOUR, FOUR_BY_SIX, SIX_BY_SIX = FOUR_RANK_DATA, SIX[:, :4], SIX

# (OneFlow's function name, table, source ranks, sbp chain, target ranks, target sbp)
CASES: list[tuple[str, numpy.ndarray, list[int], list[Any], list[int], Any]] = [
    ("non_overlapping_placement_p_to_s1", FOUR, [0, 1], [P], [2, 3], S1),
    ("non_overlapping_placement_b_to_s1", FOUR, [0, 1], [B], [2, 3], S1),
    ("non_overlapping_placement_s0_to_s1", FOUR, [0, 1], [S0], [2, 3], S1),
    ("non_overlapping_placement_s1_to_s1", FOUR, [0, 1], [S0, S1], [2, 3], S1),
    ("non_overlapping_placement_s1_to_s0", FOUR, [0, 1], [S0, S1], [2, 3], S0),
    ("non_overlapping_placement_s1_to_b", FOUR, [0, 1], [S0, S1], [2, 3], B),
    ("non_overlapping_placement_s1_to_p", FOUR, [0, 1], [S0, S1], [2, 3], P),
    ("overlapping_placement_p_to_s1", FOUR, [0, 1, 3], [P], [2, 3], S1),
    ("overlapping_placement_b_to_s1", FOUR, [0, 1, 3], [B], [2, 3], S1),
    ("overlapping_placement_s0_to_s1", FOUR, [0, 1, 3], [S0], [2, 3], S1),
    ("overlapping_placement_s1_to_s1", FOUR_BY_SIX, [0, 1, 3], [S0, S1], [2, 3], S1),
    ("overlapping_placement_s1_to_s0", FOUR_BY_SIX, [0, 1, 3], [S0, S1], [2, 3], S0),
    ("overlapping_placement_s1_to_b", FOUR_BY_SIX, [0, 1, 3], [S0, S1], [2, 3], B),
    ("overlapping_placement_s1_to_p", FOUR_BY_SIX, [0, 1, 3], [S0, S1], [2, 3], P),
    ("in_placement_contain_out_placement_p_to_s1", FOUR, [0, 1, 3], [P], [1, 3], S1),
    ("in_placement_contain_out_placement_b_to_s1", FOUR, [0, 1, 3], [B], [1, 3], S1),
    ("in_placement_contain_out_placement_s0_to_s1", FOUR, [0, 1, 3], [S0], [1, 3], S1),
    ("in_placement_contain_out_placement_s1_to_s1", FOUR, [0, 2, 1, 3], [B, S1], [1, 3], S1),
    ("in_placement_contain_out_placement_s1_to_s0", FOUR, [0, 2, 1, 3], [B, S1], [1, 3], S0),
    ("in_placement_contain_out_placement_s1_to_p", FOUR, [0, 2, 1, 3], [B, S1], [1, 3], P),
    ("in_placement_contain_out_placement_s1_to_b", FOUR, [0, 2, 1, 3], [B, S1], [1, 3], B),
    ("out_placement_contain_in_placement_p_to_s1", FOUR, [0, 1, 3], [P], [0, 1, 2, 3], S1),
    ("out_placement_contain_in_placement_b_to_s1", FOUR, [0, 1, 3], [B], [0, 1, 2, 3], S1),
    ("out_placement_contain_in_placement_s0_to_s1", FOUR, [0, 1, 3], [S0], [0, 1, 2, 3], S1),
    ("out_placement_contain_in_placement_s1_to_b", FOUR_BY_SIX, [0, 1, 3], [S0, S1],
     [0, 1, 2, 3], B),
    ("out_placement_contain_in_placement_s1_to_p", FOUR_BY_SIX, [0, 1, 3], [S0, S1],
     [0, 1, 2, 3], P),
    ("out_placement_contain_in_placement_s1_to_s0", FOUR_BY_SIX, [0, 1, 3], [S0, S1],
     [0, 1, 2, 3], S0),
    ("out_placement_contain_in_placement_s1_to_s1", EIGHT, [0, 1], [S0, S1], [0, 1, 2, 3], S1),
    ("same_placement_s0_to_s1", FOUR_BY_SIX, [0, 1, 3], [S0], [0, 1, 3], S1),
    ("same_placement_p_to_s1", SIX_BY_SIX, [0, 1, 3], [P], [0, 1, 3], S1),
    ("same_placement_b_to_s1", SIX_BY_SIX, [0, 1, 3], [B], [0, 1, 3], S1),
    ("same_placement_s1_to_s1", FOUR_BY_SIX, [0, 1, 3], [S0, S1], [0, 1, 3], S1),
    ("same_placement_s1_to_s0", FOUR_BY_SIX, [0, 1, 3], [S0, S1], [0, 1, 3], S0),
    ("same_placement_s1_to_p", FOUR_BY_SIX, [0, 1, 3], [S0, S1], [0, 1, 3], P),
    ("same_placement_s1_to_b", FOUR_BY_SIX, [0, 1, 3], [S0, S1], [0, 1, 3], B),
]


def _logical(table: numpy.ndarray, ranks: list[int], first: Any) -> numpy.ndarray:
    """The global value made from the local tensors of ``ranks`` with the sbp ``first``."""
    ordered = sorted(ranks)  # a placement's ranks are in canonical order
    if isinstance(first, Split):
        return numpy.concatenate([table[r] for r in ordered], axis=first.dim)
    if isinstance(first, Partial):
        return sum(table[r] for r in ordered)
    return table[ordered[0]]


def _slab(value: numpy.ndarray, dim: int, parts: int, i: int) -> tuple[slice, ...]:
    """Where part ``i`` of ``parts`` balanced slabs of ``value`` along ``dim`` lies."""
    n = value.shape[dim]
    sizes = [n // parts + (1 if j < n % parts else 0) for j in range(parts)]
    start = sum(sizes[:i])
    index = [slice(None)] * value.ndim
    index[dim] = slice(start, start + sizes[i])
    return tuple(index)


def _expected(value: numpy.ndarray, src: list[int], chain: list[Any], dst: list[int],
              sbp: Any) -> numpy.ndarray:
    """This rank's shard of ``value`` in OneFlow's target layout."""
    ordered, i = sorted(dst), sorted(dst).index(RANK)
    if isinstance(sbp, Split):
        return value[_slab(value, sbp.dim, len(ordered), i)]
    if isinstance(sbp, Broadcast):
        return value
    last = chain[-1]
    if isinstance(last, Split):  # S->P: each source slab, in place, on one target rank
        out = numpy.zeros_like(value)
        sources = sorted(src)
        for j, s in enumerate(sources):
            owner = s if s in ordered else ordered[j % len(ordered)]
            if owner == RANK:
                where = _slab(value, last.dim, len(sources), j)
                out[where] = value[where]
        return out
    return value if i == 0 else numpy.zeros_like(value)


@exactly(4)
@pytest.mark.parametrize("name, table, src, chain, dst, sbp", CASES, ids=[c[0] for c in CASES])
def test_eager_boxing(name: str, table: numpy.ndarray, src: list[int], chain: list[Any],
                      dst: list[int], sbp: Any) -> None:
    tensor = flow.tensor(table[RANK], device=flow.device("cpu"), dtype=flow.float32)
    placement = flow.placement("cpu", src)
    x = tensor.to_global(placement, chain[0])
    for step in chain[1:]:
        x = x.to_global(placement, step)
    new_placement = flow.placement("cpu", dst)
    y = x.to_global(new_placement, sbp)
    assert y.placement == new_placement
    value = _logical(table, src, chain[0])
    if RANK in dst:
        numpy.testing.assert_array_equal(y.to_local().numpy(), _expected(value, src, chain, dst,
                                                                         sbp))
    numpy.testing.assert_array_equal(y.numpy(), value)


# Some of OneFlow's literal arrays, checked as they are written there.
@exactly(4)
def test_eager_boxing_literal_values() -> None:
    p = flow.placement("cpu", [0, 1, 3])
    x = flow.tensor(FOUR[RANK]).to_global(p, P)
    y = x.to_global(flow.placement("cpu", [2, 3]), S1)
    literal = {2: [[15, 20], [16, 19], [13, 16], [15, 23]],
               3: [[20, 35], [28, 10], [20, 11], [20, 12]]}
    if RANK in literal:
        numpy.testing.assert_array_equal(y.to_local().numpy(), literal[RANK])
    z = flow.tensor(SIX[RANK]).to_global(p, P).to_global(p, S1)
    literal = {0: [[15, 20], [16, 19], [13, 16], [15, 23], [17, 19], [16, 20]],
               1: [[20, 35], [28, 10], [20, 11], [20, 12], [25, 5], [22, 6]],
               3: [[27, 18], [13, 13], [16, 13], [22, 13], [10, 8], [12, 6]]}
    if RANK in literal:
        numpy.testing.assert_array_equal(z.to_local().numpy(), literal[RANK])
    # S(1) -> P across placements, OneFlow's literal rows (overlapping and contained cases)
    v = flow.tensor(FOUR_BY_SIX[RANK]).to_global(p, S0).to_global(p, S1)
    v = v.to_global(flow.placement("cpu", [2, 3]), P)
    literal = {2: [[4, 6, 0, 0, 0, 0], [6, 8, 0, 0, 0, 0]],
               3: [[0, 0, 5, 20, 8, 9], [0, 0, 9, 0, 4, 6]]}
    if RANK in literal:
        numpy.testing.assert_array_equal(v.to_local().numpy()[:2], literal[RANK])
    every = flow.placement("cpu", [0, 2, 1, 3])
    u = flow.tensor(FOUR[RANK]).to_global(every, B).to_global(every, S1)
    u = u.to_global(flow.placement("cpu", [1, 3]), P)
    literal = {1: [[4, 6, 5, 0], [6, 8, 9, 0], [3, 7, 5, 0], [6, 8, 9, 0]],
               3: [[0, 0, 0, 20], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]}
    if RANK in literal:
        numpy.testing.assert_array_equal(u.to_local().numpy(), literal[RANK])
    w = flow.tensor(FOUR_BY_SIX[RANK]).to_global(p, S0).to_global(p, S1).to_global(p, P)
    if RANK == 1:
        numpy.testing.assert_array_equal(w.to_local().numpy()[:2], [[0, 0, 5, 20, 0, 0],
                                                                    [0, 0, 9, 0, 0, 0]])


# -- TestEagerBoxingSToB and TestEagerNaiveBoxingSToS (random data) -----------------------------
@exactly(4)
@pytest.mark.parametrize("shape", [(12, 12), (12, 18, 24)])
@pytest.mark.parametrize("in_list", [[0, 1], [1, 2, 3]])
@pytest.mark.parametrize("out_list", [[2, 3], [0, 1, 3]])
def test_eager_boxing_s_to_b(shape: tuple[int, ...], in_list: list[int],
                             out_list: list[int]) -> None:
    x = flow.tensor(numpy.random.default_rng(0).uniform(-1e-5, 1e-5, shape),
                    dtype=flow.float32).to_global(flow.env.all_device_placement("cpu"), B)
    placement = flow.placement("cpu", in_list)
    y = x.to_global(placement, B).to_global(placement, S0)
    new_placement = flow.placement("cpu", out_list)
    z = y.to_global(new_placement, B)
    if RANK in out_list:
        numpy.testing.assert_allclose(z.to_local().numpy(), x.to_local().numpy(), 1e-5, 1e-5)
    assert z.placement == new_placement


@exactly(4)
@pytest.mark.parametrize("shape", [(12, 12), (18, 24)])
@pytest.mark.parametrize("in_list", [[0, 1], [1, 2, 3]])
@pytest.mark.parametrize("out_list", [[1], [3], [2, 3], [0, 1, 3]])
@pytest.mark.parametrize("in_axis", [0, 1])
@pytest.mark.parametrize("out_axis", [0, 1])
def test_eager_naive_boxing_s_to_s(shape: tuple[int, ...], in_list: list[int],
                                   out_list: list[int], in_axis: int, out_axis: int) -> None:
    value = numpy.random.default_rng(1).uniform(-1e-5, 1e-5, shape).astype(numpy.float32)
    x = flow.tensor(value).to_global(flow.env.all_device_placement("cpu"), B)
    placement = flow.placement("cpu", in_list)
    y = x.to_global(placement, B).to_global(placement, flow.sbp.split(in_axis))
    new_placement = flow.placement("cpu", out_list)
    z = y.to_global(new_placement, flow.sbp.split(out_axis))
    if RANK in out_list:
        idx = out_list.index(RANK)
        step = shape[out_axis] // len(out_list)
        index = [slice(None)] * 2
        index[out_axis] = slice(idx * step, (idx + 1) * step)
        numpy.testing.assert_allclose(z.to_local().numpy(), value[tuple(index)], 1e-5, 1e-5)
    assert z.placement == new_placement
