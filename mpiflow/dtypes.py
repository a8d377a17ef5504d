"""mpiflow's dtypes: ``mpiflow.float32`` and friends, and PyTorch's rules for inferring them.

A :class:`DType` names one numpy dtype; arrays of every array module (numpy, CuPy) use the
numpy dtype underneath.

Examples:
    >>> import mpiflow as flow
    >>> flow.float32, flow.float32.itemsize
    (mpiflow.float32, 4)
    >>> flow.dtypes.as_dtype("float64") is flow.float64
    True
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy

__all__ = [
    "DType",
    "as_dtype",
    "bool",
    "complex64",
    "complex128",
    "default_float",
    "double",
    "float",
    "float16",
    "float32",
    "float64",
    "half",
    "infer_dtype",
    "int",
    "int8",
    "int16",
    "int32",
    "int64",
    "long",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
]



class DType:
    """A tensor element type; compares equal only to itself (one instance per numpy dtype)."""

    __slots__ = ("name", "numpy")

    def __init__(self, name: str, np_dtype: numpy.dtype) -> None:
        self.name = name
        self.numpy = np_dtype

    @property
    def itemsize(self) -> builtins.int:
        return self.numpy.itemsize

    @property
    def is_floating_point(self) -> builtins.bool:
        return self.numpy.kind == "f"

    @property
    def is_complex(self) -> builtins.bool:
        return self.numpy.kind == "c"

    @property
    def is_signed(self) -> builtins.bool:
        return self.numpy.kind in "fic"

    def __repr__(self) -> str:
        return f"mpiflow.{self.name}"

    def __reduce__(self) -> str:
        return self.name


_BY_NUMPY: dict[numpy.dtype, DType] = {}


def _make(name: str, np_name: str) -> DType:
    dt = DType(name, numpy.dtype(np_name))
    _BY_NUMPY[dt.numpy] = dt
    return dt


bool = _make("bool", "bool")
uint8 = _make("uint8", "uint8")
uint16 = _make("uint16", "uint16")
uint32 = _make("uint32", "uint32")
uint64 = _make("uint64", "uint64")
int8 = _make("int8", "int8")
int16 = _make("int16", "int16")
int32 = _make("int32", "int32")
int64 = _make("int64", "int64")
float16 = _make("float16", "float16")
float32 = _make("float32", "float32")
float64 = _make("float64", "float64")
complex64 = _make("complex64", "complex64")
complex128 = _make("complex128", "complex128")
half, float, double = float16, float32, float64
int, long = int32, int64

default_float = float32


def as_dtype(value: Any) -> DType:
    """Return the :class:`DType` for ``value``: a DType, numpy dtype, type or name.

    Raises:
        TypeError: ``value`` names no supported dtype.
    """
    if isinstance(value, DType):
        return value
    if value is builtins.float:
        return default_float
    if value is builtins.int:
        return int64
    if value is builtins.bool:
        return bool
    try:
        np_dtype = numpy.dtype(value)
    except TypeError:
        raise TypeError(f"not a dtype: {value!r}") from None
    found = _BY_NUMPY.get(np_dtype)
    if found is None:
        raise TypeError(f"mpiflow has no dtype for {np_dtype}")
    return found


def infer_dtype(data: Any) -> DType:
    """PyTorch's inference: Python floats give float32, ints int64, bools bool, complex
    complex64; arrays keep their dtype."""
    if hasattr(data, "dtype"):
        return as_dtype(getattr(data.dtype, "numpy", data.dtype))
    array = numpy.asarray(data)
    kind = array.dtype.kind
    if kind == "f":
        return default_float
    if kind in "iu":
        return int64
    if kind == "b":
        return bool
    if kind == "c":
        return complex64
    raise TypeError(f"cannot make a tensor from {type(data).__name__} data of dtype {array.dtype}")
