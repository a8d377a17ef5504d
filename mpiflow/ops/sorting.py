"""Sorting along one dim: ``sort``, ``argsort``, ``msort``.

One op, ``sort``, gives the values and their indices along the dim (two outputs of one layout).
Layout rule, per mesh axis: a split of another dim stays a split (each rank sorts its columns);
and a split of the sorted dim stays a split, a collective signature: the kernel runs
:func:`mpiflow.algorithms.sort` (a sample sort: each value moves about once), so a sorted split
array is split the same way and nothing is gathered. The collective signature is offered where
the columns are few (at most :data:`~.layout_rules.COLUMNS`); with more, converting to a split
of another dim (one all-to-all) and sorting locally moves the same bytes in one collective
instead of one sort per column. Indices are global positions along the dim; the sort is stable.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy

from ..algorithms import gather_counts
from ..algorithms import sort as distributed_sort
from ..layouts.sbp import Split
from ..tensors.tape import is_grad_enabled
from ..tensors.tensor import Tensor, bind
from .engine import Context, OpDef, Signature, apply, apply_multi
from .layout_rules import few_columns, wrap_dim
from .reduction import PUT_ALONG

__all__ = ["argsort", "msort", "sort"]

Shape = tuple[int, ...]


def local_sort(xp: Any, a: Any, dim: int, descending: bool) -> tuple[Any, Any]:
    """Stable sort of one array along ``dim``: ``(values, int64 indices)``; descending keeps
    equal values in their order and puts NaN first, as torch does."""
    n = a.shape[dim]
    if descending:
        flipped = xp.flip(a, axis=dim)
        order = xp.flip(xp.argsort(flipped, axis=dim, kind="stable"), axis=dim)
        indices = (n - 1) - order
    else:
        indices = xp.argsort(a, axis=dim, kind="stable")
    return xp.take_along_axis(a, indices, axis=dim), indices.astype(numpy.int64, copy=False)


def _sort_kernel(ctx: Context, a: Any, *, dim: int, descending: bool, **_: Any
                 ) -> tuple[Any, Any]:
    if a.ndim == 0:
        return a.copy(), ctx.xp.zeros((), dtype=numpy.int64)
    if ctx.comm is None:
        return local_sort(ctx.xp, a, dim, descending)
    assert ctx.out_sbp is not None
    counts = ctx.extents(ctx.global_shape, ctx.out_sbp, dim)
    values, indices = distributed_sort(a, ctx.comm, dim, counts, descending=descending,
                                       indices=True)
    return values, indices


def _splits_of_others(shape: Shape, *, dim: int, **_: Any) -> list[Signature]:
    return [((Split(d),), Split(d)) for d in range(len(shape)) if d != dim]


def _split_sorted(shape: Shape, *, dim: int, **_: Any) -> list[Signature]:
    return [((Split(dim),), Split(dim))] if few_columns(shape, dim) else []


def _sort_grad(g: Tensor, operands: Any, out: Tensor, *, dim: int, outputs: Any, **_: Any
               ) -> tuple[Tensor]:
    """Each value's gradient goes back to where it came from: ``g`` put at the indices."""
    x = operands[0]
    if x.ndim == 0:
        return (g,)
    return (apply(PUT_ALONG, g, outputs[1], dim=dim, keepdim=True, size=tuple(x.shape)),)


SORT = OpDef("sort", _sort_kernel, lambda shape, **_: shape, _splits_of_others,
             lambda dtype, **_: (dtype, numpy.dtype(numpy.int64)), _sort_grad,
             collective=_split_sorted, outputs=2)


def _sort_values_kernel(ctx: Context, a: Any, *, dim: int, descending: bool) -> Any:
    xp = ctx.xp
    if a.ndim == 0:
        return a.copy()
    if ctx.comm is None:
        out = xp.sort(a, axis=dim)
        return xp.flip(out, axis=dim) if descending else out  # NaN first when descending
    assert ctx.out_sbp is not None
    counts = ctx.extents(ctx.global_shape, ctx.out_sbp, dim)
    return distributed_sort(a, ctx.comm, dim, counts, descending=descending)[0]


# The values alone (no indices, no gradient): equal values are interchangeable, so the
# distributed sort cuts its buckets by selection and never sorts row numbers along.
SORT_VALUES = OpDef("sort_values", _sort_values_kernel, lambda shape, **_: shape,
                    _splits_of_others, collective=_split_sorted)


