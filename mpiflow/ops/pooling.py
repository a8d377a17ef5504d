"""``max_pool2d`` and ``avg_pool2d``: reductions over sliding windows of the last two dims.

Each kernel runs one elementwise pass per kernel offset over strided views of the padded input
(:func:`~mpiflow.ops.window.offset_view`): no window copy. Their gradients are ops of their own:

- ``max_pool2d_grad`` (``g``, input) recomputes the maxima and sends each output's gradient to
  the first position of its window that holds the maximum (PyTorch's choice; a NaN wins);
- ``avg_pool2d_grad`` (``g``) spreads each output's gradient evenly over its window.

Layouts, per mesh axis: a split of the batch or the channels (``S(0)``, ``S(1)``) stays one, as
every window lies within one sample and channel; average pooling, being linear, also keeps a
partial sum (``P -> P``).

Examples:
    >>> x = flow.arange(16.0).reshape(1, 1, 4, 4)
    >>> max_pool2d(x, 2).tolist()
    [[[[5.0, 7.0], [13.0, 15.0]]]]
    >>> avg_pool2d(x, 2).tolist()
    [[[[2.5, 4.5], [10.5, 12.5]]]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy

from ..layouts.sbp import Partial, Split
from ..tensors.tensor import Tensor
from .engine import Context, OpDef, Signature, apply
from .reduction_rules import check_floating
from .shape import squeeze, unsqueeze
from .window import Pads, Pair, offset_view, out_size, pad2d, pads, pair

__all__ = ["avg_pool2d", "max_pool2d"]

Shape = tuple[int, ...]
P = Partial()


def _out_hw(hw: Shape, kernel: Pair, stride: Pair, padding: Pads, dilation: Pair,
            ceil_mode: bool) -> Pair:
    return tuple(out_size(hw[k], kernel[k], stride=stride[k],  # type: ignore[return-value]
                          pad=(padding[2 * k], padding[2 * k + 1]), dilation=dilation[k],
                          ceil_mode=ceil_mode) for k in range(2))


def _pads(hw: Shape, out_hw: Pair, kernel: Pair, stride: Pair, padding: Pads,
          dilation: Pair) -> Pads:
    """The padding that makes every window whole: ``padding`` before, and after as much as the
    last window needs (more than ``padding`` in ceil mode)."""
    after = [max(padding[2 * k + 1], (out_hw[k] - 1) * stride[k] + dilation[k] * (kernel[k] - 1)
                 + 1 - hw[k] - padding[2 * k]) for k in range(2)]
    return padding[0], after[0], padding[2], after[1]


def _lowest(dtype: numpy.dtype) -> Any:
    return -numpy.inf if dtype.kind == "f" else numpy.iinfo(dtype).min


def _spatial_shape(x: Shape, *, kernel: Pair, stride: Pair, padding: Pads,
                   dilation: Pair = (1, 1), ceil_mode: bool, **_: Any) -> Shape:
    return (*x[:2], *_out_hw(x[2:], kernel, stride, padding, dilation, ceil_mode))


def _pool_layouts(x: Shape, **_: Any) -> list[Signature]:
    return [((Split(0),), Split(0)), ((Split(1),), Split(1))]


def _pool_grad_layouts(g: Shape, x: Shape, **_: Any) -> list[Signature]:
    return [((Split(0), Split(0)), Split(0)), ((Split(1), Split(1)), Split(1))]


def _avg_layouts(x: Shape, **_: Any) -> list[Signature]:
    return [*_pool_layouts(x), ((P,), P)]


# -- max ---------------------------------------------------------------------------------------
def _max_setup(xp: Any, x: Any, out_hw: Pair, kernel: Pair, stride: Pair, padding: Pads,
               dilation: Pair) -> Any:
    pads = _pads(x.shape[2:], out_hw, kernel, stride, padding, dilation)
    return pad2d(xp, x, pads, _lowest(x.dtype))


def _max_kernel(ctx: Context, x: Any, *, kernel: Pair, stride: Pair, padding: Pads,
                dilation: Pair, ceil_mode: bool) -> Any:
    out_hw = (ctx.out_shape[2], ctx.out_shape[3])
    padded = _max_setup(ctx.xp, x, out_hw, kernel, stride, padding, dilation)
    return _window_max(ctx.xp, padded, kernel, stride, dilation, out_hw)


def _window_max(xp: Any, padded: Any, kernel: Pair, stride: Pair, dilation: Pair,
                out_hw: Pair) -> Any:
    out: Any = None
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            view = offset_view(padded, i, j, stride, dilation, out_hw)
            out = view.copy() if out is None else xp.maximum(out, view, out=out)
    return out


def _max_grad(g: Tensor, operands: Any, out: Tensor, **attrs: Any) -> tuple[Tensor]:
    return (apply(MAX_POOL2D_GRAD, g, operands[0], **attrs),)


def _max_grad_kernel(ctx: Context, g: Any, x: Any, *, kernel: Pair, stride: Pair,
                     padding: Pads, dilation: Pair, ceil_mode: bool) -> Any:
    xp = ctx.xp
    out_hw = g.shape[2:]
    g = g.astype(ctx.out_dtype, copy=False)
    padded = _max_setup(xp, x, out_hw, kernel, stride, padding, dilation)
    top = _window_max(xp, padded, kernel, stride, dilation, out_hw)
    taken = xp.zeros(g.shape, dtype=bool)
    grad = xp.zeros(padded.shape, dtype=ctx.out_dtype)
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            view = offset_view(padded, i, j, stride, dilation, out_hw)
            hit = (view == top) | (view != view)  # the maximum, or a NaN (which won)
            hit &= ~taken
            taken |= hit
            target = offset_view(grad, i, j, stride, dilation, out_hw)
            target += xp.where(hit, g, 0)
    h, w = x.shape[2:]
    return xp.ascontiguousarray(grad[:, :, padding[0]:padding[0] + h, padding[2]:padding[2] + w])


MAX_POOL2D = OpDef("max_pool2d", _max_kernel, _spatial_shape, _pool_layouts, grad=_max_grad)
MAX_POOL2D_GRAD = OpDef("max_pool2d_grad", _max_grad_kernel,
                        lambda g, x, **_: x, _pool_grad_layouts)


# -- average -----------------------------------------------------------------------------------
def _divisor(xp: Any, hw: Shape, out_hw: Pair, kernel: Pair, stride: Pair, padding: Pads,
             count_include_pad: bool, divisor_override: int, dtype: numpy.dtype) -> Any:
    """Each output's divisor ``(OH, OW)``: the window's size within the padded input (or
    within the input, without ``count_include_pad``), as PyTorch counts it."""
    if divisor_override:
        return xp.asarray(float(divisor_override), dtype=dtype)
    counts = []
    for k in range(2):
        start = numpy.arange(out_hw[k]) * stride[k] - padding[2 * k]
        end = numpy.minimum(start + kernel[k], hw[k] + padding[2 * k + 1])
        if not count_include_pad:
            start, end = numpy.maximum(start, 0), numpy.minimum(end, hw[k])
        counts.append(end - start)
    return xp.asarray(numpy.multiply.outer(counts[0], counts[1]).astype(dtype))


def _avg_kernel(ctx: Context, x: Any, *, kernel: Pair, stride: Pair, padding: Pads,
                ceil_mode: bool, count_include_pad: bool, divisor_override: int) -> Any:
    xp = ctx.xp
    x = x.astype(ctx.out_dtype, copy=False)
    out_hw = (ctx.out_shape[2], ctx.out_shape[3])
    padded = pad2d(xp, x, _pads(x.shape[2:], out_hw, kernel, stride, padding, (1, 1)))
    out: Any = None
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            view = offset_view(padded, i, j, stride, (1, 1), out_hw)
            out = view.copy() if out is None else xp.add(out, view, out=out)
    out /= _divisor(xp, x.shape[2:], out_hw, kernel, stride, padding, count_include_pad,
                    divisor_override, out.dtype)
    return out


def _avg_grad(g: Tensor, operands: Any, out: Tensor, **attrs: Any) -> tuple[Tensor]:
    return (apply(AVG_POOL2D_GRAD, g, size=tuple(operands[0].shape[2:]), **attrs),)


def _avg_grad_kernel(ctx: Context, g: Any, *, size: Pair, kernel: Pair, stride: Pair,
                     padding: Pads, ceil_mode: bool, count_include_pad: bool,
                     divisor_override: int) -> Any:
    xp = ctx.xp
    out_hw = g.shape[2:]
    share = g / _divisor(xp, size, out_hw, kernel, stride, padding, count_include_pad,
                         divisor_override, ctx.out_dtype)
    pads = _pads(size, out_hw, kernel, stride, padding, (1, 1))
    grad = xp.zeros((*g.shape[:2], size[0] + pads[0] + pads[1], size[1] + pads[2] + pads[3]),
                    dtype=ctx.out_dtype)
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            target = offset_view(grad, i, j, stride, (1, 1), out_hw)
            target += share
    return xp.ascontiguousarray(grad[:, :, padding[0]:padding[0] + size[0],
                                     padding[2]:padding[2] + size[1]])


AVG_POOL2D = OpDef("avg_pool2d", _avg_kernel, _spatial_shape, _avg_layouts, grad=_avg_grad)
AVG_POOL2D_GRAD = OpDef("avg_pool2d_grad", _avg_grad_kernel,
                        lambda g, *, size, **_: (*g[:2], *size), _avg_layouts)


# -- the functions -----------------------------------------------------------------------------
def _pool_args(name: str, input: Tensor, kernel_size: Any, stride: Any, padding: Any,
               dilation: Any, ceil_mode: bool) -> dict[str, Any]:
    if input.ndim != 4:
        raise RuntimeError(f"{name}: Expected 3D or 4D (batch mode) tensor for input, got size "
                           f"{list(input.shape)}")
    check_floating(name, input.dtype.numpy)
    kernel = pair(kernel_size, "kernel_size")
    st = kernel if stride is None or stride == [] or stride == () else pair(stride, "stride")
    pad, dl = pads(padding), pair(dilation, "dilation")
    if min(kernel) < 1 or min(st) < 1 or min(dl) < 1:
        raise ValueError(f"{name}: kernel_size, stride and dilation must be positive, got "
                         f"{kernel}, {st}, {dl}")
    if max(pad[:2]) > kernel[0] // 2 or max(pad[2:]) > kernel[1] // 2:
        raise RuntimeError(f"{name}: pad should be at most half of effective kernel size, but "
                           f"got pad={pad}, kernel_size={kernel}")
    out_hw = _out_hw(tuple(input.shape[2:]), kernel, st, pad, dl, bool(ceil_mode))
    if min(out_hw) < 1:
        raise RuntimeError(f"{name}: Given input size {list(input.shape[1:])}, the calculated "
                           f"output size {[input.shape[1], *out_hw]} is too small")
    return {"kernel": kernel, "stride": st, "padding": pad, "ceil_mode": bool(ceil_mode),
            "dilation": dl}


def max_pool2d(input: Tensor, kernel_size: int | Sequence[int],
               stride: int | Sequence[int] | None = None, padding: int | Sequence[int] = 0,
               dilation: int | Sequence[int] = 1, ceil_mode: bool = False,
               return_indices: bool = False) -> Tensor:
    """The maximum of each window of the last two dims, as PyTorch's.

    Args:
        input: ``(N, C, H, W)`` or ``(C, H, W)``, floating point.
        kernel_size: an int or ``(kh, kw)``.
        stride: an int or a pair; the kernel size by default.
        padding: implicit ``-inf`` on both sides (an int or a pair), at most half the kernel;
            also ``(top, bottom, left, right)``.
        dilation: the spacing of a window's elements.
        ceil_mode: round the output size up (a last, partial window).
        return_indices: not supported (the gradient needs no indices); must be False.

    Returns:
        ``(N, C, OH, OW)``; splits of the batch or channels stay splits.

    Raises:
        ValueError: ``return_indices=True``, or a non-positive kernel, stride or dilation.
        RuntimeError: an input of the wrong rank, too much padding, an empty output.

    Examples:
        >>> max_pool2d(flow.tensor([[[1.0, 3.0, 2.0]]]), (1, 2), stride=1).tolist()
        [[[3.0, 3.0]]]
    """
    if return_indices:
        raise ValueError("max_pool2d: return_indices=True is not supported by mpiflow; its "
                         "gradient needs no indices (use the values, or argmax on windows)")
    if input.ndim == 3:
        return squeeze(max_pool2d(unsqueeze(input, 0), kernel_size, stride, padding, dilation,
                                  ceil_mode), 0)
    return apply(MAX_POOL2D, input, **_pool_args("max_pool2d", input, kernel_size, stride,
                                                 padding, dilation, ceil_mode))


def avg_pool2d(input: Tensor, kernel_size: int | Sequence[int],
               stride: int | Sequence[int] | None = None, padding: int | Sequence[int] = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:
    """The mean of each window of the last two dims, as PyTorch's.

    Args:
        input: ``(N, C, H, W)`` or ``(C, H, W)``, floating point.
        kernel_size: an int or ``(kh, kw)``.
        stride: an int or a pair; the kernel size by default.
        padding: implicit zeros on both sides (an int or a pair), at most half the kernel;
            also ``(top, bottom, left, right)``.
        ceil_mode: round the output size up (a last, partial window).
        count_include_pad: count the padding zeros in the divisor.
        divisor_override: divide by this instead (a positive int).

    Returns:
        ``(N, C, OH, OW)``; splits of the batch or channels stay splits, a partial sum stays
        one.

    Raises:
        ValueError: a non-positive kernel, stride or ``divisor_override``.
        RuntimeError: an input of the wrong rank, too much padding, an empty output.

    Examples:
        >>> avg_pool2d(flow.ones(1, 3, 3), 2, padding=1).tolist()
        [[[0.25, 0.5], [0.5, 1.0]]]
    """
    if input.ndim == 3:
        return squeeze(avg_pool2d(unsqueeze(input, 0), kernel_size, stride, padding, ceil_mode,
                                  count_include_pad, divisor_override), 0)
    if divisor_override is not None and divisor_override <= 0:
        raise ValueError(f"avg_pool2d: divisor must be not zero, got {divisor_override}")
    attrs = _pool_args("avg_pool2d", input, kernel_size, stride, padding, 1, ceil_mode)
    del attrs["dilation"]
    return apply(AVG_POOL2D, input, **attrs, count_include_pad=bool(count_include_pad),
                 divisor_override=int(divisor_override or 0))
