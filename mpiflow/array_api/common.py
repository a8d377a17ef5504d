"""What the namespace's functions share: argument checks, the standard's dtype defaults and
promotion, and the torch-named functions other parts of mpiflow provide.

Every check here reads only what every rank knows alike (types, shapes, dtypes, arguments),
so bad input raises the same error on every rank before any communication.
"""

from __future__ import annotations

import builtins
import importlib
import operator
from collections.abc import Sequence
from typing import Any

import numpy

from .. import dtypes as _dt
from .. import ops
from ..tensors.tensor import Tensor

__all__ = ["DEFAULT_COMPLEX", "DEFAULT_FLOAT", "DEFAULT_INT", "array", "axes", "axis",
           "face", "module", "promote", "scalar_dtype", "two_arrays"]

#: The namespace's default dtypes (``__array_namespace_info__().default_dtypes()``).
DEFAULT_FLOAT, DEFAULT_COMPLEX, DEFAULT_INT = _dt.float64, _dt.complex128, _dt.int64

_SCALARS = (builtins.bool, builtins.int, builtins.float, builtins.complex)


def array(x: Any, name: str) -> Tensor:
    """``x`` if it is an array of this namespace, else a ``TypeError`` naming ``name``."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected an array (a mpiflow Tensor), got "
                        f"{type(x).__name__}")
    return x


def two_arrays(x1: Any, x2: Any, name: str) -> None:
    """Binary elementwise functions take two arrays, or an array and a Python scalar."""
    if not isinstance(x1, Tensor) and not isinstance(x2, Tensor):
        raise TypeError(f"{name}: at least one argument must be an array, got "
                        f"{type(x1).__name__} and {type(x2).__name__}")
    for x in (x1, x2):
        if not isinstance(x, (Tensor, *_SCALARS)):
            raise TypeError(f"{name}: expected an array or a Python scalar, got "
                            f"{type(x).__name__}")


def axis(value: Any, ndim: int, name: str, *, insert: builtins.bool = False) -> int:
    """One axis as a non-negative int (``insert``: a position among ``ndim + 1``)."""
    bound = ndim + 1 if insert else ndim
    try:
        a = operator.index(value)
    except TypeError:
        raise TypeError(f"{name}: axis must be an int, got {type(value).__name__}") from None
    if not -builtins.max(bound, 1) <= a < builtins.max(bound, 1) or (bound == 0):
        raise IndexError(f"{name}: axis {a} is out of bounds for an array of {ndim} "
                         "dimension(s)")
    return a % bound


def axes(value: Any, ndim: int, name: str) -> tuple[int, ...]:
    """``axis=`` of a reduction: None for all, an int or a tuple of distinct ints, sorted
    and non-negative (``()``: none)."""
    if value is None:
        return tuple(range(ndim))
    items = value if isinstance(value, (tuple, list)) else (value,)
    out = [axis(a, ndim, name) for a in items]
    if len(set(out)) != len(out):
        raise ValueError(f"{name}: axis {value} names an axis more than once")
    return tuple(sorted(out))


def scalar_dtype(value: Any) -> _dt.DType:
    """The default dtype of a Python scalar's kind."""
    if isinstance(value, builtins.bool):
        return _dt.bool
    if isinstance(value, builtins.int):
        return DEFAULT_INT
    if isinstance(value, builtins.float):
        return DEFAULT_FLOAT
    if isinstance(value, builtins.complex):
        return DEFAULT_COMPLEX
    raise TypeError(f"not a Python scalar: {type(value).__name__}")


_KIND = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def promote(*dtypes: Any) -> _dt.DType:
    """The standard's promotion of array dtypes (numpy's, which agrees on every pair the
    standard defines); a ``TypeError`` where numpy has none."""
    np_dtypes = [_dt.as_dtype(d).numpy for d in dtypes]
    try:
        return _dt.as_dtype(numpy.result_type(*np_dtypes))
    except TypeError as e:
        raise TypeError(f"no promotion of {', '.join(str(d) for d in np_dtypes)}") from e


def face(name: str) -> Any:
    """The torch-named function ``name`` of :mod:`mpiflow.ops` (some come from other parts
    of mpiflow as they land: an ``AttributeError`` names one that is not there yet)."""
    fn = getattr(ops, name, None)
    if fn is None:
        raise AttributeError(f"mpiflow has no '{name}' yet (the array API function that "
                             "needs it follows it when it lands)")
    return fn


def module(name: str) -> Any:
    """A torch-named module of mpiflow (``mpiflow.fft``, ``mpiflow.linalg``)."""
    return importlib.import_module(f"mpiflow.{name}")


def dtypes_of(values: Sequence[Any]) -> list[Any]:
    """The dtypes of the arrays among ``values``."""
    return [v.dtype for v in values if isinstance(v, Tensor)]
