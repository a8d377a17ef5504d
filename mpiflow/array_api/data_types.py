"""Data types and the standard's data type functions: ``astype``, ``can_cast``, ``finfo``,
``iinfo``, ``isdtype``, ``result_type``.

The dtypes are mpiflow's own (``mpiflow.float64`` is ``xp.float64``). The defaults differ from
the torch-named functions': a Python float becomes **float64** here (float32 there), as the
standard's scientific users expect.

Examples:
    >>> from mpiflow import array_api as xp
    >>> xp.result_type(xp.int8, xp.uint8), xp.isdtype(xp.float32, "real floating")
    (mpiflow.int16, True)
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Any

import numpy

from .. import dtypes as _dt
from ..ops import pointwise as pw
from ..tensors.tensor import Tensor
from .common import array, promote, scalar_dtype

__all__ = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float32", "float64", "complex64", "complex128", "astype", "can_cast", "finfo",
           "iinfo", "isdtype", "result_type", "finfo_object", "iinfo_object"]

bool, int8, int16, int32, int64 = _dt.bool, _dt.int8, _dt.int16, _dt.int32, _dt.int64
uint8, uint16, uint32, uint64 = _dt.uint8, _dt.uint16, _dt.uint32, _dt.uint64
float32, float64, complex64, complex128 = _dt.float32, _dt.float64, _dt.complex64, _dt.complex128

DTYPES = (bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32, float64,
          complex64, complex128)

_KINDS = {
    "bool": "b", "signed integer": "i", "unsigned integer": "u", "integral": "iu",
    "real floating": "f", "complex floating": "c", "numeric": "iufc",
}


def dtype(value: Any, name: str = "dtype") -> _dt.DType:
    """``value`` as one of the namespace's dtypes, or a ``TypeError``."""
    if isinstance(value, _dt.DType) and value in DTYPES:
        return value
    raise TypeError(f"{name}: expected one of the namespace's dtypes (xp.float64, ...), got "
                    f"{value!r}")


def astype(x: Tensor, dtype: Any, /, *, copy: builtins.bool = True, device: Any = None
           ) -> Tensor:
    """``x`` converted to ``dtype``: a new array, or ``x`` itself when ``copy=False`` and it
    already has that dtype (and device).

    Examples:
        >>> from mpiflow import array_api as xp
        >>> xp.astype(xp.asarray([1.7, -1.7]), xp.int32).tolist()
        [1, -1]
    """
    array(x, "astype")
    target = globals()["dtype"](dtype, "astype")
    if device is not None:
        x = x.to_device(device)
    if x.dtype is target:
        return pw.clone(x) if copy else x
    return pw.cast(x, target)


def can_cast(from_: Any, to: Any, /) -> builtins.bool:
    """Whether the standard's promotion rules allow casting ``from_`` (a dtype or an array)
    to ``to`` without losing values.

    Examples:
        >>> from mpiflow import array_api as xp
        >>> xp.can_cast(xp.int8, xp.int16), xp.can_cast(xp.float64, xp.float32)
        (True, False)
    """
    source = from_.dtype if isinstance(from_, Tensor) else dtype(from_, "can_cast")
    target = dtype(to, "can_cast")
    a, b = source.numpy, target.numpy
    if a.kind == "b":
        return True
    if b.kind == "b":
        return False
    if a.kind in "iu" and b.kind in "fc":  # mixed kinds: not among the standard's casts
        return False
    return builtins.bool(numpy.can_cast(a, b, casting="safe"))


@dataclass(frozen=True)
class finfo_object:
    """Machine limits of a floating dtype (Python floats, the dtype the namespace's)."""

    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: _dt.DType


@dataclass(frozen=True)
class iinfo_object:
    """Machine limits of an integer dtype."""

    bits: int
    max: int
    min: int
    dtype: _dt.DType


def _dtype_of(type: Any, name: str) -> _dt.DType:
    return type.dtype if isinstance(type, Tensor) else dtype(type, name)


