"""Sliding windows over the last two dims: the geometry and the array helpers that convolution
and pooling share.

A 2-D window op reads, for output position ``(oh, ow)`` and kernel offset ``(i, j)``, the
padded input at ``(oh * sh + i * dh, ow * sw + j * dw)``. :func:`windows` gives all of them as
one strided view ``(N, C, KH, KW, OH, OW)`` of the padded input (no copy: numpy's
``as_strided``, as ``sliding_window_view`` builds it), which a copy turns into the columns of
im2col; :func:`offset_view` gives the ``(N, C, OH, OW)`` view of one kernel offset, which the
pooling kernels reduce over and :func:`col2im` adds into.

Examples:
    >>> out_size(28, 5, stride=1, pad=(2, 2), dilation=1)
    28
    >>> same_padding((5, 5), (1, 1))
    (2, 2, 2, 2)
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

__all__ = ["Pair", "Pads", "col2im", "offset_view", "out_size", "pad2d", "pads", "pair",
           "same_padding", "windows"]

Pair = tuple[int, int]
Pads = tuple[int, int, int, int]  # top, bottom, left, right


def pair(value: int | Sequence[int], name: str) -> Pair:
    """``value`` as ``(h, w)``: an int for both, or a sequence of two ints.

    Raises:
        ValueError: a sequence of another length.
    """
    if isinstance(value, Sequence) and not isinstance(value, str):
        if len(value) == 1:
            value = (value[0], value[0])
        if len(value) != 2:
            raise ValueError(f"{name} must be an int or a pair of ints, got {value!r}")
        return operator.index(value[0]), operator.index(value[1])
    n = operator.index(value)
    return n, n


def pads(value: int | Sequence[int]) -> Pads:
    """Padding as ``(top, bottom, left, right)``: an int for all four, ``(h, w)`` for both
    sides of each dim (PyTorch's forms), or the four (an mpiflow extension, for the
    asymmetric "SAME" padding of TensorFlow-style APIs).

    Raises:
        ValueError: another length, or a negative pad.

    Examples:
        >>> pads(1), pads((1, 2)), pads((0, 1, 0, 1))
        ((1, 1, 1, 1), (1, 1, 2, 2), (0, 1, 0, 1))
    """
    if isinstance(value, Sequence) and len(value) == 4:
        out = tuple(operator.index(v) for v in value)
    else:
        h, w = pair(value, "padding")
        out = (h, h, w, w)
    if min(out) < 0:
        raise ValueError(f"negative padding is not supported, got {out}")
    return out  # type: ignore[return-value]


def same_padding(kernel: Pair, dilation: Pair) -> Pads:
    """PyTorch's ``padding="same"`` (stride 1): ``d * (k - 1)`` in all, the odd one at the end.

    Examples:
        >>> same_padding((4, 3), (1, 2))
        (1, 2, 2, 2)
    """
    th, tw = dilation[0] * (kernel[0] - 1), dilation[1] * (kernel[1] - 1)
    return th // 2, th - th // 2, tw // 2, tw - tw // 2


def out_size(size: int, kernel: int, *, stride: int, pad: tuple[int, int], dilation: int,
             ceil_mode: bool = False) -> int:
    """The number of windows along one dim (PyTorch's formula, ceil mode included: a last
    window must start inside the input or its left padding)."""
    span = size + pad[0] + pad[1] - dilation * (kernel - 1) - 1
    if span < 0:
        return 0
    if not ceil_mode:
        return span // stride + 1
    n = -(-span // stride) + 1
    if (n - 1) * stride >= size + pad[0]:
        n -= 1
    return n


def pad2d(xp: Any, x: Any, pads: Pads, value: float = 0.0) -> Any:
    """``x`` with ``pads`` (top, bottom, left, right) rows and columns of ``value`` around its
    last two dims; ``x`` itself where every pad is 0."""
    if not any(pads):
        return x
    t, b, left, r = pads
    h, w = x.shape[-2:]
    out = xp.full((*x.shape[:-2], h + t + b, w + left + r), value, dtype=x.dtype)
    out[..., t:t + h, left:left + w] = x
    return out


def windows(xp: Any, padded: Any, kernel: Pair, stride: Pair, dilation: Pair,
            out_hw: Pair) -> Any:
    """The read-only view ``(N, C, KH, KW, OH, OW)`` of every window of ``padded``
    (``(N, C, H, W)``, already padded far enough for ``out_hw`` windows)."""
    n, c = padded.shape[:2]
    s_n, s_c, s_h, s_w = padded.strides
    shape = (n, c, kernel[0], kernel[1], out_hw[0], out_hw[1])
    strides = (s_n, s_c, s_h * dilation[0], s_w * dilation[1], s_h * stride[0], s_w * stride[1])
    return xp.lib.stride_tricks.as_strided(padded, shape, strides, writeable=False)


def offset_view(padded: Any, i: int, j: int, stride: Pair, dilation: Pair, out_hw: Pair) -> Any:
    """The ``(N, C, OH, OW)`` view of ``padded`` that kernel offset ``(i, j)`` reads."""
    h0, w0 = i * dilation[0], j * dilation[1]
    return padded[:, :, h0:h0 + stride[0] * (out_hw[0] - 1) + 1:stride[0],
                  w0:w0 + stride[1] * (out_hw[1] - 1) + 1:stride[1]]


def col2im(xp: Any, cols: Any, padded_hw: Pair, stride: Pair, dilation: Pair) -> Any:
    """The adjoint of :func:`windows`: columns ``(KH, KW, A, B, OH, OW)`` added into a zero
    padded input ``(A, B, *padded_hw)`` at the positions they were read from (one strided add
    per kernel offset, each reading a contiguous block).

    Examples:
        >>> import numpy
        >>> col2im(numpy, numpy.ones((1, 2, 1, 1, 1, 2)), (1, 3), (1, 1), (1, 1)).tolist()
        [[[[1.0, 2.0, 1.0]]]]
    """
    kh, kw, a, b, oh, ow = cols.shape
    out = xp.zeros((a, b, *padded_hw), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            view = offset_view(out, i, j, stride, dilation, (oh, ow))
            view += cols[i, j]
    return out
