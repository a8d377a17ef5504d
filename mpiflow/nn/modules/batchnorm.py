"""``BatchNorm1d`` and ``BatchNorm2d``: with global tensors, synchronised batch statistics.

On a model made global (``module.to_global(placement, B)``) fed a batch split over the ranks
(``S(0)``), the statistics are those of the whole logical batch, and the running statistics
(broadcast buffers) are the same on every rank: PyTorch's ``SyncBatchNorm`` with no extra
module. On local tensors (each rank its own batch, as DDP) each rank normalizes by its own
batch, as PyTorch's ``BatchNorm2d``.

Examples:
    >>> import mpiflow.nn as nn
    >>> bn = nn.BatchNorm2d(3)
    >>> bn(flow.randn(4, 3, 2, 2)).shape, bn.num_batches_tracked.item()
    (mpiflow.Size([4, 3, 2, 2]), 1)
"""

from __future__ import annotations

from typing import Any

from ...autograd import no_grad
from ...tensors.creation import empty, ones, tensor, zeros
from ...tensors.tensor import Tensor
from .. import functional as F
from .. import init
from .module import Module
from .parameter import Parameter

__all__ = ["BatchNorm1d", "BatchNorm2d"]


class _BatchNorm(Module):
    """Shared by the batch norms: parameters, buffers, the forward."""

    weight: Parameter | None
    bias: Parameter | None
    running_mean: Tensor | None
    running_var: Tensor | None
    num_batches_tracked: Tensor | None
    _ndims: tuple[int, ...] = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(empty(num_features, dtype=dtype, device=device))
            self.bias = Parameter(empty(num_features, dtype=dtype, device=device))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype, device=device))
            self.register_buffer("running_var", ones(num_features, dtype=dtype, device=device))
            self.register_buffer("num_batches_tracked", tensor(0, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        """Running mean to zeros, variance to ones, the batch count to 0."""
        if self.track_running_stats:
            with no_grad():
                init.zeros_(self.running_mean)  # type: ignore[arg-type]
                init.ones_(self.running_var)  # type: ignore[arg-type]
                init.zeros_(self.num_batches_tracked)  # type: ignore[arg-type]

    def reset_parameters(self) -> None:
        """The running statistics, and weight to ones, bias to zeros."""
        self.reset_running_stats()
        if self.weight is not None and self.bias is not None:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in self._ndims:
            raise ValueError(f"expected {' or '.join(f'{n}D' for n in self._ndims)} input "
                             f"(got {input.ndim}D input)")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked.item())
        use_batch = self.training or self.running_mean is None
        return F.batch_norm(
            input,
            self.running_mean if not self.training or self.track_running_stats else None,
            self.running_var if not self.training or self.track_running_stats else None,
            self.weight, self.bias, use_batch, factor, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class BatchNorm2d(_BatchNorm):
    """Normalize each channel of ``(N, C, H, W)`` over the batch and the positions.

    Args:
        num_features: ``C``.
        eps: added to the variance.
        momentum: the running statistics' update factor (None: a cumulative average).
        affine: learn a scale (ones) and a shift (zeros).
        track_running_stats: keep running statistics for evaluation.
        device: of the parameters and buffers.
        dtype: of the parameters and buffers.

    Examples:
        >>> nn.BatchNorm2d(4)
        BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)
    """

    _ndims = (4,)


class BatchNorm1d(_BatchNorm):
    """Normalize each feature of ``(N, C)`` or ``(N, C, L)`` over the batch (and ``L``).

    Args:
        num_features: ``C``.
        eps: added to the variance.
        momentum: the running statistics' update factor (None: a cumulative average).
        affine: learn a scale and a shift.
        track_running_stats: keep running statistics for evaluation.
        device: of the parameters and buffers.
        dtype: of the parameters and buffers.

    Examples:
        >>> nn.BatchNorm1d(4)(flow.randn(3, 4)).shape
        mpiflow.Size([3, 4])
    """

    _ndims = (2, 3)
