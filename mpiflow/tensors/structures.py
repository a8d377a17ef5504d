"""``flow.to_global`` and ``flow.to_local`` of whole structures: the tensors inside nested
lists, tuples and dicts (a state dict, a batch) converted, everything else kept as it is.

OneFlow's functions of the same names; on one tensor they are ``Tensor.to_global`` and
``Tensor.to_local``.
"""

from __future__ import annotations

import warnings
from typing import Any

from .tensor import Tensor

__all__ = ["to_global", "to_local"]


def _map(fn: Any, value: Any) -> Any:
    """``value`` with ``fn`` applied to every tensor in it (lists, tuples, dicts, nested)."""
    if isinstance(value, Tensor):
        return fn(value)
    if isinstance(value, dict):
        return type(value)((k, _map(fn, v)) for k, v in value.items())
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_map(fn, v) for v in value)
    return value


def to_global(input: Any, placement: Any = None, sbp: Any = None, **kwargs: Any) -> Any:
    """Every tensor of ``input`` made global (or redistributed) by ``Tensor.to_global``
    (collective: every rank calls it with the same structure).

    Args:
        input: a tensor, or lists, tuples and dicts holding tensors; other values are kept.
        placement: as for ``Tensor.to_global``.
        sbp: as for ``Tensor.to_global``.
        kwargs: ``grad_sbp``, ``check_meta``, ``shape``, as for ``Tensor.to_global``.

    Returns:
        The same structure, its tensors global.

    Examples:
        >>> p, b = flow.placement.all("cpu"), flow.sbp.broadcast
        >>> out = flow.to_global({"w": flow.ones(2), "step": 3}, placement=p, sbp=b)
        >>> out["w"].is_global, out["step"]
        (True, 3)
    """
    return _map(lambda t: t.to_global(placement, sbp, **kwargs), input)


def to_local(input: Any) -> Any:
    """Every global tensor of ``input`` replaced by this rank's shard (``Tensor.to_local``);
    local tensors are kept, with a warning, as OneFlow does.

    Examples:
        >>> p = flow.placement.all("cpu")
        >>> flow.to_local([flow.ones(2, placement=p, sbp=flow.sbp.broadcast)])[0].is_local
        True
    """
    def convert(t: Tensor) -> Tensor:
        if t.is_local:
            warnings.warn("to_local: the tensor is already local", stacklevel=3)
            return t
        return t.to_local()

    return _map(convert, input)
