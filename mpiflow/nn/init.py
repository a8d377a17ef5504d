"""Parameter initialization, as ``torch.nn.init``: in place, outside autograd.

Random fills use mpiflow's counter-based generator through :meth:`Tensor.uniform_` and
:meth:`Tensor.normal_`: a global tensor gets, on each rank, its region of one logical value, so
the value does not depend on the layout (a split parameter holds the slabs of the value the
local parameter would have after the same seed and calls). Partial layouts cannot be drawn.

Examples:
    >>> import mpiflow.nn as nn
    >>> w = nn.Parameter(flow.empty(3, 5))
    >>> _ = nn.init.kaiming_uniform_(w, a=5 ** 0.5)
    >>> bool((w.abs() <= 1 / 5 ** 0.5).all())
    True
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from ..autograd import no_grad
from ..ops.pointwise import fill_
from ..tensors.random import Generator
from ..tensors.random import normal_ as _normal_
from ..tensors.random import uniform_ as _uniform_
from ..tensors.tensor import Tensor

__all__ = [
    "calculate_gain", "constant_", "kaiming_normal_", "kaiming_uniform_", "normal_", "ones_",
    "uniform_", "xavier_normal_", "xavier_uniform_", "zeros_",
]

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d")


def calculate_gain(nonlinearity: str, param: Any = None) -> float:
    """The recommended gain for a nonlinearity (PyTorch's table).

    Args:
        nonlinearity: ``"linear"``, ``"conv*"``, ``"sigmoid"``, ``"tanh"``, ``"relu"``,
            ``"leaky_relu"`` or ``"selu"``.
        param: the negative slope of ``"leaky_relu"`` (default 0.01).

    Examples:
        >>> nn.init.calculate_gain("relu")
        1.4142135623730951
    """
    if nonlinearity in _LINEAR or nonlinearity == "sigmoid":
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """``(fan_in, fan_out)``: ``size(1)`` and ``size(0)`` times the receptive field.

    Args:
        tensor: a weight of at least 2 dims.

    Returns:
        The fan-in and the fan-out.

    Raises:
        ValueError: a tensor of fewer than 2 dims.

    Examples:
        >>> nn.init.calculate_fan_in_and_fan_out(flow.empty(8, 3, 2, 2))
        (12, 32)
    """
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


# PyTorch's spelling (torch.nn.init._calculate_fan_in_and_fan_out), which ported code calls.
_calculate_fan_in_and_fan_out = calculate_fan_in_and_fan_out


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0,
             generator: Generator | None = None) -> Tensor:
    """Fill with numbers uniform in ``[a, b)``; returns ``tensor``.

    Examples:
        >>> bool((nn.init.uniform_(flow.empty(4), -1, 1).abs() < 1).all())
        True
    """
    with no_grad():
        return _uniform_(tensor, a, b, generator=generator)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0,
            generator: Generator | None = None) -> Tensor:
    """Fill with normal numbers of ``mean`` and ``std``; returns ``tensor``.

    Examples:
        >>> nn.init.normal_(flow.empty(2, 2), std=0.02).shape
        mpiflow.Size([2, 2])
    """
    with no_grad():
        return _normal_(tensor, mean, std, generator=generator)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with ``val``; returns ``tensor``.

    Examples:
        >>> nn.init.constant_(flow.empty(2), 0.5).tolist()
        [0.5, 0.5]
    """
    with no_grad():
        return fill_(tensor, val)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill with zeros; returns ``tensor``."""
    return constant_(tensor, 0.0)


def ones_(tensor: Tensor) -> Tensor:
    """Fill with ones; returns ``tensor``."""
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0,
                    generator: Generator | None = None) -> Tensor:
    """Glorot uniform: ``U(-a, a)`` with ``a = gain * sqrt(6 / (fan_in + fan_out))``.

    Examples:
        >>> w = nn.init.xavier_uniform_(flow.empty(3, 5))
        >>> bool((w.abs() <= (6 / 8) ** 0.5).all())
        True
    """
    fan_in, fan_out = calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0,
                   generator: Generator | None = None) -> Tensor:
    """Glorot normal: ``N(0, std)`` with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float | None:
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return None
    fan = _calculate_correct_fan(tensor, mode)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu",
                     generator: Generator | None = None) -> Tensor:
    """He uniform: ``U(-b, b)`` with ``b = gain * sqrt(3 / fan)``.

    Args:
        tensor: at least 2 dims.
        a: the negative slope of the rectifier after this layer (``"leaky_relu"``).
        mode: ``"fan_in"`` (keeps the forward variance) or ``"fan_out"`` (the backward's).
        nonlinearity: as :func:`calculate_gain`.
        generator: the generator to draw from.

    Examples:
        >>> nn.init.kaiming_uniform_(flow.empty(4, 3), nonlinearity="relu").shape
        mpiflow.Size([4, 3])
    """
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu",
                    generator: Generator | None = None) -> Tensor:
    """He normal: ``N(0, std)`` with ``std = gain / sqrt(fan)`` (arguments as
    :func:`kaiming_uniform_`)."""
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    return normal_(tensor, 0.0, std, generator)


def layer_defaults_(weight: Tensor, bias: Tensor | None) -> None:
    """PyTorch's default initialization of a ``Linear`` or ``ConvNd`` layer's parameters.

    The weight is ``kaiming_uniform_(weight, a=sqrt(5))``; the bias, when there is one,
    ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``: the same draws, in the same order, as torch's
    ``reset_parameters`` of those layers. Package-internal (not in ``__all__``): the layers'
    ``reset_parameters`` share it.

    Args:
        weight: the layer's weight, at least 2 dims.
        bias: its bias, or ``None``.

    Examples:
        >>> w, b = flow.empty(4, 9), flow.empty(4)
        >>> nn.init.layer_defaults_(w, b)
        >>> bool((b.abs() <= 1 / 3).all())
        True
    """
    kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        uniform_(bias, -bound, bound)
