"""The elementwise functions of mpiflow (``mpiflow.add``, ``mpiflow.exp``, ...), casts, copies
and in-place assignment, on local and global tensors alike."""

from __future__ import annotations

from typing import Any

import numpy

from .. import cuda
from .. import dtypes as _dtypes
from ..boxing.execute import redistribute
from ..core.device import device as _device
from ..layouts.placement import Placement
from ..layouts.plan import Layout
from ..layouts.sbp import Partial, SbpParallel, Split
from ..tensors import trace
from ..tensors.tape import is_grad_enabled, rebind_inplace, record
from ..tensors.tensor import Tensor
from .engine import B, OpDef, Signature, apply
from .pointwise_defs import BINARY, UNARY, WHERE, broadcast_shape

__all__ = [
    "add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "pow", "atan2",
    "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
    "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "neg", "negative", "abs", "sign",
    "exp", "expm1", "log", "log1p", "log2", "sqrt", "rsqrt", "reciprocal", "square", "sin", "cos",
    "tanh", "sigmoid", "relu", "gelu", "erf", "floor", "ceil", "round", "logical_not",
    "bitwise_not", "isnan", "isinf", "isfinite", "where", "clamp", "clip", "cast", "clone",
    "to", "expand", "assign_", "fill_", "zero_",
]


def _bin(name: str) -> Any:
    op = BINARY[name]

    def fn(input: Any, other: Any) -> Tensor:
        return apply(op, input, other)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise ``{name}`` of two tensors (or a tensor and a number), broadcasting."
    return fn


def _un(name: str) -> Any:
    op = UNARY[name]

    def fn(input: Tensor) -> Tensor:
        return apply(op, input)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise ``{name}``."
    return fn


mul, div = _bin("mul"), _bin("div")
_ADD, _SUB = BINARY["add"], BINARY["sub"]
plain_add, plain_sub = _bin("add"), _bin("sub")  # the operators + and -: no alpha to check


def _scaled(other: Any, alpha: Any) -> Any:
    """``alpha * other``: a number stays a number (so a global ``input`` takes it as a constant,
    as OneFlow's ``add`` does), a tensor is multiplied in its own layout."""
    if alpha == 1:
        return other
    if not isinstance(other, Tensor):
        return other * alpha
    return apply(BINARY["mul"], other, alpha)


