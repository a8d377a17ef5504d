"""Halo (ghost-row) exchange for global tensors split along one dimension.

A stencil code (a finite-difference update, a banded matrix-vector product) on a tensor split
by rows needs, besides its own rows, a few rows that its neighbours hold. :func:`halo_exchange`
returns this rank's shard extended by ``width`` rows on each side of the split dimension, with
point-to-point messages on mpiflow's world communicator.

Which rows a ghost region holds is decided from the global shape and the balanced split alone
(every rank can compute every shard's bounds), so each rank asks the *owners* of the rows it
needs directly: a neighbour with fewer rows than ``width``, or none at all, is simply skipped
and the rows come from the next rank along. Any ``width`` works, uneven and empty shards
included, and no rank ever forwards another's data.

Examples:
    >>> import mpiflow as flow
    >>> from mpiflow.halo import halo_exchange
    >>> p = flow.placement("cpu", list(range(flow.env.get_world_size())))
    >>> u = flow.arange(6.0, placement=p, sbp=flow.sbp.split(0))
    >>> halo_exchange(u, 1).tolist()     # on 1 rank: [fill, 0..5, fill]
    [0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 0.0]
"""

from __future__ import annotations

import functools
from typing import Any

import numpy

from .communication.mpi.group import world_comm
from .communication.mpi.interface import Work
from .layouts.sbp import Split, balanced_bounds
from .runtime import topology
from .tensors.tensor import Tensor

__all__ = ["ghost_sources", "halo_exchange"]

# Tag of halo messages on mpiflow's world communicator (below MPI's guaranteed tag limit 32767).
HALO_TAG = 18960


def _owner(row: int, n: int, parts: int) -> int:
    """The part of the balanced split of ``n`` rows into ``parts`` that holds ``row``."""
    base, extra = divmod(n, parts)
    if row < extra * (base + 1):
        return row // (base + 1)
    return extra + (row - extra * (base + 1)) // base


def ghost_sources(n: int, parts: int, part: int, width: int, periodic: bool = False
                  ) -> tuple[int, ...]:
    """The global rows that the ghost rows of one shard hold, or -1 where they hold the fill.

    Args:
        n: the length of the split dimension.
        parts: the number of shards (ranks of the placement).
        part: the shard's index in the placement.
        width: ghost rows on each side.
        periodic: wrap around the ends (row ``-1`` is row ``n - 1``) instead of filling.

    Returns:
        ``2 * width`` row indices: the ``width`` rows before the shard, then the ``width``
        rows after it, in the order they appear in the extended shard.

    Examples:
        >>> ghost_sources(5, 2, 1, 2)          # shard 1 holds rows 3, 4
        (1, 2, -1, -1)
        >>> ghost_sources(5, 2, 1, 2, periodic=True)
        (1, 2, 0, 1)
    """
    start, stop = balanced_bounds(n, parts, part)
    wanted = [*range(start - width, start), *range(stop, stop + width)]
    if periodic and n > 0:
        return tuple(row % n for row in wanted)
    return tuple(row if 0 <= row < n else -1 for row in wanted)


@functools.lru_cache(maxsize=256)
def _plan(n: int, parts: int, width: int, periodic: bool
          ) -> dict[tuple[int, int], tuple[tuple[int, ...], tuple[int, ...]]]:
    """Who sends which rows to whom: ``(src part, dst part) -> (src local rows, dst slots)``.

    Slots number the ghost rows of the destination: ``0..width-1`` before its shard,
    ``width..2*width-1`` after it. A part may send to itself (a periodic wrap).
    """
    plan: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
    for dst in range(parts):
        for slot, row in enumerate(ghost_sources(n, parts, dst, width, periodic)):
            if row < 0:
                continue
            src = _owner(row, n, parts)
            rows, slots = plan.setdefault((src, dst), ([], []))
            rows.append(row - balanced_bounds(n, parts, src)[0])
            slots.append(slot)
    return {key: (tuple(rows), tuple(slots)) for key, (rows, slots) in plan.items()}


