"""More elementwise functions: inverse trigonometric and hyperbolic ones, ``trunc``, ``log10``,
``hypot``, ``logaddexp``, ``copysign``, ``nextafter``, bit shifts, complex parts, ``clamp``
with tensor bounds, ``nan_to_num``, ``isclose`` and ``allclose``, with PyTorch's names and
behaviour (integer inputs of the floating functions give float32, as in PyTorch).

Each is an :class:`~mpiflow.ops.engine.OpDef` beside its gradient rule. Layouts: any split of
the output dim is computed where the operands lie (as every elementwise op); the linear ones
(``real``, ``imag``) also keep partial sums. No function here communicates, except
``allclose``, which reduces a split comparison to one number (an all-reduce of one integer).

Examples:
    >>> flow.hypot(flow.tensor([3.0]), flow.tensor([4.0])).tolist()
    [5.0]
    >>> flow.clamp(flow.tensor([1, 5, 9]), min=flow.tensor([2, 2, 2]), max=6).tolist()
    [2, 5, 6]
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable
from typing import Any

import numpy

from ..layouts.sbp import Partial, Split
from ..tensors.tensor import Tensor, bind
from .deterministic_sum import CONJ
from .engine import Context, OpDef, Signature, apply
from .pointwise_defs import broadcast_shape, pointwise_splits

__all__ = [
    "acos", "acosh", "asin", "asinh", "atan", "atanh", "arccos", "arccosh", "arcsin",
    "arcsinh", "arctan", "arctanh", "cosh", "sinh", "tan", "trunc", "fix", "log10", "exp2",
    "signbit", "real", "imag", "angle", "conj", "conj_physical", "positive", "hypot",
    "logaddexp", "logaddexp2", "copysign", "nextafter", "fmod", "bitwise_left_shift",
    "bitwise_right_shift", "clamp_min", "clamp_max", "nan_to_num", "isclose", "allclose",
    "isneginf", "isposinf", "isreal", "float_power",
]

Shape = tuple[int, ...]
_P = Partial()


# -- rules ------------------------------------------------------------------------------------
def _same(shape: Shape, **_: Any) -> Shape:
    return shape


def _splits(shape: Shape, **_: Any) -> list[Signature]:
    return [((Split(i),), Split(i)) for i in range(len(shape))]


def _linear(shape: Shape, **_: Any) -> list[Signature]:
    return [*_splits(shape), ((_P,), _P)]


def _floating(*dtypes: numpy.dtype, **_: Any) -> numpy.dtype:
    """The promoted dtype, or float32 for integers and bools (PyTorch)."""
    dt = numpy.result_type(*dtypes)
    return dt if dt.kind in "fc" else numpy.dtype(numpy.float32)


def _real_floating(*dtypes: numpy.dtype, **_: Any) -> numpy.dtype:
    """As :func:`_floating`, complex to its real counterpart (``abs``, ``angle``, ``real``)."""
    dt = _floating(*dtypes)
    return numpy.dtype(numpy.float32 if dt == numpy.complex64 else numpy.float64) \
        if dt.kind == "c" else dt


def _boolean(*_: Any, **__: Any) -> numpy.dtype:
    return numpy.dtype(bool)


def _keep(dtype: numpy.dtype, **_: Any) -> numpy.dtype:
    return dtype


def _part(dtype: numpy.dtype, **_: Any) -> numpy.dtype:
    """The real dtype of a complex one; a real dtype stays (``real``, ``imag``)."""
    if dtype.kind == "c":
        return numpy.dtype(numpy.float32 if dtype == numpy.complex64 else numpy.float64)
    return dtype


def _as(ctx: Context, *arrays: Any) -> list[Any]:
    """The array operands cast to the output dtype (numbers stay numbers)."""
    return [a.astype(ctx.out_dtype) if hasattr(a, "dtype") and a.dtype != ctx.out_dtype else a
            for a in arrays]


# -- gradient rules (written with mpiflow ops: they work on global tensors too) ----------------
def _pw() -> Any:
    from . import pointwise

    return pointwise


def _unary_grad(fn: Callable[[Any, Any, Any, Any], Any]) -> Callable[..., Any]:
    """A rule from ``fn(pw, g, x, out)`` (``pw``: :mod:`.pointwise`)."""

    def rule(g: Any, operands: Any, out: Any, **_: Any) -> tuple[Any]:
        return (fn(_pw(), g, operands[0], out),)

    return rule


def _binary_grad(fx: Callable[..., Any] | None, fy: Callable[..., Any] | None
                 ) -> Callable[..., Any]:
    """A rule from ``fx(pw, g, x, y, out)`` and ``fy``, each summed to its operand's shape."""

    def rule(g: Any, operands: Any, out: Any, **_: Any) -> tuple[Any, Any]:
        from .grad_util import maybe

        x, y = operands
        pw = _pw()
        gx = maybe(x, fx(pw, g, x, y, out)) if fx is not None and isinstance(x, Tensor) \
            else None
        gy = maybe(y, fy(pw, g, x, y, out)) if fy is not None and isinstance(y, Tensor) \
            else None
        return gx, gy

    return rule


