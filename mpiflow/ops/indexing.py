"""Indexing: ``tensor[index]`` and ``tensor[index] = value`` on local and global tensors.

Basic indices are ints, slices (any step, negative bounds), ``None`` and ``...``; advanced
indices are integer or boolean arrays, lists and tensors, as numpy.

Layouts of global tensors (per mesh axis):

- basic ``__getitem__``: a split dim indexed by a full slice ``:`` keeps its split, renumbered
  for the dims that ints remove and ``None`` adds; a split dim indexed any other way is
  gathered first; partial layouts stay partial (indexing only selects elements).
- advanced ``__getitem__`` with a boolean mask of the leading dims, or with one integer index
  at one dim (the other entries ``:``/``...``): distributed ops that gather nothing
  (:mod:`.fancy`): ``x[mask]`` is split along dim 0, balanced; ``x[idx]`` is split as the
  index (or along that dim, balanced, for an index every rank holds), the rows fetched from
  their owners.
- other advanced ``__getitem__``: the input is gathered to ``B`` (partial layouts stay partial)
  and indexed on every rank. Index tensors that are global are gathered too; local index
  arrays and tensors must be the same on every rank.
- basic ``__setitem__``: no communication beyond laying out ``value``: each rank writes the
  part of the indexed region inside its shard. A global value is made whole (``B``), except
  along a split dim of the target that the index takes whole (``:``) and the value spans:
  there it is split as the target (no communication when it already is), so
  ``x[:, 2:5] = y`` of row-split ``x`` and ``y`` gathers nothing. On partial axes the rank at
  coordinate 0 writes the value and the others the reduction's identity, so that the
  logical value is numpy's.
- advanced ``__setitem__`` with those two index forms, and a value of one row (mask) or of
  the indexed region (integer index): the mask, the index and the value are made whole (their
  size), and each rank writes the rows its shard holds (:mod:`.fancy`); the target never
  moves. Other advanced ``__setitem__``: the whole value is gathered, written, and laid out
  again.

Local results of basic indexing share memory with their input (numpy views).

Gradients: ``getitem`` puts the gradient into zeros of the input's shape at the index (advanced
indices accumulate where they repeat, as ``index_add``). ``setitem`` on a tensor that takes part
in autograd records a node and rebinds the target to it: the written value gets the region's
gradient (summed over the dims it was broadcast along), the target's old value the gradient
outside the region. A local tensor written into a global one is made global (``B``) first, so
its gradient goes to rank 0 as ``to_global``'s does. Views do not track their base: writing
into the local result of basic indexing does not update the base's history.

Examples:
    >>> import mpiflow as flow
    >>> x = flow.arange(12).reshape(3, 4)
    >>> x[1:, ::-2].tolist(), x[x > 9].tolist()
    ([[7, 5], [11, 9]], [10, 11])
    >>> x[0, 1:3] = -1
    >>> x[0].tolist()
    [0, -1, -1, 3]
"""

from __future__ import annotations

import operator
from typing import Any

import numpy

from ..boxing.execute import redistribute
from ..core.array_module import array_module, is_array
from ..layouts.plan import Layout
from ..layouts.sbp import Partial, Split, partial_max, partial_min, partial_sum
from ..layouts.shards import fill_op, shard_bounds
from ..runtime import topology
from ..tensors import trace
from ..tensors.tape import is_grad_enabled, rebind_inplace, record
from ..tensors.tensor import Tensor, bind
from .engine import B, Context, OpDef, Signature, apply
from .fancy import plan, routed_getitem, routed_setitem

__all__ = ["getitem", "setitem"]

Shape = tuple[int, ...]
Basic = tuple[int | slice | None, ...]  # one entry per input dim, plus None for new dims
_PARTIALS = (partial_sum, partial_max, partial_min)
_FULL = slice(None)


# -- index normalization -------------------------------------------------------------------------
def _as_tuple(index: Any) -> tuple[Any, ...]:
    return index if isinstance(index, tuple) else (index,)


def _entry(item: Any) -> Any:
    """One index entry with 0-d integer tensors and numpy integers turned into ints (also as
    the bounds and step of a slice)."""
    if isinstance(item, Tensor) and item.ndim == 0 and item.dtype.numpy.kind in "iu":
        return int(item)  # collective for a global index tensor, as every global op
    if isinstance(item, numpy.integer):
        return int(item)
    if isinstance(item, slice) and not all(v is None or type(v) is int
                                           for v in (item.start, item.stop, item.step)):
        return slice(*(None if v is None else operator.index(v)
                       for v in (item.start, item.stop, item.step)))
    return item


