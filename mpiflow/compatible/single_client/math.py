"""``flow.math``: the elementwise functions and reductions of OneFlow 0.x's guides.

Examples:
    >>> import mpiflow as mf
    >>> reduce_mean(mf.tensor([[1.0, 3.0]]), axis=1).tolist()
    [2.0]
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from ...ops import pointwise as pw
from ...ops import reduction as rd
from ...tensors.tensor import Tensor

__all__ = ["abs", "add", "add_n", "argmax", "divide", "exp", "log", "maximum", "minimum",
           "multiply", "negative", "reduce_max", "reduce_mean", "reduce_min", "reduce_sum",
           "relu", "rsqrt", "sigmoid", "sqrt", "square", "subtract", "tanh"]

abs, exp, log, sqrt, rsqrt, relu, sigmoid, tanh = (pw.abs, pw.exp, pw.log, pw.sqrt, pw.rsqrt,
                                                   pw.relu, pw.sigmoid, pw.tanh)
add, subtract, multiply, divide, maximum, minimum = (pw.add, pw.sub, pw.mul, pw.div, pw.maximum,
                                                     pw.minimum)


def negative(x: Tensor, name: str | None = None) -> Tensor:
    """``-x``."""
    return pw.neg(x)


def square(x: Tensor, name: str | None = None) -> Tensor:
    """``x * x``."""
    return pw.mul(x, x)


def add_n(inputs: Sequence[Tensor], name: str | None = None) -> Tensor:
    """The sum of the tensors."""
    return functools.reduce(pw.add, inputs)


def _axes(axis: Any) -> Any:
    return tuple(axis) if isinstance(axis, (list, tuple)) else axis


def reduce_mean(input_tensor: Tensor, axis: Any = None, keepdims: bool = False,
                name: str | None = None) -> Tensor:
    """The mean over ``axis`` (all by default)."""
    return rd.mean(input_tensor, _axes(axis), keepdims)


def reduce_sum(input_tensor: Tensor, axis: Any = None, keepdims: bool = False,
               name: str | None = None) -> Tensor:
    """The sum over ``axis`` (all by default)."""
    return rd.sum(input_tensor, _axes(axis), keepdims)


def reduce_max(input_tensor: Tensor, axis: Any = None, keepdims: bool = False,
               name: str | None = None) -> Tensor:
    """The maximum over ``axis`` (all by default)."""
    return rd.amax(input_tensor, _axes(axis), keepdims)


def reduce_min(input_tensor: Tensor, axis: Any = None, keepdims: bool = False,
               name: str | None = None) -> Tensor:
    """The minimum over ``axis`` (all by default)."""
    return rd.amin(input_tensor, _axes(axis), keepdims)


def argmax(input: Tensor, axis: int = -1, dtype: Any = None, name: str | None = None
           ) -> Tensor:
    """The index of the maximum along ``axis``."""
    return rd.argmax(input, axis)
