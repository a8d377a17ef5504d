"""Cross-entropy of class indices as one op on local tensors: the common case, fast.

``F.cross_entropy`` composes ``log_softmax``, a mask of the chosen classes, ``where``, sums and
a division: about a dozen engine calls forward and as many gradient rules backward, which on
small batches cost more than the arithmetic. This op runs the same arithmetic in one kernel
and one gradient rule, for a local ``(N, C)`` floating input, ``(N,)`` integer targets, no
class weights, no label smoothing and ``"mean"`` or ``"sum"`` reduction; the caller keeps the
composite for everything else. The operations are those of the composite, in its order (the
stable ``log_softmax`` kernel, the chosen log-probabilities summed with the zeros of the other
classes, ``sum(-picked) / count``; backward ``G - exp(logp) * rowsum(G)`` with ``G`` the
scaled one-hot gradient), so the loss and the input's gradient come out bitwise the same.

Examples:
    >>> from mpiflow.nn.cross_entropy import cross_entropy_indices
    >>> round(cross_entropy_indices(flow.zeros(2, 4), flow.tensor([1, 2]), -100,
    ...                             "mean").item(), 4)
    1.3863
"""

from __future__ import annotations

from typing import Any

import numpy

from ..core.array_module import array_module
from ..ops.engine import Context, OpDef, Signature, apply
from ..ops.softmax import SOFTMAX
from ..tensors.tensor import Tensor

__all__ = ["cross_entropy_indices", "fits"]

Shape = tuple[int, ...]


def _log_softmax(ctx: Context, x: Any) -> Any:
    """``log_softmax`` over dim 1 with the reduction kernel's operations (bitwise the same),
    written into one new array: a float32/float64 input of finite row maxima (else the
    reduction kernel, which handles infinite rows)."""
    xp = ctx.xp
    if x.dtype != ctx.out_dtype or x.size == 0:
        logp = SOFTMAX.kernel(ctx, x, dims=(1,), log=True)
        return logp if logp.dtype == ctx.out_dtype else logp.astype(ctx.out_dtype)
    top = xp.max(x, axis=1, keepdims=True)
    if not bool(xp.isfinite(top).all()):
        return SOFTMAX.kernel(ctx, x, dims=(1,), log=True)
    shifted = xp.subtract(x, top)
    exps = xp.exp(shifted)
    total = xp.sum(exps, axis=1, keepdims=True)
    return xp.subtract(shifted, xp.log(total, out=total), out=shifted)


def _picked(xp: Any, logp: Any, target: Any, ignore_index: int) -> tuple[Any, Any]:
    """``(chosen log-probabilities, 0 where ignored; the used-target mask)``, both ``(N,)``."""
    valid = target != ignore_index
    rows = xp.arange(target.shape[0])
    picked = xp.where(valid, logp[rows, xp.where(valid, target, 0)], 0)
    return picked.astype(logp.dtype, copy=False), valid


def _kernel(ctx: Context, x: Any, target: Any, *, ignore_index: int, reduction: str) -> Any:
    xp = ctx.xp
    logp = _log_softmax(ctx, x)
    picked, valid = _picked(xp, logp, target, ignore_index)
    total = xp.sum(xp.multiply(picked, -1.0))
    if reduction == "sum":
        return total
    with numpy.errstate(divide="ignore", invalid="ignore"):
        return xp.true_divide(total, xp.sum(valid, dtype=logp.dtype))


def _grad(g: Tensor, operands: Any, out: Tensor, *, ignore_index: int, reduction: str
          ) -> tuple[Tensor, None]:
    """``G - exp(logp) * rowsum(G)``, ``G`` the gradient of the chosen log-probabilities
    (``-g / count`` or ``-g`` at the targets, zero elsewhere)."""
    x, target = operands[0]._data, operands[1]._data
    xp = array_module(x)
    ctx = Context(xp, tuple(x.shape), tuple(x.shape), x.dtype)
    logp = _log_softmax(ctx, x)
    valid = target != ignore_index
    scale = g._data
    if reduction == "mean":
        with numpy.errstate(divide="ignore", invalid="ignore"):
            scale = xp.true_divide(scale, xp.sum(valid, dtype=x.dtype))
    per_row = xp.multiply(xp.broadcast_to(scale, target.shape), -1.0).astype(x.dtype, copy=False)
    # G has one entry per used row, so rowsum(G) is that entry (0 in ignored rows), and
    # G - p * rowsum(G) is -(p * rowsum(G)) plus G at the targets: the same values, written
    # into exp(logp)'s array instead of a zero-filled G and two temporaries.
    row_sum = xp.where(valid, per_row, 0).astype(x.dtype, copy=False)[:, None]
    dx = xp.exp(logp, out=logp)
    xp.multiply(dx, row_sum, out=dx)
    xp.negative(dx, out=dx)
    rows = xp.arange(target.shape[0])[valid]
    dx[rows, target[valid]] += per_row[valid]
    return Tensor(dx), None


def _shape(x: Shape, target: Shape, **_: Any) -> Shape:
    return ()


def _no_layouts(*shapes: Shape, **_: Any) -> list[Signature]:
    return []  # local tensors only


# Local-only (as linear's): the gradient rule works on the operands' arrays.
CROSS_ENTROPY = OpDef("cross_entropy", _kernel, _shape, _no_layouts,
                      lambda dtype, target_dtype, **_: dtype, _grad, local_only=True)


def fits(input: Tensor, target: Tensor, weight: Any, reduction: str,
         label_smoothing: float) -> bool:
    """Whether the one-op path applies: local ``(N, C)`` float32/float64 input (float16 sums
    run in float32 in the composite), ``(N,)`` integer targets, no weight or smoothing,
    ``"mean"``/``"sum"``."""
    return (weight is None and label_smoothing == 0 and reduction in ("mean", "sum")
            and input._placement is None and target._placement is None
            and input.ndim == 2 and target.ndim == 1
            and input._data.dtype in (numpy.float32, numpy.float64)
            and target._data.dtype.kind in "iu" and target._shape[0] == input._shape[0])


def cross_entropy_indices(input: Tensor, target: Tensor, ignore_index: int,
                          reduction: str) -> Tensor:
    """The loss of :func:`~mpiflow.nn.functional.cross_entropy` where :func:`fits` holds
    (targets already checked to be in range or ignored)."""
    return apply(CROSS_ENTROPY, input, target, ignore_index=int(ignore_index),
                 reduction=reduction)
