"""Tensor operators and methods, bound to the functions of :mod:`mpiflow.ops.pointwise`.

Kept apart from the Tensor class so that the class stays about data and layout, and every op
has one definition that serves ``mpiflow.exp(x)`` and ``x.exp()`` alike. The other ops modules
bind their own methods the same way (:func:`mpiflow.tensors.tensor.bind`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..tensors.tensor import Tensor, bind
from . import pointwise as pw

__all__ = ["METHODS"]


def _reflected(fn: Callable[[Any, Any], Tensor]) -> Callable[[Tensor, Any], Tensor]:
    def method(self: Tensor, other: Any) -> Tensor:
        return fn(other, self)  # the engine takes numbers in any operand position

    method.__name__ = method.__qualname__ = f"r{fn.__name__}"
    method.__doc__ = f"``{fn.__name__}(other, self)``: the reflected operator."
    return method


def _inplace(fn: Callable[[Any, Any], Tensor]) -> Callable[[Tensor, Any], Tensor]:
    def method(self: Tensor, other: Any) -> Tensor:
        return pw.assign_(self, fn(self, other))

    method.__name__ = method.__qualname__ = f"{fn.__name__}_"
    method.__doc__ = f"``self = {fn.__name__}(self, other)`` in place; returns self."
    return method


def _inplace_kw(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    def method(self: Tensor, other: Any, **kwargs: Any) -> Tensor:
        return pw.assign_(self, fn(self, other, **kwargs))  # add_(other, alpha=2)

    method.__name__ = method.__qualname__ = f"{fn.__name__}_"
    method.__doc__ = (f"``self = {fn.__name__}(self, other, alpha=...)`` in place; returns "
                      "self.")
    return method


def _invert(self: Tensor) -> Tensor:
    """``~self``: logical not of a bool tensor, bitwise not of an integer one."""
    return pw.logical_not(self) if self.dtype.name == "bool" else pw.bitwise_not(self)


def _pos(self: Tensor) -> Tensor:
    """``+self``: self."""
    return self


def _clamp_(self: Tensor, min: Any = None, max: Any = None) -> Tensor:
    """Clamp in place to ``[min, max]``; returns self."""
    return pw.assign_(self, pw.clamp(self, min, max))


_OPERATORS = {
    "add": pw.plain_add, "sub": pw.plain_sub, "mul": pw.mul, "truediv": pw.div,
    "floordiv": pw.floor_divide, "mod": pw.remainder, "pow": pw.pow, "and": pw.bitwise_and,
    "or": pw.bitwise_or, "xor": pw.bitwise_xor,
}
_COMPARISONS = {"eq": pw.eq, "ne": pw.ne, "lt": pw.lt, "le": pw.le, "gt": pw.gt, "ge": pw.ge}
_NOT_METHODS = ("assign_", "fill_", "zero_", "cast")  # functions only, or bound by other names

#: The bind table of this module: method name -> function.
METHODS: dict[str, Callable[..., Any]] = {
    **{f"__{name}__": fn for name, fn in (_OPERATORS | _COMPARISONS).items()},
    **{f"__r{name}__": _reflected(fn) for name, fn in _OPERATORS.items()},
    **{f"__i{name}__": _inplace(_OPERATORS[name])
       for name in ("add", "sub", "mul", "truediv", "pow")},
    "__neg__": pw.neg, "__abs__": pw.abs, "__invert__": _invert, "__pos__": _pos,
    **{name: getattr(pw, name) for name in pw.__all__ if name not in _NOT_METHODS},
    **{f"{name}_": _inplace_kw(getattr(pw, name)) for name in ("add", "sub")},
    **{f"{name}_": _inplace(getattr(pw, name)) for name in ("mul", "div")},
    "clamp_": _clamp_, "copy_": pw.assign_, "fill_": pw.fill_, "zero_": pw.zero_,
    "multiply": pw.mul, "subtract": pw.sub, "divide": pw.div,
}

bind(METHODS)
