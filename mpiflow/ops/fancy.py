"""Advanced indexing of global tensors without gathering them: ``x[mask]``, ``x[idx]`` and
their assignments.

Two index forms cover the usual cases and run distributed (any other advanced index still
gathers the input, as :mod:`.indexing` says):

- a boolean mask of the leading dims, the other entries ``:`` or ``...``: ``x[mask]`` is
  :func:`.selection.masked_rows` (the marked rows, split along dim 0, balanced);
- one integer index (a tensor, an array or a list, any shape) at one dim, the other entries
  ``:`` or ``...``: ``x[idx]`` is :func:`.gathers.take_rows` (the owners answer for the rows
  asked for; the result split as the index, or along that dim where the index is whole).

Assignments with those indices write in place where the rows lie: ``x[mask] = v`` (``v``
broadcast to one row) and ``x[idx] = v`` (``v`` broadcast to the indexed region) make the
mask, the index and ``v`` whole on every rank where they are not (their size, not ``x``'s),
and every rank writes the rows its shard holds: ``x`` itself never moves. On partial mesh axes
the rank at coordinate 0 writes the value and the others the reduction's identity.

Examples:
    >>> plan((5, 3), (Ellipsis, [0, 2]))
    ('rows', 1, [0, 2])
"""

from __future__ import annotations

from typing import Any

import numpy

from ..core.array_module import array_module, is_array, to_host
from ..layouts.sbp import Partial, Split
from ..layouts.shards import fill_op, shard_bounds
from ..runtime import topology
from ..tensors.tensor import Tensor
from .engine import B
from .gathers import agree_in_bounds, take_rows
from .selection import masked_rows

__all__ = ["plan", "routed_getitem", "routed_setitem"]

Shape = tuple[int, ...]
_FULL = slice(None)


def _kind(item: Any) -> str | None:
    """``"mask"`` or ``"rows"`` for a boolean or integer index of at least one dim, else None."""
    if isinstance(item, Tensor):
        kind, ndim = item.dtype.numpy.kind, item.ndim
    elif is_array(item):
        kind, ndim = item.dtype.kind, item.ndim
    elif isinstance(item, list):
        array = numpy.asarray(item)
        kind, ndim = ("i" if array.size == 0 else array.dtype.kind), array.ndim
    else:
        return None
    if ndim == 0:
        return None
    return "mask" if kind == "b" else "rows" if kind in "iu" else None


def plan(shape: Shape, items: tuple[Any, ...]) -> tuple[str, int, Any] | None:
    """``(kind, dim, index)`` where ``items`` is one mask of the leading dims or one integer
    index (the rest ``:``/``...``), else None (the general path handles it)."""
    found = [i for i, item in enumerate(items) if _kind(item) is not None]
    if len(found) != 1:
        return None
    at = found[0]
    rest = items[:at] + items[at + 1:]
    if any(not (item is Ellipsis or (isinstance(item, slice) and item == _FULL))
           for item in rest) or sum(item is Ellipsis for item in items) > 1:
        return None
    index = items[at]
    kind = _kind(index)
    assert kind is not None
    width = (index.ndim if isinstance(index, Tensor) or is_array(index)
             else numpy.asarray(index).ndim) if kind == "mask" else 1
    after = sum(item is not Ellipsis for item in items[at + 1:])
    dim = len(shape) - after - width if any(i is Ellipsis for i in items[:at]) else at
    if dim < 0 or dim + width + after > len(shape) or (kind == "mask" and dim != 0):
        return None
    return kind, dim, index


def routed_getitem(input: Tensor, items: tuple[Any, ...]) -> Tensor | None:
    """``input[items]`` by a distributed op for a global input and a planned index, else None."""
    if not input.is_global:
        return None
    found = plan(tuple(input.shape), items)
    if found is None:
        return None
    kind, dim, index = found
    return masked_rows(input, index) if kind == "mask" else take_rows(input, index, dim)


# -- assignments ---------------------------------------------------------------------------------
def _shape_of(value: Any) -> Shape:
    return tuple(value.shape) if isinstance(value, Tensor) or is_array(value) else \
        numpy.shape(value)


def _fits(value: Any, region: Shape) -> bool:
    shape = _shape_of(value)
    while len(shape) > len(region) and shape[0] == 1:
        shape = shape[1:]
    try:
        return numpy.broadcast_shapes(shape, region) == region
    except ValueError:
        return False


