"""Turn what users pass to the communication functions into the arrays the layer moves.

numpy arrays pass through untouched. Other array-like types (mpiflow tensors, CuPy arrays)
register a converter that returns the array *sharing their memory*, so in-place collectives
write into the caller's object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy

from ._array_module import is_array

__all__ = ["as_buffer", "as_buffer_list", "register_buffer_type"]

_converters: dict[type, Callable[[Any], Any]] = {}


def register_buffer_type(cls: type, to_array: Callable[[Any], Any]) -> None:
    """Let instances of ``cls`` be passed to every collective.

    Args:
        cls: the type to accept.
        to_array: returns the array that shares the instance's memory.
    """
    _converters[cls] = to_array


def as_buffer(obj: Any, what: str = "tensor") -> Any:
    """Return the array behind ``obj``, or raise a ``TypeError`` naming the argument.

    Args:
        obj: a numpy array or a registered array-like.
        what: the argument's name, for the error message.

    Examples:
        >>> as_buffer(numpy.zeros(2)).shape
        (2,)
    """
    if type(obj) is numpy.ndarray:
        return obj
    exact = _converters.get(type(obj))  # the common case, one lookup: an mpiflow Tensor
    if exact is not None:
        return exact(obj)
    for cls, convert in _converters.items():
        if isinstance(obj, cls):
            return convert(obj)
    if isinstance(obj, numpy.ndarray) or is_array(obj):  # numpy subclasses, CuPy arrays
        return obj
    raise TypeError(
        f"{what} must be a numpy array or an mpiflow tensor, got {type(obj).__name__}"
        + (" (wrap Python data with numpy.asarray first)" if isinstance(obj, (list, tuple,
                                                                              int, float)) else "")
    )


def as_buffer_list(objs: Any, what: str) -> list[Any]:
    """Return the arrays behind a list of tensors, checking that it is a list."""
    if not isinstance(objs, (list, tuple)):
        raise TypeError(f"{what} must be a list of arrays or tensors, got {type(objs).__name__}")
    return [as_buffer(o, f"{what}[{i}]") for i, o in enumerate(objs)]
