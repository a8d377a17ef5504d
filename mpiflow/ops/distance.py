"""Pairwise distances: ``cdist``.

Layout rule, per mesh axis, for ``x1`` of ``(..., P, M)`` and ``x2`` of ``(..., R, M)``: rows of
``x1`` split with ``x2`` whole give rows of the result split (each rank measures its rows against
all of ``x2``); rows of ``x2`` split with ``x1`` whole give columns split; a batch dim split in
both stays split; and for ``p`` in 0, 1 and inf, the columns ``M`` split in both give a partial
sum (max for inf) of per-part distances. Where both operands' rows are split, the engine
converts the cheaper one to whole (``B``): an all-gather of the smaller operand, after which the
other's rows stay where they are. Distances are computed in blocks of rows (no ``P x R x M``
temporary beyond a few MB).

The gradient ``cdist_grad`` (for ``x1``; ``x2``'s is the same with the roles swapped and the
gradient transposed) has the layout rule of a product: rows split with rows split, or columns
of the gradient split with rows of the other operand split, which leaves a partial sum.

Examples:
    >>> flow.cdist(flow.tensor([[0.0, 0.0]]), flow.tensor([[3.0, 4.0], [1.0, 0.0]])).tolist()
    [[5.0, 1.0]]
"""

from __future__ import annotations

import math
from typing import Any

import numpy

from ..layouts.sbp import Split, partial_max, partial_sum
from ..tensors.tensor import Tensor
from . import pointwise as pw
from .engine import B, Context, OpDef, Signature, apply

__all__ = ["cdist"]

Shape = tuple[int, ...]
_BLOCK = 1 << 18  # elements of one block's differences


def _blocks(rows: int, other: int, width: int) -> list[tuple[int, int]]:
    step = max(1, _BLOCK // max(other * width, 1))
    return [(i, min(rows, i + step)) for i in range(0, rows, step)]


def _norm(xp: Any, diff: Any, p: float) -> Any:
    if diff.shape[-1] == 0:
        return xp.zeros(diff.shape[:-1], dtype=diff.dtype)
    if p == 0:
        return (diff != 0).sum(axis=-1).astype(diff.dtype)
    if p == 1:
        return diff.sum(axis=-1)
    if p == 2:
        return xp.sqrt((diff * diff).sum(axis=-1))
    if math.isinf(p):
        return diff.max(axis=-1)
    return (diff ** p).sum(axis=-1) ** (1.0 / p)


def _cdist_kernel(ctx: Context, a: Any, b: Any, *, p: float) -> Any:
    xp = ctx.xp
    out = xp.empty(ctx.out_shape, dtype=ctx.out_dtype)
    for i, j in _blocks(a.shape[-2], b.shape[-2], a.shape[-1]):
        diff = xp.abs(a[..., i:j, None, :] - b[..., None, :, :])
        out[..., i:j, :] = _norm(xp, diff, p)
    return out


def _cdist_layouts(a: Shape, b: Shape, *, p: float) -> list[Signature]:
    r = len(a)
    sigs: list[Signature] = [((Split(r - 2), B), Split(r - 2)), ((B, Split(r - 2)), Split(r - 1))]
    sigs += [((Split(k), Split(k)), Split(k)) for k in range(r - 2)]
    if p in (0, 1):
        sigs.append(((Split(r - 1), Split(r - 1)), partial_sum))
    elif math.isinf(p):
        sigs.append(((Split(r - 1), Split(r - 1)), partial_max))
    return sigs


def _cdist_grad(g: Tensor, operands: Any, out: Tensor, *, p: float) -> tuple[Tensor, Tensor]:
    from .shape import transpose

    a, b = operands
    ga = apply(CDIST_GRAD, g, a, b, out, p=p)
    gb = apply(CDIST_GRAD, transpose(g, -1, -2), b, a, transpose(out, -1, -2), p=p)
    return ga, gb


CDIST = OpDef("cdist", _cdist_kernel,
              lambda a, b, **_: (*a[:-2], a[-2], b[-2]), _cdist_layouts, grad=_cdist_grad)


def _grad_kernel(ctx: Context, g: Any, a: Any, b: Any, d: Any, *, p: float) -> Any:
    """``sum_j g_ij * d d_ij / d a_i``, in blocks of rows."""
    xp = ctx.xp
    out = xp.zeros(ctx.out_shape, dtype=ctx.out_dtype)
    if p == 0:
        return out
    for i, j in _blocks(a.shape[-2], b.shape[-2], a.shape[-1]):
        diff = a[..., i:j, None, :] - b[..., None, :, :]
        dist = d[..., i:j, :, None]
        with numpy.errstate(divide="ignore", invalid="ignore"):
            if p == 1:
                part = xp.sign(diff)
            elif p == 2:
                part = xp.where(dist == 0, 0.0, diff / dist)
            elif math.isinf(p):
                part = xp.sign(diff) * (xp.abs(diff) == dist)
            else:
                part = xp.where(dist == 0, 0.0,
                                xp.sign(diff) * (xp.abs(diff) / dist) ** (p - 1))
        out[..., i:j, :] = (g[..., i:j, :, None] * part).sum(axis=-2)
    return out


def _grad_layouts(g: Shape, a: Shape, b: Shape, d: Shape, *, p: float) -> list[Signature]:
    r = len(a)
    rows, cols = Split(r - 2), Split(r - 1)
    sigs: list[Signature] = [((rows, rows, B, rows), rows), ((cols, B, rows, cols), partial_sum),
                             ((B, cols, cols, B), cols), ((partial_sum, B, B, B), partial_sum)]
    return sigs + [((Split(k),) * 4, Split(k)) for k in range(r - 2)]


# The gradient of cdist for its first operand (g, x1, x2, distances).
CDIST_GRAD = OpDef("cdist_grad", _grad_kernel, lambda g, a, b, d, **_: a, _grad_layouts,
                   lambda g, a, b, d, **_: a)


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: str | None = None) -> Tensor:
    """The ``p``-norm distance between each row of ``x1`` and each row of ``x2`` (torch's
    ``cdist``).

    Args:
        x1: ``(..., P, M)`` floating-point tensor.
        x2: ``(..., R, M)`` of the same dtype (batch dims broadcast).
        p: the norm, ``p >= 0`` (0 counts the differing entries; inf is the largest).
        compute_mode: accepted for torch's signature; distances are always computed from the
            differences (exact, no ``|a|^2 + |b|^2 - 2ab`` cancellation).

    Returns:
        ``(..., P, R)``. Rows of ``x1`` split: rows of the result split, no communication;
        ``x2``'s rows split too: the smaller operand is all-gathered first.

    Examples:
        >>> flow.cdist(flow.tensor([[0.0, 0.0]]), flow.tensor([[1.0, 1.0]]), p=1).item()
        2.0
    """
    if x1.ndim < 2 or x2.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: "
                           f"{x1.shape[-1]} X2: {x2.shape[-1]}")
    for x, name in ((x1, "X1"), (x2, "X2")):
        if x.dtype.numpy.kind != "f":
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: "
                               f"{x.dtype}")
    p = float(p)
    if p < 0 or math.isnan(p):
        raise RuntimeError("cdist only supports non-negative p values")
    batch = numpy.broadcast_shapes(tuple(x1.shape[:-2]), tuple(x2.shape[:-2]))
    x1 = pw.expand(x1, (*batch, *x1.shape[-2:]))
    x2 = pw.expand(x2, (*batch, *x2.shape[-2:]))
    return apply(CDIST, x1, x2, p=p)
