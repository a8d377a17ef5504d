"""The bookkeeping of distributed axes and exchanges (pure: no MPI)."""

from __future__ import annotations

import itertools

import pytest

from mpiflow.algorithms.ranges import balanced, fetch_plan, offsets, pieces, reversed_range


def test_offsets_and_balanced_parts() -> None:
    assert offsets([]) == [0]
    assert offsets([2, 0, 3]) == [0, 2, 2, 5]
    assert balanced(7, 3) == [3, 2, 2]
    assert balanced(2, 4) == [1, 1, 0, 0]
    with pytest.raises(ValueError, match="non-negative"):
        offsets([1, -1])


def test_pieces_skip_empty_parts_and_cover_the_range() -> None:
    counts = [0, 3, 0, 0, 2, 1]
    assert pieces(counts, 0, 6) == [(1, 0, 3), (4, 0, 2), (5, 0, 1)]
    assert pieces(counts, 2, 5) == [(1, 2, 3), (4, 0, 2)]
    assert pieces(counts, 4, 4) == []
    with pytest.raises(IndexError, match="outside"):
        pieces(counts, 5, 7)


def test_reversed_range() -> None:
    assert reversed_range(10, 0, 3) == (7, 10)


def _simulate(counts: list[int], wants: list[list[tuple[int, int]]]) -> list[list[int]]:
    """Run every rank's plan on the axis 0..n-1 and return what each rank ends up with."""
    starts = offsets(counts)
    plans = [fetch_plan(counts, wants, r) for r in range(len(counts))]
    out = []
    for r, plan in enumerate(plans):
        got = []
        for owner, lo, hi in plan.mine:
            assert (lo, hi) in [s for s in plans[owner].sends[r]]
            got += list(range(starts[owner] + lo, starts[owner] + hi))
        assert plan.recv_counts == tuple(plans[s].send_counts[r] for s in range(len(counts)))
        out.append(got)
    totals = {p.remote for p in plans}
    assert len(totals) == 1, "every rank agrees on the rows that move"
    return out


@pytest.mark.parametrize("counts", [[3, 2], [0, 4, 0], [2, 2, 2, 1], [5], [0, 0, 1, 0]])
def test_every_rank_gets_exactly_the_rows_it_wants(counts: list[int]) -> None:
    n = sum(counts)
    p = len(counts)
    cases = [
        [[(0, n)]] * p,  # everyone wants everything
        [[(r * n // p, (r + 1) * n // p)] for r in range(p)],  # a rebalance
        [[(n - 1, n), (0, 1)] if n else [] for _ in range(p)],  # wrapped halo rows
    ]
    for a, b in itertools.combinations(range(n + 1), 2):
        cases.append([[(a, b)] if r % 2 else [(0, a), (b, n)] for r in range(p)])
    for wants in cases:
        got = _simulate(counts, wants)
        for r in range(p):
            assert got[r] == [i for lo, hi in wants[r] for i in range(lo, hi)]


def test_a_rank_keeping_its_rows_moves_nothing() -> None:
    counts = [2, 3]
    plan = fetch_plan(counts, [[(0, 2)], [(2, 5)]], 0)
    assert plan.remote == 0 and plan.mine == ((0, 0, 2),)
