"""``Conv2d``, ``MaxPool2d`` and ``AvgPool2d``.

Examples:
    >>> import mpiflow.nn as nn
    >>> net = nn.Sequential(nn.Conv2d(1, 4, 3, padding="same"), nn.MaxPool2d(2))
    >>> net(flow.ones(2, 1, 8, 8)).shape
    mpiflow.Size([2, 4, 4, 4])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...ops.window import pair
from ...tensors.creation import empty
from ...tensors.tensor import Tensor
from .. import functional as F
from .. import init
from .module import Module
from .parameter import Parameter

__all__ = ["AvgPool2d", "Conv2d", "MaxPool2d"]

Size2 = int | Sequence[int]


class Conv2d(Module):
    """2-D convolution with PyTorch's initialization (weight ``kaiming_uniform_(a=sqrt(5))``,
    bias uniform in ``+-1/sqrt(fan_in)``).

    Args:
        in_channels: channels of the input.
        out_channels: channels of the output.
        kernel_size: an int or ``(kh, kw)``.
        stride: an int or a pair.
        padding: an int, a pair, ``"valid"`` or ``"same"``.
        dilation: an int or a pair.
        groups: independent channel groups (dividing both channel counts).
        bias: learn a bias.
        padding_mode: ``"zeros"`` (the only mode mpiflow has).
        device: of the parameters.
        dtype: of the parameters.

    Raises:
        ValueError: channels that groups do not divide, another padding mode.

    Examples:
        >>> nn.Conv2d(3, 8, 5, stride=2)
        Conv2d(3, 8, kernel_size=(5, 5), stride=(2, 2))
    """

    weight: Parameter
    bias: Parameter | None

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Size2,
                 stride: Size2 = 1, padding: str | Size2 = 0, dilation: Size2 = 1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError(f"in_channels ({in_channels}) and out_channels ({out_channels}) "
                             f"must be divisible by groups ({groups})")
        if padding_mode != "zeros":
            raise ValueError(f"padding_mode={padding_mode!r} is not supported by mpiflow; only "
                             "'zeros' (pad the input with F.pad-style zeros yourself otherwise)")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = pair(kernel_size, "kernel_size")
        self.stride, self.dilation = pair(stride, "stride"), pair(dilation, "dilation")
        self.padding = padding if isinstance(padding, str) else pair(padding, "padding")
        self.groups = groups
        self.padding_mode = padding_mode
        self.weight = Parameter(empty(out_channels, in_channels // groups, *self.kernel_size,
                                      dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the parameters again (PyTorch's default initialization)."""
        init.layer_defaults_(self.weight, self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding,
                        self.dilation, self.groups)

    def extra_repr(self) -> str:
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        if self.padding not in ((0, 0), "valid"):
            text += f", padding={self.padding!r}" if isinstance(self.padding, str) else \
                f", padding={self.padding}"
        if self.dilation != (1, 1):
            text += f", dilation={self.dilation}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        return text


class MaxPool2d(Module):
    """The maximum of each window (:func:`mpiflow.nn.functional.max_pool2d`).

    Args:
        kernel_size: an int or a pair.
        stride: the kernel size by default.
        padding: implicit ``-inf``, at most half the kernel.
        dilation: the spacing of a window's elements.
        return_indices: must be False (not supported).
        ceil_mode: round the output size up.

    Examples:
        >>> nn.MaxPool2d(2)(flow.ones(1, 1, 4, 4)).shape
        mpiflow.Size([1, 1, 2, 2])
    """

    def __init__(self, kernel_size: Size2, stride: Size2 | None = None, padding: Size2 = 0,
                 dilation: Size2 = 1, return_indices: bool = False,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        if return_indices:
            raise ValueError("MaxPool2d: return_indices=True is not supported by mpiflow")
        self.kernel_size, self.stride, self.padding = kernel_size, stride or kernel_size, padding
        self.dilation, self.ceil_mode = dilation, ceil_mode

    def forward(self, input: Tensor) -> Tensor:
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """The mean of each window (:func:`mpiflow.nn.functional.avg_pool2d`).

    Args:
        kernel_size: an int or a pair.
        stride: the kernel size by default.
        padding: implicit zeros, at most half the kernel.
        ceil_mode: round the output size up.
        count_include_pad: count the padding in the divisor.
        divisor_override: divide by this instead.

    Examples:
        >>> nn.AvgPool2d(2)(flow.ones(1, 1, 4, 4)).tolist()
        [[[[1.0, 1.0], [1.0, 1.0]]]]
    """

    def __init__(self, kernel_size: Size2, stride: Size2 | None = None, padding: Size2 = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: int | None = None) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride or kernel_size, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"
