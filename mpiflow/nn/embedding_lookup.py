"""The embedding lookup as one op, so that a split batch of indices stays split.

``weight[indices]`` through general advanced indexing gathers a global index tensor to every
rank first. The lookup op instead keeps the layouts data and model parallelism need, per mesh
axis:

- indices ``S(i)``, weight ``B`` -> rows ``S(i)`` (a split batch: each rank looks up its own);
- indices ``B``, weight ``S(1)`` -> rows split along the embedding dim;
- indices ``B``, weight ``P`` -> ``P`` (the lookup is linear in the weight).

Its backward adds the rows of the gradient into a zero table (``add.at``: repeated indices
accumulate): indices ``S(i)`` give a partial sum ``P`` of the weight's gradient, which autograd
turns into the weight's own layout (an all-reduce for ``B``).

Examples:
    >>> lookup(flow.tensor([1, 1, 0]), flow.tensor([[0.5], [2.0]])).tolist()
    [[2.0], [2.0], [0.5]]
"""

from __future__ import annotations

from typing import Any

from ..layouts.sbp import Partial, Split
from ..ops.bounds import check_bounds
from ..ops.engine import B, Context, OpDef, Signature, apply
from ..tensors.tensor import Tensor

__all__ = ["lookup"]

Shape = tuple[int, ...]
P = Partial()


def _lookup_layouts(index: Shape, weight: Shape, **_: Any) -> list[Signature]:
    sigs: list[Signature] = [((Split(i), B), Split(i)) for i in range(len(index))]
    return [*sigs, ((B, Split(1)), Split(len(index))), ((B, P), P)]


def _lookup_kernel(ctx: Context, index: Any, weight: Any, **_: Any) -> Any:
    return weight[index]


def _lookup_grad(g: Tensor, operands: Any, out: Tensor, *, padding_idx: int
                 ) -> tuple[None, Tensor]:
    index, weight = operands
    return None, apply(_LOOKUP_GRAD, g, index, rows=weight.shape[0], padding_idx=padding_idx)


_LOOKUP = OpDef("embedding", _lookup_kernel,
                lambda index, weight, **_: (*index, weight[1]), _lookup_layouts,
                lambda index, weight, **_: weight, _lookup_grad)


def _grad_layouts(g: Shape, index: Shape, **_: Any) -> list[Signature]:
    sigs: list[Signature] = [((Split(i), Split(i)), P) for i in range(len(index))]
    return [*sigs, ((Split(len(index)), B), Split(1)), ((P, B), P)]


def _grad_kernel(ctx: Context, g: Any, index: Any, *, rows: int, padding_idx: int) -> Any:
    xp = ctx.xp
    out = xp.zeros(ctx.out_shape, dtype=ctx.out_dtype)
    if index.size:
        xp.add.at(out, index.reshape(-1), g.reshape(index.size, -1))
    if padding_idx >= 0:
        out[padding_idx] = 0
    return out


_LOOKUP_GRAD = OpDef("embedding_backward", _grad_kernel,
                     lambda g, index, *, rows, **_: (rows, g[-1]), _grad_layouts,
                     lambda g, index, **_: g)


def lookup(index: Tensor, weight: Tensor, padding_idx: int | None = None) -> Tensor:
    """Rows of ``weight`` (``(num, dim)``) at the integer ``index``: ``index.shape + (dim,)``.

    Args:
        index: integer indices in ``[0, num)`` (checked on this rank's shard); a local index
            of a global ``weight`` must be the same on every rank.
        weight: the table.
        padding_idx: a row that gets no gradient (non-negative), or None.

    Raises:
        IndexError: an index outside the table.
    """
    if weight.is_global and index.is_local:  # the same indices on every rank: no communication
        from ..tensors.creation import tensor

        index = tensor(index.numpy(), placement=weight.placement,
                       sbp=(B,) * weight.placement.ndim)
    elif index.is_global and weight.is_local:
        raise TypeError("a local embedding table cannot be indexed by a global tensor; make the "
                        "module global (to_global) or use the index's local data")
    rows = weight.shape[0]
    check_bounds(index, rows, lambda value: IndexError(
        f"index out of range in self: indices must be in [0, {rows}), got {value}"))
    return apply(_LOOKUP, index, weight, padding_idx=-1 if padding_idx is None else padding_idx)
