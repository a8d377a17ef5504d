"""Which part of a global tensor's logical value each rank holds: pure shape bookkeeping.

A global tensor of logical shape ``shape`` with layout ``(placement, sbp)`` is stored as one
local array ("shard") per rank of the placement. For mesh coordinates ``c`` the shard is found
axis by axis, in mesh-axis order: ``S(d)`` on axis ``a`` keeps the balanced part ``c[a]`` of
``mesh_shape[a]`` parts of the *current* extent of dim ``d`` (so two axes splitting one dim
split it twice, nested); ``B`` keeps everything; ``P(op)`` keeps everything, and the logical
value is the ``op``-reduction over that axis of the shards (inner mesh axes reduced first).
Ranks outside the placement hold an empty array of shape ``(0,)``.

Examples:
    >>> from mpiflow.layouts.sbp import split
    >>> shard_slices((5, 2), (2, 2), (split(0), split(0)), (0, 1))
    (slice(2, 3, None), slice(0, 2, None))
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy

from ..core.errors import GlobalTensorError
from ..core.reduce_op import ReduceOp
from .layout import Layout, format_sbp
from .placement import Placement
from .sbp import Partial, SbpParallel, Split, balanced_bounds

__all__ = [
    "Box",
    "check_shape",
    "fill_op",
    "intersect",
    "layout_boxes",
    "local_shape",
    "relative_slices",
    "scatter_value",
    "shard_bounds",
    "shard_slices",
    "split_leaves",
    "volume",
]

Box = tuple[tuple[int, int], ...]  # per tensor dim, the [start, stop) of a region


def check_shape(shape: tuple[int, ...], sbp: Sequence[SbpParallel]) -> None:
    """Raise ``ValueError`` unless ``shape`` is a valid shape that every split of ``sbp`` fits.

    Args:
        shape: the logical shape.
        sbp: one layout per mesh axis.
    """
    if any(n < 0 for n in shape):
        raise ValueError(f"a logical shape has non-negative sizes, got {shape}")
    for s in sbp:
        if isinstance(s, Split) and s.dim >= len(shape):
            raise GlobalTensorError(
                f"sbp {format_sbp(tuple(sbp))} splits dim {s.dim}, but the tensor "
                f"of shape {shape} has {len(shape)} dim(s)")


def shard_bounds(shape: Sequence[int], mesh_shape: Sequence[int], sbp: Sequence[SbpParallel],
                 coords: Sequence[int]) -> Box:
    """The ``[start, stop)`` per dim of the region of the logical value a shard covers.

    Args:
        shape: the logical shape.
        mesh_shape: the placement's mesh shape.
        sbp: one layout per mesh axis.
        coords: the rank's mesh coordinates.

    Returns:
        One ``(start, stop)`` per tensor dim; partial and broadcast axes cover everything.

    Examples:
        >>> from mpiflow.layouts.sbp import split
        >>> shard_bounds((5,), (2,), (split(0),), (1,))
        ((3, 5),)
    """
    if not len(sbp) == len(mesh_shape) == len(coords):
        raise GlobalTensorError(f"sbp {format_sbp(tuple(sbp))}, mesh shape {tuple(mesh_shape)} and "
                                f"coordinates {tuple(coords)} must have one entry per mesh axis")
    bounds = [(0, int(n)) for n in shape]
    for axis, s in enumerate(sbp):
        if isinstance(s, Split):
            lo, hi = bounds[s.dim]
            start, stop = balanced_bounds(hi - lo, mesh_shape[axis], coords[axis])
            bounds[s.dim] = (lo + start, lo + stop)
    return tuple(bounds)


def shard_slices(shape: Sequence[int], placement_mesh_shape: Sequence[int],
                 sbp: Sequence[SbpParallel], coords: Sequence[int]) -> tuple[slice, ...]:
    """The region of the logical value that the shard at mesh coordinates ``coords`` covers.

    Args:
        shape: the logical shape.
        placement_mesh_shape: the placement's mesh shape.
        sbp: one layout per mesh axis.
        coords: the rank's mesh coordinates.

    Returns:
        One slice per tensor dim (partial and broadcast axes cover everything).

    Examples:
        >>> from mpiflow.layouts.sbp import split
        >>> shard_slices((4, 3), (2, 2), (split(0), split(0)), (1, 0))
        (slice(2, 3, None), slice(0, 3, None))
    """
    return tuple(slice(a, b) for a, b in shard_bounds(shape, placement_mesh_shape, sbp, coords))


def local_shape(shape: Sequence[int], placement: Placement, sbp: Sequence[SbpParallel],
                rank: int) -> tuple[int, ...]:
    """The shape of world ``rank``'s shard; ``(0,)`` outside the placement.

    Args:
        shape: the logical shape.
        placement: where the tensor lives.
        sbp: one layout per mesh axis.
        rank: a world rank.

    Returns:
        The shard's shape.

    Examples:
        >>> from mpiflow.layouts.sbp import split
        >>> local_shape((5, 2), Placement("cpu", [0, 1]), (split(0),), 1)
        (2, 2)
    """
    coords = placement.coordinates(rank)
    if coords is None:
        return (0,)
    return tuple(b - a for a, b in shard_bounds(shape, placement.mesh_shape, sbp, coords))


@functools.lru_cache(maxsize=1024)
def layout_boxes(shape: tuple[int, ...], layout: Layout) -> tuple[Box, ...]:
    """The region of every rank of ``layout``'s placement, in canonical rank order.

    Args:
        shape: the logical shape.
        layout: placement and sbp.

    Returns:
        One :data:`Box` per rank of ``layout.placement.rank_list``.
    """
    mesh = layout.placement.mesh_shape
    return tuple(shard_bounds(shape, mesh, layout.sbp, coords) for coords in numpy.ndindex(*mesh))


@functools.lru_cache(maxsize=1024)
def split_leaves(shape: tuple[int, ...], layout: Layout, dim: int) -> tuple[tuple[int, int], ...]:
    """The non-empty ``[start, stop)`` pieces that ``layout``'s nested splits cut ``dim`` into.

    A non-partial layout's distinct shards are the products of these pieces over the dims
    (each mesh axis splits one dim, and the mesh coordinates vary independently).

    Args:
        shape: the logical shape.
        layout: placement and sbp.
        dim: a tensor dim.

    Returns:
        The pieces in increasing order; they partition ``[0, shape[dim])``.

    Examples:
        >>> from mpiflow.layouts.sbp import split
        >>> split_leaves((5,), Layout(Placement("cpu", [[0, 1], [2, 3]]), (split(0),) * 2), 0)
        ((0, 2), (2, 3), (3, 4), (4, 5))
    """
    pieces = [(0, shape[dim])]
    for axis, s in enumerate(layout.sbp):
        if isinstance(s, Split) and s.dim == dim:
            k = layout.placement.mesh_shape[axis]
            pieces = [(lo + a, lo + b) for lo, hi in pieces
                      for a, b in (balanced_bounds(hi - lo, k, i) for i in range(k))]
    return tuple((a, b) for a, b in pieces if b > a)


def volume(box: Box) -> int:
    """The number of elements of ``box`` (1 for the box of a 0-d tensor)."""
    return math.prod(b - a for a, b in box)


def intersect(a: Box, b: Box) -> Box:
    """The common part of two boxes (empty extents where they do not meet)."""
    out = []
    for (a0, a1), (b0, b1) in zip(a, b, strict=True):
        lo, hi = max(a0, b0), min(a1, b1)
        out.append((lo, max(lo, hi)))
    return tuple(out)


def relative_slices(inner: Box, outer: Box) -> tuple[slice, ...]:
    """Index of box ``inner`` within an array holding box ``outer`` (``inner`` inside it)."""
    return tuple(slice(i0 - o0, i1 - o0) for (i0, i1), (o0, _) in zip(inner, outer, strict=True))


def fill_op(sbp: Sequence[SbpParallel], coords: Sequence[int], axis: int) -> ReduceOp:
    """The op whose identity a rank fills in where partial axis ``axis`` holds no data.

    That is the op of the innermost partial axis ``b >= axis`` of ``sbp`` whose coordinate is
    not 0 (``axis`` itself when there is none): the inner reductions then turn the fill into
    the identity of ``axis``'s op, whatever mix of SUM, MAX and MIN the axes use, without
    ever reducing two identities of different ops (no integer overflow).

    Args:
        sbp: the layout after the axis became partial.
        coords: the rank's mesh coordinates.
        axis: the partial axis.

    Returns:
        The reduce op (``sbp[axis].op`` when no inner partial axis applies).
    """
    chosen = sbp[axis]
    for b in range(axis + 1, len(sbp)):
        if isinstance(sbp[b], Partial) and coords[b] != 0:
            chosen = sbp[b]
    assert isinstance(chosen, Partial)
    return chosen.op


def scatter_value(full: Any, placement: Placement, sbp: Sequence[SbpParallel],
                  rank: int) -> Any:
    """World ``rank``'s shard of the logical value ``full`` (a copy, in ``full``'s module).

    For partial axes the rank whose partial coordinates are all 0 holds the data; the others
    hold the identity of :func:`fill_op` (0 for sum: OneFlow's rule for ``ones`` with P).

    Args:
        full: the whole logical value (numpy or CuPy array), the same on every rank.
        placement: where the tensor lives.
        sbp: one layout per mesh axis.
        rank: a world rank.

    Returns:
        The shard; an empty ``(0,)`` array of ``full``'s dtype outside the placement.

    Examples:
        >>> from mpiflow.layouts.sbp import split
        >>> scatter_value(numpy.arange(5), Placement("cpu", [0, 1]), (split(0),), 1)
        array([3, 4])
    """
    sbp = tuple(sbp)
    check_shape(tuple(full.shape), sbp)
    coords = placement.coordinates(rank)
    if coords is None:
        return full[..., :0].reshape(0) if full.ndim else full.reshape(1)[:0]
    part = full[(..., *shard_slices(full.shape, placement.mesh_shape, sbp, coords))].copy()
    partial = [a for a, s in enumerate(sbp) if isinstance(s, Partial) and coords[a] != 0]
    if partial:
        part[...] = fill_op(sbp, coords, partial[0]).identity(full.dtype)
    return part