def _is_basic(item: Any) -> bool:
    return (item is None or item is Ellipsis or isinstance(item, slice)
            or (isinstance(item, int) and not isinstance(item, bool)))


def expand_basic(items: tuple[Any, ...], shape: Shape) -> Basic:
    """The basic index with ``...`` expanded, ints made non-negative and checked, full slices
    written as ``slice(None)``, and ``:`` added for trailing dims."""
    ellipses = sum(item is Ellipsis for item in items)
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(item is not None and item is not Ellipsis for item in items)
    if used > len(shape):
        raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
    out: list[int | slice | None] = []
    dim = 0
    for item in items:
        if item is Ellipsis:
            out.extend([_FULL] * (len(shape) - used))
            dim += len(shape) - used
        elif item is None:
            out.append(None)
        elif isinstance(item, slice):
            full = item.indices(shape[dim]) == (0, shape[dim], 1)
            out.append(_FULL if full else item)
            dim += 1
        else:
            n = shape[dim]
            if not -n <= item < n:
                raise IndexError(f"index {item} is out of bounds for dimension {dim} with "
                                 f"size {n}")
            out.append(item % n)
            dim += 1
    out.extend([_FULL] * (len(shape) - dim))
    return tuple(out)


def _basic_shape(shape: Shape, *, index: Basic) -> Shape:
    out, dim = [], 0
    for item in index:
        if item is None:
            out.append(1)
            continue
        if isinstance(item, slice):
            out.append(len(range(*item.indices(shape[dim]))))
        dim += 1
    return tuple(out)


def _basic_layouts(shape: Shape, *, index: Basic) -> list[Signature]:
    sigs: list[Signature] = []
    dim = pos = 0
    for item in index:
        if item is None:
            pos += 1
            continue
        if isinstance(item, slice):
            if item == _FULL:
                sigs.append(((Split(dim),), Split(pos)))
            pos += 1
        dim += 1
    return sigs + [((p,), p) for p in _PARTIALS]


def _basic_kernel(ctx: Context, a: Any, *, index: Basic) -> Any:
    # Split dims are indexed by ':' only, so the same index fits every shard. The trailing
    # '...' makes numpy return a 0-d view rather than a scalar copy.
    return a[(*index, Ellipsis)]


def _basic_grad(g: Tensor, operands: Any, out: Tensor, *, index: Basic) -> tuple[Tensor]:
    return (apply(GETITEM_GRAD, g, index=index, size=tuple(operands[0].shape)),)


GETITEM = OpDef("getitem", _basic_kernel, _basic_shape, _basic_layouts,
                grad=_basic_grad)


def _basic_grad_layouts(g: Shape, *, index: Basic, size: Shape) -> list[Signature]:
    """The inverse of :func:`_basic_layouts`: a split of the gradient's dim taken by ``:``
    becomes a split of the input's dim; partial sums stay partial."""
    sigs: list[Signature] = []
    dim = pos = 0
    for item in index:
        if item is None:
            pos += 1
            continue
        if isinstance(item, slice):
            if item.indices(size[dim]) == (0, size[dim], 1):
                sigs.append(((Split(pos),), Split(dim)))
            pos += 1
        dim += 1
    return [*sigs, ((partial_sum,), partial_sum)]


def _basic_grad_kernel(ctx: Context, g: Any, *, index: Basic, size: Shape) -> Any:
    out = ctx.xp.zeros(ctx.out_shape, dtype=ctx.out_dtype)
    out[(*index, Ellipsis)] = g  # a basic index selects each element at most once
    return out


# Zeros of shape ``size`` with ``g`` written at the basic ``index``: getitem's backward.
GETITEM_GRAD = OpDef("getitem_grad", _basic_grad_kernel, lambda g, *, size, **_: size,
                     _basic_grad_layouts)


def _host(array: Any) -> numpy.ndarray:
    get = getattr(array, "get", None)
    return numpy.asarray(get() if get is not None else array)


def _advanced_parts(items: tuple[Any, ...], is_global: bool) -> tuple[Any, ...]:
    """The index with tensors replaced by arrays: the whole value of global index tensors
    (collective), the data of local ones; a local target refuses global index tensors."""
    out = []
    for item in items:
        if isinstance(item, Tensor):
            if item.is_global and not is_global:
                raise TypeError("a local tensor cannot be indexed by a global tensor; use "
                                "to_local() or numpy() on the index first")
            item = item.numpy() if item.is_global else item._data
        elif isinstance(item, list):
            item = numpy.asarray(item)
        out.append(item)
    return tuple(out)


