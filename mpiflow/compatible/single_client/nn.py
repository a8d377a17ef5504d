"""``flow.nn``: activations, pooling, dropout and the losses of OneFlow 0.x's guides.

Examples:
    >>> import mpiflow as mf
    >>> relu(mf.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...autograd import no_grad
from ...dtypes import float32
from ...layouts.sbp import Broadcast, Split
from ...nn import functional as F
from ...ops.conv import conv2d as _conv2d
from ...ops.pointwise import relu, sigmoid, tanh
from ...ops.pooling import avg_pool2d as _avg_pool2d
from ...ops.pooling import max_pool2d as _max_pool2d
from ...ops.shape import reshape
from ...ops.softmax import log_softmax
from ...ops.softmax import softmax as _softmax
from ...ops.window import pair
from ...tensors.random import Generator, rand
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


def dropout(x: Tensor, rate: float, noise_shape: Sequence[int | None] | None = None,
            seed: int | None = None, name: str | None = None) -> Tensor:
    """Zero elements with probability ``rate`` (scaling the rest by ``1 / (1 - rate)``) in a
    train job; in a predict job (or outside jobs) ``x`` unchanged.

    Args:
        x: the tensor.
        rate: the probability of dropping, in ``[0, 1)``.
        noise_shape: the shape of the keep/drop mask, broadcast against ``x`` as
            TensorFlow's ``tf.nn.dropout`` does: one entry per dim of ``x``, equal to it (or
            None) or 1 (the same decision along that dim: ``(N, C, 1, 1)`` drops whole
            channels).
        seed: the masks come from a generator of their own, seeded with ``seed`` on first
            use (one per dropout name and seed, kept by the session): a program's masks
            are the same on every run whatever else draws random numbers. Without it they
            come from mpiflow's default generator (``mpiflow.manual_seed``).
        name: the layer's name (keys the seeded generator; unnamed dropouts are numbered).

    Raises:
        ValueError: ``rate`` outside ``[0, 1)``, or a ``noise_shape`` that does not
            broadcast against ``x``.

    Examples:
        >>> import mpiflow as mf
        >>> dropout(mf.ones(2, 3), 0.5, noise_shape=[2, 1]).tolist()  # outside a train job
        [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    """
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"flow.nn.dropout: rate must be in [0, 1), got {rate}")
    shape = _noise_shape(noise_shape, tuple(x.shape))
    call = SESSION.call
    if call is None or not call.train or rate == 0.0:
        return x
    if seed is None and shape == tuple(x.shape):
        return F.dropout(x, rate, training=True)
    generator = None
    if seed is not None:
        key = (name if name is not None else call.auto_name("dropout"), seed)
        generator = SESSION.generators.get(key)
        if generator is None:
            generator = SESSION.generators[key] = Generator().manual_seed(seed)
    dtype = x.dtype if x.dtype.is_floating_point else float32
    with no_grad():
        if x.is_global:
            sbp = tuple(s if isinstance(s, Split) and shape[s.dim] == x.shape[s.dim]
                        else Broadcast() for s in x.sbp)
            noise = rand(shape, dtype=dtype, placement=x.placement, sbp=sbp,
                         generator=generator)
        else:
            noise = rand(shape, dtype=dtype, generator=generator)
        scale = (noise >= rate).to(dtype) * (1.0 / (1.0 - rate))
    return x * scale


def _noise_shape(noise_shape: Sequence[int | None] | None, shape: tuple[int, ...]
                 ) -> tuple[int, ...]:
    if noise_shape is None:
        return shape
    given = tuple(noise_shape)
    if len(given) != len(shape) or any(n not in (None, 1, d) for n, d in zip(given, shape)):
        raise ValueError(f"flow.nn.dropout: noise_shape {list(given)} does not broadcast "
                         f"against the input's shape {list(shape)} (one entry per dim: the "
                         "dim's size, None or 1)")
    return tuple(d if n is None else int(n) for n, d in zip(given, shape))


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