def _zero(pw: Any, g: Any, *_: Any) -> Any:
    return pw.mul(g, 0)


_LN10, _LN2 = math.log(10.0), math.log(2.0)

_UNARY_GRADS: dict[str, Callable[..., Any]] = {
    "acos": _unary_grad(lambda pw, g, x, out: pw.div(pw.neg(g),
                                                     pw.sqrt(pw.sub(1.0, pw.square(x))))),
    "asin": _unary_grad(lambda pw, g, x, out: pw.div(g, pw.sqrt(pw.sub(1.0, pw.square(x))))),
    "acosh": _unary_grad(lambda pw, g, x, out: pw.div(g, pw.sqrt(pw.sub(pw.square(x), 1.0)))),
    "asinh": _unary_grad(lambda pw, g, x, out: pw.div(g, pw.sqrt(pw.add(pw.square(x), 1.0)))),
    "atan": _unary_grad(lambda pw, g, x, out: pw.div(g, pw.add(pw.square(x), 1.0))),
    "atanh": _unary_grad(lambda pw, g, x, out: pw.div(g, pw.sub(1.0, pw.square(x)))),
    "cosh": _unary_grad(lambda pw, g, x, out: pw.mul(g, apply(UNARY_MORE["sinh"], x))),
    "sinh": _unary_grad(lambda pw, g, x, out: pw.mul(g, apply(UNARY_MORE["cosh"], x))),
    "tan": _unary_grad(lambda pw, g, x, out: pw.mul(g, pw.add(pw.square(out), 1.0))),
    "log10": _unary_grad(lambda pw, g, x, out: pw.div(g, pw.mul(x, _LN10))),
    "exp2": _unary_grad(lambda pw, g, x, out: pw.mul(g, pw.mul(out, _LN2))),
    "trunc": _unary_grad(_zero),
    "real": _unary_grad(lambda pw, g, x, out: g),
}


# -- unary ops --------------------------------------------------------------------------------
def _unary(name: str, fn: Callable[[Any, Any], Any], dtype: Callable[..., numpy.dtype] =
           _floating, layouts: Callable[..., list[Signature]] = _splits) -> OpDef:
    def kernel(ctx: Context, a: Any, **_: Any) -> Any:
        (a,) = _as(ctx, a) if dtype is _floating else (a,)
        return fn(ctx.xp, a)

    return OpDef(name, kernel, _same, layouts, dtype, _UNARY_GRADS.get(name))


def _trunc(xp: Any, a: Any) -> Any:
    return a.copy() if a.dtype.kind in "biu" else xp.trunc(a)


def _signbit(xp: Any, a: Any) -> Any:
    return xp.signbit(a) if a.dtype.kind == "f" else a < 0


def _real(xp: Any, a: Any) -> Any:
    return xp.real(a).copy() if a.dtype.kind == "c" else a.copy()


def _imag(xp: Any, a: Any) -> Any:
    return xp.imag(a).copy() if a.dtype.kind == "c" else xp.zeros_like(a)


def _angle(xp: Any, a: Any) -> Any:
    if a.dtype.kind == "c":
        return xp.angle(a)
    # Real inputs: 0 for x >= 0, pi for x < 0, NaN stays NaN (PyTorch).
    return xp.where(xp.isnan(a), a, xp.where(a < 0, math.pi, 0.0)).astype(a.dtype)


