"""Sets: ``unique``, ``unique_consecutive``, ``isin``.

``unique`` is a chain of ops that each keep a split a split:

1. ``flat_sort`` (``flat_argsort`` where the inverse is asked for): the flattened input by the
   distributed sample sort, split along its one dim;
2. ``run_starts``: where a value differs from the one before (a halo of one element);
3. the number of runs, one all-reduce (``sum``): the length of the result, which every rank
   must know before the next op lays it out;
4. ``unique_runs``: each run's value and length, moved to balanced parts (a ``fetch`` of the
   runs' first elements and a halo of one);
5. with ``return_inverse``, ``run_ids`` (a distributed scan of the starts) and
   ``unique_inverse``, which sends each sorted element's run number back to the element's
   place in the input (:func:`mpiflow.algorithms.put`).

``unique_consecutive`` is steps 2 to 5 on the input as it is (its inverse is ``run_ids``).
``isin`` of split elements and split test elements sorts the test elements (values only) and
sends each element to the rank whose part decides it (:func:`mpiflow.algorithms.isin`).

Layouts: broadcast inputs give broadcast results (each rank computes them); split ones give
split results (the values and counts balanced, the inverse split as the input); a partial
input is converted first. NaN values are each unique (torch's rule).
"""

from __future__ import annotations

import math
from typing import Any

import numpy

from ..algorithms import compact_runs, gather_counts, put, run_ids, run_starts
from ..algorithms import isin as distributed_isin
from ..algorithms.runs import starts_of
from ..layouts.sbp import Split
from ..tensors.tensor import Tensor, bind
from .engine import B, Context, OpDef, Signature, apply, apply_multi
from .reduction import sum
from .searching import number_like
from .sorting import FLAT_ARGSORT, FLAT_SORT

__all__ = ["isin", "unique", "unique_consecutive"]

Shape = tuple[int, ...]
_INT64 = numpy.dtype(numpy.int64)


def _flat_counts(ctx: Context, shape: Shape) -> list[int]:
    """Elements each rank of ``ctx.comm`` holds of a ``shape`` split along dim 0 (as the
    output, of that shape)."""
    assert ctx.out_sbp is not None
    inner = math.prod(shape[1:])
    return [c * inner for c in ctx.extents(shape, ctx.out_sbp, 0)]


def _first_split(shape: Shape, *_: Shape, **__: Any) -> list[Signature]:
    """Ops on the flattened order: a split of dim 0 holds consecutive runs of it."""
    return [((Split(0),) * (1 + len(_)), Split(0))] if shape else []


def _no_layouts(*_: Shape, **__: Any) -> list[Signature]:
    return []


# -- runs ----------------------------------------------------------------------------------------
def _run_starts_kernel(ctx: Context, a: Any) -> Any:
    flat = a.reshape(-1)
    if ctx.comm is None:
        return starts_of(ctx.xp, flat).reshape(a.shape)
    return run_starts(flat, ctx.comm, _flat_counts(ctx, ctx.global_shape)).reshape(a.shape)


RUN_STARTS = OpDef("run_starts", _run_starts_kernel, lambda shape: shape, _no_layouts,
                   lambda dtype: numpy.dtype(bool), collective=_first_split)


def _run_ids_kernel(ctx: Context, starts: Any) -> Any:
    flat = starts.reshape(-1)
    if ctx.comm is None:
        return (ctx.xp.cumsum(flat, dtype=numpy.int64) - 1).reshape(starts.shape)
    return run_ids(flat, ctx.comm).reshape(starts.shape)


RUN_IDS = OpDef("run_ids", _run_ids_kernel, lambda shape: shape, _no_layouts,
                lambda dtype: _INT64, collective=_first_split)


def _unique_runs_kernel(ctx: Context, a: Any, starts: Any, *, size: int) -> tuple[Any, Any]:
    xp = ctx.xp
    flat, flags = a.reshape(-1), starts.reshape(-1)
    if ctx.comm is None:
        first = xp.nonzero(flags)[0]
        ends = xp.concatenate([first[1:], xp.asarray([flat.shape[0]], dtype=first.dtype)])
        return flat[flags], (ends - first).astype(numpy.int64)
    assert ctx.out_sbp is not None
    counts = gather_counts(ctx.comm, int(flat.shape[0]))
    return compact_runs(flat, flags, ctx.comm, counts,
                        ctx.extents(ctx.global_shape, ctx.out_sbp, 0))


# The value of each run (the elements where ``starts``, in flattened order) and its length.
UNIQUE_RUNS = OpDef("unique_runs", _unique_runs_kernel, lambda x, starts, *, size: (size,),
                    _no_layouts, lambda dtype, starts, **_: (dtype, _INT64),
                    collective=_first_split, outputs=2)


def _inverse_kernel(ctx: Context, ids: Any, positions: Any, *, size: Shape) -> Any:
    xp = ctx.xp
    if ctx.comm is None:
        out = xp.empty(math.prod(size), dtype=numpy.int64)
        out[positions] = ids
        return out.reshape(size)
    out = put(ids, ctx.comm, 0, positions, _flat_counts(ctx, size), accumulate=False)
    return out.reshape(ctx.out_shape)


def _inverse_split(ids: Shape, positions: Shape, *, size: Shape) -> list[Signature]:
    return [((Split(0), Split(0)), Split(0))] if size else []


