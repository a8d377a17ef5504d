"""``flow.layers``: ``dense`` and ``conv2d``, with their variables found by name.

A layer named ``name`` keeps ``name-weight`` and ``name-bias`` (OneFlow's names); an unnamed
layer is named by its kind and its order in the job (``dense_0``, ...), the same on every
call.

Examples:
    >>> import numpy
    >>> import mpiflow.compatible.single_client as flow
    >>> @flow.global_function()
    ... def job(x: flow.typing.Numpy.Placeholder((2, 3))) -> flow.typing.Numpy:
    ...     return flow.layers.dense(x, 4, kernel_initializer=flow.ones_initializer())
    >>> job(numpy.ones((2, 3), numpy.float32)).tolist()
    [[3.0, 3.0, 3.0, 3.0], [3.0, 3.0, 3.0, 3.0]]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...ops.conv import conv2d as _conv2d
from ...ops.linear import linear
from ...ops.shape import reshape
from ...ops.window import pair
from ...tensors.tensor import Tensor
from .initializers import Initializer, zeros_initializer
from .session import SESSION
from .variables import Regularizer, get_variable

__all__ = ["conv2d", "dense", "same_padding"]


def _name(name: str | None, kind: str) -> str:
    return name if name is not None else SESSION.current_call(f"flow.layers.{kind}").auto_name(
        kind)


def dense(inputs: Tensor, units: int, activation: Callable[[Tensor], Tensor] | None = None,
          use_bias: bool = True, kernel_initializer: Initializer | None = None,
          bias_initializer: Initializer | None = None,
          kernel_regularizer: Regularizer | None = None,
          bias_regularizer: Regularizer | None = None, trainable: bool = True,
          name: str | None = None, **_: Any) -> Tensor:
    """``activation(inputs @ weight.T + bias)``; inputs of more than 2 dims are flattened to
    ``(-1, last)`` first.

    Args:
        inputs: ``(N, in)`` (or more dims).
        units: the output features.
        activation: applied to the result (``flow.nn.relu``, ...).
        use_bias: add ``name-bias``.
        kernel_initializer: of ``name-weight`` ``(units, in)`` (Glorot uniform by default).
        bias_initializer: of the bias (zeros by default).
        kernel_regularizer: a penalty on the weight, added to the loss.
        bias_regularizer: a penalty on the bias.
        trainable: whether the update changes the variables.
        name: the layer's name.

    Returns:
        ``(N, units)``.
    """
    name = _name(name, "dense")
    if inputs.ndim > 2:
        inputs = reshape(inputs, (-1, inputs.shape[-1]))
    weight = get_variable(f"{name}-weight", (units, inputs.shape[-1]), inputs.dtype,
                          kernel_initializer, kernel_regularizer, trainable)
    bias = (get_variable(f"{name}-bias", (units,), inputs.dtype,
                         bias_initializer or zeros_initializer(), bias_regularizer, trainable)
            if use_bias else None)
    out = linear(inputs, weight, bias)
    return activation(out) if activation is not None else out


def same_padding(size: Sequence[int], kernel: tuple[int, int], stride: tuple[int, int],
                 dilation: tuple[int, int]) -> tuple[int, int, int, int]:
    """TensorFlow's "SAME" padding ``(top, bottom, left, right)``: output ``ceil(size /
    stride)``, the odd row or column at the end.

    Examples:
        >>> same_padding((7, 8), (3, 3), (2, 2), (1, 1))
        (1, 1, 0, 1)
    """
    out = []
    for k in range(2):
        n = -(-size[k] // stride[k])
        total = max((n - 1) * stride[k] + dilation[k] * (kernel[k] - 1) + 1 - size[k], 0)
        out += [total // 2, total - total // 2]
    return out[0], out[1], out[2], out[3]


def padding_of(padding: Any, size: Sequence[int], kernel: tuple[int, int],
               stride: tuple[int, int], dilation: tuple[int, int]) -> Any:
    """``"SAME"``/``"VALID"`` (any case), an int, a pair or OneFlow's per-dim list, as the
    ops' padding.

    Raises:
        ValueError: another string.
    """
    if isinstance(padding, str):
        if padding.upper() == "SAME":
            return same_padding(size, kernel, stride, dilation)
        if padding.upper() == "VALID":
            return 0
        raise ValueError(f"padding must be 'SAME', 'VALID' or numbers, got {padding!r}")
    if isinstance(padding, Sequence) and len(padding) == 4:  # NCHW pairs per dim
        rows = [p if isinstance(p, Sequence) else (p, p) for p in padding]
        return (*rows[2], *rows[3]) if len(rows[2]) == 2 else padding
    return padding


def check_nchw(data_format: str, what: str) -> None:
    """Raises ValueError for a data format other than NCHW."""
    if data_format.upper() not in ("NCHW", "CHANNELS_FIRST"):
        raise ValueError(f"{what}: data_format={data_format!r} is not supported by mpiflow; "
                         "use NCHW (transpose the input with flow.transpose(x, (0, 3, 1, 2)))")


def conv2d(inputs: Tensor, filters: int, kernel_size: int | Sequence[int] = 1,
           strides: int | Sequence[int] = 1, padding: Any = "VALID",
           data_format: str = "NCHW", dilation_rate: int | Sequence[int] = 1,
           activation: Callable[[Tensor], Tensor] | None = None, use_bias: bool = True,
           groups: int = 1, kernel_initializer: Initializer | None = None,
           bias_initializer: Initializer | None = None,
           kernel_regularizer: Regularizer | None = None,
           bias_regularizer: Regularizer | None = None, trainable: bool = True,
           name: str | None = None, **_: Any) -> Tensor:
    """A 2-D convolution layer on ``(N, C, H, W)``: ``name-weight`` ``(filters, C / groups,
    kh, kw)`` and ``name-bias``.

    Args:
        inputs: ``(N, C, H, W)``.
        filters: the output channels.
        kernel_size: an int or a pair.
        strides: an int or a pair.
        padding: ``"SAME"`` (output ``ceil(size / stride)``), ``"VALID"``, or numbers.
        data_format: ``"NCHW"`` only.
        dilation_rate: an int or a pair.
        activation: applied to the result.
        use_bias: add a bias.
        groups: channel groups.
        kernel_initializer: of the weight (Glorot uniform by default).
        bias_initializer: of the bias (zeros by default).
        kernel_regularizer: a penalty on the weight.
        bias_regularizer: a penalty on the bias.
        trainable: whether the update changes the variables.
        name: the layer's name.

    Returns:
        ``(N, filters, OH, OW)``.
    """
    check_nchw(data_format, "flow.layers.conv2d")
    name = _name(name, "conv2d")
    kernel, stride, dilation = (pair(kernel_size, "kernel_size"), pair(strides, "strides"),
                                pair(dilation_rate, "dilation_rate"))
    weight = get_variable(f"{name}-weight", (filters, inputs.shape[1] // groups, *kernel),
                          inputs.dtype, kernel_initializer, kernel_regularizer, trainable)
    bias = (get_variable(f"{name}-bias", (filters,), inputs.dtype,
                         bias_initializer or zeros_initializer(), bias_regularizer, trainable)
            if use_bias else None)
    pads = padding_of(padding, tuple(inputs.shape[2:]), kernel, stride, dilation)
    out = _conv2d(inputs, weight, bias, stride, pads, dilation, groups)
    return activation(out) if activation is not None else out
