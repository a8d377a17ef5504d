"""Which array module (numpy, CuPy) an array belongs to, without importing CuPy needlessly."""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import numpy

__all__ = ["array_module", "is_array", "to_host"]


def array_module(array: Any) -> ModuleType:
    """Return ``numpy`` or ``cupy``: the module whose functions operate on ``array``.

    Examples:
        >>> array_module(numpy.zeros(2)) is numpy
        True
    """
    if isinstance(array, (numpy.ndarray, numpy.generic)):
        return numpy
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(array, cupy.ndarray):
        return cupy
    return numpy


def is_array(value: Any) -> bool:
    """Whether ``value`` is an ndarray of a supported array module."""
    if isinstance(value, numpy.ndarray):
        return True
    cupy = sys.modules.get("cupy")
    return cupy is not None and isinstance(value, cupy.ndarray)


def to_host(array: Any) -> numpy.ndarray:
    """``array`` as a numpy array: itself, or a copy from the device (CuPy's ``get()``)."""
    if isinstance(array, numpy.ndarray):
        return array
    get = getattr(array, "get", None)
    return numpy.asarray(get() if get is not None else array)
