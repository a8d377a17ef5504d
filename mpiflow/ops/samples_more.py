"""Sample inputs of the ops of :mod:`mpiflow.ops.pointwise_more` and :mod:`mpiflow.ops.slicing`,
for the op sweep.

Values keep inside each function's domain and away from its edges (``acos`` in (-1, 1),
``acosh`` above 1, no zero divisors for ``fmod``, no ties of ``clamp``'s bounds).

Examples:
    >>> [s.operands[0].shape for s in SAMPLES["acos"][1](numpy.dtype("float64"), (2,))]
    [(5, 3), (7,)]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy

if TYPE_CHECKING:
    from .samples import Sample

__all__ = ["SAMPLES"]

Mesh = tuple[int, ...]


def _sample(*args: Any, **kwargs: Any) -> Sample:
    """A :class:`.samples.Sample` (imported when called: samples.py imports this module)."""
    from . import samples

    return samples.Sample(*args, **kwargs)


def _values(*args: Any, **kwargs: Any) -> numpy.ndarray:
    """:func:`.samples.sample_values` (imported when called)."""
    from . import samples

    return samples.sample_values(*args, **kwargs)
F64, F32, I64, BOOL, C128 = "float64", "float32", "int64", "bool", "complex128"


def _inside(shape: tuple[int, ...], dtype: numpy.dtype, seed: int, low: float, high: float
            ) -> numpy.ndarray:
    """Values in ``(low, high)`` (integers: rounded into it)."""
    rng = numpy.random.default_rng(seed)
    v = rng.uniform(low, high, size=shape)
    return numpy.round(v).astype(dtype) if numpy.dtype(dtype).kind in "iu" else v.astype(dtype)


_DOMAINS: dict[str, tuple[float, float]] = {
    "acos": (-0.9, 0.9), "asin": (-0.9, 0.9), "atanh": (-0.9, 0.9), "acosh": (1.2, 3.0),
    "log10": (0.5, 3.0), "tan": (-1.2, 1.2),
}


def _unary(name: str) -> Any:
    low, high = _DOMAINS.get(name, (-2.0, 2.0))

    def samples(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
        if name in _DOMAINS or numpy.dtype(dtype).kind == "f":
            return [_sample((_inside((5, 3), dtype, 1, low, high),)),
                    _sample((_inside((7,), dtype, 2, low, high),))]
        return [_sample((_values((5, 3), dtype, 1),)),
                _sample((_values((7,), dtype, 2),))]

    return samples


def _special(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    """Values with NaN, infinities and signed zeros (no gradient: not smooth there)."""
    x = numpy.array([[numpy.nan, 1.5, -numpy.inf], [numpy.inf, -0.0, 2.0], [0.0, -1.0, 3.0],
                     [4.0, -2.5, numpy.nan], [1.0, 2.0, 3.0]], dtype=dtype)
    return [_sample((x,), grad=False)]


def _nan_to_num(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [_sample(s.operands, {"nan": 0.5, "posinf": None, "neginf": -7.0}, grad=False)
            for s in _special(dtype, mesh)] + \
           [_sample((_values((7,), dtype, 3),), {"nan": 0.0, "posinf": 9.0, "neginf": None})]


def _binary(first: tuple[float, float] | None, second: tuple[float, float] | None,
            grad: bool = True) -> Any:
    def values(shape: tuple[int, ...], dtype: numpy.dtype, seed: int,
               domain: tuple[float, float] | None) -> numpy.ndarray:
        if domain is None:
            return _values(shape, dtype, seed)
        return _inside(shape, dtype, seed, *domain)

    def samples(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
        x = values((5, 3), dtype, 1, first)
        number: Any = 2 if numpy.dtype(dtype).kind in "iu" else 1.5
        return [_sample((x, values((5, 3), dtype, 2, second)), grad=grad),
                _sample((x, values((3,), dtype, 3, second)), grad=grad),
                _sample((values((5, 1), dtype, 4, first), values((5, 3), dtype, 5, second)),
                       grad=grad),
                _sample((x, number), grad=grad)]

    return samples


def _shift(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = _values((5, 3), dtype, 1)
    return [_sample((x, _inside((5, 3), dtype, 2, 0, 5))),
            _sample((x, _inside((3,), dtype, 3, 0, 5))), _sample((x, 3))]


def _clamp(which: str) -> Any:
    def samples(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
        x = _values((5, 3), dtype, 1)
        low = _inside((5, 3), dtype, 2, -1.9, -0.1)   # strictly below ...
        high = _inside((3,), dtype, 3, 0.1, 1.9)      # ... strictly above: no ties
        if numpy.dtype(dtype).kind in "iu":
            low, high = numpy.full((5, 3), -2, dtype), numpy.full((3,), 2, dtype)
        integral = numpy.dtype(dtype).kind in "iu"
        below: Any = -1 if integral else -0.5  # a Python number of the tensor's kind
        above: Any = 1 if integral else 0.5
        bounds: tuple[tuple[Any, ...], ...] = {
            "min_max": ((low, high), (below, high), (low, above)),
            "min": ((low,), (below,)), "max": ((high,), (above,))}[which]
        return [_sample((x, *bs), {"which": which}) for bs in bounds]

    return samples


def _isclose(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = _values((5, 3), dtype, 1)
    y = x.copy()
    y[::2] += numpy.asarray(1, dtype=dtype)
    attrs = {"rtol": 1e-05, "atol": 1e-08, "equal_nan": False}
    return [_sample((x, y), attrs), _sample((x, y[0]), {**attrs, "equal_nan": True})]


_SLICES = ((0, 1, 6, 1), (0, 6, -1, -1), (0, 0, 7, 3), (1, 2, 0, -1))  # dim, start, stop, step


def _slice(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = _values((7, 3), dtype, 1)
    return [_sample((x,), {"dim": d, "start": a, "stop": b, "step": c, "n": x.shape[d]})
            for d, a, b, c in _SLICES]


def _slice_grad(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    out = []
    for i, (d, a, b, c) in enumerate(_SLICES):
        shape = [7, 3]
        shape[d] = len(range(a, b, c))
        out.append(_sample((_values(tuple(shape), dtype, 2 + i),),
                          {"dim": d, "start": a, "stop": b, "step": c, "n": (7, 3)[d]}))
    return out


_UNARY: dict[str, tuple[str, ...]] = {
    **{name: (F64, F32) for name in ("acos", "asin", "atan", "atanh", "acosh", "asinh",
                                     "cosh", "sinh", "tan", "log10", "exp2")},
    "trunc": (F64, F32, I64), "signbit": (F64, I64), "real": (F64, C128),
    "imag": (C128,), "angle": (F64, C128), "isneginf": (F64,), "isposinf": (F64,),
    "isreal": (C128, F64),
}

#: op name -> (the input dtypes it accepts, its sample generator).
SAMPLES: dict[str, tuple[tuple[str, ...], Any]] = {
    **{name: (dtypes, _unary(name)) for name, dtypes in _UNARY.items()},
    "hypot": ((F64, F32), _binary((0.5, 2.0), (0.5, 2.0))),
    "logaddexp": ((F64, F32), _binary(None, None)),
    "logaddexp2": ((F64, F32), _binary(None, None)),
    "copysign": ((F64, F32), _binary((0.5, 2.0), None)),
    "nextafter": ((F64, F32), _binary(None, None, grad=False)),
    "fmod": ((F64, I64), _binary(None, (1.0, 3.0))),
    "float_power": ((F64,), _binary((0.5, 2.0), (0.5, 2.0), grad=False)),
    "bitwise_left_shift": ((I64,), _shift),
    "bitwise_right_shift": ((I64,), _shift),
    "clamp": ((F64, I64), _clamp("min_max")),
    "clamp_min": ((F64, I64), _clamp("min")),
    "clamp_max": ((F64, I64), _clamp("max")),
    "nan_to_num": ((F64, F32), _nan_to_num),
    "isclose": ((F64, I64), _isclose),
    "slice": ((F64, I64), _slice),
    "slice_grad": ((F64,), _slice_grad),
}