UNARY_MORE: dict[str, OpDef] = {
    op.name: op
    for op in [
        _unary("acos", lambda xp, a: xp.arccos(a)),
        _unary("acosh", lambda xp, a: xp.arccosh(a)),
        _unary("asin", lambda xp, a: xp.arcsin(a)),
        _unary("asinh", lambda xp, a: xp.arcsinh(a)),
        _unary("atan", lambda xp, a: xp.arctan(a)),
        _unary("atanh", lambda xp, a: xp.arctanh(a)),
        _unary("cosh", lambda xp, a: xp.cosh(a)),
        _unary("sinh", lambda xp, a: xp.sinh(a)),
        _unary("tan", lambda xp, a: xp.tan(a)),
        _unary("log10", lambda xp, a: xp.log10(a)),
        _unary("exp2", lambda xp, a: xp.exp2(a)),
        _unary("trunc", _trunc, _keep),
        _unary("signbit", _signbit, _boolean),
        _unary("real", _real, _part, _linear),
        _unary("imag", _imag, _part, _linear),
        _unary("angle", _angle, _real_floating),
        _unary("isneginf", lambda xp, a: xp.isneginf(a) if a.dtype.kind == "f"
               else xp.zeros(a.shape, bool), _boolean),
        _unary("isposinf", lambda xp, a: xp.isposinf(a) if a.dtype.kind == "f"
               else xp.zeros(a.shape, bool), _boolean),
        _unary("isreal", lambda xp, a: xp.imag(a) == 0 if a.dtype.kind == "c"
               else xp.ones(a.shape, bool), _boolean),
    ]
}


def _unary_fn(name: str, doc: str) -> Callable[[Tensor], Tensor]:
    op = UNARY_MORE[name]

    def fn(input: Tensor) -> Tensor:
        return apply(op, input)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


acos = _unary_fn("acos", "Elementwise arc cosine (radians); integers give float32.")
acosh = _unary_fn("acosh", "Elementwise inverse hyperbolic cosine.")
asin = _unary_fn("asin", "Elementwise arc sine (radians).")
asinh = _unary_fn("asinh", "Elementwise inverse hyperbolic sine.")
atan = _unary_fn("atan", "Elementwise arc tangent (radians).")
atanh = _unary_fn("atanh", "Elementwise inverse hyperbolic tangent.")
cosh = _unary_fn("cosh", "Elementwise hyperbolic cosine.")
sinh = _unary_fn("sinh", "Elementwise hyperbolic sine.")
tan = _unary_fn("tan", "Elementwise tangent.")
log10 = _unary_fn("log10", "Elementwise base-10 logarithm.")
exp2 = _unary_fn("exp2", "Elementwise ``2 ** x``.")
trunc = _unary_fn("trunc", "Elementwise rounding toward zero (integers are returned as they "
                           "are, in their dtype).")
signbit = _unary_fn("signbit", "Whether the sign bit is set (True for -0.0), elementwise.")
real = _unary_fn("real", "The real part (a real tensor's own values, copied).")
imag = _unary_fn("imag", "The imaginary part (zeros for a real tensor).")
angle = _unary_fn("angle", "The argument of complex values; 0 or pi for real ones.")
isneginf = _unary_fn("isneginf", "Whether each element is negative infinity.")
isposinf = _unary_fn("isposinf", "Whether each element is positive infinity.")
isreal = _unary_fn("isreal", "Whether each element has a zero imaginary part.")
arccos, arccosh, arcsin, arcsinh, arctan, arctanh = acos, acosh, asin, asinh, atan, atanh
fix = trunc


def conj(input: Tensor) -> Tensor:
    """The complex conjugate (a real tensor is returned as it is, as PyTorch's view).

    Examples:
        >>> flow.conj(flow.tensor([1 + 2j])).tolist()
        [(1-2j)]
    """
    return apply(CONJ, input) if input.dtype.numpy.kind == "c" else input


conj_physical = conj


def positive(input: Tensor) -> Tensor:
    """``+input``: the tensor itself (PyTorch returns its input)."""
    return input


# -- binary ops -------------------------------------------------------------------------------
def _binary(name: str, fn: Callable[..., Any], dtype: Callable[..., numpy.dtype] | None =
            _floating, grad: Callable[..., Any] | None = None) -> OpDef:
    def kernel(ctx: Context, a: Any, b: Any, **_: Any) -> Any:
        if dtype is _floating:
            a, b = _as(ctx, a, b)
        return fn(ctx.xp, a, b)

    return OpDef(name, kernel, broadcast_shape, pointwise_splits, dtype, grad)