# -- the flattened input sorted: the first step of unique -------------------------------------
def _flat_sort_kernel(ctx: Context, a: Any, **_: Any) -> Any:
    flat = a.reshape(-1)
    if ctx.comm is None:
        return ctx.xp.sort(flat)
    assert ctx.out_sbp is not None
    counts = gather_counts(ctx.comm, int(flat.shape[0]))
    return distributed_sort(flat, ctx.comm, 0, counts,
                            out_counts=ctx.extents(ctx.global_shape, ctx.out_sbp, 0))[0]


def _flat_argsort_kernel(ctx: Context, a: Any, **_: Any) -> tuple[Any, Any]:
    flat = a.reshape(-1)
    if ctx.comm is None:
        return local_sort(ctx.xp, flat, 0, False)
    assert ctx.out_sbp is not None
    counts = gather_counts(ctx.comm, int(flat.shape[0]))
    return distributed_sort(flat, ctx.comm, 0, counts, indices=True,
                            out_counts=ctx.extents(ctx.global_shape, ctx.out_sbp, 0))


def _flat(shape: Shape, **_: Any) -> Shape:
    return (math.prod(shape),)


def _any_split_to_flat(shape: Shape, **_: Any) -> list[Signature]:
    """Values alone: every rank's elements are some of the values, whatever the split."""
    return [((Split(d),), Split(0)) for d in range(len(shape))]


def _first_split_to_flat(shape: Shape, **_: Any) -> list[Signature]:
    """With positions: a split of dim 0 holds consecutive runs of the flattened elements."""
    return [((Split(0),), Split(0))] if shape else []


# The flattened input, ascending (NaN last), split as it was (values only)
FLAT_SORT = OpDef("flat_sort", _flat_sort_kernel, _flat, lambda shape, **_: [],
                  collective=_any_split_to_flat)
# ... with each value's position in the flattened input (a stable sort)
FLAT_ARGSORT = OpDef("flat_argsort", _flat_argsort_kernel, _flat, lambda shape, **_: [],
                     lambda dtype, **_: (dtype, numpy.dtype(numpy.int64)),
                     collective=_first_split_to_flat, outputs=2)


def _check(input: Tensor, name: str) -> None:
    if input.dtype.numpy.kind == "c":
        raise TypeError(f"{name}: complex values have no order; sort their real or imaginary "
                        "part, or their absolute value")


def sort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False
         ) -> tuple[Tensor, Tensor]:
    """The values along ``dim`` in order, and their indices (torch's ``sort``).

    Args:
        input: a real tensor.
        dim: the dim to sort along; a global tensor split along it stays split (a
            distributed sample sort).
        descending: largest first (NaN first), else smallest first (NaN last).
        stable: accepted for torch's signature; the sort is always stable (equal values keep
            their order).

    Returns:
        ``(values, indices)``: tensors of ``input``'s shape and layout; ``indices`` (int64)
        are positions along ``dim`` of the whole tensor.

    Examples:
        >>> values, indices = flow.sort(flow.tensor([3.0, 1.0, 2.0]))
        >>> values.tolist(), indices.tolist()
        ([1.0, 2.0, 3.0], [1, 2, 0])
    """
    _check(input, "sort")
    values, indices = apply_multi(SORT, input, dim=wrap_dim(operator.index(dim), input.ndim),
                            descending=bool(descending))
    return values, indices


def argsort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False
            ) -> Tensor:
    """The indices that sort ``input`` along ``dim`` (torch's ``argsort``; see :func:`sort`).

    Examples:
        >>> flow.argsort(flow.tensor([3, 1, 2]), descending=True).tolist()
        [0, 2, 1]
    """
    return sort(input, dim, descending, stable)[1]


def msort(input: Tensor) -> Tensor:
    """``input`` sorted along its first dim (torch's ``msort``).

    Where no gradient is asked for, only the values are sorted (no indices): the fastest
    distributed sort of a split array.

    Examples:
        >>> flow.msort(flow.tensor([[2, 1], [1, 3]])).tolist()
        [[1, 1], [2, 3]]
    """
    _check(input, "msort")
    if input.requires_grad and is_grad_enabled():
        return sort(input, 0)[0]
    return apply(SORT_VALUES, input, dim=0, descending=False)


bind({_name: globals()[_name] for _name in __all__})
