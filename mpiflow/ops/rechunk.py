"""A reshape across a split dim: the row-major elements re-chunked, never gathered.

A reshape whose input split does not map onto a split of the output (``reshape_split_map``)
used to gather the input. ``rechunk`` does it as the re-chunking of the flat row-major order
that it is: a split of the input's first dim of extent > 1 holds one contiguous run of the
flat order on each rank, and so does a split of the output's first dim of extent > 1, so one
:func:`mpiflow.algorithms.fetch` of flat ranges (one ``all_to_all_v``, each element moving at
most once) turns one into the other. The result is split along the output's first dim of
extent > 1, balanced. A split of another input dim is converted to that one first (one
all-to-all). Partial layouts stay partial (no communication).

Examples:
    >>> rechunk(flow.arange(6), (2, 3)).shape
    mpiflow.Size([2, 3])
"""

from __future__ import annotations

import math
from typing import Any

from ..algorithms import fetch
from ..algorithms.ranges import offsets
from ..layouts.sbp import Split
from ..tensors.tensor import Tensor
from .engine import Context, OpDef, Signature, apply
from .gathers import split_on_comm
from .layout_rules import keep_partial

__all__ = ["first_dim", "rechunk"]

Shape = tuple[int, ...]


def first_dim(shape: Shape) -> int:
    """The first dim of extent other than 1 (0 where there is none): splitting it gives each
    rank one contiguous run of the row-major elements.

    Examples:
        >>> first_dim((1, 1, 4, 2)), first_dim((3,)), first_dim(())
        (2, 0, 0)
    """
    return next((d for d, n in enumerate(shape) if n != 1), 0)


def _rechunk_collective(shape: Shape, *, size: Shape) -> list[Signature]:
    if not shape or not size:
        return []
    return [((Split(first_dim(shape)),), Split(first_dim(size)))]


def _rechunk_kernel(ctx: Context, a: Any, *, size: Shape, source: Shape) -> Any:
    if ctx.comm is None:
        return a.reshape(ctx.out_shape)
    assert ctx.out_sbp is not None
    d, d2 = first_dim(source), first_dim(size)
    inner, inner2 = math.prod(source[d + 1:]), math.prod(size[d2 + 1:])
    counts = [c * inner for c in ctx.extents(source, split_on_comm(ctx, d), d)]
    starts = offsets(ctx.extents(size, ctx.out_sbp, d2))
    wants = [[(starts[r] * inner2, starts[r + 1] * inner2)] for r in range(ctx.comm.size)]
    return fetch(a.reshape(-1), ctx.comm, 0, counts, wants).reshape(ctx.out_shape)


def _rechunk_grad(g: Tensor, operands: Any, out: Tensor, *, size: Shape, source: Shape
                  ) -> tuple[Tensor]:
    from .shape import reshape

    return (reshape(g, source),)


RECHUNK = OpDef("rechunk", _rechunk_kernel, lambda shape, *, size, **_: size,
                lambda shape, **_: keep_partial(), grad=_rechunk_grad,
                collective=lambda shape, *, size, **_: _rechunk_collective(shape, size=size))


def rechunk(input: Tensor, size: Shape) -> Tensor:
    """``input`` reshaped to ``size`` (same number of elements), a split input re-chunked
    along the output's first dim of extent > 1 (see the module)."""
    return apply(RECHUNK, input, size=tuple(size), source=tuple(input.shape))
