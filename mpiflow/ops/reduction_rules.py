"""Rules the reductions share: dims, reduced shapes, layout signatures, accumulation dtypes.

Used by :mod:`.reduction` (``sum``, ``max``, ...) and :mod:`.softmax` (``softmax``,
``logsumexp``, ``cumsum``): pure functions of shapes, dims and dtypes, plus :func:`unreduce`,
the gradient helper that puts reduced dims back.

Examples:
    >>> reduction_dims((-1, 0), 3), reduced_shape((4, 5, 6), dims=(0, 2), keepdim=False)
    ((0, 2), (5,))
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Sequence
from typing import Any

import numpy

from ..communication import ReduceOp
from ..dtypes import as_dtype
from ..layouts.sbp import Partial, Split
from ..tensors.tensor import Tensor
from .engine import Signature, apply

__all__ = ["P_SUM", "DimArg", "Dims", "Shape", "accumulator", "check_floating",
           "check_nonempty", "extreme_layouts", "integral_to_long", "kept_splits",
           "linear_layouts", "reduced_shape", "reduction_dims", "requested_dtype", "unreduce"]

Shape = tuple[int, ...]
Dims = tuple[int, ...]
DimArg = int | Sequence[int] | None
P_SUM = Partial(ReduceOp.SUM)


def reduction_dims(dim: DimArg, ndim: int) -> Dims:
    """``dim`` (an int, a sequence of ints, None or ``()`` for all) as sorted non-negative dims.

    Raises:
        IndexError: a dim outside ``[-ndim, ndim - 1]`` (a 0-d tensor accepts 0 and -1).
        ValueError: a dim given twice.
    """
    items: list[Any] = ([] if dim is None else list(dim) if isinstance(dim, (tuple, list))
                        else [dim])
    if not items:
        return tuple(range(ndim))
    bound = builtins.max(ndim, 1)
    out = []
    for item in items:
        d = operator.index(item)
        if not -bound <= d < bound:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-bound}, "
                             f"{bound - 1}], but got {d})")
        out.append(d % bound)
    if len(set(out)) != len(out):
        raise ValueError(f"dim {dim} names a dimension more than once")
    return tuple(sorted(d for d in out if d < ndim))


def reduced_shape(shape: Shape, *, dims: Dims, keepdim: bool, **_: Any) -> Shape:
    return tuple(1 if i in dims else n for i, n in enumerate(shape) if keepdim or i not in dims)


def kept_splits(shape: Shape, *, dims: Dims, keepdim: bool = True, **_: Any) -> list[Signature]:
    """``S(d) -> S(d')`` for every dimension ``d`` that is not reduced (``d'`` shifted down)."""
    return [((Split(d),), Split(d if keepdim else d - builtins.sum(r < d for r in dims)))
            for d in range(len(shape)) if d not in dims]


def linear_layouts(shape: Shape, *, dims: Dims, keepdim: bool, **_: Any) -> list[Signature]:
    """Sum-like reductions: a split reduced dim leaves partial sums; ``P -> P``."""
    return [*kept_splits(shape, dims=dims, keepdim=keepdim),
            *[((Split(d),), P_SUM) for d in dims], ((P_SUM,), P_SUM)]


def extreme_layouts(shape: Shape, *, dims: Dims, keepdim: bool, largest: bool, partial: bool,
                     **_: Any) -> list[Signature]:
    """``amax``/``amin``: a split reduced dim leaves ``P(max)``/``P(min)``, which stays one."""
    sigs = kept_splits(shape, dims=dims, keepdim=keepdim)
    if partial:
        p = Partial(ReduceOp.MAX if largest else ReduceOp.MIN)
        sigs += [*[((Split(d),), p) for d in dims], ((p,), p)]
    return sigs


def accumulator(dtype: numpy.dtype) -> numpy.dtype:
    """The dtype to accumulate in: float16 sums run in float32, as PyTorch does."""
    return numpy.dtype(numpy.float32) if dtype == numpy.float16 else dtype


def integral_to_long(dtype: numpy.dtype, *, out: numpy.dtype | None = None, **_: Any
                      ) -> numpy.dtype:
    """``sum``/``prod``/``cumsum``: bool and integers give int64 unless ``dtype`` is given."""
    if out is None and dtype.kind in "biu":
        return numpy.dtype(numpy.int64)
    return dtype if out is None else out


def check_floating(name: str, dtype: numpy.dtype) -> None:
    if dtype.kind not in "fc":
        raise TypeError(f"{name}(): could not infer output dtype. Input dtype must be either a "
                        f"floating point or complex dtype. Got: {dtype}")


def requested_dtype(dtype: Any) -> numpy.dtype | None:
    return None if dtype is None else as_dtype(dtype).numpy


def check_nonempty(name: str, input: Tensor, dims: Dims | None) -> None:
    """Reductions without an identity need elements; ``dims=None`` means all (flattened)."""
    if dims is None and input.numel() == 0:
        raise RuntimeError(f"{name}(): Expected reduction dim to be specified for "
                           "input.numel() == 0")
    for d in dims or ():
        if input.shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size")


# Gradient rules: ``rule(g, operands, result, **attrs)`` -> one gradient per operand (the third
# parameter is not called ``out``: that is the attribute naming a requested dtype).
def unreduce(g: Tensor, dims: Dims, keepdim: bool) -> Tensor:
    """``g`` (a reduction's gradient) with its reduced dims back as size 1, ready to broadcast."""
    from . import shape as sh

    if not keepdim:
        for d in dims:  # ascending: each insertion lands at its final position
            g = apply(sh.UNSQUEEZE, g, dim=d)
    return g
