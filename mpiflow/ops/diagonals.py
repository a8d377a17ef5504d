"""``diagonal`` and ``trace``: a diagonal of two dims, kept distributed.

Element ``t`` of the ``offset``-th diagonal of dims ``(dim1, dim2)`` is
``input[..., t + c1, ..., t + c2, ...]`` (``c1 = max(-offset, 0)``, ``c2 = max(offset, 0)``);
the result has the other dims, then the diagonal last (torch's ``diagonal``).

Layout rules, per mesh axis: a split of another dim stays a split (renumbered); a partial
layout stays partial (the op only selects elements); and a split of ``dim1`` is a collective
signature: each rank takes the diagonal entries in its own rows (no communication), then the
entries that cross the balanced split of the diagonal move (:func:`mpiflow.algorithms
.rebalance`, one all-to-all of at most one row per rank's boundary). A split of ``dim2`` is the
same diagonal of the swapped dims (``offset`` negated), so :func:`diagonal` swaps them: no
matrix is ever gathered or transposed.

The gradient is ``diagonal_grad`` (zeros with the gradient on the diagonal), whose layout rules
are the mirror image: its split diagonal becomes a split of ``dim1`` by one
:func:`mpiflow.algorithms.fetch` of the entries each rank's rows hold.

Examples:
    >>> x = flow.tensor([[1, 2, 3], [4, 5, 6]])
    >>> flow.diagonal(x).tolist(), flow.diagonal(x, 1).tolist(), flow.trace(x).item()
    ([1, 5], [2, 6], 6)
"""

from __future__ import annotations

import operator
from typing import Any

from ..algorithms import fetch, rebalance
from ..algorithms.ranges import offsets
from ..layouts.sbp import Split, partial_sum
from ..tensors.tensor import Tensor, bind
from .engine import Context, OpDef, Signature, apply
from .gathers import split_on_comm
from .layout_rules import keep_partial, wrap_dim

__all__ = ["diagonal", "trace"]

Shape = tuple[int, ...]


def diagonal_length(n1: int, n2: int, offset: int) -> int:
    """Entries of the ``offset``-th diagonal of an ``n1 x n2`` matrix.

    Examples:
        >>> diagonal_length(3, 5, 1), diagonal_length(3, 5, -2), diagonal_length(3, 5, 9)
        (3, 1, 0)
    """
    return max(0, min(n1 - max(-offset, 0), n2 - max(offset, 0)))


def _out_dim(k: int, dim1: int, dim2: int) -> int:
    """Where the input's dim ``k`` (neither of the two) lies in the result."""
    return k - (k > dim1) - (k > dim2)


def _in_shape(out_shape: Shape, *, dim1: int, dim2: int, sizes: tuple[int, int]) -> Shape:
    """The input's shape, from the result's (the diagonal last) and the two dims' sizes."""
    shape = list(out_shape[:-1])
    for d, n in sorted(((dim1, sizes[0]), (dim2, sizes[1]))):
        shape.insert(d, n)
    return tuple(shape)


def _pieces(counts: list[int], c: int, length: int) -> list[tuple[int, int]]:
    """Per rank holding ``counts`` rows of ``dim1``: the diagonal entries ``[t0, t1)`` in them."""
    starts = offsets(counts)
    out = []
    for r in range(len(counts)):
        t0 = min(max(starts[r] - c, 0), length)
        out.append((t0, max(t0, min(starts[r + 1] - c, length))))
    return out


def _entries(xp: Any, a: Any, dim1: int, dim2: int, rows: Any, cols: Any) -> Any:
    """``a[..., rows[t], ..., cols[t], ...]`` with the two dims moved last, a new array."""
    return xp.moveaxis(a, (dim1, dim2), (-2, -1))[..., rows, cols]


# -- diagonal ----------------------------------------------------------------------------------
def _diagonal_shape(shape: Shape, *, offset: int, dim1: int, dim2: int, **_: Any) -> Shape:
    others = tuple(n for k, n in enumerate(shape) if k not in (dim1, dim2))
    return (*others, diagonal_length(shape[dim1], shape[dim2], offset))


def _diagonal_layouts(shape: Shape, *, dim1: int, dim2: int, **_: Any) -> list[Signature]:
    return [((Split(k),), Split(_out_dim(k, dim1, dim2))) for k in range(len(shape))
            if k not in (dim1, dim2)] + keep_partial()


def _diagonal_collective(shape: Shape, *, dim1: int, **_: Any) -> list[Signature]:
    return [((Split(dim1),), Split(len(shape) - 2))]


def _diagonal_kernel(ctx: Context, a: Any, *, offset: int, dim1: int, dim2: int,
                     sizes: tuple[int, int]) -> Any:
    xp = ctx.xp
    if ctx.comm is None:
        return xp.diagonal(a, offset, dim1, dim2).copy()
    length = ctx.global_shape[-1]
    c1, c2 = max(-offset, 0), max(offset, 0)
    in_shape = _in_shape(ctx.global_shape, dim1=dim1, dim2=dim2, sizes=sizes)
    counts = ctx.extents(in_shape, split_on_comm(ctx, dim1), dim1)
    pieces = _pieces(counts, c1, length)
    t0, t1 = pieces[ctx.comm.rank]
    start = offsets(counts)[ctx.comm.rank]
    t = xp.arange(t0, t1)
    mine = _entries(xp, a, dim1, dim2, t + c1 - start, t + c2)
    assert ctx.out_sbp is not None
    want = ctx.extents(ctx.global_shape, ctx.out_sbp, len(ctx.global_shape) - 1)
    return rebalance(mine, ctx.comm, mine.ndim - 1, [b - a for a, b in pieces], want)


