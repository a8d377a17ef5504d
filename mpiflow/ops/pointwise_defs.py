"""Elementwise ops with numpy broadcasting: kernel, dtype rule and layout rule side by side.

Layouts (per mesh axis): any output dim may be split, with every input that has that dim at
full size split along its matching dim and the others broadcast; linear ops also keep partial
sums (``P + P -> P``, ``P * B -> P``, ``-P -> P``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy

from ..core.array_module import array_module
from ..layouts.sbp import Partial, SbpParallel, Split
from .engine import B, Context, OpDef, Signature

__all__ = ["BINARY", "UNARY", "WHERE", "broadcast_shape", "pointwise_splits"]

P = Partial()
Shape = tuple[int, ...]


def broadcast_shape(*shapes: Shape, **_: Any) -> Shape:
    """numpy's broadcast of ``shapes``; a ``ValueError`` names them when they do not fit."""
    try:
        return tuple(numpy.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(f"shapes {', '.join(map(str, shapes))} cannot be broadcast together")\
            from None


def pointwise_splits(*shapes: Shape, **_: Any) -> list[Signature]:
    """Signatures ``(S(j_x), ...) -> S(i)`` for every output dim ``i``."""
    out = broadcast_shape(*shapes)
    sigs: list[Signature] = []
    for i, extent in enumerate(out):
        ins: list[SbpParallel] = []
        for shape in shapes:
            j = i - (len(out) - len(shape))
            ins.append(Split(j) if j >= 0 and shape[j] == extent else B)
        sigs.append((tuple(ins), Split(i)))
    return sigs


def _same_shape(shape: Shape, **_: Any) -> Shape:
    return shape


def _unary_splits(shape: Shape, **_: Any) -> list[Signature]:
    return [((Split(i),), Split(i)) for i in range(len(shape))]


def _unary_linear(shape: Shape, **_: Any) -> list[Signature]:
    return [*_unary_splits(shape), ((P,), P)]


def _sum_linear(*shapes: Shape, **_: Any) -> list[Signature]:
    return [*pointwise_splits(*shapes), ((P,) * len(shapes), P)]


def _first_linear(*shapes: Shape, **_: Any) -> list[Signature]:
    return [*pointwise_splits(*shapes), ((P, B), P)]


def _either_linear(*shapes: Shape, **_: Any) -> list[Signature]:
    return [*pointwise_splits(*shapes), ((P, B), P), ((B, P), P)]


def _float_of(*dtypes: numpy.dtype, **_: Any) -> numpy.dtype:
    dt = numpy.result_type(*dtypes)
    return dt if dt.kind in "fc" else numpy.dtype(numpy.float32)


def _bool_of(*dtypes: numpy.dtype, **_: Any) -> numpy.dtype:
    return numpy.dtype(bool)


def _magnitude_of(dtype: numpy.dtype, **_: Any) -> numpy.dtype:
    """``abs``: a complex dtype's real counterpart (as PyTorch), any other dtype itself."""
    if dtype.kind == "c":
        return numpy.dtype(numpy.float32 if dtype == numpy.complex64 else numpy.float64)
    return dtype


def _floating(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``fn`` in floating point: integer inputs become float32, as in PyTorch."""

    def kernel(ctx: Context, *arrays: Any) -> Any:
        cast = [a.astype(ctx.out_dtype) if hasattr(a, "dtype") and a.dtype != ctx.out_dtype
                else a for a in arrays]
        return fn(ctx.xp, *cast)

    return kernel


def _plain(fn: Callable[..., Any]) -> Callable[..., Any]:
    def kernel(ctx: Context, *arrays: Any) -> Any:
        return fn(ctx.xp, *arrays)

    return kernel


def _unary(name: str, fn: Callable[..., Any], *, floating: bool = False, linear: bool = False,
           dtype: Callable[..., numpy.dtype] | None = None,
           grad: Callable[..., Any] | None = None) -> OpDef:
    return OpDef(name, _floating(fn) if floating else _plain(fn), _same_shape,
                 _unary_linear if linear else _unary_splits,
                 _float_of if floating else dtype,
                 UNARY_GRADS.get(name) if grad is None else grad)  # one OpDef per name: no rebuild


def _sigmoid(xp: Any, a: Any) -> Any:
    return 0.5 * (1.0 + xp.tanh(0.5 * a))  # no overflow for large |a|


def _relu(xp: Any, a: Any) -> Any:
    return xp.maximum(a, xp.zeros((), dtype=a.dtype))


def _erf(xp: Any, a: Any) -> Any:
    """erf by Abramowitz and Stegun 7.1.26 (max error 1.5e-7): array modules lack one."""
    sign = xp.sign(a)
    x = xp.abs(a)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027
                                                                          + t * 1.061405429))))
    return sign * (1.0 - poly * xp.exp(-x * x))


def _gelu(xp: Any, a: Any) -> Any:
    return 0.5 * a * (1.0 + _erf(xp, a * 0.7071067811865476))  # PyTorch's exact (erf) GELU



# -- gradient rules: grad(g, operands, out) -> one gradient (or None) per operand ----------------
def _pw() -> Any:
    from . import pointwise

    return pointwise


def _u(fn: Callable[[Any, Any, Any, Any], Any]) -> Callable[..., Any]:
    """A unary rule from ``fn(pw, g, x, out)``."""

    def rule(g: Any, operands: Any, out: Any, **_: Any) -> tuple[Any]:
        return (fn(_pw(), g, operands[0], out),)

    return rule


def _relu_grad(g: Any, operands: Any, out: Any, **_: Any) -> tuple[Any]:
    """``g * (x > 0)``: on local tensors one pass over the arrays (the mask multiplies as 1 or
    0, the values of the composite ``g * (x > 0).to(g.dtype)``), else the composite."""
    x = operands[0]
    if (g._placement is None and x._placement is None and tuple(g._shape) == tuple(x._shape)
            and g._data.dtype.kind in "fc"):
        from ..tensors.tensor import Tensor

        gd = g._data
        return (Tensor(array_module(gd).multiply(gd, x._data > 0)),)
    pw = _pw()
    return (pw.mul(g, pw.gt(x, 0).to(g.dtype)),)


def _b(fx: Callable[..., Any] | None, fy: Callable[..., Any] | None) -> Callable[..., Any]:
    """A binary rule from ``fx(pw, g, x, y, out)`` and ``fy(...)``, summed to each shape."""

    def rule(g: Any, operands: Any, out: Any, **_: Any) -> tuple[Any, Any]:
        from .grad_util import maybe

        x, y = operands
        pw = _pw()
        # Only for operands that are tensors: a number's gradient is never needed (and pow's
        # exponent rule would take the log of the base for nothing).
        gx = maybe(x, fx(pw, g, x, y, out)) if fx is not None and _wants(x) else None
        gy = maybe(y, fy(pw, g, x, y, out)) if fy is not None and _wants(y) else None
        return gx, gy

    return rule


def _wants(operand: Any) -> bool:
    from ..tensors.tensor import Tensor

    return isinstance(operand, Tensor)


def _zero(pw: Any, g: Any, *_: Any) -> Any:
    return pw.mul(g, 0)


_SQRT_2_OVER_PI = 0.7978845608028654
_INV_SQRT_2PI = 0.3989422804014327


def _gelu_grad(pw: Any, g: Any, x: Any, out: Any) -> Any:
    cdf = pw.mul(pw.add(pw.erf(pw.mul(x, 0.7071067811865476)), 1.0), 0.5)
    pdf = pw.mul(pw.exp(pw.mul(pw.square(x), -0.5)), _INV_SQRT_2PI)
    return pw.mul(g, pw.add(cdf, pw.mul(x, pdf)))


def _max_share(pw: Any, a: Any, b: Any) -> Any:
    """1 where ``a`` wins, 0.5 on ties (PyTorch splits the gradient), 0 elsewhere."""
    return pw.add(pw.gt(a, b).to(g_dtype(a, b)), pw.mul(pw.eq(a, b).to(g_dtype(a, b)), 0.5))


def g_dtype(a: Any, b: Any) -> Any:
    from ..tensors.tensor import Tensor

    for t in (a, b):
        if isinstance(t, Tensor) and t.dtype.is_floating_point:
            return t.dtype
    return "float32"


def _pow_x(pw: Any, g: Any, x: Any, y: Any, out: Any) -> Any:
    return pw.mul(g, pw.mul(y, pw.pow(x, y - 1)))  # (operators: y may be a Python number)


def _pow_y(pw: Any, g: Any, x: Any, y: Any, out: Any) -> Any:
    log_x = pw.log(x) if hasattr(x, "shape") else numpy.log(x)  # x may be a Python number
    return pw.mul(g, pw.mul(out, log_x))


UNARY_GRADS: dict[str, Callable[..., Any]] = {
    "neg": _u(lambda pw, g, x, out: pw.neg(g)),
    "abs": _u(lambda pw, g, x, out: pw.mul(g, pw.sign(x))),
    "sign": _u(_zero),
    "exp": _u(lambda pw, g, x, out: pw.mul(g, out)),
    "expm1": _u(lambda pw, g, x, out: pw.mul(g, pw.add(out, 1.0))),
    "log": _u(lambda pw, g, x, out: pw.div(g, x)),
    "log1p": _u(lambda pw, g, x, out: pw.div(g, pw.add(x, 1.0))),
    "log2": _u(lambda pw, g, x, out: pw.div(g, pw.mul(x, 0.6931471805599453))),
    "sqrt": _u(lambda pw, g, x, out: pw.div(pw.mul(g, 0.5), out)),
    "rsqrt": _u(lambda pw, g, x, out: pw.mul(pw.mul(g, -0.5), pw.pow(out, 3))),
    "reciprocal": _u(lambda pw, g, x, out: pw.neg(pw.mul(g, pw.square(out)))),
    "square": _u(lambda pw, g, x, out: pw.mul(pw.mul(g, 2), x)),
    "sin": _u(lambda pw, g, x, out: pw.mul(g, pw.cos(x))),
    "cos": _u(lambda pw, g, x, out: pw.neg(pw.mul(g, pw.sin(x)))),
    "tanh": _u(lambda pw, g, x, out: pw.mul(g, pw.sub(1.0, pw.square(out)))),
    "sigmoid": _u(lambda pw, g, x, out: pw.mul(g, pw.mul(out, pw.sub(1.0, out)))),
    "relu": _relu_grad,
    "gelu": _u(_gelu_grad),
    "erf": _u(lambda pw, g, x, out: pw.mul(g, pw.mul(pw.exp(pw.neg(pw.square(x))),
                                                     1.1283791670955126))),
    "floor": _u(_zero),
    "ceil": _u(_zero),
    "round": _u(_zero),
}

BINARY_GRADS: dict[str, Callable[..., Any]] = {
    "add": _b(lambda pw, g, x, y, out: g, lambda pw, g, x, y, out: g),
    "sub": _b(lambda pw, g, x, y, out: g, lambda pw, g, x, y, out: pw.neg(g)),
    "mul": _b(lambda pw, g, x, y, out: pw.mul(g, y), lambda pw, g, x, y, out: pw.mul(g, x)),
    "div": _b(lambda pw, g, x, y, out: pw.div(g, y),
              lambda pw, g, x, y, out: pw.neg(pw.div(pw.mul(g, out), y))),
    "pow": _b(_pow_x, _pow_y),
    "maximum": _b(lambda pw, g, x, y, out: pw.mul(g, _max_share(pw, x, y)),
                  lambda pw, g, x, y, out: pw.mul(g, _max_share(pw, y, x))),
    "minimum": _b(lambda pw, g, x, y, out: pw.mul(g, _max_share(pw, y, x)),
                  lambda pw, g, x, y, out: pw.mul(g, _max_share(pw, x, y))),
    "atan2": _b(lambda pw, g, x, y, out: pw.div(pw.mul(g, y), x * x + y * y),
                lambda pw, g, x, y, out: pw.div(pw.neg(pw.mul(g, x)), x * x + y * y)),
    "remainder": _b(lambda pw, g, x, y, out: g,
                    lambda pw, g, x, y, out: pw.neg(pw.mul(g, pw.floor_divide(x, y)))),
    "floor_divide": _b(_zero, _zero),
}


UNARY: dict[str, OpDef] = {
    op.name: op
    for op in [
        _unary("neg", lambda xp, a: xp.negative(a), linear=True),
        _unary("abs", lambda xp, a: xp.abs(a), dtype=_magnitude_of),
        _unary("sign", lambda xp, a: xp.sign(a)),
        _unary("exp", lambda xp, a: xp.exp(a), floating=True),
        _unary("expm1", lambda xp, a: xp.expm1(a), floating=True),
        _unary("log", lambda xp, a: xp.log(a), floating=True),
        _unary("log1p", lambda xp, a: xp.log1p(a), floating=True),
        _unary("log2", lambda xp, a: xp.log2(a), floating=True),
        _unary("sqrt", lambda xp, a: xp.sqrt(a), floating=True),
        _unary("rsqrt", lambda xp, a: 1.0 / xp.sqrt(a), floating=True),
        _unary("reciprocal", lambda xp, a: 1.0 / a, floating=True),
        _unary("square", lambda xp, a: a * a),
        _unary("sin", lambda xp, a: xp.sin(a), floating=True),
        _unary("cos", lambda xp, a: xp.cos(a), floating=True),
        _unary("tanh", lambda xp, a: xp.tanh(a), floating=True),
        _unary("sigmoid", _sigmoid, floating=True),
        _unary("relu", _relu),
        _unary("gelu", _gelu, floating=True),
        _unary("erf", _erf, floating=True),
        _unary("floor", lambda xp, a: xp.floor(a)),
        _unary("ceil", lambda xp, a: xp.ceil(a)),
        _unary("round", lambda xp, a: xp.round(a)),
        _unary("logical_not", lambda xp, a: xp.logical_not(a), dtype=_bool_of),
        _unary("bitwise_not", lambda xp, a: xp.invert(a)),
        _unary("isnan", lambda xp, a: xp.isnan(a), dtype=_bool_of),
        _unary("isinf", lambda xp, a: xp.isinf(a), dtype=_bool_of),
        _unary("isfinite", lambda xp, a: xp.isfinite(a), dtype=_bool_of),
    ]
}


def _binary(name: str, fn: Callable[..., Any], layouts: Callable[..., list[Signature]] =
            pointwise_splits, *, floating: bool = False,
            dtype: Callable[..., numpy.dtype] | None = None,
            grad: Callable[..., Any] | None = None) -> OpDef:
    return OpDef(name, _floating(fn) if floating else _plain(fn), broadcast_shape, layouts,
                 _float_of if floating else dtype,
                 BINARY_GRADS.get(name) if grad is None else grad)  # (looked up at call time)


BINARY: dict[str, OpDef] = {
    op.name: op
    for op in [
        _binary("add", lambda xp, a, b: xp.add(a, b), _sum_linear),
        _binary("sub", lambda xp, a, b: xp.subtract(a, b), _sum_linear),
        _binary("mul", lambda xp, a, b: xp.multiply(a, b), _either_linear),
        _binary("div", lambda xp, a, b: xp.true_divide(a, b), _first_linear, floating=True),
        _binary("floor_divide", lambda xp, a, b: xp.floor_divide(a, b)),
        _binary("remainder", lambda xp, a, b: xp.remainder(a, b)),
        _binary("pow", lambda xp, a, b: xp.power(a, b)),
        _binary("atan2", lambda xp, a, b: xp.arctan2(a, b), floating=True),
        _binary("maximum", lambda xp, a, b: xp.maximum(a, b)),
        _binary("minimum", lambda xp, a, b: xp.minimum(a, b)),
        _binary("eq", lambda xp, a, b: xp.equal(a, b), dtype=_bool_of),
        _binary("ne", lambda xp, a, b: xp.not_equal(a, b), dtype=_bool_of),
        _binary("lt", lambda xp, a, b: xp.less(a, b), dtype=_bool_of),
        _binary("le", lambda xp, a, b: xp.less_equal(a, b), dtype=_bool_of),
        _binary("gt", lambda xp, a, b: xp.greater(a, b), dtype=_bool_of),
        _binary("ge", lambda xp, a, b: xp.greater_equal(a, b), dtype=_bool_of),
        _binary("logical_and", lambda xp, a, b: xp.logical_and(a, b), dtype=_bool_of),
        _binary("logical_or", lambda xp, a, b: xp.logical_or(a, b), dtype=_bool_of),
        _binary("logical_xor", lambda xp, a, b: xp.logical_xor(a, b), dtype=_bool_of),
        _binary("bitwise_and", lambda xp, a, b: xp.bitwise_and(a, b)),
        _binary("bitwise_or", lambda xp, a, b: xp.bitwise_or(a, b)),
        _binary("bitwise_xor", lambda xp, a, b: xp.bitwise_xor(a, b)),
    ]
}


def _where_grad(g: Any, operands: Any, out: Any, **_: Any) -> tuple[Any, Any, Any]:
    from .grad_util import maybe

    cond, x, y = operands
    pw = _pw()
    zero = pw.mul(g, 0)
    return (None, maybe(x, pw.where(cond, g, zero)), maybe(y, pw.where(cond, zero, g)))


def _where_dtype(cond: numpy.dtype, *dtypes: numpy.dtype, **_: Any) -> numpy.dtype:
    return numpy.result_type(*dtypes) if dtypes else numpy.dtype(numpy.float32)


def _where_kernel(ctx: Context, cond: Any, x: Any, y: Any) -> Any:
    return ctx.xp.where(cond, x, y)


WHERE = OpDef("where", _where_kernel, broadcast_shape, pointwise_splits, _where_dtype,
              _where_grad)
