"""Cumulative ops along one dim: ``cumsum``.

Layout rule, per mesh axis: a split of another dim stays a split; a partial sum stays one (the
scan is linear); and a split of the scanned dim stays a split too, a collective signature: the
kernel runs :func:`mpiflow.algorithms.scan` (each rank scans its rows, one all-gather of the
shards' totals), so no row moves and a 1-D array is never gathered.
"""

from __future__ import annotations

import operator
from typing import Any

from ..algorithms import scan
from ..layouts.sbp import Split
from ..tensors.tensor import Tensor, bind
from .engine import Context, OpDef, Signature, apply
from .reduction_rules import (
    P_SUM,
    Dims,
    Shape,
    accumulator,
    integral_to_long,
    kept_splits,
    reduction_dims,
    requested_dtype,
)

__all__ = ["cumsum"]


def _unchanged(shape: Shape, **_: Any) -> Shape:
    return shape


def _cumsum_kernel(ctx: Context, a: Any, *, dims: Dims, reverse: bool = False, **_: Any
                   ) -> Any:
    if not dims:  # a 0-d input
        return a.astype(ctx.out_dtype)
    a = a.astype(accumulator(ctx.out_dtype), copy=False)
    if ctx.comm is None:
        from ..algorithms.scans import local_scan

        return local_scan(a, dims[0], "sum", reverse=reverse)
    return scan(a, ctx.comm, dims[0], "sum", reverse=reverse)


def _cumsum_layouts(shape: Shape, *, dims: Dims, **_: Any) -> list[Signature]:
    return [*kept_splits(shape, dims=dims), ((P_SUM,), P_SUM)]


def _scanned_split(shape: Shape, *, dims: Dims, **_: Any) -> list[Signature]:
    return [((Split(dims[0]),), Split(dims[0]))] if dims else []


def _cumsum_grad(g: Tensor, operands: Any, result: Tensor, *, dims: Dims,
                 reverse: bool = False, **_: Any) -> tuple[Tensor]:
    """The running sum in the other direction."""
    if not dims:
        return (g,)
    return (apply(CUMSUM, g, dims=dims, out=None, reverse=not reverse),)


CUMSUM = OpDef("cumsum", _cumsum_kernel, _unchanged, _cumsum_layouts, integral_to_long,
               _cumsum_grad, collective=_scanned_split)


def cumsum(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """Running sums along ``dim``; bool and integers give int64 unless ``dtype`` is given.

    Args:
        input: the tensor.
        dim: the dimension to accumulate along; a global tensor split along it stays split
            (a distributed scan: each rank sends one slice of totals).
        dtype: the dtype to compute in and return.

    Returns:
        A tensor of ``input``'s shape and layout (a partial sum stays one).

    Examples:
        >>> flow.cumsum(flow.tensor([1, 2, 3]), dim=0).tolist()
        [1, 3, 6]
    """
    return apply(CUMSUM, input, dims=reduction_dims(operator.index(dim), input.ndim),
                 out=requested_dtype(dtype))


bind({_name: globals()[_name] for _name in __all__})