def _logaddexp_share(pw: Any, out: Any, a: Any) -> Any:
    return pw.exp(pw.sub(a, out))  # d/da log(e^a + e^b) = e^(a - out)


def _shift(xp: Any, a: Any, b: Any, left: bool) -> Any:
    """``a << b`` / ``a >> b``; shifts past the width give what numpy gives (0 to the left,
    the sign to the right), where C leaves them undefined."""
    return xp.left_shift(a, b) if left else xp.right_shift(a, b)


BINARY_MORE: dict[str, OpDef] = {
    op.name: op
    for op in [
        _binary("hypot", lambda xp, a, b: xp.hypot(a, b), grad=_binary_grad(
            lambda pw, g, x, y, out: pw.mul(g, pw.div(x, out)),
            lambda pw, g, x, y, out: pw.mul(g, pw.div(y, out)))),
        _binary("logaddexp", lambda xp, a, b: xp.logaddexp(a, b), grad=_binary_grad(
            lambda pw, g, x, y, out: pw.mul(g, _logaddexp_share(pw, out, x)),
            lambda pw, g, x, y, out: pw.mul(g, _logaddexp_share(pw, out, y)))),
        _binary("logaddexp2", lambda xp, a, b: xp.logaddexp2(a, b), grad=_binary_grad(
            lambda pw, g, x, y, out: pw.mul(g, pw.pow(2.0, pw.sub(x, out))),
            lambda pw, g, x, y, out: pw.mul(g, pw.pow(2.0, pw.sub(y, out))))),
        _binary("copysign", lambda xp, a, b: xp.copysign(a, b), grad=_binary_grad(
            lambda pw, g, x, y, out: pw.mul(g, pw.mul(pw.sign(x), pw.sign(out))), _zero)),
        _binary("nextafter", lambda xp, a, b: xp.nextafter(a, b)),
        _binary("fmod", lambda xp, a, b: xp.fmod(a, b), None, _binary_grad(
            lambda pw, g, x, y, out: g,
            lambda pw, g, x, y, out: pw.neg(pw.mul(g, trunc(pw.div(x, y)))))),
        _binary("float_power", lambda xp, a, b: xp.power(a, b),
                lambda *dts, **_: numpy.dtype(numpy.complex128 if any(d.kind == "c" for d in dts)
                                              else numpy.float64)),
        _binary("bitwise_left_shift", lambda xp, a, b: _shift(xp, a, b, True), None),
        _binary("bitwise_right_shift", lambda xp, a, b: _shift(xp, a, b, False), None),
    ]
}


def _binary_fn(name: str, doc: str) -> Callable[[Any, Any], Tensor]:
    op = BINARY_MORE[name]

    def fn(input: Any, other: Any) -> Tensor:
        return apply(op, input, other)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


hypot = _binary_fn("hypot", "``sqrt(input**2 + other**2)`` elementwise, without overflow.")
logaddexp = _binary_fn("logaddexp", "``log(exp(input) + exp(other))`` elementwise, stably.")
logaddexp2 = _binary_fn("logaddexp2", "``log2(2**input + 2**other)`` elementwise, stably.")
copysign = _binary_fn("copysign", "The magnitude of ``input`` with the sign of ``other``.")
nextafter = _binary_fn("nextafter", "The next floating-point value after ``input`` toward "
                                    "``other``.")
fmod = _binary_fn("fmod", "C's remainder: the sign of the dividend (``remainder`` has the "
                          "divisor's).")
float_power = _binary_fn("float_power", "``input ** exponent`` computed in float64 (complex128 "
                                        "for complex operands).")
bitwise_left_shift = _binary_fn("bitwise_left_shift", "``input << other`` for integers.")
bitwise_right_shift = _binary_fn("bitwise_right_shift", "``input >> other`` for integers "
                                                         "(arithmetic for signed ones).")


# -- clamp with tensor bounds ------------------------------------------------------------------
def _clamp_kernel(ctx: Context, a: Any, *bounds: Any, which: str) -> Any:
    xp = ctx.xp
    a, *cast = _as(ctx, a, *bounds)
    out = a
    bounds = tuple(cast)
    if "min" in which:
        out = xp.maximum(out, bounds[0])
    if which.endswith("max"):
        out = xp.minimum(out, bounds[-1])
    return out


