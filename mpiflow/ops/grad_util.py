"""Small helpers shared by gradient rules."""

from __future__ import annotations

from typing import Any

from ..tensors.tensor import Tensor

__all__ = ["sum_to"]


def sum_to(grad: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Sum ``grad`` over the dimensions that broadcasting added or stretched, to ``shape``.

    Examples:
        >>> sum_to(flow.ones(3, 4), (4,)).tolist()
        [3.0, 3.0, 3.0, 3.0]
    """
    from .reduction import sum as reduce_sum
    from .shape import reshape

    shape = tuple(shape)
    if tuple(grad.shape) == shape:
        return grad
    lead = grad.ndim - len(shape)
    dims = list(range(lead)) + [lead + i for i, n in enumerate(shape)
                                if n == 1 and grad.shape[lead + i] != 1]
    summed = reduce_sum(grad, dim=tuple(dims), keepdim=True) if dims else grad
    return reshape(summed, shape)


def maybe(operand: Any, grad: Tensor) -> Tensor | None:
    """``grad`` summed to ``operand``'s shape, or None when ``operand`` is a plain number."""
    if not isinstance(operand, Tensor):
        return None
    return sum_to(grad, tuple(operand.shape))