def _whole(value: Any, target: Tensor) -> Any:
    """``value`` as an array holding its whole value (a global tensor made ``B``: its size)."""
    if isinstance(value, Tensor):
        if value.is_global:
            return value.to_global(target.placement, (B,) * target.placement.ndim)._data
        return value._data
    return value


def _identity_piece(target: Tensor, coords: tuple[int, ...]) -> Any:
    """The identity a rank writes on partial axes where it is not coordinate 0, or None."""
    sbp = target.sbp
    partial = [a for a, s in enumerate(sbp) if isinstance(s, Partial) and coords[a] != 0]
    if not partial:
        return None
    return fill_op(sbp, coords, partial[0]).identity(target._data.dtype)


def routed_setitem(target: Tensor, items: tuple[Any, ...], value: Any) -> bool:
    """Write ``target[items] = value`` where the rows lie (see the module); False where the
    index or the value is of another form (the general path writes it)."""
    if not target.is_global:
        return False
    shape = tuple(target.shape)
    found = plan(shape, items)
    if found is None:
        return False
    kind, dim, index = found
    if kind == "mask":
        return _set_masked(target, index, value)
    return _set_rows(target, index, dim, value)


def _set_masked(target: Tensor, mask: Any, value: Any) -> bool:
    shape = tuple(target.shape)
    placement = target.placement
    if not isinstance(mask, Tensor):
        from ..tensors.creation import tensor

        mask = tensor(numpy.asarray(to_host(mask) if is_array(mask) else mask),
                      placement=placement, sbp=(B,) * placement.ndim)
    k = mask.ndim
    if tuple(mask.shape) != shape[:k] or not _fits(value, shape[k:]):
        return False
    if not mask.is_global:
        mask = mask.to_global(placement, (B,) * placement.ndim)
    # the mask laid out as the target's rows: each rank holds the part of its own rows
    layout = tuple(s if isinstance(s, Split) and s.dim < k else B for s in target.sbp)
    mask = mask.to_global(placement, layout)
    data = _whole(value, target)
    coords = placement.coordinates(topology.rank)
    if coords is None:
        return True
    xp = array_module(target._data)
    bounds = shard_bounds(shape, placement.mesh_shape, target.sbp, coords)
    row = xp.broadcast_to(xp.asarray(data).reshape(_fitted(data, shape[k:])), shape[k:])
    piece = row[tuple(slice(lo, hi) for lo, hi in bounds[k:])]
    identity = _identity_piece(target, coords)
    target._data[mask._data] = piece if identity is None else identity
    return True


def _fitted(value: Any, region: Shape) -> Shape:
    shape = _shape_of(value)
    while len(shape) > len(region) and shape[0] == 1:
        shape = shape[1:]
    return shape


def _set_rows(target: Tensor, index: Any, dim: int, value: Any) -> bool:
    shape = tuple(target.shape)
    n = shape[dim]
    if isinstance(index, Tensor):
        agree_in_bounds(index, n, dim)
        whole = (index.to_global(target.placement, (B,) * target.placement.ndim)._data
                 if index.is_global else index._data)
        rows = numpy.asarray(to_host(whole), dtype=numpy.int64)
    else:
        rows = numpy.asarray(to_host(index) if is_array(index) else index, dtype=numpy.int64)
        agree_in_bounds(rows, n, dim)
    region = (*shape[:dim], *rows.shape, *shape[dim + 1:])
    if not _fits(value, region):
        return False
    data = _whole(value, target)
    coords = target.placement.coordinates(topology.rank)
    if coords is None:
        return True
    xp = array_module(target._data)
    rows = numpy.where(rows < 0, rows + n, rows).reshape(-1)
    flat = (*shape[:dim], rows.shape[0], *shape[dim + 1:])
    full = xp.broadcast_to(xp.asarray(data).reshape(_fitted(data, region)), region)
    full = full.reshape(flat)
    bounds = shard_bounds(shape, target.placement.mesh_shape, target.sbp, coords)
    lo, hi = bounds[dim]
    mine = numpy.nonzero((rows >= lo) & (rows < hi))[0]
    cut = tuple(slice(a, b) if d != dim else xp.asarray(mine) for d, (a, b) in enumerate(bounds))
    piece = full[cut]
    identity = _identity_piece(target, coords)
    where = (slice(None),) * dim + (xp.asarray(rows[mine] - lo),)
    target._data[where] = piece if identity is None else identity
    return True
