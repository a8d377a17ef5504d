"""Loss modules: ``MSELoss``, ``L1Loss``, ``CrossEntropyLoss``, ``NLLLoss``,
``BCEWithLogitsLoss``, ``BCELoss`` (thin modules over :mod:`mpiflow.nn.functional`).

Class weights are buffers, so ``to``/``to_global`` convert them with the rest of a model.

Examples:
    >>> import mpiflow.nn as nn
    >>> nn.MSELoss()(flow.tensor([1.0, 3.0]), flow.tensor([0.0, 0.0])).item()
    5.0
"""

from __future__ import annotations

from ...tensors.tensor import Tensor
from .. import functional as F
from .module import Module

__all__ = ["BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss", "L1Loss", "MSELoss",
           "NLLLoss"]


class _Loss(Module):
    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        F.check_reduction(reduction)
        self.reduction = reduction


class _WeightedLoss(_Loss):
    weight: Tensor | None

    def __init__(self, weight: Tensor | None = None, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.register_buffer("weight", weight)


class MSELoss(_Loss):
    """Mean (or summed) squared error.

    Args:
        reduction: ``"none"``, ``"mean"`` or ``"sum"``.

    Examples:
        >>> nn.MSELoss(reduction="sum")(flow.tensor([1.0, 3.0]), flow.zeros(2)).item()
        10.0
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """Mean (or summed) absolute error.

    Examples:
        >>> nn.L1Loss()(flow.tensor([1.0, -3.0]), flow.zeros(2)).item()
        2.0
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.l1_loss(input, target, reduction=self.reduction)


class NLLLoss(_WeightedLoss):
    """Negative log likelihood of class indices (input: log-probabilities).

    Args:
        weight: a weight per class.
        ignore_index: targets of this value are skipped.
        reduction: ``"none"``, ``"mean"`` (weighted mean) or ``"sum"``.

    Examples:
        >>> nn.NLLLoss()(flow.tensor([[-1.0, -2.0]]), flow.tensor([0])).item()
        1.0
    """

    def __init__(self, weight: Tensor | None = None, ignore_index: int = -100,
                 reduction: str = "mean") -> None:
        super().__init__(weight, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.nll_loss(input, target, self.weight, self.ignore_index, self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """Cross entropy of unnormalized scores and class indices (or class probabilities).

    Args:
        weight: a weight per class.
        ignore_index: class-index targets of this value are skipped.
        reduction: ``"none"``, ``"mean"`` or ``"sum"``.
        label_smoothing: in ``[0, 1]``.

    Examples:
        >>> round(nn.CrossEntropyLoss()(flow.zeros(2, 4), flow.tensor([1, 3])).item(), 4)
        1.3863
    """

    def __init__(self, weight: Tensor | None = None, ignore_index: int = -100,
                 reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(weight, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(input, target, self.weight, self.ignore_index, self.reduction,
                               self.label_smoothing)


class BCEWithLogitsLoss(_WeightedLoss):
    """Binary cross entropy of logits (stable); ``pos_weight`` weighs the positive term.

    Examples:
        >>> round(nn.BCEWithLogitsLoss()(flow.zeros(3), flow.ones(3)).item(), 4)
        0.6931
    """

    pos_weight: Tensor | None

    def __init__(self, weight: Tensor | None = None, reduction: str = "mean",
                 pos_weight: Tensor | None = None) -> None:
        super().__init__(weight, reduction)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy_with_logits(input, target, self.weight, self.reduction,
                                                  self.pos_weight)


class BCELoss(_WeightedLoss):
    """Binary cross entropy of probabilities (logs clamped at -100).

    Examples:
        >>> round(nn.BCELoss()(flow.tensor([0.5]), flow.tensor([0.0])).item(), 4)
        0.6931
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy(input, target, self.weight, self.reduction)
