"""Manipulation functions of the standard: ``broadcast_arrays``, ``broadcast_to``, ``concat``,
``expand_dims``, ``flip``, ``moveaxis``, ``permute_dims``, ``repeat``, ``reshape``, ``roll``,
``squeeze``, ``stack``, ``tile``, ``unstack``.

They are mpiflow's shape ops: a permutation, a new axis or a broadcast moves no data (the
split follows its dim); ``concat`` promotes the dtypes first, as the standard says.

Examples:
    >>> from mpiflow import array_api as xp
    >>> x = xp.reshape(xp.arange(6), (2, 3))
    >>> xp.permute_dims(x, (1, 0)).shape, xp.concat([x, x], axis=None).shape
    (mpiflow.Size([3, 2]), mpiflow.Size([12]))
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Sequence
from typing import Any

import numpy

from ..ops import join
from ..ops import pointwise as pw
from ..ops import shape as shape_ops
from ..tensors.tensor import Tensor
from .common import array, axes, axis, face, promote
from .creation import shape_arg

_axis = axis  # (the functions' own argument is named axis)

__all__ = ["broadcast_arrays", "broadcast_to", "concat", "expand_dims", "flip", "moveaxis",
           "permute_dims", "repeat", "reshape", "roll", "squeeze", "stack", "tile", "unstack"]


def _arrays(arrays: Any, name: str) -> list[Tensor]:
    if isinstance(arrays, Tensor) or not isinstance(arrays, (list, tuple)):
        raise TypeError(f"{name}: expected a list or tuple of arrays, got "
                        f"{type(arrays).__name__}")
    out = [array(a, name) for a in arrays]
    if not out:
        raise ValueError(f"{name}: needs at least one array")
    return out


def _promoted(arrays: list[Tensor]) -> list[Tensor]:
    dt = promote(*[a.dtype for a in arrays])
    return [a if a.dtype is dt else pw.cast(a, dt) for a in arrays]


def broadcast_to(x: Tensor, /, shape: Any) -> Tensor:
    """``x`` broadcast to ``shape`` (a ``ValueError`` where the shapes do not fit).

    Examples:
        >>> from mpiflow import array_api as xp
        >>> xp.broadcast_to(xp.asarray([1, 2]), (2, 2)).tolist()
        [[1, 2], [1, 2]]
    """
    array(x, "broadcast_to")
    target = shape_arg(shape, "broadcast_to")
    try:
        fits = numpy.broadcast_shapes(tuple(x.shape), target) == target
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"broadcast_to: cannot broadcast shape {tuple(x.shape)} to {target}")
    return pw.expand(x, target) if tuple(x.shape) != target else pw.clone(x)


def broadcast_arrays(*arrays: Tensor) -> list[Tensor]:
    """The arrays broadcast to their common shape."""
    for a in arrays:
        array(a, "broadcast_arrays")
    try:
        shape = tuple(numpy.broadcast_shapes(*[tuple(a.shape) for a in arrays]))
    except ValueError:
        raise ValueError("broadcast_arrays: shapes "
                         + ", ".join(str(tuple(a.shape)) for a in arrays)
                         + " cannot be broadcast together") from None
    return [broadcast_to(a, shape) for a in arrays]


def concat(arrays: Any, /, *, axis: int | None = 0) -> Tensor:
    """The arrays joined along ``axis`` (None: flattened first), dtypes promoted.

    Examples:
        >>> from mpiflow import array_api as xp
        >>> xp.concat([xp.asarray([1, 2]), xp.asarray([3.5])]).tolist()
        [1.0, 2.0, 3.5]
    """
    items = _promoted(_arrays(arrays, "concat"))
    if axis is None:
        return join.cat([shape_ops.reshape(a, (-1,)) for a in items], 0)
    ndim = items[0].ndim
    if ndim == 0:
        raise ValueError("concat: zero-dimensional arrays cannot be concatenated")
    if any(a.ndim != ndim for a in items):
        raise ValueError("concat: the arrays must have the same number of dimensions")
    d = _axis(axis, ndim, "concat")
    for a in items[1:]:
        if any(x != y for i, (x, y) in enumerate(zip(a.shape, items[0].shape)) if i != d):
            raise ValueError("concat: the shapes must match except along the axis, got "
                             + ", ".join(str(tuple(b.shape)) for b in items))
    return join.cat(items, d)


def expand_dims(x: Tensor, /, axis: int = 0) -> Tensor:
    """``x`` with a new axis of size 1 at ``axis`` (in ``[-ndim - 1, ndim]``)."""
    array(x, "expand_dims")
    return shape_ops.unsqueeze(x, _axis(axis, x.ndim, "expand_dims", insert=True))


def flip(x: Tensor, /, *, axis: Any = None) -> Tensor:
    """``x`` with the order of elements along ``axis`` (all by default) reversed."""
    dims = axes(axis, array(x, "flip").ndim, "flip")
    return shape_ops.flip(x, dims) if dims else pw.clone(x)


def moveaxis(x: Tensor, source: Any, destination: Any, /) -> Tensor:
    """``x`` with the axes ``source`` moved to ``destination`` (ints or tuples of them)."""
    array(x, "moveaxis")
    src = [_axis(a, x.ndim, "moveaxis") for a in (source if isinstance(source, (tuple, list))
                                                   else (source,))]
    dst = [_axis(a, x.ndim, "moveaxis") for a in (destination
                                                   if isinstance(destination, (tuple, list))
                                                   else (destination,))]
    if len(src) != len(dst) or len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError("moveaxis: source and destination must be distinct axes of one "
                         "length")
    order = [a for a in range(x.ndim) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return shape_ops.permute(x, tuple(order))


def permute_dims(x: Tensor, /, axes: Sequence[int]) -> Tensor:
    """``x`` with its axes in the order ``axes`` (a permutation)."""
    array(x, "permute_dims")
    order = tuple(_axis(a, x.ndim, "permute_dims") for a in axes)
    if sorted(order) != list(range(x.ndim)):
        raise ValueError(f"permute_dims: {tuple(axes)} is not a permutation of "
                         f"{x.ndim} axes")
    return shape_ops.permute(x, order)


def reshape(x: Tensor, /, shape: Any, *, copy: builtins.bool | None = None) -> Tensor:
    """``x`` with a new shape of as many elements (one extent may be -1); ``copy=True``
    always copies, ``copy=False`` refuses (``ValueError``) where a view is impossible."""
    array(x, "reshape")
    size = shape if isinstance(shape, (tuple, list)) else (shape,)
    dims = tuple(operator.index(d) for d in size)
    if sum(d == -1 for d in dims) > 1 or any(d < -1 for d in dims):
        raise ValueError(f"reshape: invalid shape {dims}")
    out = shape_ops.reshape(x, dims)
    if copy:
        return pw.clone(out) if out is x or _shares(out, x) else out
    if copy is False and x.is_local and out.numel() and not _shares(out, x):
        raise ValueError("reshape: copy=False, but this reshape needs a copy")
    return out


def _shares(a: Tensor, b: Tensor) -> builtins.bool:
    return a.is_local and b.is_local and numpy.shares_memory(a.numpy(), b.numpy())


def roll(x: Tensor, /, shift: Any, *, axis: Any = None) -> Tensor:
    """``x`` with its elements shifted by ``shift`` along ``axis`` (None: flattened),
    wrapping around."""
    array(x, "roll")
    return face("roll")(x, shift, axis)


def squeeze(x: Tensor, /, axis: Any) -> Tensor:
    """``x`` without the size-1 axes ``axis`` (a ``ValueError`` for an axis of another
    size)."""
    dims = axes(axis, array(x, "squeeze").ndim, "squeeze")
    bad = [d for d in dims if x.shape[d] != 1]
    if bad:
        raise ValueError(f"squeeze: axis {bad[0]} has size {x.shape[bad[0]]}, not 1")
    return shape_ops.squeeze(x, dims) if dims else x


def stack(arrays: Any, /, *, axis: int = 0) -> Tensor:
    """The arrays (of one shape) joined along a new ``axis``, dtypes promoted."""
    items = _promoted(_arrays(arrays, "stack"))
    if len({tuple(a.shape) for a in items}) > 1:
        raise ValueError("stack: the arrays must have one shape, got "
                         + ", ".join(str(tuple(a.shape)) for a in items))
    return join.stack(items, _axis(axis, items[0].ndim, "stack", insert=True))


def unstack(x: Tensor, /, *, axis: int = 0) -> tuple[Tensor, ...]:
    """The slices of ``x`` along ``axis``, as a tuple."""
    array(x, "unstack")
    if x.ndim == 0:
        raise ValueError("unstack: needs an array of at least one dimension")
    d = _axis(axis, x.ndim, "unstack")
    return tuple(x[(slice(None),) * d + (i,)] for i in range(x.shape[d]))


def tile(x: Tensor, repetitions: Sequence[int], /) -> Tensor:
    """``x`` repeated ``repetitions[i]`` times along each axis (shorter tuples or arrays are
    padded with leading 1s).

    Examples:
        >>> from mpiflow import array_api as xp
        >>> xp.tile(xp.asarray([1, 2]), (2, 2)).tolist()
        [[1, 2, 1, 2], [1, 2, 1, 2]]
    """
    array(x, "tile")
    reps = tuple(operator.index(r) for r in repetitions)
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: repetitions must be non-negative, got {reps}")
    n = builtins.max(len(reps), x.ndim)
    reps = (1,) * (n - len(reps)) + reps
    shape = (1,) * (n - x.ndim) + tuple(x.shape)
    # (1, s0, 1, s1, ...) broadcast to (r0, s0, r1, s1, ...), then merged pairwise
    spread = shape_ops.reshape(x, tuple(v for s in shape for v in (1, s)))
    grown = pw.expand(spread, tuple(v for r, s in zip(reps, shape) for v in (r, s)))
    return shape_ops.reshape(grown, tuple(r * s for r, s in zip(reps, shape)))


def repeat(x: Tensor, repeats: Any, /, *, axis: int | None = None) -> Tensor:
    """Each element of ``x`` repeated ``repeats`` times (an int, or an array of one count per
    element) along ``axis`` (None: of the flattened ``x``).

    Examples:
        >>> from mpiflow import array_api as xp
        >>> xp.repeat(xp.asarray([1, 2]), 2).tolist()
        [1, 1, 2, 2]
    """
    array(x, "repeat")
    if axis is None:
        x = shape_ops.reshape(x, (-1,))
        d = 0
    else:
        d = _axis(axis, x.ndim, "repeat")
    if isinstance(repeats, Tensor):
        if repeats.ndim > 1 or repeats.dtype.numpy.kind not in "iu":
            raise ValueError("repeat: repeats must be an int or a 1-D integer array")
        if repeats.ndim == 1 and repeats.shape[0] not in (1, x.shape[d]):
            raise ValueError(f"repeat: {repeats.shape[0]} repeats for an axis of "
                             f"{x.shape[d]}")
        counts = repeats.numpy().reshape(-1)  # one count per row: the index is small
        if counts.size == 1:
            repeats = builtins.int(counts[0])
        else:
            if (counts < 0).any():
                raise ValueError("repeat: repeats must be non-negative")
            rows = numpy.repeat(numpy.arange(x.shape[d]), counts)
            return x[(slice(None),) * d + (rows,)]
    r = operator.index(repeats)
    if r < 0:
        raise ValueError(f"repeat: repeats must be non-negative, got {r}")
    shape = tuple(x.shape)
    spread = shape_ops.reshape(x, (*shape[:d + 1], 1, *shape[d + 1:]))
    grown = pw.expand(spread, (*shape[:d + 1], r, *shape[d + 1:]))
    return shape_ops.reshape(grown, (*shape[:d], shape[d] * r, *shape[d + 1:]))
