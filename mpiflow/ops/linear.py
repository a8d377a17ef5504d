"""``linear``: ``x @ w.T + b`` as one op on local tensors, BLAS on the operands as they lie.

The composite ``matmul(x, t(w)) + b`` costs three engine calls forward and a transpose op, a
bias add and a ``sum_to`` backward, and its weight gradient comes out as the transpose of
``x^T @ g`` (an F-ordered array that must be copied before it can be a ``.grad``). This op
runs ``x @ w.T`` on the transposed *view* (numpy hands BLAS the transpose flag, no copy), adds
the bias in place, and its gradient rule computes only the gradients that are needed:

- ``dx = g @ w``;
- ``dw = g^T @ x`` with the leading dims of ``g`` and ``x`` flattened (one product, C-ordered,
  in the operands' dtype), as PyTorch does;
- ``db = g`` summed over the leading dims.

It serves local tensors of one floating dtype with ``x`` at least 2-D; :func:`linear` falls back
to the composite for anything else (global tensors, mixed dtypes, shapes that do not fit, which
the composite reports with its usual errors).
"""

from __future__ import annotations

from typing import Any

import numpy

from ..core.array_module import array_module
from ..tensors.tensor import Tensor
from .engine import Context, OpDef, Signature, apply
from .shape import t

__all__ = ["LINEAR", "linear"]

Shape = tuple[int, ...]


def _linear_shape(x: Shape, w: Shape, *bias: Shape, **_: Any) -> Shape:
    return (*x[:-1], w[0])


def _no_layouts(*shapes: Shape, **_: Any) -> list[Signature]:
    return []  # local tensors only: linear() sends global ones down the composite


_SWAP_ROWS = 64
_SWAP_WEIGHT = 1 << 16
"""A 2-D input of at most this many rows times a weight of at least this many elements is
multiplied as ``(w @ x.T).T``: numpy's OpenBLAS runs a product with few rows about a third
faster with the operands swapped (measured: 32 x 512 by 512 x 1024, 0.45 -> 0.30 ms, the
result's C-ordered copy included; with many rows the swap is slower). The operands are used
as they lie; only the small output is copied into C order. The products are those of
``x @ w.T``, summed in the order the BLAS kernel picks for the swapped call: on some CPUs'
kernels the bits are those of ``x @ w.T``, on others (OpenBLAS's Haswell kernel on AMD EPYC)
they differ in the last bits, as two differently shaped BLAS calls may
(docs/reproducibility.md).
The input gradient ``g @ w`` is taken the same way, as ``(w.T @ g.T).T``: the gain is largest
when ``w`` is no longer in the cache, as in a training step (2 MB weight: 0.44 -> 0.38 ms)."""


def _swaps(xp: Any, x: Any, w: Any) -> bool:
    """Whether ``x`` (rows by ``w``'s columns or rows) and ``w`` take the swapped product."""
    return xp is numpy and x.ndim == 2 and x.shape[0] <= _SWAP_ROWS and w.size >= _SWAP_WEIGHT


def _swapped(xp: Any, a: Any, b: Any) -> Any:
    """``(a @ b).T`` in C order."""
    return xp.ascontiguousarray(xp.matmul(a, b).T)


def _linear_kernel(ctx: Context, x: Any, w: Any, *bias: Any) -> Any:
    xp = ctx.xp
    out = _swapped(xp, w, x.T) if _swaps(xp, x, w) else xp.matmul(x, w.T)
    if bias:
        out += bias[0]
    return out


def _linear_grad(g: Tensor, operands: Any, out: Tensor, *,
                 needs: tuple[bool, ...] = (True, True, True)) -> tuple[Tensor | None, ...]:
    """The needed gradients, on the arrays (the op is local-only): the same BLAS calls and
    sum the matmul and sum ops would make, without an engine call each."""
    gd, x, w = g._data, operands[0]._data, operands[1]._data
    xp = array_module(gd)
    gx = None
    if needs[0]:
        gx = Tensor(_swapped(xp, w.T, gd.T) if _swaps(xp, gd, w) else xp.matmul(gd, w))
    gw = None
    if needs[1]:
        g2 = gd if gd.ndim == 2 else gd.reshape(-1, gd.shape[-1])
        x2 = x if x.ndim == 2 else x.reshape(-1, x.shape[-1])
        gw = Tensor(xp.matmul(g2.T, x2))
    if len(operands) == 2:
        return gx, gw
    # A plain sum, not sum_to's keepdim sum and reshape: the result is an array of its own,
    # which autograd can make .grad without a copy (same values).
    gb = None
    if needs[2]:
        acc = numpy.float32 if gd.dtype == numpy.float16 else gd.dtype  # as the sum op
        summed = xp.sum(gd, axis=tuple(range(gd.ndim - 1)), dtype=acc)
        gb = Tensor(xp.asarray(summed).astype(gd.dtype, copy=False))
    return gx, gw, gb


_linear_grad.needs_mask = True  # type: ignore[attr-defined]

# Local-only: the gradient rule works on the operands' arrays, which on global tensors would be
# shards of another layout than the kernel saw (the op sweep found it); linear() sends global
# tensors down the composite.
LINEAR = OpDef("linear", _linear_kernel, _linear_shape, _no_layouts, grad=_linear_grad,
               local_only=True)


def _fits(input: Tensor, weight: Tensor, bias: Tensor | None) -> bool:
    """Whether the one-op path applies (else the composite runs, with its errors)."""
    if input._placement is not None or weight._placement is not None:
        return False
    dtype = input._data.dtype
    if dtype.kind not in "fc" or weight._data.dtype != dtype or input.ndim < 2:
        return False
    if weight.ndim != 2 or input._shape[-1] != weight._shape[1]:
        return False
    if bias is None:
        return True
    return (bias._placement is None and bias._data.dtype == dtype
            and tuple(bias._shape) == (weight._shape[0],))


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias``.

    Args:
        input: ``(*, in_features)``.
        weight: ``(out_features, in_features)``.
        bias: ``(out_features,)`` or None.

    Returns:
        ``(*, out_features)``.

    Examples:
        >>> from mpiflow.ops.linear import linear
        >>> linear(flow.ones(2, 3), flow.ones(4, 3), flow.ones(4)).tolist()
        [[4.0, 4.0, 4.0, 4.0], [4.0, 4.0, 4.0, 4.0]]
    """
    if isinstance(input, Tensor) and isinstance(weight, Tensor) and _fits(input, weight, bias):
        if bias is None:
            return apply(LINEAR, input, weight)
        return apply(LINEAR, input, weight, bias)
    out = input @ t(weight)
    return out if bias is None else out + bias
