"""OneFlow's legacy ``Tensor(...)`` constructor forms: ``Tensor(list)``, ``Tensor(*sizes)``,
``Tensor(Size)`` and ``Tensor(tensor)``, local or global (``placement=``, ``sbp=``)."""

from __future__ import annotations

import builtins
from typing import Any

import numpy

from .. import dtypes as _dtypes
from ..core.array_module import to_host
from ..layouts.placement import Placement
from ..layouts.sbp import Partial, SbpParallel, normalize_sbp
from ..layouts.shards import shard_slices
from ..runtime import topology
from .size import Size

__all__ = ["legacy_data"]

_LEGACY_KEYWORDS = frozenset({"placement", "sbp", "device", "dtype"})


def legacy_data(tensor_type: Any, data: Any, more: tuple[Any, ...], keywords: dict[str, Any]
                ) -> tuple[Any, Placement | None, tuple[SbpParallel, ...] | None, Any]:
    """What OneFlow's legacy constructor makes: ``Tensor(list)`` (float32 values),
    ``Tensor(d0, d1, ...)`` or ``Tensor(Size)`` (float32 zeros of that shape), ``Tensor(tensor)``
    (a float32 copy), each local, or global with ``placement=`` and ``sbp=``; ``device=`` and
    ``dtype=`` as in :func:`mpiflow.tensor`.

    Args:
        tensor_type: the Tensor class (passed in: this module sits below it).
        data: the constructor's first argument.
        more: its other positional arguments (None where not given).
        keywords: its keyword arguments.

    Returns:
        The fields of the new tensor: its array, placement, sbp and logical shape.
    """
    unknown = set(keywords) - _LEGACY_KEYWORDS
    if unknown:
        raise TypeError(f"Tensor() got unexpected keyword arguments {sorted(unknown)}")
    extra = [m for m in more if m is not None]
    placement, sbp = keywords.get("placement"), keywords.get("sbp")
    dtype = numpy.dtype(_dtypes.as_dtype(keywords.get("dtype") or _dtypes.float32).numpy)
    if isinstance(data, (builtins.int, Size)):
        dims = [*data] if isinstance(data, Size) else [data]
        if any(not isinstance(m, builtins.int) for m in extra):
            raise TypeError("Tensor(*sizes) takes ints; use mpiflow.tensor(data, ...) for data")
        value = numpy.zeros([*dims, *extra], dtype=dtype)
    else:
        if extra:
            raise TypeError("Tensor(data) takes one data argument; use mpiflow.tensor(data, ...)")
        if isinstance(data, tensor_type):
            if placement is None and data._placement is not None:
                data = data.to_local()
            elif placement is not None:
                moved = data.to_global(placement, sbp)
                return (moved._data.astype(dtype, copy=True), moved._placement, moved._sbp,
                        tuple(moved.shape))
            value = to_host(data._data).astype(dtype, copy=True)
        else:
            value = numpy.array(to_host(data) if hasattr(data, "__array__") else data,
                                dtype=dtype)
    device = keywords.get("device")
    if placement is None:
        if device is not None and str(device).split(":")[0] == "cuda":
            from ..cuda import require

            return require().asarray(value), None, None, None
        return value, None, None, None
    if sbp is None:
        raise TypeError("Tensor(..., placement=...) needs an sbp too")
    layout = normalize_sbp(sbp, placement.ndim)
    coords = placement.coordinates(topology.rank)
    if coords is None:  # outside the placement: an empty shard
        return numpy.empty((0,), dtype=dtype), placement, layout, value.shape
    local = value[shard_slices(value.shape, placement.mesh_shape, layout, coords)].copy()
    if any(isinstance(s, Partial) for s in layout):  # zeros: every rank holds a zero share
        local[...] = 0
    return local, placement, layout, value.shape
