"""Creation functions of the standard: distributed arrays on the default placement and layout
(:mod:`mpiflow.array_api.layout`), each rank building only its own part.

Data given whole (``asarray`` of a list, a numpy array, a DLPack object) must be the same on
every rank, as every value a SPMD program passes to a global tensor: each rank keeps its part
of it (with ``copy=False`` or ``None`` a view of the input where the part is contiguous).

Examples:
    >>> from mpiflow import array_api as xp
    >>> x = xp.linspace(0.0, 1.0, 5)
    >>> x.tolist(), x.dtype
    ([0.0, 0.25, 0.5, 0.75, 1.0], mpiflow.float64)
    >>> xp.eye(3, k=1, dtype=xp.int8).tolist()
    [[0, 1, 0], [0, 0, 1], [0, 0, 0]]
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Sequence
from typing import Any

import numpy

from .. import dtypes as _dt
from ..layouts.placement import Placement
from ..layouts.sbp import Broadcast, SbpParallel, Split
from ..layouts.shards import shard_slices
from ..ops import pointwise as pw
from ..ops import shape as shape_ops
from ..runtime import topology
from ..tensors import creation as flow_creation
from ..tensors.tensor import Tensor
from .common import DEFAULT_COMPLEX, DEFAULT_FLOAT, DEFAULT_INT, array, scalar_dtype
from .data_types import dtype as checked_dtype
from .layout import follow, resolve, sbp_for

__all__ = ["arange", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full",
           "full_like", "linspace", "meshgrid", "ones", "ones_like", "tril", "triu", "zeros",
           "zeros_like"]

_B = Broadcast()
_SCALARS = (builtins.bool, builtins.int, builtins.float, builtins.complex)


def _dtype(value: Any) -> _dt.DType | None:
    return None if value is None else checked_dtype(value)


def _shape(shape: Any, name: str) -> tuple[int, ...]:
    items = shape if isinstance(shape, (tuple, list)) else (shape,)
    try:
        dims = tuple(operator.index(d) for d in items)
    except TypeError:
        raise TypeError(f"{name}: shape must be an int or a tuple of ints, got {shape!r}") \
            from None
    if any(d < 0 for d in dims):
        raise ValueError(f"{name}: negative dimensions are not allowed, got {dims}")
    return dims


def _where(device: Any, ndim: int) -> dict[str, Any]:
    """The ``placement=``/``sbp=`` (global) or ``device=`` (local) of a new ``ndim``-dim
    array made for ``device=``."""
    placement, sbp, kind = resolve(device)
    if placement is None:
        return {"device": kind}
    return {"placement": placement, "sbp": sbp_for(placement, ndim, sbp)}


def _like(x: Tensor, device: Any) -> dict[str, Any]:
    """Where an array like ``x`` goes: ``x``'s placement and layout, unless ``device``."""
    placement, sbp, kind = follow(x, device)
    if placement is None:
        return {"device": kind}
    return {"placement": placement, "sbp": sbp if sbp is not None
            else sbp_for(placement, x.ndim)}


def distribute(value: numpy.ndarray, where: dict[str, Any], view: builtins.bool) -> Tensor:
    """A tensor of the whole ``value`` (the same on every rank) laid out as ``where`` says:
    each rank keeps its part, a view of ``value`` when ``view`` and the part is contiguous."""
    if "placement" not in where:
        module = flow_creation.check_device(None, where["device"])
        data = value if module is numpy and view else module.array(value, copy=True)
        return Tensor(data)
    placement: Placement = where["placement"]
    sbp: tuple[SbpParallel, ...] = where["sbp"]
    module = flow_creation.check_device(placement, None)
    coords = placement.coordinates(topology.rank)
    if coords is None:
        return Tensor(module.empty((0,), dtype=value.dtype), placement, sbp, value.shape)
    if any(not isinstance(s, (Split, Broadcast)) for s in sbp):
        return flow_creation.tensor(value, placement=placement, sbp=sbp)
    region: tuple[Any, ...] = (..., *shard_slices(value.shape, placement.mesh_shape, sbp,
                                                  coords))
    part = value[region]
    if module is not numpy or not view or not part.flags.c_contiguous:
        part = module.array(part, copy=True, order="C")
    return Tensor(part, placement, sbp, value.shape)


