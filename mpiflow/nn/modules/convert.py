"""Putting values into tensors of a given layout: what ``load_state_dict``, ``to_global`` and
optimizers' ``load_state_dict`` share.

A *local* value for a *global* tensor is its whole logical value, the same on every rank: each
rank keeps its shard, with no communication. A global value is redistributed (collective).
"""

from __future__ import annotations

from typing import Any

import numpy

from ...autograd import no_grad
from ...core.errors import GlobalTensorError
from ...layouts.placement import Placement
from ...layouts.sbp import Broadcast, normalize_sbp
from ...ops import pointwise as _pw
from ...tensors.tensor import Tensor

__all__ = ["check_value", "copy_into", "globalize", "swap", "value_like"]


def _kind(dtype: numpy.dtype) -> str:
    return {"b": "bool", "i": "integer", "u": "integer", "f": "floating point",
            "c": "complex"}.get(dtype.kind, dtype.kind)


def value_like(target: Tensor, value: Any) -> Tensor:
    """``value`` (a tensor or numpy array of ``target``'s logical shape) as a new tensor with
    ``target``'s dtype and layout.

    A local value of a global ``target`` is its whole logical value (each rank keeps its
    shard, no communication); a global value is redistributed (collective).

    Examples:
        >>> w = flow.zeros(4, 2, placement=flow.placement.all("cpu"), sbp=flow.sbp.split(0))
        >>> value_like(w, numpy.zeros(tuple(w.shape))).sbp == w.sbp    # w global
        True
    """
    from ...tensors.creation import tensor

    with no_grad():
        if isinstance(value, Tensor):
            if value.is_global and target.is_global:
                moved = value.to_global(target.placement, target.sbp)
                return _pw.clone(_pw.cast(moved, target.dtype))  # own memory, always
            if value.is_local and target.is_local:
                return _pw.clone(_pw.cast(value, target.dtype))
            value = value.numpy()  # collective for a global value
        array = numpy.asarray(value)
        if target.is_global:
            return tensor(array, dtype=target.dtype, placement=target.placement, sbp=target.sbp)
        return tensor(array, dtype=target.dtype)


def copy_into(target: Tensor, value: Any) -> None:
    """Write ``value`` into ``target`` in place, outside autograd (layouts as
    :func:`value_like`), keeping ``target`` the same object."""
    with no_grad():
        target.copy_(value_like(target, value))


def check_value(key: str, target: Tensor, value: Any) -> str | None:
    """Why ``value`` cannot be loaded into ``target`` (an error line), or None."""
    if not isinstance(value, (Tensor, numpy.ndarray)):
        return (f'While copying the parameter named "{key}", expected a mpiflow tensor or a '
                f"numpy array, got {type(value).__name__}.")
    shape = tuple(value.shape)
    if shape != tuple(target.shape):
        return (f"size mismatch for {key}: copying a param with shape {shape} from checkpoint, "
                f"the shape in current model is {tuple(target.shape)}.")
    have = value.dtype.numpy if isinstance(value, Tensor) else value.dtype
    if _kind(have) != _kind(target.dtype.numpy):
        return (f"dtype mismatch for {key}: copying a {_kind(have)} value ({have}) from "
                f"checkpoint, the dtype in current model is {target.dtype.name}.")
    return None


def swap(t: Tensor, new: Tensor) -> None:
    """Make ``t`` hold ``new``'s data and layout (``t`` stays the same object)."""
    t._data, t._placement, t._sbp, t._shape = new._data, new._placement, new._sbp, new._shape
    t._version += 1


def globalize(t: Tensor, placement: Placement | None, sbp: Any) -> Tensor:
    """``t`` as a global tensor of ``placement`` and ``sbp`` (see ``Module.to_global``)."""
    if t.is_global:
        return t.to_global(placement, sbp)
    if placement is None or sbp is None:
        raise GlobalTensorError("to_global of a module with local tensors needs a placement and "
                                "an sbp")
    layout = normalize_sbp(sbp, placement.ndim)
    if all(isinstance(s, Broadcast) for s in layout):
        # The first rank's value everywhere: no shapes to agree on, so nothing collective over
        # the world (ranks may place different modules on different placements: pipeline stages).
        return t.to_global(placement, layout, check_meta=False)
    return t.to_global(placement, layout)  # this rank's tensor is its shard, as OneFlow's