def _advanced_shape(shape: Shape, *, index: tuple[Any, ...]) -> Shape:
    # Index a zero-byte stand-in: numpy's rules give the shape, no data is touched.
    stand_in = numpy.empty(shape, dtype=numpy.dtype([]))
    host = tuple(_host(item) if is_array(item) else item for item in index)
    return tuple(stand_in[host].shape)


def _advanced_layouts(shape: Shape, *, index: tuple[Any, ...]) -> list[Signature]:
    return [((p,), p) for p in _PARTIALS]  # anything else is gathered to B first


def _advanced_kernel(ctx: Context, a: Any, *, index: tuple[Any, ...]) -> Any:
    return a[tuple(ctx.xp.asarray(item) if is_array(item) else item for item in index)]


def _advanced_grad(g: Tensor, operands: Any, out: Tensor, *, index: tuple[Any, ...]
                   ) -> tuple[Tensor]:
    return (apply(INDEX_GRAD, g, index=index, size=tuple(operands[0].shape)),)


INDEX = OpDef("index", _advanced_kernel, _advanced_shape, _advanced_layouts,
              grad=_advanced_grad)


def _index_add_kernel(ctx: Context, g: Any, *, index: tuple[Any, ...], size: Shape) -> Any:
    xp = ctx.xp
    out = xp.zeros(ctx.out_shape, dtype=ctx.out_dtype)
    # add.at accumulates where an index repeats (plain assignment would keep one of them)
    xp.add.at(out, tuple(xp.asarray(item) if is_array(item) else item for item in index), g)
    return out


# Zeros of shape ``size`` with ``g`` added at the advanced ``index``: the backward of indexing.
INDEX_GRAD = OpDef("index_grad", _index_add_kernel, lambda g, *, size, **_: size,
                   lambda g, **_: [((partial_sum,), partial_sum)])


def getitem(input: Tensor, index: Any) -> Tensor:
    """``input[index]``, numpy's indexing (``Tensor.__getitem__``).

    Args:
        input: a local or global tensor.
        index: ints, slices, None, ``...``, or (advanced) integer/boolean arrays, lists and
            tensors, alone or in a tuple.

    Returns:
        The selection: a view for basic indices of a local tensor, else a new tensor. A global
        input gives a global result (advanced indices gather the input first, see the module).

    Examples:
        >>> flow.arange(6).reshape(2, 3)[:, None, -1].tolist()
        [[2], [5]]
    """
    items = tuple(_entry(item) for item in _as_tuple(index))
    if all(_is_basic(item) for item in items):
        basic = expand_basic(items, tuple(input.shape))
        if input.is_global:
            input, basic = _slice_split_dims(input, basic)
        return apply(GETITEM, input, index=basic)
    routed = routed_getitem(input, items)  # a mask or one integer index: distributed
    if routed is not None:
        return routed
    return apply(INDEX, input, index=_advanced_parts(items, input.is_global))


def _slice_split_dims(input: Tensor, index: Basic) -> tuple[Tensor, Basic]:
    """Each split dim that ``index`` does not take whole, sliced where it lies first
    (:mod:`.slicing`: only the selected rows move); the index left for the rest: ``:`` for a
    sliced dim, 0 for an int's (the row it kept)."""
    from .slicing import slice_dim

    split = {s.dim for s in input.sbp if isinstance(s, Split)}
    out: list[int | slice | None] = []
    dim = 0
    for item in index:
        if item is None:
            out.append(None)
            continue
        if dim in split and item != _FULL:
            if isinstance(item, slice):
                input = slice_dim(input, dim, item)
                item = _FULL
            else:
                input = slice_dim(input, dim, slice(item, item + 1))
                item = 0
        out.append(item)
        dim += 1
    return input, tuple(out)


# -- setitem -------------------------------------------------------------------------------------
def _value_array(value: Any, target: Tensor, sbp: tuple[Any, ...] | None = None) -> Any:
    """``value`` as an array (or number): its whole value on every rank, or, for a global
    value, this rank's part of it laid out as ``sbp`` (default ``B`` on every mesh axis)."""
    if isinstance(value, Tensor):
        if value.is_global:
            if not target.is_global:
                raise TypeError("cannot assign a global tensor into a local one; use "
                                "to_local() or numpy() on the value first")
            layout = sbp if sbp is not None else (B,) * target.placement.ndim
            return value.to_global(target.placement, layout)._data
        return value._data
    return value