# -- from data ----------------------------------------------------------------------------------
def _contains_arrays(obj: Any) -> builtins.bool:
    if isinstance(obj, Tensor):
        return True
    if isinstance(obj, (list, tuple)):
        return any(_contains_arrays(o) for o in obj)
    return False


def _host(obj: Any, dtype: _dt.DType | None) -> numpy.ndarray:
    """``obj`` (scalars, nested sequences, arrays, buffers) as a numpy array of ``dtype`` or of
    the standard's default for its kind."""
    if isinstance(obj, _SCALARS):
        return numpy.array(obj, dtype=(dtype or scalar_dtype(obj)).numpy)
    if _contains_arrays(obj):  # nested sequences of 0-d arrays: their values
        obj = _values(obj)
    value = numpy.asarray(obj) if dtype is None else numpy.asarray(obj, dtype=dtype.numpy)
    if value.dtype.kind in "OUSV":
        raise TypeError(f"asarray: cannot make an array of {type(obj).__name__} holding "
                        f"{value.dtype} data")
    if dtype is None:
        _dt.as_dtype(value.dtype)  # a clear error for dtypes the namespace lacks
    return value


def _values(obj: Any) -> Any:
    if isinstance(obj, Tensor):
        return obj.item() if obj.ndim == 0 else obj.tolist()
    if isinstance(obj, (list, tuple)):
        return [_values(o) for o in obj]
    return obj


def asarray(obj: Any, /, *, dtype: Any = None, device: Any = None,
            copy: builtins.bool | None = None) -> Tensor:
    """An array of ``obj``: an array of this namespace, a Python scalar, a nested sequence of
    them, or an object with a buffer, ``__array__`` or DLPack (the same on every rank).

    Args:
        obj: the data.
        dtype: the dtype; by default an array's own, the default of a scalar's kind (bool,
            int64, float64, complex128) or of the widest kind in a sequence.
        device: where the new array goes (:mod:`mpiflow.array_api.layout`); an array keeps its
            own placement and layout by default.
        copy: True: always a new array; False: never copy (a ``ValueError`` if one is
            needed); None: copy only where needed.

    Examples:
        >>> from mpiflow import array_api as xp
        >>> xp.asarray([[1, 2], [3, 4]]).dtype, xp.asarray(2.5).dtype
        (mpiflow.int64, mpiflow.float64)
    """
    dt = _dtype(dtype)
    if copy not in (None, True, False):
        raise ValueError(f"asarray: copy must be True, False or None, got {copy!r}")
    if isinstance(obj, Tensor):
        out = obj
        if device is not None and not _already(obj, device):
            if copy is False:
                raise ValueError("asarray: copy=False, but the array is on another device")
            out = obj.to_device(device)
        if dt is not None and out.dtype is not dt:
            if copy is False:
                raise ValueError(f"asarray: copy=False, but {obj.dtype} -> {dt} needs a copy")
            return pw.cast(out, dt)
        if copy and out is obj:
            return pw.clone(obj)
        return out
    if copy is False and (isinstance(obj, (list, tuple, *_SCALARS))
                          or (not hasattr(obj, "__array__") and not hasattr(obj, "__dlpack__")
                          and not hasattr(obj, "__array_interface__"))):
        raise ValueError("asarray: copy=False, but making an array of "
                         f"{type(obj).__name__} needs a copy")
    value = _host(obj, dt)
    if copy is False and isinstance(obj, numpy.ndarray) and not numpy.shares_memory(value, obj):
        raise ValueError(f"asarray: copy=False, but {obj.dtype} -> {value.dtype} needs a copy")
    return distribute(value, _where(device, value.ndim), view=copy is not True)


