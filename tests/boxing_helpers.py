"""Shared pieces of the boxing tests: source shards with real partial values, and a check of
every rank's target shard that communicates first and asserts after (collective-safe)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy
import pytest

from mpiflow.boxing import Layout, local_shape, redistribute, scatter_value
from mpiflow.communication import ReduceOp
from mpiflow.communication.mpi.group import world_comm
from mpiflow.layouts.placement import set_world_size, world_size
from mpiflow.sbp import Partial, SbpParallel, Split, balanced_bounds

RANK, SIZE = world_comm.rank, world_comm.size
_REDUCE = {ReduceOp.SUM: numpy.add, ReduceOp.MAX: numpy.maximum, ReduceOp.MIN: numpy.minimum}


def full_value(shape: tuple[int, ...], seed: int = 0, dtype: Any = numpy.float64) -> Any:
    """An integer-valued array, the same on every rank."""
    rng = numpy.random.default_rng(seed)
    return rng.integers(-20, 20, size=shape).astype(dtype)


def _decompose(value: Any, op: ReduceOp, k: int, rng: numpy.random.Generator) -> list[Any]:
    """``k`` arrays whose ``op``-reduction is ``value``, all of them non-trivial."""
    if k == 1:
        return [value.copy()]
    def noise() -> Any:
        return rng.integers(0, 4, size=value.shape).astype(value.dtype)

    if op is ReduceOp.SUM:
        parts = [noise() - 2 for _ in range(k - 1)]
        return [numpy.array(value - sum(parts, numpy.zeros_like(value))), *parts]
    sign = -1 if op is ReduceOp.MAX else 1
    parts = [numpy.array(value + sign * noise()) for _ in range(k)]
    owner = rng.integers(0, k, size=value.shape)
    for i, part in enumerate(parts):
        part[owner == i] = value[owner == i]
    return parts


Decompose = Callable[[Any, ReduceOp, int, numpy.random.Generator], list[Any]]


def all_shards(full: Any, layout: Layout, seed: int = 1,
               decompose: Decompose | None = None) -> dict[tuple[int, ...], Any]:
    """Every rank's shard of ``full`` by mesh coordinates, partial axes decomposed at random.

    Mesh axes are applied in order, as the layouts define: S keeps a balanced part of the
    current extent, B copies, P splits the value into random parts that reduce to it
    (with ``decompose(value, op, k, rng)``, this module's own by default).
    """
    decompose = _decompose if decompose is None else decompose
    rng = numpy.random.default_rng(seed)
    mesh = layout.placement.mesh_shape
    level: dict[tuple[int, ...], Any] = {(): full}
    for axis, s in enumerate(layout.sbp):
        nxt: dict[tuple[int, ...], Any] = {}
        for prefix, value in level.items():
            k = mesh[axis]
            if isinstance(s, Partial):
                children = decompose(value, s.op, k, rng)
            elif isinstance(s, Split):
                children = []
                for i in range(k):
                    lo, hi = balanced_bounds(value.shape[s.dim], k, i)
                    children.append(value[(slice(None),) * s.dim + (slice(lo, hi),)])
            else:
                children = [value] * k
            for i, child in enumerate(children):
                nxt[(*prefix, i)] = child
        level = nxt
    return level


def my_shard(full: Any, layout: Layout, seed: int = 1) -> Any:
    """This rank's shard from :func:`all_shards` (an empty array outside the placement)."""
    coords = layout.placement.coordinates(RANK)
    if coords is None:
        return numpy.empty((0,), dtype=full.dtype)
    return all_shards(full, layout, seed)[coords].copy()


def gather_shards(local: Any, shape: tuple[int, ...], layout: Layout) -> dict[int, Any]:
    """Every world rank's shard, on every rank (one ``all_gather_v`` of the world)."""
    shapes = [local_shape(shape, layout.placement, layout.sbp, r) for r in range(SIZE)]
    counts = [int(numpy.prod(s)) for s in shapes]
    recv = numpy.empty(sum(counts), dtype=local.dtype)
    world_comm.all_gather_v(numpy.ascontiguousarray(local).reshape(-1), recv, counts)
    out, offset = {}, 0
    for r, (s, c) in enumerate(zip(shapes, counts, strict=True)):
        out[r] = recv[offset:offset + c].reshape(s)
        offset += c
    return out


def reduced_shards(shards: dict[int, Any], layout: Layout) -> dict[int, Any]:
    """Every placement rank's shard with the partial axes reduced (innermost first)."""
    p = layout.placement
    coordinates = list(numpy.ndindex(*p.mesh_shape))  # canonical rank order
    by_coords = {c: shards[r] for c, r in zip(coordinates, p.rank_list, strict=True)}
    for axis in reversed(range(p.ndim)):
        s = layout.sbp[axis]
        if not isinstance(s, Partial):
            continue
        reduced = {}
        for coords in by_coords:
            line = [by_coords[(*coords[:axis], i, *coords[axis + 1:])]
                    for i in range(p.mesh_shape[axis])]
            value = line[0].copy()
            for other in line[1:]:
                value = _REDUCE[s.op](value, other)
            reduced[coords] = value
        by_coords = reduced
    return {r: by_coords[c] for c, r in zip(coordinates, p.rank_list, strict=True)}


def wrong_ranks(local: Any, full: Any, layout: Layout) -> list[str]:
    """Ranks whose shard (partial axes reduced) differs from the expected one, with details.

    Collective: every world rank must call it; all get the same answer.
    """
    shape = tuple(full.shape)
    shards = gather_shards(local, shape, layout)
    wrong = []
    for r in range(SIZE):
        if r not in layout.placement and shards[r].shape != (0,):
            wrong.append(f"rank {r} outside the placement holds {shards[r].shape}")
    reduced = reduced_shards(shards, layout)
    plain = layout.without_partial()
    for r, got in reduced.items():
        expected = scatter_value(full, plain.placement, plain.sbp, r)
        if got.shape != expected.shape or not numpy.array_equal(got, expected):
            wrong.append(f"rank {r}: got {got.tolist()}, expected {expected.tolist()}")
    return wrong


def run_case(full: Any, src: Layout, dst: Layout, seed: int = 1) -> list[str]:
    """Redistribute ``full`` from ``src`` to ``dst`` and return the wrong ranks (collective)."""
    local = my_shard(full, src, seed)
    out = redistribute(local, tuple(full.shape), src, dst)
    return wrong_ranks(out, full, dst)


def sbp_name(sbp: tuple[SbpParallel, ...]) -> str:
    return ",".join(str(s) for s in sbp)


def layout_id(value: Any) -> str:
    if isinstance(value, tuple) and value and isinstance(value[0], SbpParallel):
        return sbp_name(value)
    return str(value)


@pytest.fixture
def fake_world() -> Iterator[int]:
    """Let placements name up to 16 ranks, for the pure planner tests (nothing is sent)."""
    before = world_size()
    set_world_size(16)
    try:
        yield 16
    finally:
        set_world_size(before)
