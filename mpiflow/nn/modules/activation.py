"""Activation layers: ``ReLU``, ``GELU``, ``Tanh``, ``Sigmoid``, ``SiLU``, ``LeakyReLU``,
``Softmax``, ``LogSoftmax`` (each a thin module over :mod:`mpiflow.nn.functional`).

Examples:
    >>> import mpiflow.nn as nn
    >>> nn.ReLU()(flow.tensor([-1.0, 1.0])).tolist()
    [0.0, 1.0]
"""

from __future__ import annotations

from ...tensors.tensor import Tensor
from .. import functional as F
from .module import Module

__all__ = ["GELU", "LeakyReLU", "LogSoftmax", "ReLU", "SiLU", "Sigmoid", "Softmax", "Tanh"]


class ReLU(Module):
    """``max(x, 0)``.

    Examples:
        >>> nn.ReLU()
        ReLU()
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class GELU(Module):
    """``x * Phi(x)``; ``approximate="tanh"`` for the tanh form.

    Examples:
        >>> nn.GELU(approximate="tanh")
        GELU(approximate='tanh')
    """

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Tanh(Module):
    """``tanh(x)``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.tanh(input)


class Sigmoid(Module):
    """``1 / (1 + exp(-x))``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.sigmoid(input)


class SiLU(Module):
    """``x * sigmoid(x)``."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.silu(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    """``x`` where positive, else ``negative_slope * x``."""

    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace
                                                          else "")


class Softmax(Module):
    """Softmax along ``dim``.

    Examples:
        >>> nn.Softmax(dim=1)
        Softmax(dim=1)
    """

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """Log-softmax along ``dim``."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.log_softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