def _already(x: Tensor, device: Any) -> builtins.bool:
    """Whether ``x`` is where ``device`` says (its placement, or local, and memory kind)."""
    placement, _, kind = resolve(device)
    here = x.placement if x.is_global else None
    return placement == here and kind == str(x.device)


def from_dlpack(x: Any, /, *, device: Any = None, copy: builtins.bool | None = None) -> Tensor:
    """An array of a DLPack-capable object (the same on every rank), as :func:`asarray`.

    Examples:
        >>> from mpiflow import array_api as xp
        >>> xp.from_dlpack(numpy.arange(3.0)).tolist()
        [0.0, 1.0, 2.0]
    """
    if isinstance(x, Tensor):
        return asarray(x, device=device, copy=copy)
    if not hasattr(x, "__dlpack__"):
        raise TypeError(f"from_dlpack: {type(x).__name__} has no __dlpack__")
    value = numpy.from_dlpack(x) if copy is None else numpy.from_dlpack(x, copy=copy)
    return distribute(value, _where(device, value.ndim), view=copy is not True)


# -- filled -------------------------------------------------------------------------------------
def zeros(shape: Any, *, dtype: Any = None, device: Any = None) -> Tensor:
    """An array of zeros (float64 unless ``dtype``).

    Examples:
        >>> from mpiflow import array_api as xp
        >>> xp.zeros((2, 3)).shape
        mpiflow.Size([2, 3])
    """
    dims = _shape(shape, "zeros")
    return flow_creation.zeros(dims, dtype=_dtype(dtype) or DEFAULT_FLOAT,
                               **_where(device, len(dims)))


def ones(shape: Any, *, dtype: Any = None, device: Any = None) -> Tensor:
    """An array of ones (float64 unless ``dtype``)."""
    dims = _shape(shape, "ones")
    return flow_creation.ones(dims, dtype=_dtype(dtype) or DEFAULT_FLOAT,
                              **_where(device, len(dims)))


def empty(shape: Any, *, dtype: Any = None, device: Any = None) -> Tensor:
    """An array whose values are not set (float64 unless ``dtype``)."""
    dims = _shape(shape, "empty")
    return flow_creation.empty(dims, dtype=_dtype(dtype) or DEFAULT_FLOAT,
                               **_where(device, len(dims)))


def full(shape: Any, fill_value: Any, *, dtype: Any = None, device: Any = None) -> Tensor:
    """An array of ``fill_value`` (dtype: the default of its kind unless ``dtype``).

    Examples:
        >>> from mpiflow import array_api as xp
        >>> xp.full(2, True).tolist(), xp.full((), 3).dtype
        ([True, True], mpiflow.int64)
    """
    dims = _shape(shape, "full")
    if not isinstance(fill_value, _SCALARS):
        raise TypeError(f"full: fill_value must be a Python scalar, got "
                        f"{type(fill_value).__name__}")
    dt = _dtype(dtype) or scalar_dtype(fill_value)
    return flow_creation.full(dims, fill_value, dtype=dt, **_where(device, len(dims)))


def _like_dtype(x: Tensor, dtype: Any) -> _dt.DType:
    return _dtype(dtype) or x.dtype


def zeros_like(x: Tensor, /, *, dtype: Any = None, device: Any = None) -> Tensor:
    """Zeros with ``x``'s shape, dtype, placement and layout."""
    array(x, "zeros_like")
    return flow_creation.zeros(tuple(x.shape), dtype=_like_dtype(x, dtype), **_like(x, device))


def ones_like(x: Tensor, /, *, dtype: Any = None, device: Any = None) -> Tensor:
    """Ones with ``x``'s shape, dtype, placement and layout."""
    array(x, "ones_like")
    return flow_creation.ones(tuple(x.shape), dtype=_like_dtype(x, dtype), **_like(x, device))


