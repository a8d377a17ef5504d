"""Elementwise ops with numpy broadcasting: kernel, dtype rule and layout rule side by side.

Layouts (per mesh axis): any output dim may be split, with every input that has that dim at
full size split along its matching dim and the others broadcast; linear ops also keep partial
sums (``P + P -> P``, ``P * B -> P``, ``-P -> P``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy

from ..sbp import Partial, SbpParallel, Split
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
           dtype: Callable[..., numpy.dtype] | None = None) -> OpDef:
    return OpDef(name, _floating(fn) if floating else _plain(fn), _same_shape,
                 _unary_linear if linear else _unary_splits,
                 _float_of if floating else dtype)


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


UNARY: dict[str, OpDef] = {
    op.name: op
    for op in [
        _unary("neg", lambda xp, a: xp.negative(a), linear=True),
        _unary("abs", lambda xp, a: xp.abs(a)),
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
            dtype: Callable[..., numpy.dtype] | None = None) -> OpDef:
    return OpDef(name, _floating(fn) if floating else _plain(fn), broadcast_shape, layouts,
                 _float_of if floating else dtype)


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


def _where_dtype(cond: numpy.dtype, *dtypes: numpy.dtype, **_: Any) -> numpy.dtype:
    return numpy.result_type(*dtypes) if dtypes else numpy.dtype(numpy.float32)


def _where_kernel(ctx: Context, cond: Any, x: Any, y: Any) -> Any:
    return ctx.xp.where(cond, x, y)


WHERE = OpDef("where", _where_kernel, broadcast_shape, pointwise_splits, _where_dtype)
