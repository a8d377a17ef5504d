"""``LayerNorm``.

Examples:
    >>> import mpiflow.nn as nn
    >>> nn.LayerNorm(4)(flow.randn(2, 4)).shape
    mpiflow.Size([2, 4])
"""

from __future__ import annotations

from typing import Any

from ...tensors.creation import empty
from ...tensors.tensor import Tensor
from .. import functional as F
from .. import init
from .module import Module
from .parameter import Parameter

__all__ = ["LayerNorm"]


class LayerNorm(Module):
    """Normalize over the last ``len(normalized_shape)`` dims, then scale and shift.

    Args:
        normalized_shape: the trailing shape to normalize over (an int for one dim).
        eps: added to the variance.
        elementwise_affine: learn a ``weight`` (ones) and a ``bias`` (zeros).
        bias: learn the bias (with ``elementwise_affine``).
        device: of the parameters.
        dtype: of the parameters.

    Examples:
        >>> nn.LayerNorm((3, 4))
        LayerNorm((3, 4), eps=1e-05, elementwise_affine=True)
    """

    weight: Parameter | None
    bias: Parameter | None

    def __init__(self, normalized_shape: int | tuple[int, ...] | list[int], eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else \
            tuple(normalized_shape)
        self.normalized_shape = tuple(int(n) for n in shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(empty(*self.normalized_shape, dtype=dtype, device=device))
            if bias:
                self.bias = Parameter(empty(*self.normalized_shape, dtype=dtype, device=device))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight to ones, bias to zeros."""
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")
