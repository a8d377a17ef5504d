"""``flow.get_variable`` and the regularizers: the job's variables, kept by name.

A variable is made on the first call that asks for it and found again by name on the next
calls (a job's body runs on the first call of each input signature, which is traced, and on
every call of an eager job). In the consistent view it is a global tensor
broadcast over every rank (``B``), in the mirrored view a local tensor with the same values
on every rank. Its initial values are drawn by numpy, seeded by the name, so they are the
same at any rank count; a checkpoint loaded before the first call supplies them instead.

Examples:
    >>> import mpiflow.compatible.single_client as flow
    >>> @flow.global_function()
    ... def job() -> flow.typing.Numpy:
    ...     return flow.get_variable("w", (2,), initializer=flow.ones_initializer())
    >>> job().tolist()
    [1.0, 1.0]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy

from ... import dtypes as _dtypes
from ...layouts.sbp import Broadcast
from ...ops.pointwise import abs as _abs
from ...ops.reduction import sum as _sum
from ...tensors import trace as tensor_trace
from ...tensors.creation import tensor
from ...tensors.tensor import Tensor
from .checkpoint import take_pending
from .initializers import Initializer, glorot_uniform_initializer
from .session import MIRRORED, SESSION, persistent

__all__ = ["Regularizer", "get_variable", "l1", "l1_l2", "l2", "scoped_name"]


@dataclass(frozen=True)
class Regularizer:
    """A penalty added to the job's loss: ``l1 * sum(|w|) + l2 * sum(w**2)``."""

    l1: float = 0.0
    l2: float = 0.0

    def penalty(self, w: Tensor) -> Tensor:
        """The penalty of ``w``."""
        out = _sum(w * w) * self.l2
        return out + _sum(_abs(w)) * self.l1 if self.l1 else out


def l1(l: float = 0.01) -> Regularizer:  # noqa: E741
    """An L1 penalty."""
    return Regularizer(l1=l)


def l2(l: float = 0.01) -> Regularizer:  # noqa: E741
    """An L2 penalty."""
    return Regularizer(l2=l)


def l1_l2(l1: float = 0.01, l2: float = 0.01) -> Regularizer:
    """L1 and L2 penalties."""
    return Regularizer(l1, l2)


def scoped_name(name: str) -> str:
    """``name`` inside the open ``flow.scope.namespace`` scopes (``outer-inner-name``)."""
    call = SESSION.call
    return "-".join([*(call.namespaces if call else []), name])


def get_variable(name: str, shape: Any = None, dtype: Any = None,
                 initializer: Initializer | None = None, regularizer: Regularizer | None = None,
                 trainable: bool = True, model_name: str | None = None,
                 random_seed: int | None = None, reuse: bool = True, **_: Any) -> Tensor:
    """The variable ``name``: made (and initialized) on first use, the same tensor after.

    Args:
        name: the variable's name (inside the open namespaces).
        shape: its shape.
        dtype: its dtype (float32 by default).
        initializer: how to fill it (Glorot uniform by default).
        regularizer: a penalty added to the job's loss.
        trainable: whether the optimizer updates it.
        model_name: accepted (OneFlow's name suffix for its model files).
        random_seed: mixed into the initializer's seed.
        reuse: return an existing variable of the name (False: an existing one is an error).

    Returns:
        The variable (a leaf that requires grad when trainable).

    Raises:
        ValueError: an existing variable of another shape, or ``reuse=False`` for an existing
            name.
    """
    full = scoped_name(name)
    call = SESSION.current_call("get_variable")
    shape = tuple(int(n) for n in (shape or ()))
    var = SESSION.variables.get(full)
    if var is not None:
        if not reuse and full not in call.used and call.used:
            raise ValueError(f"variable {full!r} exists and reuse=False")
        if tuple(var.shape) != shape:
            raise ValueError(f"variable {full!r} has shape {tuple(var.shape)}, asked for {shape}")
    else:
        np_dtype = (_dtypes.as_dtype(dtype).numpy if dtype is not None
                    else numpy.dtype(numpy.float32))
        loaded = take_pending(full, shape)
        if loaded is not None:
            values = loaded.astype(np_dtype)
        else:
            init = initializer or glorot_uniform_initializer()
            if random_seed is not None:
                init = Initializer(init.kind, init.a, init.b, random_seed, init.mode,
                                   init.distribution)
            values = init.draw(shape, np_dtype, full)
        with tensor_trace.suspended():  # made once, not a step that replays would repeat
            if call.view is MIRRORED:
                var = tensor(values)
            else:
                placement = SESSION.placement
                var = tensor(values, placement=placement, sbp=(Broadcast(),) * placement.ndim)
        var.requires_grad_(trainable)
        SESSION.variables[full] = var
    call.used[full] = persistent(var)
    if regularizer is not None and call.train and var.requires_grad:
        call.losses.append(regularizer.penalty(var))
    return var
