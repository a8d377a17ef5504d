"""``conv2d``: 2-D convolution (cross-correlation, as PyTorch) by im2col on BLAS.

The forward copies every window of the padded input into columns ``(N, G, C/G * KH * KW,
OH * OW)`` (one strided copy of :func:`~mpiflow.ops.window.windows`) and multiplies the
weight ``(G, O/G, C/G * KH * KW)`` into them (one batched GEMM). Its gradient rule runs two
ops of their own, each with a layout rule:

- ``conv2d_input_grad`` (``g``, weight): ``weight^T @ g`` per sample, added back into the
  input's positions (col2im: one strided add per kernel offset);
- ``conv2d_weight_grad`` (``g``, input): ``g @ columns^T`` over the whole batch in one GEMM;
- the bias gradient is ``g`` summed over batch and positions.

Layouts, per mesh axis (bias, when given, as the weight's output channels):

- input ``S(0)`` (a split batch), weight ``B`` -> ``S(0)``: no communication; the weight
  gradient is then a partial sum ``P``, which autograd reduces into the weight's ``B``;
- input ``B``, weight ``S(0)`` (split output channels) -> ``S(1)`` (``groups=1``);
- input ``S(1)``, weight ``S(1)`` (split input channels) -> ``P`` (``groups=1``, no bias);
- one operand ``P``, the other ``B`` -> ``P`` (the op is linear in each).

Examples:
    >>> x = flow.ones(1, 1, 3, 3)
    >>> conv2d(x, flow.ones(1, 1, 2, 2)).tolist()
    [[[[4.0, 4.0], [4.0, 4.0]]]]
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from ..layouts.sbp import Partial, Split
from ..tensors.tensor import Tensor
from .engine import B, Context, OpDef, Signature, apply
from .reduction import sum as reduce_sum
from .reduction_rules import check_floating
from .shape import squeeze, unsqueeze
from .window import Pads, Pair, col2im, out_size, pad2d, pads, pair, same_padding, windows

__all__ = ["conv2d"]

Shape = tuple[int, ...]
P = Partial()


def _out_hw(hw: Shape, kernel: Shape, stride: Pair, padding: Pads, dilation: Pair) -> Pair:
    return (out_size(hw[0], kernel[0], stride=stride[0], pad=padding[:2], dilation=dilation[0]),
            out_size(hw[1], kernel[1], stride=stride[1], pad=padding[2:], dilation=dilation[1]))


def _columns(xp: Any, x: Any, kernel: Shape, stride: Pair, padding: Pads, dilation: Pair,
             out_hw: Pair) -> Any:
    """The windows of ``x`` (``(N, C, H, W)``) as a read-only ``(N, C, KH, KW, OH, OW)`` view."""
    return windows(xp, pad2d(xp, x, padding), (kernel[0], kernel[1]), stride, dilation, out_hw)


# -- forward -----------------------------------------------------------------------------------
def _conv_shape(x: Shape, w: Shape, *bias: Shape, stride: Pair, padding: Pads, dilation: Pair,
                groups: int) -> Shape:
    return (x[0], w[0], *_out_hw(x[2:], w[2:], stride, padding, dilation))


def _conv_layouts(x: Shape, w: Shape, *bias: Shape, groups: int, **_: Any) -> list[Signature]:
    extra: tuple[Any, ...] = (B,) * len(bias)
    sigs: list[Signature] = [((Split(0), B, *extra), Split(0))]
    if groups == 1:
        sigs.append(((B, Split(0), *((Split(0),) * len(bias))), Split(1)))
        if not bias:
            sigs.append(((Split(1), Split(1)), P))
    p_bias: tuple[Any, ...] = (P,) * len(bias)
    sigs += [((P, B, *p_bias), P), ((B, P, *p_bias), P)]
    return sigs


def _conv_kernel(ctx: Context, x: Any, w: Any, *bias: Any, stride: Pair, padding: Pads,
                 dilation: Pair, groups: int) -> Any:
    xp = ctx.xp
    x, w = x.astype(ctx.out_dtype, copy=False), w.astype(ctx.out_dtype, copy=False)
    n, o, oh, ow = ctx.out_shape
    c, kh, kw = w.shape[1] * groups, w.shape[2], w.shape[3]
    cols = xp.ascontiguousarray(_columns(xp, x, (kh, kw), stride, padding, dilation, (oh, ow)))
    cols = cols.reshape(n, groups, c // groups * kh * kw, oh * ow)
    out = xp.matmul(w.reshape(groups, o // groups, c // groups * kh * kw), cols)
    out = out.reshape(n, o, oh, ow)
    if bias:
        out += bias[0].astype(ctx.out_dtype, copy=False).reshape(o, 1, 1)
    return out


def _conv_grad(g: Tensor, operands: Any, out: Tensor, *, stride: Pair, padding: Pads,
               dilation: Pair, groups: int, needs: tuple[bool, ...] = (True, True, True)
               ) -> tuple[Tensor | None, ...]:
    x, w = operands[0], operands[1]
    attrs = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
    gx = (apply(CONV2D_INPUT_GRAD, g, w, size=tuple(x.shape[2:]), **attrs)
          if needs[0] else None)
    gw = (apply(CONV2D_WEIGHT_GRAD, g, x, kernel=tuple(w.shape[2:]), **attrs)
          if needs[1] else None)
    if len(operands) == 2:
        return gx, gw
    return gx, gw, (reduce_sum(g, (0, 2, 3)) if needs[2] else None)


_conv_grad.needs_mask = True  # type: ignore[attr-defined]


# -- the gradient ops --------------------------------------------------------------------------
def _input_grad_shape(g: Shape, w: Shape, *, size: Pair, groups: int, **_: Any) -> Shape:
    return (g[0], w[1] * groups, *size)


def _input_grad_layouts(g: Shape, w: Shape, *, groups: int, **_: Any) -> list[Signature]:
    sigs: list[Signature] = [((Split(0), B), Split(0))]
    if groups == 1:
        sigs += [((Split(1), Split(0)), P), ((B, Split(1)), Split(1))]
    return [*sigs, ((P, B), P), ((B, P), P)]


def _input_grad_kernel(ctx: Context, g: Any, w: Any, *, size: Pair, stride: Pair,
                       padding: Pads, dilation: Pair, groups: int) -> Any:
    xp = ctx.xp
    g, w = g.astype(ctx.out_dtype, copy=False), w.astype(ctx.out_dtype, copy=False)
    n, c, h, wd = ctx.out_shape
    o, oh, ow = g.shape[1], g.shape[2], g.shape[3]
    cg, kh, kw = w.shape[1], w.shape[2], w.shape[3]
    # one GEMM per group over the whole batch, its rows ordered (KH, KW, C/G): each kernel
    # offset's columns are then one contiguous block for col2im
    wt = xp.ascontiguousarray(w.reshape(groups, o // groups, cg, kh, kw)
                              .transpose(0, 3, 4, 2, 1)).reshape(groups, kh * kw * cg, o // groups)
    gt = xp.ascontiguousarray(g.reshape(n, groups, o // groups, oh * ow).transpose(1, 2, 0, 3))
    cols = xp.matmul(wt, gt.reshape(groups, o // groups, n * oh * ow))
    cols = cols.reshape(groups, kh, kw, cg, n, oh, ow).transpose(1, 2, 0, 3, 4, 5, 6)
    t, b, left, r = padding
    padded = col2im(xp, cols.reshape(kh, kw, c, n, oh, ow), (h + t + b, wd + left + r), stride,
                    dilation)
    return xp.ascontiguousarray(padded[:, :, t:t + h, left:left + wd].transpose(1, 0, 2, 3))


def _weight_grad_shape(g: Shape, x: Shape, *, kernel: Pair, groups: int, **_: Any) -> Shape:
    return (g[1], x[1] // groups, *kernel)


def _weight_grad_layouts(g: Shape, x: Shape, *, groups: int, **_: Any) -> list[Signature]:
    sigs: list[Signature] = [((Split(0), Split(0)), P)]
    if groups == 1:
        sigs += [((Split(1), B), Split(0)), ((B, Split(1)), Split(1))]
    return [*sigs, ((P, B), P), ((B, P), P)]


def _weight_grad_kernel(ctx: Context, g: Any, x: Any, *, kernel: Pair, stride: Pair,
                        padding: Pads, dilation: Pair, groups: int) -> Any:
    xp = ctx.xp
    g, x = g.astype(ctx.out_dtype, copy=False), x.astype(ctx.out_dtype, copy=False)
    o, cg, kh, kw = ctx.out_shape
    n, oh, ow = g.shape[0], g.shape[2], g.shape[3]
    view = _columns(xp, x, kernel, stride, padding, dilation, (oh, ow))
    # (G, C/G, KH, KW, N, OH, OW) in one copy, then the whole batch in one GEMM per group
    cols = xp.ascontiguousarray(view.reshape(n, groups, cg, kh, kw, oh, ow)
                                .transpose(1, 2, 3, 4, 0, 5, 6))
    cols = cols.reshape(groups, cg * kh * kw, n * oh * ow)
    g3 = xp.ascontiguousarray(g.reshape(n, groups, o // groups, oh * ow).transpose(1, 2, 0, 3))
    out = xp.matmul(g3.reshape(groups, o // groups, n * oh * ow), cols.transpose(0, 2, 1))
    return out.reshape(o, cg, kh, kw)


# The gradient ops have no gradient rules of their own (no double backward).
CONV2D = OpDef("conv2d", _conv_kernel, _conv_shape, _conv_layouts, grad=_conv_grad)
CONV2D_INPUT_GRAD = OpDef("conv2d_input_grad", _input_grad_kernel, _input_grad_shape,
                          _input_grad_layouts)
CONV2D_WEIGHT_GRAD = OpDef("conv2d_weight_grad", _weight_grad_kernel, _weight_grad_shape,
                           _weight_grad_layouts)


# -- the function ------------------------------------------------------------------------------
def _padding(padding: str | int | Sequence[int], kernel: Pair, stride: Pair,
             dilation: Pair) -> Pads:
    if isinstance(padding, str):
        if padding == "valid":
            return 0, 0, 0, 0
        if padding == "same":
            if stride != (1, 1):
                raise ValueError("padding='same' is not supported for strided convolutions")
            return same_padding(kernel, dilation)
        raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                         "('valid', 'same')")
    return pads(padding)


def _check(input: Tensor, weight: Tensor, bias: Tensor | None, groups: int) -> None:
    if input.ndim != 4:
        raise RuntimeError(f"Expected 3D (unbatched) or 4D (batched) input to conv2d, but got "
                           f"input of size: {list(input.shape)}")
    if weight.ndim != 4:
        raise RuntimeError(f"conv2d: expected a 4-D weight (out, in/groups, kH, kW), got size "
                           f"{list(weight.shape)}")
    check_floating("conv2d", input.dtype.numpy)
    if groups < 1 or weight.shape[0] % groups:
        raise RuntimeError(f"conv2d: groups must be positive and divide the out channels "
                           f"{weight.shape[0]}, got {groups}")
    if input.shape[1] != weight.shape[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, "
                           f"expected input{list(input.shape)} to have "
                           f"{weight.shape[1] * groups} channels, but got {input.shape[1]} "
                           "channels instead")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise RuntimeError(f"conv2d: expected bias of size [{weight.shape[0]}], got "
                           f"{list(bias.shape)}")


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None,
           stride: int | Sequence[int] = 1, padding: str | int | Sequence[int] = 0,
           dilation: int | Sequence[int] = 1, groups: int = 1) -> Tensor:
    """2-D convolution (cross-correlation) of ``input`` with ``weight``, as PyTorch's.

    Args:
        input: ``(N, C, H, W)`` or unbatched ``(C, H, W)``, floating point.
        weight: ``(O, C / groups, KH, KW)``.
        bias: ``(O,)`` or None.
        stride: an int or ``(sh, sw)``.
        padding: an int, ``(ph, pw)``, ``"valid"`` (none) or ``"same"`` (output as large as
            the input; stride 1 only; an odd total puts the extra row and column at the end);
            also ``(top, bottom, left, right)``.
        dilation: an int or ``(dh, dw)``.
        groups: split the channels into this many independent groups.

    Returns:
        ``(N, O, OH, OW)`` (``(O, OH, OW)`` for an unbatched input). On global tensors a split
        batch ``S(0)`` with a broadcast weight needs no communication.

    Raises:
        RuntimeError: shapes that do not fit (as PyTorch), an empty output.
        ValueError: a bad stride, dilation or padding.

    Examples:
        >>> x = flow.arange(16.0).reshape(1, 1, 4, 4)
        >>> conv2d(x, flow.ones(1, 1, 3, 3), padding="same").shape
        mpiflow.Size([1, 1, 4, 4])
    """
    if input.ndim == 3:
        return squeeze(conv2d(unsqueeze(input, 0), weight, bias, stride, padding, dilation,
                              groups), 0)
    groups = operator.index(groups)
    _check(input, weight, bias, groups)
    st, dl = pair(stride, "stride"), pair(dilation, "dilation")
    if min(st) < 1 or min(dl) < 1:
        raise ValueError(f"conv2d: stride and dilation must be positive, got stride={st}, "
                         f"dilation={dl}")
    kernel = (int(weight.shape[2]), int(weight.shape[3]))
    pads = _padding(padding, kernel, st, dl)
    oh, ow = _out_hw(tuple(input.shape[2:]), kernel, st, pads, dl)
    if oh < 1 or ow < 1:
        raise RuntimeError(f"conv2d: input size {list(input.shape[2:])} (padded by {pads}) is "
                           f"smaller than the dilated kernel {kernel}")
    operands = (input, weight) if bias is None else (input, weight, bias)
    return apply(CONV2D, *operands, stride=st, padding=pads, dilation=dl, groups=groups)