def _split_dim(t: Tensor) -> int:
    """The split dim of a global tensor on a 1-D placement, with clear errors otherwise."""
    if not t.is_global:
        raise TypeError("halo_exchange needs a global tensor split along one dimension; "
                        "this one is local (use to_global(placement, flow.sbp.split(d)))")
    (layout,) = t.sbp if len(t.sbp) == 1 else (None,)
    if t.placement.ndim != 1 or not isinstance(layout, Split):
        shown = "(" + ", ".join(str(s) for s in t.sbp) + ")"
        raise ValueError(f"halo_exchange needs a tensor split along one dimension (S(d)) on a "
                         f"1-D placement; this one has sbp {shown} on a placement of mesh "
                         f"shape {t.placement.mesh_shape}")
    return layout.dim


def halo_exchange(t: Tensor, width: int, *, periodic: bool = False, fill: Any = 0) -> Tensor:
    """This rank's shard of ``t`` extended by ``width`` neighbouring rows on each side.

    Collective over the ranks of ``t``'s placement: every rank calls it (ranks outside the
    placement return their empty shard at once). Messages go point to point, only between
    ranks that hold the rows someone needs.

    Args:
        t: a global tensor with sbp ``S(d)`` on a 1-D placement; shards may be uneven or
            empty.
        width: ghost rows on each side (0 or more). It may exceed the shards' sizes: the rows
            then come from whichever ranks hold them.
        periodic: False (the default): ghost rows beyond the global ends (before row 0,
            after row ``n - 1``) hold ``fill``. True: the dimension wraps around, so the
            first shard's leading ghosts are the last rows of the tensor, and so on.
        fill: the value of ghost rows beyond the ends when ``periodic`` is False (0 suits
            a zero Dirichlet boundary).

    Returns:
        A local tensor (a new array) whose dim ``d`` has ``width + rows + width`` entries:
        the ``width`` rows before this shard, the shard, the ``width`` rows after it.

    Raises:
        TypeError: ``t`` is a local tensor.
        ValueError: ``t`` is not split along one dim of a 1-D placement, or ``width < 0``.

    Examples:
        >>> p = flow.placement.all("cpu")
        >>> u = flow.tensor(numpy.arange(12.0).reshape(6, 2), placement=p,
        ...                 sbp=flow.sbp.split(0))
        >>> ext = halo_exchange(u, 1, periodic=True)     # shape (rows + 2, 2)
        >>> new = ext[:-2] + ext[2:] - 2 * ext[1:-1]     # a 1-D Laplacian of this shard
    """
    dim = _split_dim(t)
    if isinstance(width, bool) or int(width) != width or width < 0:
        raise ValueError(f"halo_exchange: width must be a non-negative int, got {width!r}")
    width = int(width)
    placement = t.placement
    rank = topology.rank
    if rank not in placement:
        return t.to_local()
    ranks = placement.rank_list
    me = ranks.index(rank)
    n, parts = int(t.shape[dim]), len(ranks)
    local = numpy.moveaxis(numpy.asarray(t.to_local().numpy()), dim, 0)
    rows = local.shape[0]
    out = numpy.full((rows + 2 * width, *local.shape[1:]), fill, dtype=local.dtype)
    out[width:width + rows] = local
    plan = _plan(n, parts, width, bool(periodic))
    works: list[Work] = []
    received: list[tuple[numpy.ndarray, tuple[int, ...]]] = []
    for (src, dst), (_, slots) in plan.items():
        if dst == me and src != me:
            buf = numpy.empty((len(slots), *local.shape[1:]), dtype=local.dtype)
            works.append(world_comm.irecv(buf, ranks[src], HALO_TAG))
            received.append((buf, slots))
    for (src, dst), (src_rows, slots) in plan.items():
        if src != me:
            continue
        picked = numpy.ascontiguousarray(local[list(src_rows)])
        if dst == me:
            received.append((picked, slots))
        else:
            work = world_comm.send(picked, ranks[dst], HALO_TAG, async_op=True)
            assert work is not None
            works.append(work)
    for work in works:
        work.wait()
    for buf, slots in received:
        positions = [s if s < width else rows + s for s in slots]
        out[positions] = buf
    return Tensor(numpy.ascontiguousarray(numpy.moveaxis(out, 0, dim)))