# ``ids`` written at the flattened ``positions`` of a tensor of shape ``size``.
UNIQUE_INVERSE = OpDef("unique_inverse", _inverse_kernel, lambda ids, pos, *, size: size,
                       _no_layouts, lambda *_, **__: _INT64, collective=_inverse_split)


def _runs(x: Tensor, starts: Tensor) -> tuple[Tensor, Tensor]:
    size = int(sum(starts).item())  # one all-reduce where split: every rank learns the length
    return apply_multi(UNIQUE_RUNS, x, starts, size=size)  # type: ignore[return-value]


def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False,
           return_counts: bool = False, dim: int | None = None) -> Any:
    """The distinct elements of ``input``, ascending (torch's ``unique``, flattened).

    Args:
        input: a tensor of any shape.
        sorted: accepted for torch's signature; the result is always sorted.
        return_inverse: also return, for each element of ``input``, the index of its value.
        return_counts: also return how many times each value occurs.
        dim: must be None (unique slices along a dim are not supported).

    Returns:
        ``values`` alone, or the tuple of ``values``, ``inverse`` (``input``'s shape) and
        ``counts`` asked for. Where ``input`` is split, ``values`` and ``counts`` are split in
        balanced parts and ``inverse`` is split as ``input``; nothing is gathered.

    Examples:
        >>> values, counts = flow.unique(flow.tensor([3, 1, 3]), return_counts=True)
        >>> values.tolist(), counts.tolist()
        ([1, 3], [1, 2])
    """
    if dim is not None:
        raise NotImplementedError("unique(dim=...): unique slices along a dim are not "
                                  "supported; flatten the tensor or pass dim=None")
    x = input.detach()
    if return_inverse:
        ordered, positions = apply_multi(FLAT_ARGSORT, x)
    else:
        ordered = apply(FLAT_SORT, x)
    starts = apply(RUN_STARTS, ordered)
    values, counts = _runs(ordered, starts)
    out = [values]
    if return_inverse:
        out.append(apply(UNIQUE_INVERSE, apply(RUN_IDS, starts), positions,
                         size=tuple(x.shape)))
    if return_counts:
        out.append(counts)
    return values if len(out) == 1 else tuple(out)


def unique_consecutive(input: Tensor, return_inverse: bool = False,
                       return_counts: bool = False, dim: int | None = None) -> Any:
    """The first element of each run of equal consecutive elements (flattened).

    Args:
        input: a tensor of any shape.
        return_inverse: also return each element's run number (``input``'s shape).
        return_counts: also return each run's length.
        dim: must be None.

    Returns:
        As :func:`unique`; where ``input`` is split along dim 0 nothing is gathered (a halo
        of one element finds the runs).

    Examples:
        >>> flow.unique_consecutive(flow.tensor([1, 1, 2, 1])).tolist()
        [1, 2, 1]
    """
    if dim is not None:
        raise NotImplementedError("unique_consecutive(dim=...): runs of slices along a dim "
                                  "are not supported; pass dim=None")
    x = input.detach()
    starts = apply(RUN_STARTS, x)
    values, counts = _runs(x, starts)
    out = [values]
    if return_inverse:
        out.append(apply(RUN_IDS, starts))
    if return_counts:
        out.append(counts)
    return values if len(out) == 1 else tuple(out)


# -- isin ----------------------------------------------------------------------------------------
def _isin_kernel(ctx: Context, elements: Any, test: Any, *, invert: bool) -> Any:
    xp = ctx.xp
    if ctx.comm is not None:
        return distributed_isin(elements, test, ctx.comm, invert=invert)
    common = numpy.result_type(elements.dtype, test.dtype)
    return xp.isin(elements.astype(common, copy=False), test.astype(common, copy=False),
                   invert=invert)


def _isin_layouts(elements: Shape, test: Shape, **_: Any) -> list[Signature]:
    return [((Split(d), B), Split(d)) for d in range(len(elements))]


def _isin_collective(elements: Shape, test: Shape, **_: Any) -> list[Signature]:
    if not elements:
        return [((B, Split(e)), B) for e in range(len(test))]
    return [((Split(d), Split(e)), Split(d)) for d in range(len(elements))
            for e in range(len(test))]


ISIN = OpDef("isin", _isin_kernel, lambda elements, test, **_: elements, _isin_layouts,
             lambda *_, **__: numpy.dtype(bool), collective=_isin_collective)


def isin(elements: Any, test_elements: Any, *, assume_unique: bool = False,
         invert: bool = False) -> Tensor:
    """Whether each of ``elements`` is among ``test_elements`` (torch's ``isin``).

    Args:
        elements: a tensor or a number.
        test_elements: a tensor or a number.
        assume_unique: accepted for torch's signature (the result does not depend on it).
        invert: whether each is *not* among them.

    Returns:
        A bool tensor of ``elements``' shape (split as ``elements``). Where both are split,
        the test elements are sorted across the ranks and each element is asked of the one
        rank whose part could hold it: neither is gathered.

    Examples:
        >>> flow.isin(flow.tensor([1, 2, 3]), flow.tensor([3, 1])).tolist()
        [True, False, True]
    """
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin(): elements or test_elements must be a tensor")
    like = elements if isinstance(elements, Tensor) else test_elements
    a = elements if isinstance(elements, Tensor) else number_like(like, elements)
    b = test_elements if isinstance(test_elements, Tensor) else number_like(like,
                                                                             test_elements)
    return apply(ISIN, a.detach(), b.detach(), invert=bool(invert))


bind({"unique": unique, "unique_consecutive": unique_consecutive})
