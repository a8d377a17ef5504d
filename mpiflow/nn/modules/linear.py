"""``Linear``, ``Identity`` and ``Flatten``.

Examples:
    >>> import mpiflow.nn as nn
    >>> nn.Linear(4, 2)(flow.ones(3, 4)).shape
    mpiflow.Size([3, 2])
"""

from __future__ import annotations

from typing import Any

from ...ops.shape import flatten
from ...tensors.creation import empty
from ...tensors.tensor import Tensor
from .. import functional as F
from .. import init
from .module import Module
from .parameter import Parameter

__all__ = ["Flatten", "Identity", "Linear"]


class Identity(Module):
    """Returns its input (any constructor arguments are ignored).

    Examples:
        >>> nn.Identity()(flow.ones(2)).tolist()
        [1.0, 1.0]
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Linear(Module):
    """``y = x @ W.T + b`` with PyTorch's initialization.

    ``W`` of shape ``(out_features, in_features)`` is ``kaiming_uniform_(a=sqrt(5))``, i.e.
    uniform in ``+-1/sqrt(in_features)``, and so is ``b``.

    Args:
        in_features: the size of each input sample.
        out_features: the size of each output sample.
        bias: whether to add a learned bias.
        device: of the parameters.
        dtype: of the parameters.

    Examples:
        >>> layer = nn.Linear(3, 5)
        >>> tuple(layer.weight.shape), tuple(layer.bias.shape)
        ((5, 3), (5,))
    """

    weight: Parameter
    bias: Parameter | None

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(empty(out_features, in_features, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(empty(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the parameters again (PyTorch's default initialization)."""
        init.layer_defaults_(self.weight, self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Flatten(Module):
    """Merge dims ``start_dim..end_dim`` (default: all but the batch dim).

    Examples:
        >>> nn.Flatten()(flow.ones(2, 3, 4)).shape
        mpiflow.Size([2, 12])
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Tensor) -> Tensor:
        return flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"