def _inside(pw: Any, x: Any, bounds: Any, which: str) -> Any:
    """Where the gradient goes to ``x``: inside ``[min, max]``, bounds included (PyTorch)."""
    keep = None
    if "min" in which:
        keep = pw.ge(x, bounds[0])
    if which.endswith("max"):
        high = pw.le(x, bounds[-1])
        keep = high if keep is None else pw.logical_and(keep, high)
    return keep


def _ordered(pw: Any, low: Any, high: Any) -> Any:
    """``low <= high``: a tensor, or a Python bool for two numbers."""
    if isinstance(low, Tensor) or isinstance(high, Tensor):
        return pw.le(low, high)
    return bool(low <= high)


def _clamp_grad(g: Any, operands: Any, out: Any, *, which: str) -> tuple[Any, ...]:
    """The input gets the gradient inside the bounds; a tensor bound where it was applied
    (``min`` where ``x < min``; ``max`` where ``x > max``, and where ``min > max``)."""
    from .grad_util import maybe

    pw = _pw()
    x, *bounds = operands
    zero = pw.mul(g, 0)
    grads: list[Any] = [maybe(x, pw.where(_inside(pw, x, bounds, which), g, zero))]
    both = "min" in which and which.endswith("max")
    ordered = _ordered(pw, bounds[0], bounds[-1]) if both else True
    if "min" in which:
        low = pw.lt(x, bounds[0])
        if ordered is False:  # the max wins over a min above it: the min gets nothing
            low = pw.logical_and(low, False)
        elif ordered is not True:
            low = pw.logical_and(low, ordered)
        grads.append(maybe(bounds[0], pw.where(low, g, zero)))
    if which.endswith("max"):
        high = pw.gt(x, bounds[-1])
        if ordered is False:
            high = pw.logical_or(high, True)
        elif ordered is not True:
            high = pw.logical_or(high, pw.logical_not(ordered))
        grads.append(maybe(bounds[-1], pw.where(high, g, zero)))
    return tuple(grads)


CLAMP: dict[str, OpDef] = {
    which: OpDef(f"clamp{'' if which == 'min_max' else '_' + which}", _clamp_kernel,
                 broadcast_shape, pointwise_splits, None,
                 lambda g, operands, out, which=which, **_: _clamp_grad(g, operands, out,
                                                                       which=which))
    for which in ("min_max", "min", "max")
}


def clamp_bounds(input: Any, min: Any = None, max: Any = None) -> Tensor:
    """``input`` limited to ``[min, max]`` (PyTorch's ``clamp``): each bound None, a number or
    a tensor, broadcasting; the dtype promotes over the tensor bounds as PyTorch does. Where
    ``min > max`` the result is ``max``; NaN in the input or a bound gives NaN.

    Examples:
        >>> clamp_bounds(flow.tensor([0.0, 2.0, 5.0]), 1.0, flow.tensor(3.0)).tolist()
        [1.0, 2.0, 3.0]
    """
    if min is None and max is None:
        raise ValueError("clamp: at least one of 'min' or 'max' must not be None")
    if min is None:
        return apply(CLAMP["max"], input, max, which="max")
    if max is None:
        return apply(CLAMP["min"], input, min, which="min")
    return apply(CLAMP["min_max"], input, min, max, which="min_max")


def clamp_min(input: Tensor, min: Any) -> Tensor:
    """``input`` limited from below by ``min`` (a number or a tensor)."""
    return clamp_bounds(input, min, None)


def clamp_max(input: Tensor, max: Any) -> Tensor:
    """``input`` limited from above by ``max`` (a number or a tensor)."""
    return clamp_bounds(input, None, max)


# -- nan_to_num, isclose, allclose -------------------------------------------------------------
def _nan_to_num_kernel(ctx: Context, a: Any, *, nan: float, posinf: float | None,
                       neginf: float | None) -> Any:
    if a.dtype.kind not in "fc":
        return a.copy()
    return ctx.xp.nan_to_num(a, copy=True, nan=nan, posinf=posinf, neginf=neginf)


