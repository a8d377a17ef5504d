"""The redistribution planner: a pure, cached function from two layouts to a list of steps.

Conversions change one mesh axis at a time, each with at most one collective along that
axis' mesh lines (table in :mod:`.steps`). A one-axis step is valid only where its lines hold
contiguous pieces of one region: the axis' old and new split dims are split by no inner
(later) mesh axis, and a partial axis is reduced only while every inner partial axis reduces
with the same op. Where no chain of valid steps is cheaper, the general :class:`Transfer`
moves exactly the needed bytes in one world exchange; it is also the only way between
different placements. The planner searches the cheapest chain (Dijkstra over layouts, costs
in bytes moved per rank plus a price per round of messages, no price for making a partial
value where the target has one, fewer steps on ties, one-axis collectives before a Transfer).

Examples:
    >>> from mpiflow.layouts.placement import Placement
    >>> from mpiflow.layouts.sbp import broadcast, split
    >>> p = Placement("cpu", [0, 1])
    >>> plan_redistribution((4, 4), 8, Layout(p, split(0)), Layout(p, broadcast))
    (AllGather(axis=0, dim=0),)
"""

from __future__ import annotations

import bisect
import functools
import heapq
import itertools
import math
from collections.abc import Iterator, Sequence

from .layout import Layout
from .sbp import Broadcast, Partial, SbpParallel, Split
from .shards import check_shape, intersect, layout_boxes, shard_bounds, split_leaves, volume
from .steps import (
    AllGather,
    AllReduce,
    AllToAll,
    AxisStep,
    LocalSlice,
    ReduceScatter,
    Step,
    ToPartial,
    Transfer,
)

__all__ = ["Layout", "Plan", "axis_step", "conversion_cost", "plan_redistribution",
           "transfer_cost"]

Plan = tuple[Step, ...]

# The planner's price of one round of messages, in bytes (latency x bandwidth, roughly): a
# collective on k ranks takes ceil(log2 k) rounds, a Transfer one per peer a rank hears from.
# Small tensors get the plans with the fewest rounds, large ones the fewest bytes.
_LATENCY_BYTES = 4096
# A Transfer costs this many bytes more than its payload, so that equal-cost chains of the
# standard (better tuned) collectives win.
_TRANSFER_OVERHEAD = 1


