"""Functions on batches of images ``(N, C, H, W)``: convolution, pooling, batch normalization
and channel dropout, as ``torch.nn.functional`` (re-exported by :mod:`mpiflow.nn.functional`).

Convolution and pooling are ops of their own (:mod:`mpiflow.ops.conv`,
:mod:`mpiflow.ops.pooling`); batch normalization and channel dropout are built from ops, so
global tensors work as in any op. On a batch split over the ranks (``S(0)``) the statistics of
:func:`batch_norm` are those of the whole logical batch (the per-rank sums are a partial sum
that the engine reduces): PyTorch's ``SyncBatchNorm``, with no separate module.

Examples:
    >>> import mpiflow.nn.functional as F
    >>> F.max_pool2d(flow.ones(1, 1, 2, 2), 2).tolist()
    [[[[1.0]]]]
    >>> F.batch_norm(flow.tensor([[1.0], [3.0]]), None, None, training=True).tolist()
    [[-0.9999949932098389], [0.9999949932098389]]
"""

from __future__ import annotations

from .. import dtypes as _dtypes
from ..autograd import no_grad
from ..layouts.sbp import Broadcast, Split
from ..ops.conv import conv2d
from ..ops.pointwise import assign_, rsqrt
from ..ops.pooling import avg_pool2d, max_pool2d
from ..ops.reduction import mean
from ..ops.shape import reshape
from ..tensors.random import rand
from ..tensors.tensor import Tensor

__all__ = ["avg_pool2d", "batch_norm", "conv2d", "dropout2d", "max_pool2d"]


def _update(running: Tensor, batch: Tensor, momentum: float) -> None:
    """``running = (1 - momentum) * running + momentum * batch``, outside autograd."""
    with no_grad():
        if running.is_global and batch.is_global:
            batch = batch.to_global(running.placement, running.sbp)
        assign_(running, running * (1.0 - momentum) + batch * momentum)


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalize each channel (dim 1) over the batch and the spatial dims, then scale and
    shift, as PyTorch's.

    In training the batch's mean and biased variance normalize, and the running statistics
    (when given) move towards the batch's mean and unbiased variance by ``momentum``; in
    evaluation the running statistics normalize. On a global input the statistics are those
    of the whole logical batch, whatever its layout.

    Args:
        input: ``(N, C, *)`` with at least two dims.
        running_mean: ``(C,)``, updated in place in training; or None.
        running_var: ``(C,)``, updated in place in training; or None.
        weight: ``(C,)`` scale, or None.
        bias: ``(C,)`` shift, or None.
        training: use (and track) the batch's statistics.
        momentum: the running statistics' update factor.
        eps: added to the variance.

    Returns:
        A tensor of ``input``'s shape.

    Raises:
        ValueError: training on one value per channel, or a missing running statistic in
            evaluation.

    Examples:
        >>> F.batch_norm(flow.ones(2, 3), flow.zeros(3), flow.ones(3)).tolist()[0]
        [0.9999949932098389, 0.9999949932098389, 0.9999949932098389]
    """
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected an input with at least 2 dims (N, C, ...), got "
                         f"size {list(input.shape)}")
    channels = int(input.shape[1])
    shape = (1, channels, *([1] * (input.ndim - 2)))
    dims = (0, *range(2, input.ndim))
    if training:
        count = input.numel() // max(channels, 1)
        if count <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input "
                             f"size {list(input.shape)}")
        batch_mean = mean(input, dims, keepdim=True)
        centered = input - batch_mean
        variance = mean(centered * centered, dims, keepdim=True)
        if running_mean is not None:
            _update(running_mean, reshape(batch_mean.detach(), (channels,)), momentum)
        if running_var is not None:
            _update(running_var, reshape(variance.detach(), (channels,)) * (count / (count - 1)),
                    momentum)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: running_mean and running_var are needed in evaluation "
                             "(training=False)")
        centered = input - reshape(running_mean, shape)
        variance = reshape(running_var, shape)
    out = centered * rsqrt(variance + eps)
    if weight is not None:
        out = out * reshape(weight, shape)
    if bias is not None:
        out = out + reshape(bias, shape)
    return out


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
              ) -> Tensor:
    """Zero whole channels with probability ``p`` and scale the rest by ``1 / (1 - p)``.

    Args:
        input: ``(N, C, H, W)``, or ``(C, H, W)`` (one image: its channels are dropped).
        p: the probability of dropping a channel, in ``[0, 1]``.
        training: apply dropout (else return ``input``).
        inplace: write the result into ``input``.

    Returns:
        A tensor of ``input``'s shape; on a global input the mask is laid out as the input's
        batch and channel dims.

    Examples:
        >>> F.dropout2d(flow.ones(1, 2, 2, 2), p=0.5, training=False).shape
        mpiflow.Size([1, 2, 2, 2])
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if input.ndim not in (3, 4):
        raise ValueError(f"dropout2d: expected a 3-D or 4-D input, got size "
                         f"{list(input.shape)}")
    if not training or p == 0.0:
        return input
    lead = input.ndim - 2  # the dims a channel's mask spans: (N, C) or (C,)
    shape = (*input.shape[:lead], 1, 1)
    dtype = input.dtype if input.dtype.is_floating_point else _dtypes.float32
    with no_grad():
        if input.is_global:
            sbp = tuple(s if isinstance(s, Split) and s.dim < lead else Broadcast()
                        for s in input.sbp)
            noise = rand(shape, dtype=dtype, placement=input.placement, sbp=sbp)
        else:
            noise = rand(shape, dtype=dtype)
        scale = (noise >= p).to(dtype) * (1.0 / (1.0 - p)) if p < 1.0 else noise * 0.0
    out = input * scale
    return assign_(input, out) if inplace else out