def _diagonal_grad(g: Tensor, operands: Any, out: Tensor, **attrs: Any) -> tuple[Tensor]:
    return (apply(DIAGONAL_GRAD, g, **attrs),)


DIAGONAL = OpDef("diagonal", _diagonal_kernel, _diagonal_shape, _diagonal_layouts,
                 grad=_diagonal_grad, collective=_diagonal_collective)


# -- its gradient: zeros with the diagonal given ------------------------------------------------
def _grad_shape(shape: Shape, *, dim1: int, dim2: int, sizes: tuple[int, int], **_: Any
                ) -> Shape:
    return _in_shape(shape, dim1=dim1, dim2=dim2, sizes=sizes)


def _grad_layouts(shape: Shape, *, dim1: int, dim2: int, **_: Any) -> list[Signature]:
    ndim = len(shape) + 1
    return [((Split(_out_dim(k, dim1, dim2)),), Split(k)) for k in range(ndim)
            if k not in (dim1, dim2)] + [((partial_sum,), partial_sum)]


def _grad_collective(shape: Shape, *, dim1: int, **_: Any) -> list[Signature]:
    return [((Split(len(shape) - 1),), Split(dim1))]


def _grad_kernel(ctx: Context, g: Any, *, offset: int, dim1: int, dim2: int,
                 sizes: tuple[int, int]) -> Any:
    xp = ctx.xp
    out = xp.zeros(ctx.out_shape, dtype=ctx.out_dtype)
    c1, c2 = max(-offset, 0), max(offset, 0)
    length = diagonal_length(sizes[0], sizes[1], offset)
    view = xp.moveaxis(out, (dim1, dim2), (-2, -1))
    if ctx.comm is None:
        t = xp.arange(length)
        view[..., t + c1, t + c2] = g
        return out
    assert ctx.out_sbp is not None
    counts = ctx.extents(ctx.global_shape, ctx.out_sbp, dim1)
    pieces = _pieces(counts, c1, length)
    have = ctx.extents((*g.shape[:-1], length), split_on_comm(ctx, g.ndim - 1), g.ndim - 1)
    mine = fetch(g, ctx.comm, g.ndim - 1, have, [[p] if p[1] > p[0] else [] for p in pieces])
    t0, t1 = pieces[ctx.comm.rank]
    t = xp.arange(t0, t1)
    view[..., t + c1 - offsets(counts)[ctx.comm.rank], t + c2] = mine
    return out


def _grad_grad(g: Tensor, operands: Any, out: Tensor, **attrs: Any) -> tuple[Tensor]:
    return (apply(DIAGONAL, g, **attrs),)


DIAGONAL_GRAD = OpDef("diagonal_grad", _grad_kernel, _grad_shape, _grad_layouts,
                      grad=_grad_grad, collective=_grad_collective)


# -- the functions -------------------------------------------------------------------------------
def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The ``offset``-th diagonal of dims ``dim1`` and ``dim2`` (torch's ``diagonal``).

    Args:
        input: a tensor of at least 2 dims.
        offset: 0 the main diagonal, above it positive, below it negative.
        dim1, dim2: the two dims (different).

    Returns:
        A new tensor (not a view, unlike torch's) of the other dims and the diagonal last.
        Split along one of the two dims, the diagonal is split, balanced (each rank's entries
        come from its own rows; one all-to-all rebalances them).

    Examples:
        >>> flow.diagonal(flow.tensor([[1, 2], [3, 4]]), -1).tolist()
        [3]
    """
    if input.ndim < 2:
        raise RuntimeError(f"diagonal: the input needs at least 2 dims, got {input.ndim}")
    d1, d2 = wrap_dim(operator.index(dim1), input.ndim), wrap_dim(operator.index(dim2),
                                                                  input.ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    offset = operator.index(offset)
    if input.is_global and any(s == Split(d2) for s in input.sbp) \
            and not any(s == Split(d1) for s in input.sbp):
        # the same diagonal, read along the split dim: its entries stay where they lie
        d1, d2, offset = d2, d1, -offset
    sizes = (int(input.shape[d1]), int(input.shape[d2]))
    return apply(DIAGONAL, input, offset=offset, dim1=d1, dim2=d2, sizes=sizes)


def trace(input: Tensor) -> Tensor:
    """The sum of the main diagonal of a matrix (torch's ``trace``).

    Args:
        input: a 2-D tensor.

    Returns:
        A 0-d tensor (integers sum as int64, as torch).

    Examples:
        >>> flow.trace(flow.tensor([[1.0, 2.0], [3.0, 4.0]])).item()
        5.0
    """
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    from .reduction import sum as reduce_sum

    return reduce_sum(diagonal(input))


bind({"diagonal": diagonal, "trace": trace})