def _nan_to_num_grad(g: Any, operands: Any, out: Any, **_: Any) -> tuple[Any]:
    pw = _pw()
    return (pw.where(pw.isfinite(operands[0]), g, pw.mul(g, 0)),)


NAN_TO_NUM = OpDef("nan_to_num", _nan_to_num_kernel, _same, _splits, None, _nan_to_num_grad)


def nan_to_num(input: Tensor, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Tensor:
    """NaN replaced by ``nan``, infinities by ``posinf``/``neginf`` (default: the dtype's
    largest and lowest finite values); integer tensors are returned copied.

    Examples:
        >>> flow.nan_to_num(flow.tensor([float("nan"), 1.0, float("-inf")]), neginf=-9.0).tolist()
        [0.0, 1.0, -9.0]
    """
    return apply(NAN_TO_NUM, input, nan=builtins.float(nan),
                 posinf=None if posinf is None else builtins.float(posinf),
                 neginf=None if neginf is None else builtins.float(neginf))


def _isclose_kernel(ctx: Context, a: Any, b: Any, *, rtol: float, atol: float,
                    equal_nan: bool) -> Any:
    xp = ctx.xp
    if not hasattr(a, "dtype"):
        a = xp.asarray(a)
    if a.dtype.kind == "b":
        a = a.astype(numpy.int8)
    return xp.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


ISCLOSE = OpDef("isclose", _isclose_kernel, broadcast_shape, pointwise_splits, _boolean)


def isclose(input: Tensor, other: Any, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: bool = False) -> Tensor:
    """Whether ``|input - other| <= atol + rtol * |other|``, elementwise (infinities equal
    themselves; NaN equals NaN only with ``equal_nan``).

    Examples:
        >>> flow.isclose(flow.tensor([1.0, 2.0]), flow.tensor([1.0 + 1e-9, 2.1])).tolist()
        [True, False]
    """
    if rtol < 0 or atol < 0:
        raise ValueError(f"isclose: rtol and atol must be non-negative, got rtol={rtol}, "
                         f"atol={atol}")
    return apply(ISCLOSE, input, other, rtol=builtins.float(rtol), atol=builtins.float(atol),
                 equal_nan=builtins.bool(equal_nan))


def allclose(input: Tensor, other: Any, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> bool:
    """Whether :func:`isclose` holds everywhere: a Python bool.

    On global tensors the count of elements that differ is summed where they lie (a partial
    sum over split dims) and made one number: one all-reduce of an integer, never a gather.

    Examples:
        >>> flow.allclose(flow.tensor([1.0, 2.0]), flow.tensor([1.0, 2.0 + 1e-7]))
        True
    """
    from .reduction import sum as reduce_sum

    far = _pw().logical_not(isclose(input, other, rtol, atol, equal_nan))
    return builtins.bool(reduce_sum(far).item() == 0)


def _rlshift(self: Tensor, other: Any) -> Tensor:
    """``other << self``: the reflected operator."""
    return bitwise_left_shift(other, self)


def _rrshift(self: Tensor, other: Any) -> Tensor:
    """``other >> self``: the reflected operator."""
    return bitwise_right_shift(other, self)


def _in_place(fn: Callable[[Any, Any], Tensor]) -> Callable[[Tensor, Any], Tensor]:
    def method(self: Tensor, other: Any) -> Tensor:
        return _pw().assign_(self, fn(self, other))

    method.__name__ = method.__qualname__ = f"{fn.__name__}_"
    method.__doc__ = f"``self = {fn.__name__}(self, other)`` in place (in self's dtype)."
    return method


def _operators() -> dict[str, Callable[..., Any]]:
    """The shift operators, and the in-place forms of the operators that lack one."""
    pw = _pw()
    return {
        "__lshift__": bitwise_left_shift, "__rshift__": bitwise_right_shift,
        "__rlshift__": _rlshift, "__rrshift__": _rrshift,
        "__ilshift__": _in_place(bitwise_left_shift),
        "__irshift__": _in_place(bitwise_right_shift),
        "__ifloordiv__": _in_place(pw.floor_divide), "__imod__": _in_place(pw.remainder),
        "__iand__": _in_place(pw.bitwise_and), "__ior__": _in_place(pw.bitwise_or),
        "__ixor__": _in_place(pw.bitwise_xor),
    }


bind({name: globals()[name] for name in __all__})
bind(_operators())
