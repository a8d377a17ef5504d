"""The general redistribution: any non-partial layout to any other, across placements.

Every rank works out, from the shape and the two layouts alone, which box of the logical
value it holds and which box it needs. The distinct source boxes of a non-partial layout are
disjoint and cover the value; a box held by several ranks (broadcast axes) is sent by one of
them: the destination itself when it holds it, else holder ``destination % holders``, which
spreads the load. One ``all_to_all_v`` over the world moves every piece; ranks outside both
placements call it with zero counts. Where no rank needs a byte from another (the planner
knows that from the layouts alone), nobody calls it.

S(d) -> P between two 1-D placements is OneFlow's own layout, not a transfer to the target's
split: each source rank's slab, in place in a full-shape tensor, goes to one target rank
(:func:`run_split_to_partial`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from ..communication import Communicator
from ..core.errors import GlobalTensorError
from ..layouts.layout import Layout
from ..layouts.plan import transfer_cost
from ..layouts.shards import Box, intersect, layout_boxes, relative_slices, volume

__all__ = ["SlabSchedule", "TransferSchedule", "run_split_to_partial", "run_transfer",
           "slab_owner", "slab_schedule", "transfer_schedule"]


@dataclass(frozen=True)
class TransferSchedule:
    """What one rank sends, receives and copies locally in a :class:`~.steps.Transfer`.

    Attributes:
        sends: ``(world rank, index into the source shard)``, by increasing rank.
        receives: ``(world rank, index into the target shard, piece shape)``, by rank.
        local: ``(index into the source shard, index into the target shard)`` pairs.
        target_shape: this rank's target shard shape (``(0,)`` outside the placement).
    """

    sends: tuple[tuple[int, tuple[slice, ...]], ...]
    receives: tuple[tuple[int, tuple[slice, ...], tuple[int, ...]], ...]
    local: tuple[tuple[tuple[slice, ...], tuple[slice, ...]], ...]
    target_shape: tuple[int, ...]


@functools.lru_cache(maxsize=256)
def _holders(shape: tuple[int, ...], layout: Layout) -> tuple[tuple[Box, tuple[int, ...]], ...]:
    """The distinct non-empty boxes of ``layout`` and the world ranks holding each."""
    groups: dict[Box, list[int]] = {}
    for rank, box in zip(layout.placement.rank_list, layout_boxes(shape, layout), strict=True):
        if volume(box):
            groups.setdefault(box, []).append(rank)
    return tuple((box, tuple(ranks)) for box, ranks in groups.items())


@functools.lru_cache(maxsize=1024)
def transfer_schedule(shape: tuple[int, ...], src: Layout, dst: Layout,
                      rank: int) -> TransferSchedule:
    """World ``rank``'s part of the general exchange from ``src`` to ``dst`` (pure, cached).

    Args:
        shape: the logical shape.
        src: a non-partial layout.
        dst: a non-partial layout.
        rank: a world rank.

    Returns:
        The rank's :class:`TransferSchedule`.
    """
    if src.is_partial or dst.is_partial:
        raise GlobalTensorError(f"a transfer moves non-partial layouts, got {src} -> {dst}")
    src_index = dict(zip(src.placement.rank_list, layout_boxes(shape, src), strict=True))
    dst_index = dict(zip(dst.placement.rank_list, layout_boxes(shape, dst), strict=True))
    sends: list[tuple[int, tuple[slice, ...]]] = []
    receives: list[tuple[int, tuple[slice, ...], tuple[int, ...]]] = []
    local: list[tuple[tuple[slice, ...], tuple[slice, ...]]] = []
    mine = src_index.get(rank)
    if mine is not None and volume(mine):
        holders = next(ranks for box, ranks in _holders(shape, src) if box == mine)
        for other, other_box in dst_index.items():
            piece = intersect(other_box, mine)
            if other in holders or not volume(piece):
                continue
            if holders[other % len(holders)] == rank:
                sends.append((other, relative_slices(piece, mine)))
    need = dst_index.get(rank)
    if need is not None:
        for box, holders in _holders(shape, src):
            piece = intersect(need, box)
            if not volume(piece):
                continue
            if rank in holders:
                local.append((relative_slices(piece, box), relative_slices(piece, need)))
            else:
                shape_ = tuple(b - a for a, b in piece)
                receives.append((holders[rank % len(holders)], relative_slices(piece, need),
                                 shape_))
    receives.sort(key=lambda item: item[0])
    target = (0,) if need is None else tuple(b - a for a, b in need)
    return TransferSchedule(tuple(sends), tuple(receives), tuple(local), target)


def run_transfer(local: Any, shape: tuple[int, ...], src: Layout, dst: Layout, xp: Any,
                 world: Communicator) -> Any:
    """Execute a :class:`~.steps.Transfer` on this rank; every world rank must call it.

    Args:
        local: this rank's shard under ``src`` (``(0,)`` outside its placement).
        shape: the logical shape.
        src: a non-partial layout.
        dst: a non-partial layout.
        xp: the array module of ``local``.
        world: the world communicator (its ranks are world ranks).

    Returns:
        This rank's shard under ``dst`` (a new array).
    """
    plan = transfer_schedule(shape, src, dst, world.rank)
    out = xp.empty(plan.target_shape, dtype=local.dtype)
    for source, target in plan.local:
        out[target] = local[source]
    send_counts = [0] * world.size
    recv_counts = [0] * world.size
    for other, index in plan.sends:
        send_counts[other] = volume(tuple((s.start, s.stop) for s in index))
    _count_receives(plan.receives, recv_counts)
    send = xp.empty(sum(send_counts), dtype=local.dtype)
    offset = 0
    for other, index in plan.sends:
        count = send_counts[other]
        send[offset:offset + count].reshape(local[index].shape)[...] = local[index]
        offset += count
    recv = xp.empty(sum(recv_counts), dtype=local.dtype)
    if transfer_cost(shape, 1, src, dst)[0]:  # every rank knows when no rank needs a byte
        world.all_to_all_v(send, send_counts, recv, recv_counts)
    _unpack(out, recv, plan.receives, recv_counts)
    return out


@dataclass(frozen=True)
class SlabSchedule:
    """What one rank does in :func:`run_split_to_partial` (pure, from the layouts alone).

    Attributes:
        send_to: the world rank this rank's slab goes to, or None (kept, empty, or none).
        keep: where this rank's own slab lies in its target, or None.
        receives: ``(world rank, index into the target, slab shape)``, by rank.
        member: whether this rank is in the target placement (holds a full-shape shard).
        moves: whether any rank sends anything (else no exchange is made).
    """

    send_to: int | None
    keep: tuple[slice, ...] | None
    receives: tuple[tuple[int, tuple[slice, ...], tuple[int, ...]], ...]
    member: bool
    moves: bool


def slab_owner(src: Layout, dst: Layout, rank: int) -> int:
    """The rank of ``dst``'s (1-D) placement that takes the slab of ``src``'s ``rank``:
    itself when it is in both placements, else the one at its position modulo their count
    (OneFlow's S -> P across placements)."""
    targets = dst.placement.rank_list
    if rank in targets:
        return rank
    return targets[src.placement.rank_list.index(rank) % len(targets)]


@functools.lru_cache(maxsize=1024)
def slab_schedule(shape: tuple[int, ...], src: Layout, dst: Layout, rank: int) -> SlabSchedule:
    """World ``rank``'s part of S(d) on one placement -> P on another (both 1-D).

    Args:
        shape: the logical shape.
        src: a 1-D split layout.
        dst: a 1-D partial layout on another placement.
        rank: a world rank.

    Returns:
        The rank's :class:`SlabSchedule`.
    """
    full = tuple((0, n) for n in shape)
    boxes = dict(zip(src.placement.rank_list, layout_boxes(shape, src), strict=True))
    owners = {r: slab_owner(src, dst, r) for r, box in boxes.items() if volume(box)}
    send_to = owners.get(rank)
    keep = relative_slices(boxes[rank], full) if send_to == rank else None
    receives = tuple((r, relative_slices(boxes[r], full), tuple(b - a for a, b in boxes[r]))
                     for r, owner in sorted(owners.items()) if owner == rank and r != rank)
    moves = any(owner != r for r, owner in owners.items())
    return SlabSchedule(None if send_to == rank else send_to, keep, receives,
                        rank in dst.placement.rank_list, moves)


def run_split_to_partial(local: Any, shape: tuple[int, ...], src: Layout, dst: Layout,
                         fill: Any, xp: Any, world: Communicator) -> Any:
    """S(d) on one 1-D placement to P on another, as OneFlow lays it out: every source
    rank's slab goes, in place in a full-shape tensor of ``fill`` (the reduction's
    identity), to one target rank (:func:`slab_owner`); every world rank must call it.

    Args:
        local: this rank's shard under ``src`` (``(0,)`` outside its placement).
        shape: the logical shape.
        src: a 1-D split layout.
        dst: a 1-D partial layout on another placement.
        fill: the value of the places no slab covers.
        xp: the array module of ``local``.
        world: the world communicator.

    Returns:
        This rank's shard under ``dst`` (``(0,)`` outside its placement).
    """
    plan = slab_schedule(shape, src, dst, world.rank)
    out = xp.full(shape if plan.member else (0,), fill, dtype=local.dtype)
    if plan.keep is not None:
        out[plan.keep] = local
    if not plan.moves:
        return out
    send_counts = [0] * world.size
    recv_counts = [0] * world.size
    if plan.send_to is not None:
        send_counts[plan.send_to] = int(local.size)
    _count_receives(plan.receives, recv_counts)
    send = xp.ascontiguousarray(local).reshape(-1) if plan.send_to is not None else \
        xp.empty(0, dtype=local.dtype)
    recv = xp.empty(sum(recv_counts), dtype=local.dtype)
    world.all_to_all_v(send, send_counts, recv, recv_counts)
    _unpack(out, recv, plan.receives, recv_counts)
    return out


def _count_receives(receives: Any, recv_counts: list[int]) -> None:
    """Fill ``recv_counts[rank]`` with the element count of each ``(rank, index, piece)``."""
    for other, _, piece in receives:
        recv_counts[other] = volume(tuple((0, n) for n in piece))


def _unpack(out: Any, recv: Any, receives: Any, recv_counts: list[int]) -> None:
    """Write each rank's piece of ``recv`` (in rank order) into its ``index`` of ``out``."""
    offset = 0
    for other, index, piece in receives:
        count = recv_counts[other]
        out[index] = recv[offset:offset + count].reshape(piece)
        offset += count