def _aligned(target: Tensor, index: Basic, region: Shape, fitted: Shape, value: Any
             ) -> dict[int, int]:
    """The mesh axes along which a global ``value`` can be written where it lies: the target
    is split there along a dim that ``index`` takes whole (``:``) and the value spans that
    dim of the region (not broadcast along it), so a balanced split of the value along its
    matching dim holds exactly the rows of the target's shard.

    Returns:
        ``{mesh axis: the value's dim to split along it}``; empty for other values.
    """
    if not (isinstance(value, Tensor) and value.is_global and value.placement == target.placement):
        return {}
    position, dim, pos = {}, 0, 0  # target dim -> its position in the region
    for item in index:
        if item is None:
            pos += 1
            continue
        if isinstance(item, slice):
            if item == _FULL:
                position[dim] = pos
            pos += 1
        dim += 1
    out = {}
    for axis, s in enumerate(target.sbp):
        p = position.get(s.dim) if isinstance(s, Split) else None
        if p is None:
            continue
        q = p - (len(region) - len(fitted))  # the region's dim p in the fitted value
        if q >= 0 and fitted[q] == region[p]:
            out[axis] = q + value.ndim - len(fitted)
    return out


def _fitting_shape(value: Any, region: Shape) -> Shape:
    """The shape ``value`` takes to fill ``region``: leading size-1 dims beyond the region's
    are dropped (as PyTorch); a ``ValueError`` on every rank when it does not broadcast."""
    shape = tuple(value.shape) if isinstance(value, Tensor) or is_array(value) else \
        numpy.shape(value)
    while len(shape) > len(region) and shape[0] == 1:
        shape = shape[1:]
    try:
        fits = numpy.broadcast_shapes(shape, region) == region
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"cannot assign a value of shape {shape} to an indexed region of "
                         f"shape {region}")
    return shape


