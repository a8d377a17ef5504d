"""``Parameter``: a tensor that is a module's trainable state.

A module registers a :class:`Parameter` assigned to it as a parameter (:mod:`.module`).
Parameters may be local or global tensors, and share their data's memory and layout.

Examples:
    >>> p = nn.Parameter(flow.ones(2))
    >>> p.requires_grad, p.is_leaf
    (True, True)
"""

from __future__ import annotations

import numpy

from ...tensors.tensor import Tensor

__all__ = ["Parameter"]


class Parameter(Tensor):
    """A tensor that is a module's trainable state: a leaf that requires grad by default.

    Args:
        data: the value (local or global); the parameter shares its memory and layout.
        requires_grad: whether autograd computes its gradient.

    Examples:
        >>> p = nn.Parameter(flow.zeros(2, 3))
        >>> isinstance(p, flow.Tensor), p.requires_grad, p.is_leaf
        (True, True, True)
    """

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        if data is None:
            data = Tensor(numpy.empty((0,), dtype=numpy.float32))
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter needs a mpiflow tensor, got {type(data).__name__}")
        if requires_grad and data.dtype.numpy.kind not in "fc":
            raise RuntimeError(f"only floating point tensors can require gradients, not "
                               f"{data.dtype!r}")
        super().__init__(data._data, data._placement, data._sbp, data.shape,
                         requires_grad=requires_grad)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()
