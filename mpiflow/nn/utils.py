"""``torch.nn.utils``/``oneflow.nn.utils``: clipping gradients.

Examples:
    >>> import mpiflow.nn as nn
    >>> net = nn.Linear(3, 2)
    >>> net(flow.ones(4, 3)).sum().backward()
    >>> total = nn.utils.clip_grad_norm_(net.parameters(), max_norm=1.0)
    >>> bool(nn.utils.clip_grad_norm_(net.parameters(), 1e9) <= 1.0 + 1e-5)
    True
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from .. import ops
from ..autograd import no_grad
from ..layouts.sbp import Broadcast
from ..tensors.creation import tensor as make_tensor
from ..tensors.tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_"]


def clip_grad_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float,
                    norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach: bool | None = None) -> Tensor:
    """Scale the gradients so that their total ``norm_type``-norm is at most ``max_norm``.

    The total norm is the norm of the per-parameter norms (for ``inf``/``-inf`` their max/min);
    each gradient is multiplied in place by ``min(1, max_norm / (total + 1e-6))``, as PyTorch
    and OneFlow do. Global gradients are reduced over their placements by the ops' layouts.

    Args:
        parameters: a tensor or tensors whose ``.grad`` is clipped (those without one skipped).
        max_norm: the largest total norm allowed.
        norm_type: the norm's order (``float("inf")`` for the max norm).
        error_if_nonfinite: raise if the total norm is nan or inf.
        foreach: accepted for PyTorch's signature.

    Returns:
        The total norm before clipping (a 0-d tensor).

    Raises:
        RuntimeError: ``error_if_nonfinite`` and the total norm is not finite.

    Examples:
        >>> w = flow.ones(4, requires_grad=True)
        >>> (w * 3).sum().backward()
        >>> clip_grad_norm_([w], 1.0)
        tensor(6.)
    """
    del foreach
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return make_tensor(0.0)
    norm_type = float(norm_type)
    with no_grad():
        norms = [_on(ops.norm(g, norm_type), grads[0]) for g in grads]
        stacked = norms[0].reshape(1) if len(norms) == 1 else ops.stack(norms)
        if norm_type == math.inf:
            total = ops.amax(stacked)
        elif norm_type == -math.inf:
            total = ops.amin(stacked)
        else:
            total = ops.norm(stacked, norm_type)
        if error_if_nonfinite and not bool(ops.isfinite(total)):
            raise RuntimeError(f"the total norm of order {norm_type} of the gradients is "
                               "non-finite, so it cannot be clipped")
        coef = ops.clamp(max_norm / (total + 1e-6), max=1.0)
        for g in grads:
            g.mul_(_on(coef, g))
    return total


def _on(value: Tensor, like: Tensor) -> Tensor:
    """``value`` (0-d) on ``like``'s placement, broadcast, where the two differ (gradients
    of pipeline stages live on different placements)."""
    if not like.is_global or value.placement == like.placement:
        return value
    return value.to_global(placement=like.placement,
                           sbp=[Broadcast()] * like.placement.ndim)


def clip_grad_value_(parameters: Tensor | Iterable[Tensor], clip_value: float) -> None:
    """Clamp every gradient into ``[-clip_value, clip_value]`` in place.

    Examples:
        >>> w = flow.ones(2, requires_grad=True)
        >>> (w * 3).sum().backward()
        >>> clip_grad_value_([w], 1.0)
        >>> w.grad
        tensor([1., 1.])
    """
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    with no_grad():
        for p in params:
            if p.grad is not None:
                p.grad.clamp_(-float(clip_value), float(clip_value))