def empty_like(x: Tensor, /, *, dtype: Any = None, device: Any = None) -> Tensor:
    """An unset array with ``x``'s shape, dtype, placement and layout."""
    array(x, "empty_like")
    return flow_creation.empty(tuple(x.shape), dtype=_like_dtype(x, dtype), **_like(x, device))


def full_like(x: Tensor, /, fill_value: Any, *, dtype: Any = None, device: Any = None
              ) -> Tensor:
    """``fill_value`` with ``x``'s shape, dtype, placement and layout."""
    array(x, "full_like")
    if not isinstance(fill_value, _SCALARS):
        raise TypeError(f"full_like: fill_value must be a Python scalar, got "
                        f"{type(fill_value).__name__}")
    return flow_creation.full(tuple(x.shape), fill_value, dtype=_like_dtype(x, dtype),
                              **_like(x, device))


# -- ranges -------------------------------------------------------------------------------------
def arange(start: Any, /, stop: Any = None, step: Any = 1, *, dtype: Any = None,
           device: Any = None) -> Tensor:
    """``[start, stop)`` in steps of ``step`` (int64 for integers, else float64); each rank
    computes only its own elements.

    Examples:
        >>> from mpiflow import array_api as xp
        >>> xp.arange(1, 2, 0.25).tolist()
        [1.0, 1.25, 1.5, 1.75]
    """
    if stop is None:
        start, stop = 0, start
    for v in (start, stop, step):
        if not isinstance(v, (builtins.int, builtins.float)) or isinstance(v, builtins.bool):
            raise TypeError(f"arange: start, stop and step must be ints or floats, got {v!r}")
    if step == 0:
        raise ValueError("arange: step must not be zero")
    floats = any(isinstance(v, builtins.float) for v in (start, stop, step))
    dt = _dtype(dtype) or (DEFAULT_FLOAT if floats else DEFAULT_INT)
    length = builtins.max(0, int(numpy.ceil((stop - start) / step)))
    where = _where(device, 1)
    if "placement" not in where:
        module = flow_creation.check_device(None, where["device"])
        return Tensor(module.asarray(numpy.arange(length, dtype=numpy.float64 if floats
                                                  else numpy.int64) * step + start,
                                     dtype=dt.numpy))
    counter = flow_creation.arange(length, dtype=_dt.float64 if floats else _dt.int64,
                                   **where)
    return pw.cast(pw.add(pw.mul(counter, step), start), dt) if (start, step) != (0, 1) \
        else pw.cast(counter, dt)


def linspace(start: Any, stop: Any, /, num: int, *, dtype: Any = None, device: Any = None,
             endpoint: builtins.bool = True) -> Tensor:
    """``num`` evenly spaced values from ``start`` to ``stop`` (included when ``endpoint``).

    Examples:
        >>> from mpiflow import array_api as xp
        >>> xp.linspace(0, 1, 4, endpoint=False).tolist()
        [0.0, 0.25, 0.5, 0.75]
    """
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"linspace: num must be non-negative, got {num}")
    complex_ = isinstance(start, builtins.complex) or isinstance(stop, builtins.complex)
    dt = _dtype(dtype) or (DEFAULT_COMPLEX if complex_ else DEFAULT_FLOAT)
    work = _dt.complex128 if complex_ or dt.numpy.kind == "c" else _dt.float64
    div = (num - 1) if endpoint else num
    step = (stop - start) / div if div > 0 else 0.0
    counter = pw.cast(arange(num, device=device), work)
    out = pw.add(pw.mul(counter, step), start)
    if endpoint and num > 1:
        out[-1] = stop  # exactly stop (a write on the rank that holds it)
    return pw.cast(out, dt)


