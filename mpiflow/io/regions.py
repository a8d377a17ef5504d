"""Chunks and regions: which parts of a chunked array each rank may write alone (pure).

A chunked format (HDF5 chunked or compressed datasets, Zarr) stores an array as a regular grid
of chunks, each read and written whole. Two ranks that write different parts of one chunk at
once would each read it, change their part and write it back: one of the two changes is lost.
So a rank's region (a box) is cut in two:

- its *interior*: the chunks that lie wholly inside its box (a chunk clipped at the end of the
  array counts as whole), which it writes alone, in parallel with the others;
- the *remainder*: the slabs of its box outside the interior, in chunks shared with a
  neighbour, which the ranks write one after the other (their turns), each merging its part
  into what is there.

:func:`aligned_chunks` chooses chunks whose grid follows the ranks' boundaries where it can (an
even split: every rank's box is whole chunks, the remainder is empty), and otherwise chunks
small enough that the shared ones are a small part of each rank's rows.

Examples:
    >>> aligned_chunks((12, 3), 8, [[0, 6], [0]])          # 2 ranks, 6 rows each
    (6, 3)
    >>> interior(((4, 9), (0, 3)), (3, 3), (12, 3))
    ((6, 9), (0, 3))
    >>> remainder(((4, 9), (0, 3)), ((6, 9), (0, 3)))
    [((4, 6), (0, 3))]
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence

from ..layouts.shards import Box

__all__ = ["CHUNK_BYTES", "aligned_chunks", "chunk_origins", "interior", "largest_divisor",
           "remainder"]

CHUNK_BYTES = 8 << 20
"""The most bytes of a chunk :func:`aligned_chunks` chooses (8 MiB)."""

# Where the ranks' boundaries cannot all fall on chunk boundaries, a chunk is at most this
# fraction of the smallest part, so the shared chunks (written in turns) hold at most about
# 2 / _UNALIGNED of each rank's rows.
_UNALIGNED = 16


def largest_divisor(n: int, limit: int) -> int:
    """The largest divisor of ``n`` (>= 1) that is at most ``limit`` (at least 1).

    Examples:
        >>> largest_divisor(24, 10), largest_divisor(7, 5)
        (8, 1)
    """
    if n <= limit:
        return max(n, 1)
    best = 1
    for i in range(1, math.isqrt(n) + 1):
        if n % i == 0:
            for d in (i, n // i):
                if best < d <= limit:
                    best = d
    return best


def aligned_chunks(shape: Sequence[int], itemsize: int, starts: Sequence[Sequence[int]],
                   budget: int = CHUNK_BYTES) -> tuple[int, ...]:
    """A chunk shape for an array that ranks write in regions starting at ``starts``.

    Along each dim the chunk is the greatest common divisor of the regions' starts (every
    boundary between two ranks falls on a chunk boundary: no chunk is shared), then cut to a
    divisor of it until the chunk holds at most ``budget`` bytes. Where the boundaries have no
    useful common divisor (an uneven split: 10 rows on 3 ranks start at 0, 4 and 7) the chunk
    is instead ``1/16`` of the smallest part, so that the chunks two ranks share are a small
    part of the rows.

    Args:
        shape: the array's shape.
        itemsize: bytes per element.
        starts: per dim, where the ranks' regions start along it.
        budget: the most bytes of one chunk.

    Returns:
        The chunk shape (each entry at least 1).

    Examples:
        >>> aligned_chunks((10, 4), 8, [[0, 4, 7], [0]])       # uneven: 1/16 of 3 rows
        (1, 4)
        >>> aligned_chunks((1 << 22,), 8, [[0, 1 << 21]])      # 16 MiB halves: 8 MiB chunks
        (1048576,)
    """
    chunks = []
    aligned = []
    for n, dim_starts in zip(shape, starts):
        n = int(n)
        bounds = sorted({int(s) for s in dim_starts if 0 < s < n})
        if not bounds:
            chunks.append(max(n, 1))
            aligned.append(True)
            continue
        g = math.gcd(*bounds)
        edges = [0, *bounds, n]
        smallest = min(b - a for a, b in itertools.pairwise(edges))
        if g * _UNALIGNED >= smallest:
            chunks.append(g)
            aligned.append(True)
        else:
            chunks.append(max(1, math.ceil(smallest / _UNALIGNED)))
            aligned.append(False)
    limit = max(budget // max(itemsize, 1), 1)  # elements per chunk
    for d in range(len(chunks)):
        rest = math.prod(chunks[d + 1:])
        if math.prod(chunks) <= limit:
            break
        most = max(limit // max(rest, 1), 1)
        chunks[d] = largest_divisor(chunks[d], most) if aligned[d] else min(chunks[d], most)
    return tuple(chunks)


def interior(box: Box, chunks: Sequence[int], shape: Sequence[int]) -> Box | None:
    """The part of ``box`` made of whole chunks (chunks clipped at the array's end count).

    Args:
        box: a region, one ``(start, stop)`` per dim.
        chunks: the chunk shape.
        shape: the array's shape.

    Returns:
        The chunk-aligned sub-box, or None when no chunk lies wholly inside ``box``.

    Examples:
        >>> interior(((0, 5),), (4,), (5,)), interior(((1, 3),), (4,), (5,))
        (((0, 5),), None)
    """
    inner = []
    for (a, b), c, n in zip(box, chunks, shape):
        lo = -(-a // c) * c
        hi = b if b == n else (b // c) * c
        if hi <= lo:
            return None
        inner.append((lo, hi))
    return tuple(inner)


def remainder(box: Box, inner: Box | None) -> list[Box]:
    """``box`` outside its sub-box ``inner``, as disjoint slabs (at most two per dim).

    Examples:
        >>> remainder(((0, 4), (0, 4)), ((1, 4), (0, 2)))
        [((0, 1), (0, 4)), ((1, 4), (2, 4))]
    """
    if inner is None:
        return [box]
    slabs = []
    current = list(box)
    for d, ((a, b), (lo, hi)) in enumerate(zip(box, inner)):
        if a < lo:
            slabs.append((*current[:d], (a, lo), *current[d + 1:]))
        if hi < b:
            slabs.append((*current[:d], (hi, b), *current[d + 1:]))
        current[d] = (lo, hi)
    return slabs


def chunk_origins(inner: Box, chunks: Sequence[int]) -> Iterator[tuple[int, ...]]:
    """The first element of every chunk of the chunk-aligned box ``inner``, in C order.

    Examples:
        >>> list(chunk_origins(((0, 4), (2, 4)), (2, 2)))
        [(0, 2), (2, 2)]
    """
    return itertools.product(*(range(lo, hi, c) for (lo, hi), c in zip(inner, chunks)))
