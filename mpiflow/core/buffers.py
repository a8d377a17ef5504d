"""Turn what users pass to the communication functions into the arrays the layer moves.

numpy arrays pass through untouched. Other array-like types (mpiflow tensors, CuPy arrays)
register a converter that returns the array *sharing their memory*, so in-place collectives
write into the caller's object. CPU ``torch.Tensor``s become numpy views of their memory
(:mod:`.torch_arrays`; torch is never imported here: a tensor can only exist once it is).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy

from .array_module import is_array
from .torch_arrays import host_array, is_torch_tensor

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
        obj: a numpy array, a registered array-like (an mpiflow tensor), a CuPy array or a
            CPU ``torch.Tensor``.
        what: the argument's name, for the error message.

    Returns:
        The array sharing ``obj``'s memory. A tensor of a dtype numpy lacks (bfloat16) appears
        as integers of its size: fit for moving bytes, not for reducing (the public faces
        reduce such tensors through :func:`.torch_arrays.stage`).

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
    if is_torch_tensor(obj):  # last: a dict lookup and an isinstance, only for what is left
        return host_array(obj, what)
    raise TypeError(
        f"{what} must be a numpy array, an mpiflow tensor, a CuPy array or a torch tensor, "
        f"got {type(obj).__name__}"
        + (" (wrap Python data with numpy.asarray first)" if isinstance(obj, (list, tuple,
                                                                              int, float)) else "")
    )


def as_buffer_list(objs: Any, what: str) -> list[Any]:
    """Return the arrays behind a list of tensors, checking that it is a list."""
    if not isinstance(objs, (list, tuple)):
        raise TypeError(f"{what} must be a list of arrays or tensors, got {type(objs).__name__}")
    return [as_buffer(o, f"{what}[{i}]") for i, o in enumerate(objs)]
