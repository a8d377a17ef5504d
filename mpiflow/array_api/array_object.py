"""What the standard's array object adds to mpiflow's Tensor: ``__array_namespace__`` and
``to_device`` (the rest, ``device``, ``mT``, ``__dlpack__``, ``__complex__``, the operators,
is the Tensor's own). Bound to the Tensor when this package is imported (``import mpiflow``
does).

Examples:
    >>> x = flow.tensor([1.0])
    >>> x.__array_namespace__().__name__, x.to_device("cpu") is x
    ('mpiflow.array_api', True)
"""

from __future__ import annotations

import importlib
from typing import Any

from ..layouts.placement import Placement
from ..tensors import conversion
from ..tensors.tensor import Tensor, TensorDevice, bind
from .creation import distribute
from .layout import resolve, sbp_for

__all__ = ["VERSIONS", "array_namespace", "to_device"]

#: The versions of the standard this namespace answers for (it implements 2024.12).
VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12")


def array_namespace(self: Tensor, /, *, api_version: str | None = None) -> Any:
    """The array API namespace of mpiflow's tensors, :mod:`mpiflow.array_api` (local and
    global tensors alike).

    Raises:
        ValueError: an ``api_version`` it does not implement.
    """
    if api_version is not None and api_version not in VERSIONS:
        raise ValueError(f"mpiflow.array_api implements the array API standard "
                         f"{VERSIONS[-1]} (and earlier), not {api_version!r}")
    return importlib.import_module("mpiflow.array_api")


def to_device(self: Tensor, device: Any, /, *, stream: Any = None) -> Tensor:
    """This array on ``device``: "cpu"/"cuda" change the memory kind (the layout kept); a
    placement, or a global array's ``.device``, lays the value out there by the default rule
    (a local array: each rank keeps its part of it); a local array's ``.device`` gives a
    global array's whole value on every rank (collective). The array itself where it is
    there already.
    """
    if stream is not None:
        raise ValueError("to_device: streams are not supported")
    if not isinstance(device, (TensorDevice, Placement)):
        kind = resolve(device)[2]
        return self if kind == str(self.device) else self.to(kind)
    placement, sbp, kind = resolve(device)
    here = self.placement if self.is_global else None
    if placement == here:
        return self if kind == str(self.device) else self.to(kind)
    if placement is None:  # to a local array: the whole value
        return Tensor(conversion.gather_value(self)).to(kind)
    layout = sbp_for(placement, self.ndim, sbp)
    if self.is_global:
        return conversion.to_global(self, placement, layout)
    return distribute(self.numpy(), {"placement": placement, "sbp": layout}, view=False)


bind({"__array_namespace__": array_namespace, "to_device": to_device})
