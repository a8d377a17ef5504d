"""Stateless neural-network functions, as ``torch.nn.functional`` (local and global tensors).

Every function is built from mpiflow ops, so autograd differentiates it through its parts and
global tensors work as they do in any op: a loss of a batch split over the ranks (``S(0)``) is a
global scalar, and its backward gives the full-batch gradients. Class indices are matched with
a comparison against ``arange(C)`` rather than gathered, so a split batch never moves.

Examples:
    >>> import mpiflow.nn.functional as F
    >>> F.relu(flow.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
    >>> logits = flow.tensor([[2.0, 0.0], [0.0, 2.0]])
    >>> round(F.cross_entropy(logits, flow.tensor([0, 1])).item(), 4)
    0.1269
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy

from .. import dtypes as _dtypes
from ..autograd import no_grad
from ..layouts.sbp import Broadcast, Partial
from ..ops.bounds import check_bounds
from ..ops.linear import linear as _linear
from ..ops.pointwise import (
    abs,
    assign_,
    clamp,
    exp,
    log,
    log1p,
    logical_and,
    rsqrt,
    sigmoid,
    tanh,
    where,
)
from ..ops.pointwise import gelu as _gelu_erf
from ..ops.pointwise import relu as _relu
from ..ops.reduction import amax, mean, sum
from ..ops.shape import flatten, reshape, squeeze, unsqueeze
from ..ops.shifts import pad
from ..ops.softmax import log_softmax as _log_softmax
from ..ops.softmax import softmax as _softmax
from ..tensors.creation import arange
from ..tensors.random import rand
from ..tensors.tensor import Tensor
from . import cross_entropy as _ce
from .embedding_lookup import lookup
from .spatial import avg_pool2d, batch_norm, conv2d, dropout2d, max_pool2d

__all__ = [
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "cross_entropy", "dropout",
    "embedding", "gelu", "l1_loss", "layer_norm", "leaky_relu", "linear", "log_softmax",
    "mse_loss", "nll_loss", "one_hot", "relu", "sigmoid", "silu", "softmax", "tanh",
    "flatten", "conv2d", "max_pool2d", "avg_pool2d", "batch_norm", "dropout2d", "pad",
]

_REDUCTIONS = ("none", "mean", "sum")


# -- helpers -------------------------------------------------------------------------------------
def _broadcast_like(value: Tensor, like: Tensor) -> Tensor:
    """A small local constant (a class weight) made global where ``like`` is: ``B``."""
    if like.is_global and value.is_local:
        return value.to_global(like.placement, (Broadcast(),) * like.placement.ndim)
    return value


def check_reduction(reduction: str) -> None:
    """Raise ``ValueError`` unless ``reduction`` is ``"none"``, ``"mean"`` or ``"sum"``.

    Examples:
        >>> F.check_reduction("mean")
    """
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return mean(loss)
    return sum(loss) if reduction == "sum" else loss


def _classes(like: Tensor, num_classes: int) -> Tensor:
    """``arange(num_classes)``, global (``B``) where ``like`` is."""
    if like.is_global:
        return arange(num_classes, placement=like.placement,
                      sbp=(Broadcast(),) * like.placement.ndim)
    return arange(num_classes)


# -- layers --------------------------------------------------------------------------------------
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias``.

    Args:
        input: ``(*, in_features)``.
        weight: ``(out_features, in_features)``.
        bias: ``(out_features,)`` or None.

    Returns:
        ``(*, out_features)``.

    Examples:
        >>> F.linear(flow.ones(2, 3), flow.ones(4, 3)).shape
        mpiflow.Size([2, 4])
    """
    return _linear(input, weight, bias)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
            ) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``.

    The mask comes from mpiflow's counter-based generator, so on a global tensor it is the
    same logical mask whatever the layout (and ranks of a broadcast layout agree).

    Args:
        input: the tensor.
        p: the probability of dropping, in ``[0, 1]``.
        training: apply dropout (else return ``input``).
        inplace: write the result into ``input``.

    Examples:
        >>> F.dropout(flow.ones(4), p=0.5, training=False).tolist()
        [1.0, 1.0, 1.0, 1.0]
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    dtype = input.dtype if input.dtype.is_floating_point else _dtypes.float32
    with no_grad():
        if input.is_global:
            sbp = tuple(Broadcast() if isinstance(s, Partial) else s for s in input.sbp)
            noise = rand(tuple(input.shape), dtype=dtype, placement=input.placement, sbp=sbp)
        else:
            noise = rand(tuple(input.shape), dtype=dtype)
        scale = (noise >= p).to(dtype) * (1.0 / (1.0 - p)) if p < 1.0 else noise * 0.0
    out = input * scale
    if inplace:
        return assign_(input, out)
    return out


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None) -> Tensor:
    """Rows of ``weight`` picked by the integer tensor ``input`` (``weight[input]``).

    Args:
        input: integer indices, any shape.
        weight: ``(num_embeddings, embedding_dim)``.
        padding_idx: rows of this index get no gradient.

    Returns:
        ``input.shape + (embedding_dim,)``; backward adds up repeated indices. A batch of
        indices split over the ranks stays split (see :mod:`mpiflow.nn.embedding_lookup`).

    Examples:
        >>> F.embedding(flow.tensor([1, 1, 0]), flow.tensor([[0.5], [2.0]])).tolist()
        [[2.0], [2.0], [0.5]]
    """
    if input.dtype.numpy.kind not in "iu":
        raise TypeError(f"embedding expects an integer index tensor, got {input.dtype!r}")
    if padding_idx is not None and padding_idx < 0:
        padding_idx += weight.shape[0]
    return lookup(input, weight, padding_idx)