def _clip(item: slice, n: int, lo: int, hi: int) -> tuple[slice, slice] | None:
    """The part of the selection ``item`` of a dim of ``n`` that lies in ``[lo, hi)``.

    Returns:
        (the slice into a shard holding ``[lo, hi)``, the slice of the selection's positions),
        or None when they do not meet.
    """
    start, _, step = item.indices(n)
    count = len(range(*item.indices(n)))
    if step > 0:
        first = max(0, -(-(lo - start) // step))
        last = min(count, -(-(hi - start) // step))
    else:
        first = max(0, (start - hi) // -step + 1)
        last = min(count, (start - lo) // -step + 1)
    if first >= last:
        return None
    begin = start + step * first - lo
    end = begin + step * (last - first)
    return slice(begin, end if end >= 0 else None, step), slice(first, last)


def _set_basic_global(target: Tensor, index: Basic, value: Any) -> None:
    """Each rank writes the part of the region ``index`` that its shard holds."""
    placement, sbp = target.placement, target.sbp
    shape = tuple(target.shape)
    region_shape = _basic_shape(shape, index=index)
    fitted = _fitting_shape(value, region_shape)
    # A split value spanning a split dim taken whole is laid out as the target's shards (no
    # gathering it): each rank's part is then exactly its shard's rows of the region.
    aligned = _aligned(target, index, region_shape, fitted, value)
    layout = tuple(Split(aligned[a]) if a in aligned else B for a in range(placement.ndim))
    data = _value_array(value, target, layout if aligned else None)
    coords = placement.coordinates(topology.rank)
    if coords is None:
        return
    xp = array_module(target._data)
    bounds = shard_bounds(shape, placement.mesh_shape, sbp, coords)
    spans = {s.dim for a, s in enumerate(sbp) if a in aligned and isinstance(s, Split)}
    local: list[int | slice | None] = []
    part: list[slice] = []
    local_region = list(region_shape)
    dim = 0
    for item in index:
        if item is None:
            local.append(None)
            part.append(_FULL)
            continue
        lo, hi = bounds[dim]
        if isinstance(item, slice):
            clipped = _clip(item, shape[dim], lo, hi)
            if clipped is None:
                return
            local.append(clipped[0])
            if dim in spans:  # the value's part already holds just these rows
                local_region[len(part)] = hi - lo
                part.append(_FULL)
            else:
                part.append(clipped[1])
        else:
            if not lo <= item < hi:
                return
            local.append(item - lo)
        dim += 1
    array = xp.asarray(data)
    if aligned:  # drop the value's leading size-1 dims that the region does not have
        array = array.reshape(array.shape[array.ndim - len(fitted):])
    region = xp.broadcast_to(array.reshape(fitted) if not aligned else array,
                             tuple(local_region))
    piece = region[tuple(part)]
    partial = [a for a, s in enumerate(sbp) if isinstance(s, Partial) and coords[a] != 0]
    if partial:  # the logical value reduces over partial axes: only coordinate 0 writes it
        piece = fill_op(sbp, coords, partial[0]).identity(target._data.dtype)
    target._data[(*local, Ellipsis)] = piece


def _set_gathered(target: Tensor, index: tuple[Any, ...], value: Any) -> None:
    """Gather the whole value, write ``index`` there, and keep this rank's shard."""
    shape = tuple(target.shape)
    layout = Layout(target.placement, target.sbp)
    whole_layout = Layout(target.placement, (B,) * target.placement.ndim)
    _fitting_shape(value, _advanced_shape(shape, index=index))
    data = _value_array(value, target)
    whole = redistribute(target._data, shape, layout, whole_layout)
    if topology.rank in target.placement:  # (for a B target, whole is target._data)
        xp = array_module(whole)
        whole[tuple(xp.asarray(i) if is_array(i) else i for i in index)] = data
    target._data[...] = redistribute(whole, shape, whole_layout, layout)


def setitem(target: Tensor, index: Any, value: Any) -> None:
    """``target[index] = value`` in place (``Tensor.__setitem__``), numpy's semantics.

    Args:
        target: a local or global tensor; its array is written in place and its version
            counter bumped.
        index: as :func:`getitem`.
        value: a number, an array, or a tensor broadcastable to the indexed region. For a
            global target, arrays and local tensors must be the same on every rank; a global
            value is made whole (``B``) first, or split as the target (see the module).

    Examples:
        >>> x = flow.zeros(2, 3)
        >>> x[:, 1] = flow.tensor([1.0, 2.0])
        >>> x.tolist()
        [[0.0, 1.0, 0.0], [0.0, 2.0, 0.0]]
    """
    trace.call(_setitem, target, index, value)  # one step of a traced graph


def _setitem(target: Tensor, index: Any, value: Any) -> None:
    items = tuple(_entry(item) for item in _as_tuple(index))
    basic = all(_is_basic(item) for item in items)
    if basic:
        key = expand_basic(items, tuple(target.shape))
    elif target.is_global and plan(tuple(target.shape), items) is not None:
        key = items  # a mask or one integer index: index tensors stay where they are
    else:
        key = _advanced_parts(items, target.is_global)
    if is_grad_enabled() and (target.requires_grad or (isinstance(value, Tensor)
                                                       and value.requires_grad)):
        value = _record_setitem(target, key, value)
    if not target.is_global:
        data = _value_array(value, target)
        if is_array(data) and array_module(data) is not array_module(target._data):
            raise TypeError("the value lives on another device than the tensor")
        target._data[(*key, Ellipsis) if basic else key] = data
    elif basic:
        _set_basic_global(target, key, value)
    elif not routed_setitem(target, key, value):
        _set_gathered(target, _advanced_parts(key, True), value)
    target._version += 1


def _record_setitem(target: Tensor, key: tuple[Any, ...], value: Any) -> Any:
    """Give ``target`` the history of its new value: a node whose gradient rule sends the
    region's gradient to ``value`` and the rest to ``target``'s old value (a snapshot).

    Returns:
        ``value``, made global (``B``) if it is a local tensor written into a global target.
    """
    if isinstance(value, Tensor) and target.is_global and not value.is_global:
        value = value.to_global(target.placement, (B,) * target.placement.ndim)
    operand = value if isinstance(value, Tensor) else 0
    marker = record("setitem", _setitem_grad, [target, operand], {"index": key},
                    target.detach())
    rebind_inplace(target, marker)
    return value


def _setitem_grad(g: Tensor, operands: Any, out: Tensor, *, index: tuple[Any, ...]
                  ) -> tuple[Tensor, Tensor | None]:
    """The old value gets the gradient outside the region; ``value`` the region's, summed
    over the dims it was broadcast along."""
    from . import pointwise as pw
    from .grad_util import sum_to
    from .shape import reshape

    value = operands[1]
    rest = pw.clone(g)
    setitem(rest, index, 0)
    if not isinstance(value, Tensor):
        return rest, None
    region = getitem(g, index)
    fitted = _fitting_shape(value, tuple(region.shape))
    return rest, reshape(sum_to(region, fitted), tuple(value.shape))


bind({"__getitem__": getitem, "__setitem__": setitem})