def add(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """``input + alpha * other``, elementwise, broadcasting (tensors or numbers).

    Examples:
        >>> flow.add(flow.tensor([1.0, 2.0]), flow.tensor([1.0, 1.0]), alpha=3)
        tensor([4., 5.])
    """
    return apply(_ADD, input, _scaled(other, alpha))


def sub(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """``input - alpha * other``, elementwise, broadcasting (tensors or numbers)."""
    return apply(_SUB, input, _scaled(other, alpha))


true_divide = div
floor_divide, remainder, pow, atan2 = (_bin("floor_divide"), _bin("remainder"), _bin("pow"),
                                       _bin("atan2"))
maximum, minimum = _bin("maximum"), _bin("minimum")
eq, ne, lt, le, gt, ge = (_bin(n) for n in ("eq", "ne", "lt", "le", "gt", "ge"))
logical_and, logical_or, logical_xor = (_bin(n) for n in ("logical_and", "logical_or",
                                                          "logical_xor"))
bitwise_and, bitwise_or, bitwise_xor = (_bin(n) for n in ("bitwise_and", "bitwise_or",
                                                          "bitwise_xor"))
neg, abs, sign = _un("neg"), _un("abs"), _un("sign")
negative = neg
exp, expm1, log, log1p, log2 = (_un(n) for n in ("exp", "expm1", "log", "log1p", "log2"))
sqrt, rsqrt, reciprocal, square = (_un(n) for n in ("sqrt", "rsqrt", "reciprocal", "square"))
sin, cos, tanh, sigmoid, relu, gelu, erf = (_un(n) for n in ("sin", "cos", "tanh", "sigmoid",
                                                             "relu", "gelu", "erf"))
floor, ceil, round = _un("floor"), _un("ceil"), _un("round")
logical_not, bitwise_not = _un("logical_not"), _un("bitwise_not")
isnan, isinf, isfinite = _un("isnan"), _un("isinf"), _un("isfinite")


def where(condition: Tensor, input: Any, other: Any) -> Tensor:
    """``input`` where ``condition`` holds, else ``other`` (broadcasting)."""
    return apply(WHERE, condition, input, other)


def clamp(input: Tensor, min: Any = None, max: Any = None) -> Tensor:
    """Limit ``input`` to ``[min, max]`` (either bound may be None, a number or a tensor,
    broadcasting); where ``min > max`` the result is ``max``, as in PyTorch.

    Examples:
        >>> flow.clamp(flow.tensor([-2.0, 0.5, 3.0]), min=-1.0, max=flow.tensor(1.0)).tolist()
        [-1.0, 0.5, 1.0]
    """
    from .pointwise_more import clamp_bounds

    return clamp_bounds(input, min, max)


clip = clamp


# -- casts and copies ------------------------------------------------------------------------
def _every_layout(shape: tuple[int, ...], **_: Any) -> list[Signature]:
    sigs: list[Signature] = [((Split(i),), Split(i)) for i in range(len(shape))]
    return sigs + [((p,), p) for p in (Partial(), Partial(_max()), Partial(_min()))]


def _max() -> Any:
    from ..communication import ReduceOp

    return ReduceOp.MAX


def _min() -> Any:
    from ..communication import ReduceOp

    return ReduceOp.MIN


def _cast_layouts(shape: tuple[int, ...], dtype: numpy.dtype, source: numpy.dtype, **_: Any
                  ) -> list[Signature]:
    sigs: list[Signature] = [((Split(i),), Split(i)) for i in range(len(shape))]
    if dtype.kind in "fc" and source.kind in "fc":  # a partial sum stays one in floating point
        sigs.append(((Partial(),), Partial()))
    return sigs


def _cast_grad(g: Tensor, operands: Any, out: Tensor, *, dtype: numpy.dtype,
               source: numpy.dtype) -> tuple[Tensor | None]:
    return (cast(g, source) if source.kind in "fc" else None,)


_CAST = OpDef("cast", lambda ctx, a, dtype, source: a.astype(dtype),
              lambda shape, **_: shape, _cast_layouts, lambda *_, dtype, source: dtype,
              _cast_grad)
_CLONE = OpDef("clone", lambda ctx, a: a.copy(), lambda shape, **_: shape, _every_layout,
               grad=lambda g, operands, out: (g,))


def cast(input: Tensor, dtype: Any) -> Tensor:
    """``input`` converted to ``dtype`` (a new tensor, or ``input`` if it already has it)."""
    target = _dtypes.as_dtype(dtype).numpy
    if input._data.dtype == target:
        return input
    return apply(_CAST, input, dtype=target, source=input._data.dtype)


def clone(input: Tensor) -> Tensor:
    """A copy of ``input`` with its own memory and the same layout."""
    return apply(_CLONE, input)


def to(input: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """``to(dtype)``, ``to(device)``, ``to(device, dtype)`` or ``to(other_tensor)``."""
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    kwargs.pop("copy", None)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"to() got unexpected arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            dtype = a.dtype
            device = a.device
        elif isinstance(a, (str, _device)):
            device = a
        else:
            dtype = a
    out = input
    if device is not None:
        kind = str(device).split(":")[0]
        if kind not in ("cpu", "cuda"):
            raise ValueError(f"unknown device {device!r}: mpiflow has 'cpu' and 'cuda'")
        if kind != input.device:
            out = _to_device(input, kind)
    if dtype is not None:
        out = cast(out, dtype)
    return out


def _to_device(input: Tensor, kind: str) -> Tensor:
    """``input`` copied to ``kind`` ("cpu": numpy, "cuda": CuPy on this rank's device); a
    global tensor keeps its ranks and layout on a placement of the new type."""
    source = input.device
    if kind == "cuda":
        data = cuda.require().asarray(input._data)
    else:
        get = getattr(input._data, "get", None)
        data = get() if get is not None else numpy.asarray(input._data)
    placement = (None if input._placement is None
                 else Placement(kind, input._placement.ranks.tolist()))
    out = Tensor(data, placement, input._sbp, input.shape)
    return record("to", _to_device_grad, [input], {"source": source}, out)


def _to_device_grad(g: Tensor, operands: Any, out: Tensor, *, source: str) -> tuple[Tensor]:
    """The gradient goes back to the device the input was on."""
    return (_to_device(g, source),)


def _expand_layouts(shape: tuple[int, ...], size: tuple[int, ...], **_: Any) -> list[Signature]:
    sigs: list[Signature] = []
    for i, extent in enumerate(size):
        j = i - (len(size) - len(shape))
        if j >= 0 and shape[j] == extent:
            sigs.append(((Split(j),), Split(i)))
    return sigs


def _expand_grad(g: Tensor, operands: Any, out: Tensor, **_: Any) -> tuple[Tensor]:
    from .grad_util import sum_to

    return (sum_to(g, tuple(operands[0].shape)),)


_EXPAND = OpDef("expand", lambda ctx, a, size: ctx.xp.broadcast_to(a, ctx.out_shape).copy(),
                lambda shape, size: broadcast_shape(shape, size) and size, _expand_layouts,
                grad=_expand_grad)


def expand(input: Tensor, *size: Any) -> Tensor:
    """``input`` broadcast to ``size`` (-1 keeps a dimension), as a new tensor."""
    dims = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    lead = len(dims) - input.ndim
    if lead < 0:
        raise ValueError(f"expand: {tuple(dims)} has fewer dimensions than {tuple(input.shape)}")
    full = tuple(input.shape[i - lead] if d == -1 and i >= lead else int(d)
                 for i, d in enumerate(dims))
    if full == tuple(input.shape):
        return input
    return apply(_EXPAND, input, size=full)


# -- in place ----------------------------------------------------------------------------------
def assign_(target: Tensor, value: Any) -> Tensor:
    """Write ``value`` (tensor or number, broadcast to ``target``'s shape) into ``target``."""
    return trace.call(_assign, target, value)  # one step of a traced graph


def _assign(target: Tensor, value: Any) -> Tensor:
    if not isinstance(value, Tensor):
        return fill_(target, value)
    if target.is_global != value.is_global:
        raise RuntimeError("in-place update mixes a local and a global tensor")
    if tuple(value.shape) != tuple(target.shape):
        value = expand(value, tuple(target.shape))
    if target.is_global:
        value = value.to_global(target.placement, target.sbp)
    rebind_inplace(target, value)
    target._data[...] = value._data.astype(target._data.dtype, copy=False)
    target._version += 1
    return target


def _broadcast_sbp(sbp: tuple[SbpParallel, ...]) -> tuple[SbpParallel, ...]:
    return tuple(B if isinstance(s, Partial) else s for s in sbp)


def fill_(target: Tensor, value: Any) -> Tensor:
    """Set every element of ``target`` to the number ``value``."""
    return trace.call(_fill, target, value)  # one step of a traced graph


def _fill(target: Tensor, value: Any) -> Tensor:
    if isinstance(value, Tensor):
        value = value.item()
    if is_grad_enabled() and target.requires_grad:
        if target.grad_fn is None:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                               "operation; wrap it in mpiflow.no_grad()")
        target.grad_fn = None  # the new value is a constant
        target.requires_grad = False
    if target.is_global and any(isinstance(s, Partial) for s in target.sbp):
        # The logical value is `value`: coordinate-0 ranks hold it, the others the identity.
        xp_full = target._data.copy()
        xp_full[...] = value
        src = Layout(target.placement, _broadcast_sbp(target.sbp))
        target._data[...] = redistribute(xp_full, tuple(target.shape), src,
                                         Layout(target.placement, target.sbp))
    else:
        target._data[...] = value
    target._version += 1
    return target


def zero_(target: Tensor) -> Tensor:
    """Set every element of ``target`` to zero."""
    return fill_(target, 0)

