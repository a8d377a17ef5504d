"""Selection along one dim: ``topk``, ``kthvalue``, ``median``, ``nanmedian``, ``mode``.

Layout rule, per mesh axis: a split of another dim stays a split (each rank selects in its
columns). A split of the selected dim is a collective signature where the columns are few
(:data:`~.layout_rules.COLUMNS`): ``topk`` keeps it (``S(dim) -> S(dim)``: each rank's own top
k, a selection across ranks of the k-th value, a distributed sort of the k rows kept), the
others give a broadcast result (``S(dim) -> B``: the value by distributed selection,
:func:`mpiflow.algorithms.kth_values`, with no sort; ``mode`` by a distributed sort and the
ranks' runs). ``median``/``nanmedian`` without a dim take any split (only values, in any order,
matter). Nothing is gathered.

Indices: of the element that a stable sort puts at the selected position (for ``topk``, equal
values in order of position; for ``mode``, the last occurrence). torch's CPU kernels pick
among equal values as their quickselect happens to; where the values are distinct the indices
are the same.

Gradients go to the indices (:data:`~.reduction.PUT_ALONG`, a distributed scatter along a
split dim); ``median`` of all elements splits it among the elements equal to the median.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy

from ..algorithms import kth_values
from ..algorithms import mode as distributed_mode
from ..algorithms import topk as distributed_topk
from ..algorithms.runs import local_mode
from ..algorithms.selection import lines
from ..layouts.sbp import Split
from ..tensors.tensor import Tensor, bind
from . import pointwise as pw
from .engine import B, Context, OpDef, Signature, apply, apply_multi
from .layout_rules import few_columns, wrap_dim
from .reduction import PUT_ALONG, MaxResult, sum
from .reduction_rules import check_nonempty, kept_splits, reduced_shape
from .sorting import local_sort

__all__ = ["kthvalue", "median", "mode", "nanmedian", "topk"]

Shape = tuple[int, ...]
_INT64 = numpy.dtype(numpy.int64)


def _with_indices(dtype: numpy.dtype, **_: Any) -> tuple[numpy.dtype, numpy.dtype]:
    return dtype, _INT64


def _reshaped(xp: Any, flat: Any, shape: Shape, dim: int, keepdim: bool) -> Any:
    """Per-column results (a host or device vector) as the reduced shard of ``shape``."""
    inner = tuple(n for d, n in enumerate(shape) if d != dim)
    out = xp.asarray(flat).reshape(inner)
    return xp.expand_dims(out, dim) if keepdim else out


# -- topk ----------------------------------------------------------------------------------------
def _topk_shape(shape: Shape, *, dim: int, k: int, **_: Any) -> Shape:
    return tuple(k if d == dim else n for d, n in enumerate(shape))


def _topk_kernel(ctx: Context, a: Any, *, dim: int, k: int, largest: bool) -> tuple[Any, Any]:
    if ctx.comm is None:
        values, indices = local_sort(ctx.xp, a, dim, largest)
        at = tuple(slice(0, k) if d == dim else slice(None) for d in range(a.ndim))
        return values[at], indices[at]
    assert ctx.out_sbp is not None
    return distributed_topk(a, ctx.comm, dim, k, largest=largest,
                            out_counts=ctx.extents(ctx.global_shape, ctx.out_sbp, dim))


def _others(shape: Shape, *, dim: int, **_: Any) -> list[Signature]:
    return [((Split(d),), Split(d)) for d in range(len(shape)) if d != dim]


def _topk_collective(shape: Shape, *, dim: int, **_: Any) -> list[Signature]:
    return [((Split(dim),), Split(dim))] if few_columns(shape, dim) else []


def _to_indices(g: Tensor, operands: Any, out: Tensor, *, dim: int, outputs: Any,
                keepdim: bool = True, **_: Any) -> tuple[Tensor]:
    """The gradient of a selection goes to the selected elements."""
    return (apply(PUT_ALONG, g, outputs[1], dim=dim, keepdim=keepdim,
                  size=tuple(operands[0].shape)),)


TOPK = OpDef("topk", _topk_kernel, _topk_shape, _others, _with_indices, _to_indices,
             collective=_topk_collective, outputs=2)


def _check_real(input: Tensor, name: str) -> None:
    if input.dtype.numpy.kind in "cb":
        raise TypeError(f"{name}(): expected a real tensor of numbers, got {input.dtype}")


def _as_vector(input: Tensor, dim: int | None) -> tuple[Tensor, int, bool]:
    """A 0-d input as one element along dim 0 (its only dim, as torch wraps it)."""
    if input.ndim == 0:
        wrap_dim(operator.index(dim or 0), 0)
        return input.reshape(1), 0, True
    return input, wrap_dim(operator.index(-1 if dim is None else dim), input.ndim), False


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True
         ) -> MaxResult:
    """The ``k`` largest (or smallest) elements along ``dim``, in order, and their indices.

    Args:
        input: a real tensor.
        k: how many (``0 <= k <= input.shape[dim]``).
        dim: the dim to select along; a global tensor split along it stays split (a
            distributed selection and a sort of the ``k`` kept).
        largest: the largest (NaN largest), else the smallest.
        sorted: accepted for torch's signature; the result is always sorted.

    Returns:
        ``(values, indices)``: ``input``'s shape with ``k`` along ``dim``.

    Raises:
        RuntimeError: ``k`` outside ``[0, input.shape[dim]]``, on every rank.

    Examples:
        >>> flow.topk(flow.tensor([1.0, 3.0, 2.0]), 2)
        MaxResult(values=tensor([3., 2.]), indices=tensor([1, 2]))
    """
    _check_real(input, "topk")
    x, d, scalar = _as_vector(input, dim)
    k = operator.index(k)
    if not 0 <= k <= x.shape[d]:
        raise RuntimeError(f"topk(): selected index k out of range (k={k}, "
                           f"{x.shape[d]} elements along dim {d})")
    values, indices = apply_multi(TOPK, x, dim=d, k=k, largest=bool(largest))
    if scalar:
        values, indices = values.reshape(()), indices.reshape(())
    return MaxResult(values, indices)


# -- kthvalue, median, nanmedian -----------------------------------------------------------------
def _local_kth(xp: Any, a: Any, dim: int, k: int, rule: str) -> tuple[Any, Any]:
    matrix = lines(a, dim)
    n, width = matrix.shape
    valid = n - (xp.count_nonzero(xp.isnan(matrix), axis=0) if matrix.dtype.kind == "f"
                 else xp.zeros(width, dtype=numpy.int64))
    if rule == "k":
        positions = xp.full(width, k - 1, dtype=numpy.int64)
    elif rule == "median":
        positions = xp.where(valid < n, valid, (n - 1) // 2)
    else:
        positions = xp.where(valid > 0, (valid - 1) // 2, 0)
    order = xp.argsort(matrix, axis=0, kind="stable")
    columns = xp.arange(width)
    rows = order[positions, columns]
    return matrix[rows, columns], rows.astype(numpy.int64)


def _kth_kernel(ctx: Context, a: Any, *, dim: int, keepdim: bool, rule: str, k: int = 0
                ) -> tuple[Any, Any]:
    if ctx.comm is None:
        values, rows = _local_kth(ctx.xp, a, dim, k, rule)
    else:
        values, rows = kth_values(a, ctx.comm, dim, k, rule=rule)
    return (_reshaped(ctx.xp, values, a.shape, dim, keepdim),
            _reshaped(ctx.xp, rows, a.shape, dim, keepdim))


def _reduced(shape: Shape, *, dim: int, keepdim: bool, **_: Any) -> Shape:
    return reduced_shape(shape, dims=(dim,), keepdim=keepdim)


def _kept(shape: Shape, *, dim: int, keepdim: bool, **_: Any) -> list[Signature]:
    return kept_splits(shape, dims=(dim,), keepdim=keepdim)


def _selected_split(shape: Shape, *, dim: int, **_: Any) -> list[Signature]:
    return [((Split(dim),), B)] if few_columns(shape, dim) else []


KTHVALUE = OpDef("kthvalue", _kth_kernel, _reduced, _kept, _with_indices, _to_indices,
                 collective=_selected_split, outputs=2)
MEDIAN = OpDef("median", _kth_kernel, _reduced, _kept, _with_indices, _to_indices,
               collective=_selected_split, outputs=2)
NANMEDIAN = OpDef("nanmedian", _kth_kernel, _reduced, _kept, _with_indices, _to_indices,
                  collective=_selected_split, outputs=2)


def _median_all_kernel(ctx: Context, a: Any, *, rule: str) -> Any:
    flat = a.reshape(-1)
    if ctx.comm is None:
        return _local_kth(ctx.xp, flat, 0, 0, rule)[0].reshape(())
    return ctx.xp.asarray(kth_values(flat, ctx.comm, 0, rule=rule, rows=False)[0]).reshape(())


def _any_split(shape: Shape, **_: Any) -> list[Signature]:
    return [((Split(d),), B) for d in range(len(shape))]


def _median_all_grad(g: Tensor, operands: Any, out: Tensor, **_: Any) -> tuple[Tensor]:
    """Split evenly among the elements equal to the median (torch: deterministic subgradients
    of ``median()`` without a dim)."""
    x = operands[0]
    hit = pw.eq(x, out).to(g.dtype)
    return (pw.mul(g, pw.div(hit, sum(hit))),)


MEDIAN_ALL = {rule: OpDef(f"{rule}_all", _median_all_kernel, lambda shape, **_: (),
                          lambda shape, **_: [], lambda dtype, **_: dtype, _median_all_grad,
                          collective=_any_split)
              for rule in ("median", "nanmedian")}


def _select(op: OpDef, name: str, input: Tensor, dim: int, keepdim: bool, **attrs: Any
            ) -> MaxResult:
    _check_real(input, name)
    x, d, scalar = _as_vector(input, dim)
    check_nonempty(name, x, (d,))
    values, indices = apply_multi(op, x, dim=d, keepdim=bool(keepdim) and not scalar, **attrs)
    if scalar:
        values, indices = values.reshape(()), indices.reshape(())
    return MaxResult(values, indices)


def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> MaxResult:
    """The ``k``-th smallest element along ``dim`` (NaN largest) and its index.

    Args:
        input: a real tensor.
        k: 1-based, at most ``input.shape[dim]``.
        dim: the dim to select along; a global tensor split along it is selected in place
            (a distributed selection; the result is broadcast).
        keepdim: keep ``dim`` with size 1.

    Returns:
        ``(values, indices)``; the index is that of the element a stable sort puts k-th.

    Raises:
        RuntimeError: ``k`` outside ``[1, input.shape[dim]]``, on every rank.

    Examples:
        >>> flow.kthvalue(flow.tensor([3.0, 1.0, 2.0]), 2)
        MaxResult(values=tensor(2.), indices=tensor(2))
    """
    x, d, _ = _as_vector(input, dim)
    k = operator.index(k)
    if not 1 <= k <= x.shape[d]:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d} "
                           f"(k={k}, {x.shape[d]} elements)")
    return _select(KTHVALUE, "kthvalue", input, dim, keepdim, rule="k", k=k)


def _median(name: str, input: Tensor, dim: int | None, keepdim: bool) -> Any:
    if dim is not None:
        return _select(MEDIAN if name == "median" else NANMEDIAN, name, input, dim, keepdim,
                       rule=name)
    _check_real(input, name)
    if input.numel() == 0:
        raise RuntimeError(f"{name}(): input tensor must be non-empty")
    return apply(MEDIAN_ALL[name], input, rule=name)


def median(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
    """The median: the lower of the two middle values (torch's ``median``; NaN if any is NaN).

    Args:
        input: a real tensor.
        dim: None: of all elements (a 0-d tensor); else along ``dim``, with indices.
        keepdim: keep ``dim`` with size 1.

    Returns:
        A 0-d tensor, or ``(values, indices)`` along ``dim`` (the index of the first NaN
        where a slice has one). A global tensor split along ``dim`` (any dim when ``dim`` is
        None) is not gathered: a distributed selection, the result broadcast.

    Examples:
        >>> flow.median(flow.tensor([4.0, 1.0, 3.0, 2.0]))
        tensor(2.)
    """
    return _median("median", input, dim, keepdim)


def nanmedian(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
    """:func:`median` of the values that are not NaN (NaN where all are).

    Examples:
        >>> flow.nanmedian(flow.tensor([4.0, float("nan"), 3.0]))
        tensor(3.)
    """
    return _median("nanmedian", input, dim, keepdim)


# -- mode ----------------------------------------------------------------------------------------
def _mode_kernel(ctx: Context, a: Any, *, dim: int, keepdim: bool) -> tuple[Any, Any]:
    if ctx.comm is None:
        values, rows = local_mode(ctx.xp, lines(a, dim))
    else:
        values, rows = distributed_mode(a, ctx.comm, dim)
    return (_reshaped(ctx.xp, values, a.shape, dim, keepdim),
            _reshaped(ctx.xp, rows, a.shape, dim, keepdim))


MODE = OpDef("mode", _mode_kernel, _reduced, _kept, _with_indices, _to_indices,
             collective=_selected_split, outputs=2)


def mode(input: Tensor, dim: int = -1, keepdim: bool = False) -> MaxResult:
    """The most frequent value along ``dim`` (the smallest of those) and the index of its last
    occurrence (torch's ``mode``).

    Each NaN counts as a value of its own, larger than all others (torch's result with NaN
    depends on its sort's order of NaNs; this one is defined).

    Args:
        input: a real tensor.
        dim: the dim; a global tensor split along it is not gathered (a distributed sort,
            then the ranks' runs merged), the result broadcast.
        keepdim: keep ``dim`` with size 1.

    Returns:
        ``(values, indices)``.

    Examples:
        >>> flow.mode(flow.tensor([2, 1, 2, 3]))
        MaxResult(values=tensor(2), indices=tensor(2))
    """
    return _select(MODE, "mode", input, dim, keepdim)


bind({_name: globals()[_name] for _name in __all__})
