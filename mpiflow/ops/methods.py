"""Tensor operators and methods, bound to the functions of :mod:`mpiflow.ops`.

Kept apart from the Tensor class so that the class stays about data and layout, and every op
has one definition that serves ``mpiflow.exp(x)`` and ``x.exp()`` alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._tensor import Tensor
from . import pointwise as pw

__all__ = ["bind", "install"]


def _reflected(fn: Callable[[Any, Any], Tensor]) -> Callable[[Tensor, Any], Tensor]:
    def method(self: Tensor, other: Any) -> Tensor:
        return fn(other, self)  # the engine takes numbers in any operand position

    return method


def _inplace(fn: Callable[[Any, Any], Tensor]) -> Callable[[Tensor, Any], Tensor]:
    def method(self: Tensor, other: Any) -> Tensor:
        return pw.assign_(self, fn(self, other))

    return method


def bind(name: str, fn: Callable[..., Any]) -> None:
    """Make ``fn(tensor, ...)`` available as the method ``tensor.name(...)``."""
    setattr(Tensor, name, fn)


def install() -> None:
    """Attach the elementwise operators and methods to :class:`Tensor`."""
    operators = {
        "__add__": pw.add, "__sub__": pw.sub, "__mul__": pw.mul, "__truediv__": pw.div,
        "__floordiv__": pw.floor_divide, "__mod__": pw.remainder, "__pow__": pw.pow,
        "__and__": pw.bitwise_and, "__or__": pw.bitwise_or, "__xor__": pw.bitwise_xor,
        "__eq__": pw.eq, "__ne__": pw.ne, "__lt__": pw.lt, "__le__": pw.le, "__gt__": pw.gt,
        "__ge__": pw.ge,
    }
    for name, fn in operators.items():
        bind(name, fn)
    for name, fn in {"__radd__": pw.add, "__rsub__": pw.sub, "__rmul__": pw.mul,
                     "__rtruediv__": pw.div, "__rfloordiv__": pw.floor_divide,
                     "__rmod__": pw.remainder, "__rpow__": pw.pow, "__rand__": pw.bitwise_and,
                     "__ror__": pw.bitwise_or, "__rxor__": pw.bitwise_xor}.items():
        bind(name, _reflected(fn))
    for name, fn in {"__iadd__": pw.add, "__isub__": pw.sub, "__imul__": pw.mul,
                     "__itruediv__": pw.div, "__ipow__": pw.pow}.items():
        bind(name, _inplace(fn))
    bind("__neg__", pw.neg)
    bind("__abs__", pw.abs)
    bind("__invert__", lambda self: pw.logical_not(self) if self.dtype.name == "bool"
         else pw.bitwise_not(self))
    bind("__pos__", lambda self: self)
    methods = [n for n in pw.__all__ if n not in ("assign_", "fill_", "zero_", "cast", "to",
                                                  "clone", "expand")]
    for name in methods:
        bind(name, getattr(pw, name))
    bind("expand", pw.expand)
    for name in ("add", "sub", "mul", "div"):
        bind(f"{name}_", _inplace(getattr(pw, name)))
    bind("clamp_", lambda self, min=None, max=None: pw.assign_(self, pw.clamp(self, min, max)))
    bind("copy_", pw.assign_)
    bind("fill_", pw.fill_)
    bind("zero_", pw.zero_)
    bind("multiply", pw.mul)
    bind("subtract", pw.sub)
    bind("divide", pw.div)