def finfo(type: Any, /) -> finfo_object:
    """Machine limits of a floating dtype (or of an array's dtype); complex dtypes give their
    real part's.

    Examples:
        >>> from mpiflow import array_api as xp
        >>> xp.finfo(xp.float32).bits, xp.finfo(xp.complex128).dtype
        (32, mpiflow.float64)
    """
    dt = _dtype_of(type, "finfo")
    if dt.numpy.kind not in "fc":
        raise TypeError(f"finfo: {dt} is not a floating dtype")
    info = numpy.finfo(dt.numpy)
    real = _dt.as_dtype(info.dtype)
    return finfo_object(int(info.bits), float(info.eps), float(info.max), float(info.min),
                        float(info.smallest_normal), real)


def iinfo(type: Any, /) -> iinfo_object:
    """Machine limits of an integer dtype (or of an array's dtype).

    Examples:
        >>> from mpiflow import array_api as xp
        >>> xp.iinfo(xp.int8).min, xp.iinfo(xp.uint16).max
        (-128, 65535)
    """
    dt = _dtype_of(type, "iinfo")
    if dt.numpy.kind not in "iu":
        raise TypeError(f"iinfo: {dt} is not an integer dtype")
    info = numpy.iinfo(dt.numpy)
    return iinfo_object(int(info.bits), int(info.max), int(info.min), dt)


def isdtype(dtype: Any, kind: Any) -> builtins.bool:
    """Whether ``dtype`` is ``kind``: a dtype, a kind's name ("bool", "signed integer",
    "unsigned integer", "integral", "real floating", "complex floating", "numeric") or a
    tuple of those.

    Examples:
        >>> from mpiflow import array_api as xp
        >>> xp.isdtype(xp.int8, ("integral", xp.float32))
        True
    """
    dt = globals()["dtype"](dtype, "isdtype")
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if isinstance(k, str):
            if k not in _KINDS:
                raise ValueError(f"isdtype: unknown kind {k!r}; one of {', '.join(_KINDS)}")
            if dt.numpy.kind in _KINDS[k]:
                return True
        elif globals()["dtype"](k, "isdtype") is dt:
            return True
    return False


def result_type(*arrays_and_dtypes: Any) -> _dt.DType:
    """The dtype the standard's promotion gives: of the arrays and dtypes, then of the Python
    scalars (which take the arrays' dtype when of a kind it holds).

    Examples:
        >>> from mpiflow import array_api as xp
        >>> xp.result_type(xp.float32, 1.0), xp.result_type(xp.int8, 1)
        (mpiflow.float32, mpiflow.int8)
    """
    dts = [a.dtype if isinstance(a, Tensor) else dtype(a, "result_type")
           for a in arrays_and_dtypes if not isinstance(a, (builtins.bool, int, float, complex))]
    scalars = [a for a in arrays_and_dtypes if isinstance(a, (builtins.bool, int, float,
                                                              complex))]
    if not dts:
        if not scalars:
            raise ValueError("result_type needs at least one array or dtype")
        dts = [scalar_dtype(scalars[0])]
        scalars = scalars[1:]
    out = promote(*dts)
    for s in scalars:
        out = _with_scalar(out, s)
    return out


def _with_scalar(dt: _dt.DType, s: Any) -> _dt.DType:
    """``dt`` combined with a Python scalar: kept where the scalar's kind fits it (bool in
    anything, int in numeric, float in floating, complex in complex); real floating with a
    complex scalar gives the complex of the same precision."""
    kind = dt.numpy.kind
    if isinstance(s, builtins.bool) or (isinstance(s, int) and kind in "iufc") \
            or (isinstance(s, float) and kind in "fc") or (isinstance(s, complex) and kind == "c"):
        return dt
    if isinstance(s, complex) and kind == "f":
        return complex64 if dt is float32 else complex128
    raise TypeError(f"result_type: a Python {type(s).__name__} does not promote with {dt}")