def layer_norm(input: Tensor, normalized_shape: int | tuple[int, ...] | list[int],
               weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5
               ) -> Tensor:
    """Normalize over the last dims to mean 0 and variance 1 (biased), then scale and shift.

    Examples:
        >>> F.layer_norm(flow.tensor([[1.0, 3.0]]), (2,)).tolist()
        [[-0.9999949932098389, 0.9999949932098389]]
    """
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not shape or tuple(input.shape[input.ndim - len(shape):]) != shape or \
            input.ndim < len(shape):
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, shape))}], but got input of size "
                           f"{list(input.shape)}")
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    centered = input - mean(input, dims, keepdim=True)
    variance = mean(centered * centered, dims, keepdim=True)
    out = centered * rsqrt(variance + eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot vectors of an integer tensor: shape ``tensor.shape + (num_classes,)``.

    Examples:
        >>> F.one_hot(flow.tensor([0, 2]), 3).tolist()
        [[1, 0, 0], [0, 0, 1]]
    """
    if tensor.dtype.numpy.kind not in "iu":
        raise TypeError("one_hot is only applicable to index tensor")
    if num_classes == -1:
        num_classes = int(amax(tensor).item()) + 1 if tensor.numel() else 0
    return (unsqueeze(tensor, -1) == _classes(tensor, num_classes)).to(_dtypes.int64)


# -- activations ---------------------------------------------------------------------------------
def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``max(input, 0)``."""
    out = _relu(input)
    return assign_(input, out) if inplace else out


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """GELU: ``x * Phi(x)`` (``approximate="tanh"``: PyTorch's tanh approximation)."""
    if approximate == "none":
        return _gelu_erf(input)
    if approximate != "tanh":
        raise ValueError(f"approximate argument must be either none or tanh, got {approximate}")
    inner = (input + input * input * input * 0.044715) * math.sqrt(2.0 / math.pi)
    return input * 0.5 * (tanh(inner) + 1.0)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * sigmoid(x)``."""
    out = input * sigmoid(input)
    return assign_(input, out) if inplace else out


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``x`` where positive, else ``negative_slope * x``."""
    out = where(input > 0, input, input * negative_slope)
    return assign_(input, out) if inplace else out


def _softmax_dim(name: str, ndim: int) -> int:
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  "to include dim=X as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input: Tensor, dim: int | None = None, dtype: Any = None) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``dim`` (stable)."""
    if dim is None:
        dim = _softmax_dim("softmax", input.ndim)
    return _softmax(input, dim, dtype)


def log_softmax(input: Tensor, dim: int | None = None, dtype: Any = None) -> Tensor:
    """``x - logsumexp(x)`` along ``dim`` (stable)."""
    if dim is None:
        dim = _softmax_dim("log_softmax", input.ndim)
    return _log_softmax(input, dim, dtype)


# -- losses --------------------------------------------------------------------------------------
def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Squared error ``(input - target)**2``, reduced (``"none"``, ``"mean"``, ``"sum"``).

    Examples:
        >>> F.mse_loss(flow.tensor([1.0, 3.0]), flow.tensor([0.0, 0.0])).item()
        5.0
    """
    check_reduction(reduction)
    diff = input - target
    return _reduce(diff * diff, reduction)


def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Absolute error ``|input - target|``, reduced.

    Examples:
        >>> F.l1_loss(flow.tensor([1.0, -3.0]), flow.tensor([0.0, 0.0])).item()
        2.0
    """
    check_reduction(reduction)
    return _reduce(abs(input - target), reduction)


def _batched(input: Tensor, target: Tensor) -> tuple[Tensor, Tensor, bool]:
    """``(N, C, d...)`` input and ``(N, d...)`` target; an unbatched ``(C,)`` input gets N=1."""
    if input.ndim == 0:
        raise ValueError("input tensor should be 1D or more")
    if input.ndim == 1:
        return unsqueeze(input, 0), unsqueeze(target, 0), True
    return input, target, False


def _check_targets(input: Tensor, target: Tensor, ignore_index: int) -> None:
    """Class-index targets: integer, of shape ``(N, d...)``, each in ``[0, C)`` or ignored.

    The bounds check is a step of a traced plan too (replays check their targets), agreed
    over the ranks of a split target.
    """
    if target.dtype.numpy.kind not in "iu":
        raise TypeError(f"expected class indices of an integer dtype, got {target.dtype!r}")
    want = (input.shape[0], *input.shape[2:])
    if tuple(target.shape) != want:
        raise ValueError(f"Expected target size {list(want)}, got {list(target.shape)}")
    check_bounds(target, input.shape[1], _target_error, ignore=ignore_index)


def _target_error(value: int) -> IndexError:
    return IndexError(f"Target {value} is out of bounds.")


def _nll_parts(input: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int
               ) -> tuple[Tensor, Tensor]:
    """``(-w[t] * input[n, t], w[t])`` per element (zeros where ignored), both ``(N, d...)``."""
    num_classes = input.shape[1]
    view = [1] * input.ndim
    view[1] = num_classes
    classes = reshape(_classes(target, num_classes), *view)
    picked_target = unsqueeze(target, 1)
    mask = picked_target == classes
    if 0 <= ignore_index < num_classes:
        mask = logical_and(mask, picked_target != ignore_index)
    picked = sum(where(mask, input, 0.0), 1)
    if weight is None:
        with no_grad():
            chosen = sum(mask.to(input.dtype), 1)
        return picked * -1.0, chosen
    with no_grad():
        chosen = sum(where(mask, reshape(_broadcast_like(weight, input), *view), 0.0), 1)
    return picked * chosen * -1.0, chosen


def _weighted_mean(loss: Tensor, chosen: Tensor) -> Tensor:
    """``sum(loss) / sum(weights of the used targets)``: NaN when every target is ignored."""
    with numpy.errstate(divide="ignore", invalid="ignore"):
        return sum(loss) / sum(chosen)


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
             ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """Negative log likelihood of class indices: ``-weight[t] * input[n, t]``.

    Args:
        input: log-probabilities ``(N, C)``, ``(N, C, d...)`` or ``(C,)``.
        target: class indices ``(N,)``, ``(N, d...)`` or ``()``.
        weight: a weight per class ``(C,)``.
        ignore_index: targets of this value add nothing (nor to the mean's denominator).
        reduction: ``"mean"`` divides by the sum of the used targets' weights.

    Examples:
        >>> F.nll_loss(flow.tensor([[-1.0, -2.0]]), flow.tensor([1])).item()
        2.0
    """
    check_reduction(reduction)
    input, target, unbatched = _batched(input, target)
    _check_targets(input, target, ignore_index)
    loss, chosen = _nll_parts(input, target, weight, ignore_index)
    if reduction == "mean":
        return _weighted_mean(loss, chosen)
    if reduction == "sum":
        return sum(loss)
    return squeeze(loss, 0) if unbatched else loss


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                  ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """``nll_loss(log_softmax(input, 1), target)``, with optional label smoothing.

    Args:
        input: unnormalized scores ``(N, C)``, ``(N, C, d...)`` or ``(C,)``.
        target: class indices (integer, ``(N, d...)``) or class probabilities (floating, the
            shape of ``input``).
        weight: a weight per class ``(C,)``.
        ignore_index: class-index targets of this value are skipped.
        reduction: ``"none"``, ``"mean"`` or ``"sum"``.
        label_smoothing: in ``[0, 1]``: the target mixes with the uniform distribution.

    Examples:
        >>> round(F.cross_entropy(flow.zeros(1, 4), flow.tensor([2])).item(), 4)
        1.3863
    """
    check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if _ce.fits(input, target, weight, reduction, label_smoothing):
        _check_targets(input, target, ignore_index)
        return _ce.cross_entropy_indices(input, target, ignore_index, reduction)
    batched_input, batched_target, unbatched = _batched(input, target)
    num_classes = batched_input.shape[1]
    logp = _log_softmax(batched_input, 1)
    view = [1] * logp.ndim
    view[1] = num_classes
    class_weight = None if weight is None else reshape(_broadcast_like(weight, logp), *view)
    if target.dtype.is_floating_point:
        if tuple(target.shape) != tuple(input.shape):
            raise ValueError(f"class-probability targets need the input's shape "
                             f"{list(input.shape)}, got {list(target.shape)}")
        probs = batched_target
        if label_smoothing > 0:
            probs = probs * (1.0 - label_smoothing) + label_smoothing / num_classes
        term = logp * probs
        if class_weight is not None:
            term = term * class_weight
        loss = sum(term, 1) * -1.0
        return squeeze(loss, 0) if unbatched and reduction == "none" else \
            _reduce(loss, reduction)
    _check_targets(batched_input, batched_target, ignore_index)
    loss, chosen = _nll_parts(logp, batched_target, weight, ignore_index)
    if label_smoothing > 0:
        smooth = logp if class_weight is None else logp * class_weight
        smooth = where(batched_target != ignore_index, sum(smooth, 1) * -1.0, 0.0)
        loss = loss * (1.0 - label_smoothing) + smooth * (label_smoothing / num_classes)
    if reduction == "mean":
        return _weighted_mean(loss, chosen)
    if reduction == "sum":
        return sum(loss)
    return squeeze(loss, 0) if unbatched else loss


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,
                                     weight: Tensor | None = None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """Binary cross entropy of ``sigmoid(input)``, computed stably from the logits.

    ``loss = (1 - y) * x - lw * log_sigmoid(x)`` with ``lw = 1 + (pos_weight - 1) * y`` and
    ``log_sigmoid(x) = -(max(-x, 0) + log1p(exp(-|x|)))``, PyTorch's form.

    Args:
        input: logits.
        target: probabilities of the same shape.
        weight: a weight broadcast over the elements.
        reduction: ``"none"``, ``"mean"`` or ``"sum"``.
        pos_weight: a weight of the positive term, broadcast along the last dim (per class).

    Examples:
        >>> round(F.binary_cross_entropy_with_logits(flow.zeros(2), flow.ones(2)).item(), 4)
        0.6931
    """
    check_reduction(reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({list(target.shape)}) must be the same as input size "
                         f"({list(input.shape)})")
    log_sigmoid = (_relu(input * -1.0) + log1p(exp(abs(input) * -1.0))) * -1.0
    if pos_weight is not None:
        log_weight = (_broadcast_like(pos_weight, input) - 1.0) * target + 1.0
        log_sigmoid = log_sigmoid * log_weight
    loss = (1.0 - target) * input - log_sigmoid
    if weight is not None:
        loss = loss * _broadcast_like(weight, input)
    return _reduce(loss, reduction)


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         reduction: str = "mean") -> Tensor:
    """Binary cross entropy of probabilities; each log is clamped at -100, as PyTorch.

    Examples:
        >>> round(F.binary_cross_entropy(flow.tensor([0.5]), flow.tensor([1.0])).item(), 4)
        0.6931
    """
    check_reduction(reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({list(target.shape)}) that is different to the "
                         f"input size ({list(input.shape)}) is deprecated. Please ensure they "
                         "have the same size.")
    with numpy.errstate(divide="ignore"):
        log_p = clamp(log(input), min=-100.0)
        log_q = clamp(log(1.0 - input), min=-100.0)
    loss = (target * log_p + (1.0 - target) * log_q) * -1.0
    if weight is not None:
        loss = loss * _broadcast_like(weight, input)
    return _reduce(loss, reduction)
