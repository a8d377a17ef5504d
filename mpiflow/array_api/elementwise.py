"""Elementwise functions of the standard, on mpiflow's elementwise ops.

Every function runs where its operands lie (no communication: a split operand gives a split
result). Binary functions take two arrays or an array and a Python scalar (which takes the
array's dtype where its kind fits, as the standard says). Integer ``floor``, ``ceil``,
``trunc`` and ``round`` return the integers themselves; ``abs`` of complex values is real.

Examples:
    >>> from mpiflow import array_api as xp
    >>> x = xp.asarray([-1.5, 0.5, 2.5])
    >>> xp.round(x).tolist(), xp.add(x, 1).dtype
    ([-2.0, 0.0, 2.0], mpiflow.float64)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy

from ..ops import pointwise as pw
from ..ops import pointwise_more as pm
from ..tensors import creation as flow_creation
from ..tensors.tensor import Tensor
from .common import array, two_arrays

__all__ = [
    "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and",
    "bitwise_left_shift", "bitwise_invert", "bitwise_or", "bitwise_right_shift",
    "bitwise_xor", "ceil", "clip", "conj", "copysign", "cos", "cosh", "divide", "equal", "exp",
    "expm1", "floor", "floor_divide", "greater", "greater_equal", "hypot", "imag", "isfinite",
    "isinf", "isnan", "less", "less_equal", "log", "log1p", "log2", "log10", "logaddexp",
    "logical_and", "logical_not", "logical_or", "logical_xor", "maximum", "minimum",
    "multiply", "negative", "nextafter", "not_equal", "positive", "pow", "real", "reciprocal",
    "remainder", "round", "sign", "signbit", "sin", "sinh", "square", "sqrt", "subtract",
    "tan", "tanh", "trunc",
]


def _unary(name: str, fn: Callable[[Tensor], Tensor]) -> Callable[..., Tensor]:
    def f(x: Tensor, /) -> Tensor:
        return fn(array(x, name))

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"The standard's ``{name}(x)``, elementwise."
    return f


def _binary(name: str, fn: Callable[[Any, Any], Tensor]) -> Callable[..., Tensor]:
    def f(x1: Any, x2: Any, /) -> Tensor:
        two_arrays(x1, x2, name)
        return fn(x1, x2)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"The standard's ``{name}(x1, x2)``, elementwise with broadcasting (either "
                 "may be a Python scalar).")
    return f


def _integral_as_is(fn: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    """Rounding functions return integer (and bool) arrays unchanged, in their dtype."""

    def rounding(x: Tensor) -> Tensor:
        return pw.clone(x) if x.dtype.numpy.kind in "biu" else fn(x)

    return rounding


abs = _unary("abs", pw.abs)
acos = _unary("acos", pm.acos)
acosh = _unary("acosh", pm.acosh)
asin = _unary("asin", pm.asin)
asinh = _unary("asinh", pm.asinh)
atan = _unary("atan", pm.atan)
atanh = _unary("atanh", pm.atanh)
bitwise_invert = _unary("bitwise_invert", pw.bitwise_not)
ceil = _unary("ceil", _integral_as_is(pw.ceil))
conj = _unary("conj", lambda x: pm.conj(x) if x.dtype.numpy.kind == "c" else pw.clone(x))
cos = _unary("cos", pw.cos)
cosh = _unary("cosh", pm.cosh)
exp = _unary("exp", pw.exp)
expm1 = _unary("expm1", pw.expm1)
floor = _unary("floor", _integral_as_is(pw.floor))
imag = _unary("imag", pm.imag)
isfinite = _unary("isfinite", pw.isfinite)
isinf = _unary("isinf", pw.isinf)
isnan = _unary("isnan", pw.isnan)
log = _unary("log", pw.log)
log1p = _unary("log1p", pw.log1p)
log2 = _unary("log2", pw.log2)
log10 = _unary("log10", pm.log10)
logical_not = _unary("logical_not", pw.logical_not)
negative = _unary("negative", pw.neg)
positive = _unary("positive", pw.clone)
real = _unary("real", pm.real)
reciprocal = _unary("reciprocal", pw.reciprocal)
round = _unary("round", _integral_as_is(pw.round))
sign = _unary("sign", pw.sign)
signbit = _unary("signbit", pm.signbit)
sin = _unary("sin", pw.sin)
sinh = _unary("sinh", pm.sinh)
square = _unary("square", pw.square)
sqrt = _unary("sqrt", pw.sqrt)
tan = _unary("tan", pm.tan)
tanh = _unary("tanh", pw.tanh)
trunc = _unary("trunc", _integral_as_is(pm.trunc))

add = _binary("add", pw.plain_add)
atan2 = _binary("atan2", pw.atan2)
bitwise_and = _binary("bitwise_and", pw.bitwise_and)
bitwise_left_shift = _binary("bitwise_left_shift", pm.bitwise_left_shift)
bitwise_or = _binary("bitwise_or", pw.bitwise_or)
bitwise_right_shift = _binary("bitwise_right_shift", pm.bitwise_right_shift)
bitwise_xor = _binary("bitwise_xor", pw.bitwise_xor)
copysign = _binary("copysign", pm.copysign)
divide = _binary("divide", pw.div)
equal = _binary("equal", pw.eq)
def _floor_divide(x1: Any, x2: Any) -> Tensor:
    """numpy's (PyTorch's) floor division, with the standard's special cases where those
    give NaN or -1: an infinite dividend over a finite non-zero divisor is infinite, a finite
    non-zero dividend over an infinity of the other sign is -0."""
    with numpy.errstate(invalid="ignore", divide="ignore"):
        out = pw.floor_divide(x1, x2)
    if out.dtype.numpy.kind != "f":
        return out
    # (a Python scalar operand as an array laid out as the result, for the masks)
    x1, x2 = (v if isinstance(v, Tensor) else flow_creation.full_like(out, v) for v in (x1, x2))
    with numpy.errstate(invalid="ignore"):
        inf_over_finite = pw.logical_and(pw.isinf(x1), pw.logical_and(pw.isfinite(x2),
                                                                      pw.ne(x2, 0)))
        out = pw.where(inf_over_finite, pw.mul(x1, pw.sign(x2)), out)
        finite_over_inf = pw.logical_and(pw.logical_and(pw.isfinite(x1), pw.ne(x1, 0)),
                                         pw.logical_and(pw.isinf(x2),
                                                        pw.ne(pw.gt(x1, 0), pw.gt(x2, 0))))
        return pw.where(finite_over_inf, -0.0, out)


floor_divide = _binary("floor_divide", _floor_divide)
greater = _binary("greater", pw.gt)
greater_equal = _binary("greater_equal", pw.ge)
hypot = _binary("hypot", pm.hypot)
less = _binary("less", pw.lt)
less_equal = _binary("less_equal", pw.le)
logaddexp = _binary("logaddexp", pm.logaddexp)
logical_and = _binary("logical_and", pw.logical_and)
logical_or = _binary("logical_or", pw.logical_or)
logical_xor = _binary("logical_xor", pw.logical_xor)
maximum = _binary("maximum", pw.maximum)
minimum = _binary("minimum", pw.minimum)
multiply = _binary("multiply", pw.mul)
nextafter = _binary("nextafter", pm.nextafter)
not_equal = _binary("not_equal", pw.ne)
pow = _binary("pow", pw.pow)
remainder = _binary("remainder", pw.remainder)
subtract = _binary("subtract", pw.plain_sub)


def clip(x: Tensor, /, min: Any = None, max: Any = None) -> Tensor:
    """``x`` limited to ``[min, max]`` (each None, a Python scalar or an array), in ``x``'s
    dtype; NaN in ``x`` or a bound gives NaN.

    Examples:
        >>> from mpiflow import array_api as xp
        >>> xp.clip(xp.asarray([1, 5, 9]), 2, 6).tolist()
        [2, 5, 6]
    """
    array(x, "clip")
    if min is None and max is None:
        return pw.clone(x)
    return pw.cast(pm.clamp_bounds(x, min, max), x.dtype)