def _grid(x: Tensor) -> tuple[Tensor, Tensor]:
    """Row and column numbers of ``x``'s last two dims, shaped ``(n, 1)`` and ``(1, m)``,
    each split where ``x``'s dim is (so that a mask of them is made where ``x`` lies)."""
    n, m = x.shape[-2], x.shape[-1]
    if not x.is_global:
        return (Tensor(numpy.arange(n).reshape(n, 1)), Tensor(numpy.arange(m).reshape(1, m)))
    placement, sbp = x.placement, x.sbp
    out = []
    for dim, length in ((x.ndim - 2, n), (x.ndim - 1, m)):
        layout = tuple(Split(0) if isinstance(s, Split) and s.dim == dim else _B for s in sbp)
        line = flow_creation.arange(length, placement=placement, sbp=layout)
        out.append(shape_ops.reshape(line, (length, 1) if dim == x.ndim - 2 else (1, length)))
    return out[0], out[1]


def _triangle(x: Tensor, k: int, lower: builtins.bool, name: str) -> Tensor:
    array(x, name)
    if x.ndim < 2:
        raise ValueError(f"{name}: needs an array of at least 2 dimensions, got {x.ndim}")
    k = operator.index(k)
    rows, cols = _grid(x)
    offset = pw.sub(cols, rows)
    keep = pw.le(offset, k) if lower else pw.ge(offset, k)
    return pw.where(keep, x, 0)


def tril(x: Tensor, /, *, k: int = 0) -> Tensor:
    """``x`` with the elements above the ``k``-th diagonal zeroed (of the last two dims).

    Examples:
        >>> from mpiflow import array_api as xp
        >>> xp.tril(xp.ones((2, 2), dtype=xp.int64)).tolist()
        [[1, 0], [1, 1]]
    """
    return _triangle(x, k, True, "tril")


def triu(x: Tensor, /, *, k: int = 0) -> Tensor:
    """``x`` with the elements below the ``k``-th diagonal zeroed (of the last two dims)."""
    return _triangle(x, k, False, "triu")


def eye(n_rows: int, n_cols: int | None = None, /, *, k: int = 0, dtype: Any = None,
        device: Any = None) -> Tensor:
    """Ones on the ``k``-th diagonal, zeros elsewhere (float64 unless ``dtype``); each rank
    builds only its rows.

    Examples:
        >>> from mpiflow import array_api as xp
        >>> xp.eye(2, 3).tolist()
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    """
    n = operator.index(n_rows)
    m = n if n_cols is None else operator.index(n_cols)
    k = operator.index(k)
    if n < 0 or m < 0:
        raise ValueError(f"eye: the sizes must be non-negative, got {n} and {m}")
    dt = _dtype(dtype) or DEFAULT_FLOAT
    template = zeros((n, m), dtype=_dt.bool, device=device)
    rows, cols = _grid(template)
    return pw.cast(pw.eq(pw.sub(cols, rows), k), dt) if n and m else \
        pw.cast(template, dt)


def meshgrid(*arrays: Tensor, indexing: str = "xy") -> list[Tensor]:
    """Coordinate arrays of the 1-D ``arrays``: ``ij`` (matrix) or ``xy`` (Cartesian, the
    first two dims swapped) indexing.

    Examples:
        >>> from mpiflow import array_api as xp
        >>> [a.shape for a in xp.meshgrid(xp.arange(2), xp.arange(3))]
        [mpiflow.Size([3, 2]), mpiflow.Size([3, 2])]
    """
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    for a in arrays:
        array(a, "meshgrid")
        if a.ndim != 1:
            raise ValueError(f"meshgrid: the arrays must be 1-D, got a {a.ndim}-D one")
    if len({a.dtype for a in arrays}) > 1:
        raise ValueError("meshgrid: the arrays must have one dtype")
    sizes = [a.shape[0] for a in arrays]
    positions = list(range(len(arrays)))
    if indexing == "xy" and len(arrays) > 1:
        positions[0], positions[1] = 1, 0
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for a, pos in zip(arrays, positions):
        shape = [1] * len(arrays)
        shape[pos] = a.shape[0]
        out.append(pw.expand(shape_ops.reshape(a, tuple(shape)), tuple(sizes)))
    return out


def shape_arg(shape: Sequence[Any], name: str) -> tuple[int, ...]:
    """A shape argument checked as the creation functions check theirs."""
    return _shape(shape, name)
