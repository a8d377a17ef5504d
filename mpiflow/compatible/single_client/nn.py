"""``flow.nn``: activations, pooling, dropout and the losses of OneFlow 0.x's guides.

Examples:
    >>> import mpiflow as mf
    >>> relu(mf.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...nn import functional as F
from ...ops.conv import conv2d as _conv2d
from ...ops.pointwise import relu, sigmoid, tanh
from ...ops.pooling import avg_pool2d as _avg_pool2d
from ...ops.pooling import max_pool2d as _max_pool2d
from ...ops.shape import reshape
from ...ops.softmax import log_softmax
from ...ops.softmax import softmax as _softmax
from ...ops.window import pair
from ...tensors.tensor import Tensor
from .layers import check_nchw, padding_of
from .session import SESSION

__all__ = ["avg_pool2d", "bias_add", "conv2d", "dropout", "max_pool2d", "relu", "sigmoid",
           "softmax", "softmax_cross_entropy_with_logits",
           "sparse_softmax_cross_entropy_with_logits", "tanh"]


def _pool(input: Tensor, ksize: Any, strides: Any, padding: Any, data_format: str,
          what: str) -> dict[str, Any]:
    check_nchw(data_format, what)
    kernel, stride = pair(ksize, "ksize"), pair(strides, "strides")
    pads = padding_of(padding, tuple(input.shape[2:]), kernel, stride, (1, 1))
    return {"kernel_size": kernel, "stride": stride, "padding": pads}


def max_pool2d(input: Tensor, ksize: int | Sequence[int], strides: int | Sequence[int],
               padding: Any, data_format: str = "NCHW", name: str | None = None) -> Tensor:
    """The maximum of each window (``padding``: ``"SAME"``, ``"VALID"`` or numbers).

    Examples:
        >>> import mpiflow as mf
        >>> max_pool2d(mf.ones(1, 1, 3, 3), 2, 2, "SAME").shape
        mpiflow.Size([1, 1, 2, 2])
    """
    return _max_pool2d(input, **_pool(input, ksize, strides, padding, data_format,
                                      "flow.nn.max_pool2d"))


def avg_pool2d(input: Tensor, ksize: int | Sequence[int], strides: int | Sequence[int],
               padding: Any, data_format: str = "NCHW", name: str | None = None) -> Tensor:
    """The mean of each window; padding is not counted (TensorFlow's "SAME")."""
    return _avg_pool2d(input, **_pool(input, ksize, strides, padding, data_format,
                                      "flow.nn.avg_pool2d"), count_include_pad=False)


def conv2d(input: Tensor, filters: Tensor, strides: Any, padding: Any,
           data_format: str = "NCHW", dilations: Any = 1, groups: int = 1,
           name: str | None = None) -> Tensor:
    """Convolution with a given weight ``filters`` ``(O, C / groups, kh, kw)``."""
    check_nchw(data_format, "flow.nn.conv2d")
    stride, dilation = pair(strides, "strides"), pair(dilations, "dilations")
    pads = padding_of(padding, tuple(input.shape[2:]), tuple(filters.shape[2:]),  # type: ignore[arg-type]
                      stride, dilation)
    return _conv2d(input, filters, None, stride, pads, dilation, groups)


def bias_add(value: Tensor, bias: Tensor, data_format: str | None = None,
             name: str | None = None) -> Tensor:
    """``value + bias`` along the channels (dim 1 for NCHW and 2-D inputs)."""
    if value.ndim > 2 and (data_format or "NCHW").upper().startswith("NC"):
        return value + reshape(bias, (-1, *([1] * (value.ndim - 2))))
    return value + bias


def dropout(x: Tensor, rate: float, noise_shape: Any = None, seed: int | None = None,
            name: str | None = None) -> Tensor:
    """Zero elements with probability ``rate`` (scaling the rest) in a train job; in a predict
    job (or outside jobs) ``x`` unchanged."""
    call = SESSION.call
    return F.dropout(x, rate, training=call is not None and call.train)


def softmax(logits: Tensor, axis: int | None = None, name: str | None = None) -> Tensor:
    """Softmax along ``axis`` (the last by default)."""
    return _softmax(logits, -1 if axis is None else axis)


def sparse_softmax_cross_entropy_with_logits(labels: Tensor, logits: Tensor,
                                             name: str | None = None) -> Tensor:
    """Each sample's cross-entropy of ``logits`` ``(N, C)`` and class indices ``labels``
    ``(N,)``: a loss per sample (a job's update averages it)."""
    return F.cross_entropy(logits, labels.long(), reduction="none")


def softmax_cross_entropy_with_logits(labels: Tensor, logits: Tensor,
                                      name: str | None = None) -> Tensor:
    """Each sample's cross-entropy of ``logits`` and class probabilities ``labels``."""
    return -(labels * log_softmax(logits, -1)).sum(-1)