def _axis_cost(size: int, ndim: int, src: SbpParallel, dst: SbpParallel, k: int,
               scale: int, penalty: bool = True) -> int:
    """Bytes moved per rank converting one axis of ``k`` ranks, times ``scale``.

    ``size`` is the bytes the axis works on and ``ndim`` its tensor's dims; ``scale`` is a
    multiple of ``k * k``, so the cost is an exact integer (the planner compares sums of costs
    exactly, as it would fractions, at a fraction of their price); ``penalty`` adds the cost of
    making P.
    """
    if src == dst:
        return 0
    moved = (k - 1) * size * (scale // k)  # what a rank receives in an all-gather
    if isinstance(dst, Partial):
        extra = size * scale if penalty else 0
        if isinstance(src, Partial):  # via S (reduce-scatter) or, for 0-d tensors, via B
            return (moved if ndim else 2 * moved) + extra
        return extra
    if isinstance(src, Partial):
        return 2 * moved if isinstance(dst, Broadcast) else moved
    if isinstance(src, Broadcast):
        return 0
    return moved if isinstance(dst, Broadcast) else moved // k


def conversion_cost(shape: Sequence[int], itemsize: int, src_sbp: SbpParallel,
                    dst_sbp: SbpParallel, group_size: int) -> float:
    """Bytes a rank moves to convert one mesh axis of ``group_size`` ranks (OneFlow-like).

    ``size`` is the bytes of ``shape`` (the extent the axis works on): equal 0; B->S 0;
    S->B (k-1)/k*size; P->B 2(k-1)/k*size; P->S (k-1)/k*size; S(i)->S(j) (k-1)/k^2*size;
    a non-partial to P: size, a penalty so that ops do not make partial values needlessly;
    P(x)->P(y): P->S plus the penalty (P->B plus the penalty for a 0-d tensor).

    Args:
        shape: the logical shape along the axis.
        itemsize: bytes per element.
        src_sbp: the axis' layout now.
        dst_sbp: the axis' layout wanted.
        group_size: the number of ranks along the axis.

    Returns:
        The cost in bytes.

    Examples:
        >>> from mpiflow.layouts.sbp import broadcast, split
        >>> conversion_cost((4, 4), 8, split(0), broadcast, 2)
        64.0
    """
    if group_size < 1:
        raise ValueError(f"group_size must be positive, got {group_size}")
    scale = group_size * group_size
    return _axis_cost(math.prod(shape) * itemsize, len(shape), src_sbp, dst_sbp, group_size,
                      scale) / scale


def axis_step(sbp: Sequence[SbpParallel], axis: int, new: SbpParallel) -> AxisStep | None:
    """The one-axis step turning ``sbp[axis]`` into ``new``, or None where no valid one exists.

    Args:
        sbp: the current layout, one entry per mesh axis.
        axis: the mesh axis to change.
        new: its wanted layout.

    Returns:
        The step, or None (same layout, P(x)->P(y), or a step that the inner axes make
        invalid: see the module docstring).
    """
    cur = sbp[axis]
    inner = sbp[axis + 1:]
    inner_split = {s.dim for s in inner if isinstance(s, Split)}
    if cur == new:
        return None
    if isinstance(cur, Split) and cur.dim in inner_split:
        return None
    if isinstance(new, Split) and new.dim in inner_split:
        return None
    if isinstance(cur, Partial):
        if isinstance(new, Partial):
            return None
        if any(isinstance(s, Partial) and s.op is not cur.op for s in inner):
            return None
        if isinstance(new, Split):
            return ReduceScatter(axis, new.dim, cur.op)
        return AllReduce(axis, cur.op)
    if isinstance(new, Partial):
        return ToPartial(axis, new.op)
    if isinstance(cur, Split):
        if isinstance(new, Split):
            return AllToAll(axis, cur.dim, new.dim)
        return AllGather(axis, cur.dim)
    assert isinstance(new, Split)
    return LocalSlice(axis, new.dim)


@functools.lru_cache(maxsize=1024)
def transfer_cost(shape: tuple[int, ...], itemsize: int, src: Layout,
                  dst: Layout) -> tuple[int, int]:
    """The most bytes, and the most peers, that any rank receives from in a :class:`Transfer`.

    A rank receives what its target shard needs beyond what its own source shard holds, one
    message from each source shard it overlaps (other than its own).

    Args:
        shape: the logical shape.
        itemsize: bytes per element.
        src: a non-partial layout.
        dst: a non-partial layout.

    Returns:
        ``(bytes, messages)``, each the maximum over the ranks of ``dst``'s placement.
    """
    src_boxes = dict(zip(src.placement.rank_list, layout_boxes(shape, src), strict=True))
    leaves = [split_leaves(shape, src, d) for d in range(len(shape))]
    starts = [[a for a, _ in pieces] for pieces in leaves]
    stops = [[b for _, b in pieces] for pieces in leaves]
    most_bytes = most_peers = 0
    for rank, box in zip(dst.placement.rank_list, layout_boxes(shape, dst), strict=True):
        if not volume(box):
            continue
        have = src_boxes.get(rank)
        local = volume(intersect(box, have)) if have is not None else 0
        most_bytes = max(most_bytes, volume(box) - local)
        overlapping = math.prod(bisect.bisect_left(starts[d], hi)
                                - bisect.bisect_right(stops[d], lo)
                                for d, (lo, hi) in enumerate(box))
        most_peers = max(most_peers, overlapping - (1 if local else 0))
    return most_bytes * itemsize, most_peers


@functools.lru_cache(maxsize=16384)
def _line_elements(shape: tuple[int, ...], layout: Layout, axis: int) -> int:
    """The elements a line along ``axis`` works on (the most, those of mesh coordinate 0)."""
    sbp = (*layout.sbp[:axis], Broadcast(), *layout.sbp[axis + 1:])
    zero = (0,) * layout.placement.ndim
    return math.prod(b - a for a, b in shard_bounds(shape, layout.placement.mesh_shape, sbp, zero))


@functools.lru_cache(maxsize=4096)
def _moves(layout: Layout, ndim: int, wanted: tuple[Partial | None, ...]
           ) -> tuple[tuple[tuple[AxisStep, Layout, SbpParallel, SbpParallel], ...], ...]:
    """Per mesh axis, the one-axis steps out of ``layout`` for a tensor of ``ndim`` dims.

    Each is ``(step, layout reached, axis layout before, after)``; ``wanted`` holds, per
    axis, the target's partial layout, the only partial a step makes (None for none).
    They do not depend on the shape, so plans of other shapes reuse them.
    """
    options: list[SbpParallel] = [Broadcast(), *(Split(d) for d in range(ndim))]
    out = []
    for axis, extra in enumerate(wanted):
        moves = []
        for new in options if extra is None else [*options, extra]:
            step = axis_step(layout.sbp, axis, new)
            if step is not None:
                moves.append((step, step.apply(layout), layout.sbp[axis], new))
        out.append(tuple(moves))
    return tuple(out)


def _edges(shape: tuple[int, ...], itemsize: int, scale: int, layout: Layout, src: Layout,
           dst: Layout, target: Layout) -> Iterator[tuple[Step, Layout, int]]:
    """The steps out of ``layout``, with the layout they reach and their cost (x ``scale``).

    ``target`` is ``dst`` without its partial axes, the only layout a Transfer goes to.
    """
    placement = layout.placement
    mesh_shape = placement.mesh_shape
    if placement == dst.placement:
        wanted = tuple(s if isinstance(s, Partial) else None for s in dst.sbp)
    else:
        wanted = (None,) * placement.ndim
    for axis, moves in enumerate(_moves(layout, len(shape), wanted)):
        if not moves:
            continue
        k = mesh_shape[axis]
        size = _line_elements(shape, layout, axis) * itemsize
        latency = _LATENCY_BYTES * scale * math.ceil(math.log2(k))  # a collective's rounds
        for step, reached, old, new in moves:
            cost = _axis_cost(size, len(shape), old, new, k, scale, penalty=False)
            yield step, reached, cost + latency if step.communicates else cost
    if placement == src.placement and not layout.is_partial and layout != target:
        moved, peers = transfer_cost(shape, itemsize, layout, target)
        yield (Transfer(layout, target), target,
               (moved + _LATENCY_BYTES * peers + _TRANSFER_OVERHEAD) * scale)


@functools.lru_cache(maxsize=4096)
def _plan(shape: tuple[int, ...], itemsize: int, src: Layout, dst: Layout) -> Plan:
    # Costs are integers scaled by every mesh axis' k * k: the exact fractions' order and ties.
    scale = math.lcm(*(k * k for k in (*src.placement.mesh_shape, *dst.placement.mesh_shape)))
    target = dst.without_partial()
    best: dict[Layout, tuple[int, int]] = {src: (0, 0)}
    previous: dict[Layout, tuple[Layout, Step]] = {}
    order = itertools.count()
    heap: list[tuple[int, int, int, Layout]] = [(0, 0, next(order), src)]
    while heap:
        cost, steps, _, layout = heapq.heappop(heap)
        if layout == dst:
            break
        if (cost, steps) > best[layout]:
            continue
        for step, reached, step_cost in _edges(shape, itemsize, scale, layout, src, dst,
                                                   target):
            candidate = (cost + step_cost, steps + 1)
            if reached not in best or candidate < best[reached]:
                best[reached] = candidate
                previous[reached] = (layout, step)
                heapq.heappush(heap, (*candidate, next(order), reached))
    if dst not in previous:
        raise AssertionError(f"no redistribution from {src} to {dst}")  # unreachable
    out: list[Step] = []
    layout = dst
    while layout != src:
        layout, step = previous[layout]
        out.append(step)
    return tuple(reversed(out))


def plan_redistribution(shape: Sequence[int], dtype_itemsize: int, src: Layout,
                        dst: Layout) -> Plan:
    """The cheapest list of steps that turns a tensor of layout ``src`` into ``dst``.

    Pure and cached: every rank computes the same plan from the same arguments.

    Args:
        shape: the logical shape.
        dtype_itemsize: bytes per element.
        src: the layout now.
        dst: the layout wanted (any placement).

    Returns:
        A tuple of :class:`~.steps.Step` values; empty when ``src == dst``.

    Raises:
        ValueError: a split dim the shape does not have, or a negative size.

    Examples:
        >>> from mpiflow.layouts.placement import Placement
        >>> from mpiflow.layouts.sbp import partial_sum, split
        >>> p = Placement("cpu", [0, 1])
        >>> plan_redistribution((4,), 4, Layout(p, partial_sum), Layout(p, split(0)))
        (ReduceScatter(axis=0, dim=0, op=SUM),)
    """
    return _checked_plan(tuple(int(n) for n in shape), int(dtype_itemsize), src, dst)


@functools.lru_cache(maxsize=4096)
def _checked_plan(shape: tuple[int, ...], itemsize: int, src: Layout, dst: Layout) -> Plan:
    # The checks are cached with the plan (a call that raises caches nothing).
    check_shape(shape, src.sbp)
    check_shape(shape, dst.sbp)
    if src == dst:
        return ()
    return _plan(shape, itemsize, src, dst)
