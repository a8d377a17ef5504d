"""``Dropout``: random zeros in training, the identity in evaluation.

Examples:
    >>> import mpiflow.nn as nn
    >>> nn.Dropout(0.5).eval()(flow.ones(3)).tolist()
    [1.0, 1.0, 1.0]
"""

from __future__ import annotations

from ...tensors.tensor import Tensor
from .. import functional as F
from .module import Module

__all__ = ["Dropout", "Dropout2d"]


class Dropout(Module):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)`` while
    training (mpiflow's counter-based generator draws the mask).

    Args:
        p: the probability of dropping, in ``[0, 1]``.
        inplace: write into the input.

    Examples:
        >>> nn.Dropout(p=0.2)
        Dropout(p=0.2, inplace=False)
    """

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout2d(Dropout):
    """Zero whole channels of ``(N, C, H, W)`` with probability ``p`` while training
    (:func:`mpiflow.nn.functional.dropout2d`).

    Args:
        p: the probability of dropping a channel.
        inplace: write into the input.

    Examples:
        >>> nn.Dropout2d(0.5).eval()(flow.ones(1, 2, 1, 1)).flatten().tolist()
        [1.0, 1.0]
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout2d(input, self.p, self.training, self.inplace)
