"""``flow.optimizer.grad_clipping``: gradient clipping of OneFlow 0.x's optimizers.

``flow.optimizer.SGD(..., grad_clipping=flow.optimizer.grad_clipping.by_global_norm(1.0))``
scales the gradients of the variables an optimizer updates by ``clip_norm / max(norm,
clip_norm)``, ``norm`` their global L2 norm (all of them together, as if concatenated into
one vector): gradients of a smaller norm are left as they are. The scaling is made of tensor
ops, so a traced job replays it on each call's gradients.

Examples:
    >>> import mpiflow as mf
    >>> clip = by_global_norm(1.0)
    >>> [g.tolist() for g in clip.clip([mf.tensor([3.0]), mf.tensor([4.0])])]
    [[0.6000000238418579], [0.800000011920929]]
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ...ops.pointwise import clamp, sqrt
from ...ops.reduction import sum as total
from ...tensors.tensor import Tensor

__all__ = ["ClipGradientConf", "by_global_norm"]


class ClipGradientConf:
    """A way of clipping gradients (the ``grad_clipping`` argument of the optimizers)."""

    def clip(self, grads: Sequence[Tensor]) -> list[Tensor]:
        """The clipped ``grads``."""
        raise NotImplementedError


class by_global_norm(ClipGradientConf):  # OneFlow's (lower-case) name
    """Clip by the global norm: ``g * clip_norm / max(norm, clip_norm)``.

    Args:
        clip_norm: the largest global norm the update sees (positive).

    Raises:
        ValueError: ``clip_norm`` is not a positive finite number.
    """

    def __init__(self, clip_norm: float) -> None:
        clip_norm = float(clip_norm)
        if not (clip_norm > 0 and math.isfinite(clip_norm)):
            raise ValueError(f"by_global_norm: clip_norm must be a positive number, got "
                             f"{clip_norm}")
        self.clip_norm = clip_norm

    def __repr__(self) -> str:
        return f"by_global_norm({self.clip_norm})"

    def clip(self, grads: Sequence[Tensor]) -> list[Tensor]:
        """``grads`` scaled by ``clip_norm / max(global norm, clip_norm)``."""
        if not grads:
            return []
        squares = [total(g * g) for g in grads]
        norm = sqrt(sum(squares[1:], squares[0]))
        coefficient = self.clip_norm / clamp(norm, min=self.clip_norm)
        return [g * coefficient for g in grads]
