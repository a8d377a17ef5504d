"""Chunks and regions (pure): the chunks a rank writes alone, the slabs it writes in turns."""

from __future__ import annotations

import itertools
import math

import numpy
import pytest

from mpiflow.io.regions import (
    aligned_chunks,
    chunk_origins,
    interior,
    largest_divisor,
    remainder,
)
from mpiflow.layouts.sbp import balanced_bounds


def test_largest_divisor() -> None:
    assert [largest_divisor(24, k) for k in (1, 5, 8, 23, 24, 99)] == [1, 4, 8, 12, 24, 24]
    assert largest_divisor(97, 50) == 1
    assert largest_divisor(0, 4) == 1


def test_even_splits_get_chunks_on_the_rank_boundaries() -> None:
    assert aligned_chunks((12, 3), 8, [[0, 6], [0]]) == (6, 3)
    assert aligned_chunks((12, 8), 8, [[0, 6], [0, 4]]) == (6, 4)       # a 2-D mesh
    assert aligned_chunks((1 << 22,), 8, [[0, 1 << 21]]) == (1 << 20,)  # cut to 8 MiB
    assert aligned_chunks((5,), 8, [[0]]) == (5,)                       # one region
    assert aligned_chunks((0, 3), 8, [[0], [0]]) == (1, 3)              # empty dims


def test_uneven_splits_get_small_chunks() -> None:
    # 1000 rows on 3 ranks start at 0, 334, 667: no common divisor; 1/16 of 333 rows.
    assert aligned_chunks((1000, 4), 8, [[0, 334, 667], [0]]) == (21, 4)
    assert aligned_chunks((10, 4), 8, [[0, 4, 7], [0]]) == (1, 4)


def test_chunk_budget_cuts_the_later_dims_too() -> None:
    chunks = aligned_chunks((4, 1 << 21), 8, [[0], [0]], budget=1 << 20)
    assert math.prod(chunks) * 8 <= 1 << 20
    assert chunks[0] == 1


def _covered_chunks(box: tuple[tuple[int, int], ...], chunks: tuple[int, ...]) -> set:
    ranges = [range(a // c, -(-b // c)) for (a, b), c in zip(box, chunks)]
    return set(itertools.product(*ranges))


@pytest.mark.parametrize("n,parts,chunk", [(10, 3, 2), (13, 4, 3), (16, 4, 4), (7, 3, 5),
                                           (9, 2, 1)])
def test_interior_and_remainder_split_each_region(n: int, parts: int, chunk: int) -> None:
    shape, chunks = (n, 5), (chunk, 2)
    owners: dict[tuple[int, ...], set[int]] = {}
    alone: list[set] = []
    for r in range(parts):
        box = (balanced_bounds(n, parts, r), (0, 5))
        if box[0][0] == box[0][1]:
            continue
        inner = interior(box, chunks, shape)
        slabs = remainder(box, inner)
        # The interior and the slabs cover the region exactly once.
        mask = numpy.zeros(shape, dtype=int)
        for piece in ([inner] if inner else []) + slabs:
            mask[tuple(slice(a, b) for a, b in piece)] += 1
        expected = numpy.zeros(shape, dtype=int)
        expected[slice(*box[0]), :] = 1
        numpy.testing.assert_array_equal(mask, expected)
        mine = _covered_chunks(inner, chunks) if inner else set()
        if inner:
            assert set(chunk_origins(inner, chunks)) == {
                tuple(i * c for i, c in zip(k, chunks)) for k in mine}
        for slab in slabs:
            assert not _covered_chunks(slab, chunks) & mine  # slabs never touch whole chunks
        alone.append(mine)
        for k in _covered_chunks(box, chunks):
            owners.setdefault(k, set()).add(r)
    # A chunk a rank writes alone is in no other rank's region.
    for r_chunks in alone:
        for k in r_chunks:
            assert len(owners[k]) == 1
