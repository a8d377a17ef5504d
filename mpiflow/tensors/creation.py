"""Making tensors: from data, from numpy/DLPack, and filled ones (``zeros``, ``arange``, ...).

With ``placement=`` and ``sbp=`` the result is global and each rank builds only its shard, with
no communication. A partial layout follows OneFlow: the coordinate-0 ranks of each partial axis
hold the value, the others the reduction's identity (``ones`` with ``P``: rank 0 holds ones).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import numpy

from .. import dtypes as _dtypes
from ..boxing.execute import redistribute
from ..core.array_module import array_module
from ..core.errors import GlobalTensorError
from ..layouts.placement import Placement
from ..layouts.plan import Layout
from ..layouts.sbp import Broadcast, Partial, SbpParallel, normalize_sbp
from ..layouts.shards import local_shape, scatter_value, shard_slices
from ..runtime import topology
from .tensor import Tensor, bind

__all__ = [
    "arange",
    "empty",
    "empty_like",
    "from_dlpack",
    "from_numpy",
    "full",
    "full_like",
    "ones",
    "ones_like",
    "tensor",
    "zeros",
    "zeros_like",
]

_B = Broadcast()


def layout_of(placement: Placement | None, sbp: Any
            ) -> tuple[Placement, tuple[SbpParallel, ...]] | None:
    if placement is None:
        if sbp is not None:
            raise GlobalTensorError("sbp was given without a placement")
        return None
    if not isinstance(placement, Placement):
        raise TypeError(f"placement must be a mpiflow.placement, got {placement!r}")
    if sbp is None:
        raise GlobalTensorError("a global tensor needs an sbp as well as a placement")
    return placement, normalize_sbp(sbp, placement.ndim)


def check_device(placement: Placement | None, device: Any) -> ModuleType:
    """The array module of a tensor on ``placement`` (or ``device``): numpy for 'cpu', CuPy for
    'cuda' (a clear error saying what is missing when CuPy or a device is)."""
    kind = (placement.type if placement is not None
            else (str(device).split(":")[0] if device is not None else "cpu"))
    if kind == "cuda":
        from .. import cuda

        return cuda.require()
    if kind != "cpu":
        raise GlobalTensorError(f"unknown device {kind!r}: mpiflow has 'cpu' and 'cuda'")
    return numpy


def _on(xp: ModuleType, host: numpy.ndarray) -> Any:
    """``host`` (a new numpy array) as an array of ``xp``."""
    return host if xp is numpy else xp.asarray(host)


def tensor(data: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False,
           placement: Placement | None = None, sbp: Any = None) -> Tensor:
    """A new tensor holding a copy of ``data``.

    Args:
        data: numbers, (nested) lists, a numpy array or a tensor. With ``placement``, the
            *global* value, which must be the same on every rank.
        dtype: the dtype; inferred as PyTorch does (Python floats give float32, ints int64).
        placement: make a global tensor; each rank keeps its shard (no communication).
        sbp: make a global tensor; each rank keeps its shard (no communication).
        requires_grad: record operations for autograd.

    Examples:
        >>> flow.tensor([[1, 2], [3, 4]]).dtype
        mpiflow.int64
    """
    layout = layout_of(placement, sbp)
    source = data._data if isinstance(data, Tensor) else data
    if device is None and placement is None and array_module(source) is not numpy:
        device = "cuda"  # CuPy data stays on the GPU
    xp = check_device(placement, device)
    if isinstance(data, Tensor):
        data = data.numpy()
    elif array_module(data) is not numpy:
        data = data.get()  # a CuPy array, copied to the host first
    dt = _dtypes.as_dtype(dtype) if dtype is not None else _dtypes.infer_dtype(data)
    value = numpy.array(data, dtype=dt.numpy, copy=True)
    if layout is None:
        return Tensor(_on(xp, value), requires_grad=requires_grad)
    p, s = layout
    shard = (scatter_value(value, p, s, topology.rank) if topology.rank in p
             else numpy.empty((0,), dtype=dt.numpy))
    return Tensor(_on(xp, numpy.require(shard, requirements='C').copy()), p, s, value.shape,
                  requires_grad=requires_grad)


def from_numpy(array: numpy.ndarray) -> Tensor:
    """A local tensor sharing memory with ``array`` (changes show through both ways)."""
    if not isinstance(array, numpy.ndarray):
        raise TypeError(f"from_numpy needs a numpy array, got {type(array).__name__}")
    _dtypes.as_dtype(array.dtype)  # a clear error for unsupported dtypes
    return Tensor(array)


def from_dlpack(obj: Any) -> Tensor:
    """A local tensor sharing memory with a DLPack-capable object (numpy, CuPy, PyTorch).

    Objects on a CUDA device become CuPy-backed ('cuda') tensors.
    """
    if isinstance(obj, Tensor):
        return obj
    device = getattr(obj, "__dlpack_device__", None)
    if device is not None and int(device()[0]) in _DLPACK_CUDA:
        from .. import cuda

        return Tensor(cuda.require().from_dlpack(obj))
    array = numpy.from_dlpack(obj)
    return Tensor(array)


_DLPACK_CUDA = (2, 13)  # kDLCUDA, kDLCUDAManaged


def size_of(size: Sequence[Any], keyword: Any = None) -> tuple[int, ...]:
    """The shape given as ints, one sequence, or (``keyword``) the ``size=`` argument."""
    if keyword is not None:
        if size:
            raise TypeError("give the size as positional arguments or as size=, not both")
        size = (keyword,)
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    dims = tuple(int(d) for d in size)
    if any(d < 0 for d in dims):
        raise ValueError(f"sizes must be non-negative, got {dims}")
    return dims


def _filled(shape: tuple[int, ...], fill: Callable[[Any, tuple[int, ...], numpy.dtype], Any],
            dtype: numpy.dtype, placement: Placement | None, sbp: Any,
            requires_grad: bool, device: Any = None) -> Tensor:
    layout = layout_of(placement, sbp)
    xp = check_device(placement, device)
    if layout is None:
        return Tensor(fill(xp, shape, dtype), requires_grad=requires_grad)
    p, s = layout
    rank = topology.rank
    if rank not in p:
        return Tensor(xp.empty((0,), dtype=dtype), p, s, shape, requires_grad=requires_grad)
    as_broadcast = tuple(_B if isinstance(x, Partial) else x for x in s)
    local = fill(xp, local_shape(shape, p, as_broadcast, rank), dtype)
    if as_broadcast != s:  # B -> P is local: coordinate-0 ranks keep the value
        local = redistribute(local, shape, Layout(p, as_broadcast), Layout(p, s))
    return Tensor(local, p, s, shape, requires_grad=requires_grad)


def _dtype_or(dtype: Any, default: _dtypes.DType) -> numpy.dtype:
    return (_dtypes.as_dtype(dtype) if dtype is not None else default).numpy


def zeros(*dims: Any, size: Any = None, dtype: Any = None,
          placement: Placement | None = None, sbp: Any = None,
          requires_grad: bool = False, device: Any = None) -> Tensor:
    """A tensor of zeros of shape ``size`` (float32 unless ``dtype``)."""
    check_device(placement, device)
    return _filled(size_of(dims, size), lambda xp, s, d: xp.zeros(s, d),
                   _dtype_or(dtype, _dtypes.default_float), placement, sbp, requires_grad,
                   device)


def ones(*dims: Any, size: Any = None, dtype: Any = None,
         placement: Placement | None = None, sbp: Any = None,
         requires_grad: bool = False, device: Any = None) -> Tensor:
    """A tensor of ones of shape ``size``; with a partial sbp only rank 0 holds ones."""
    check_device(placement, device)
    return _filled(size_of(dims, size), lambda xp, s, d: xp.ones(s, d),
                   _dtype_or(dtype, _dtypes.default_float), placement, sbp, requires_grad,
                   device)


def empty(*dims: Any, size: Any = None, dtype: Any = None,
          placement: Placement | None = None, sbp: Any = None,
          requires_grad: bool = False, device: Any = None) -> Tensor:
    """A tensor of shape ``size`` whose values are not set (zeros on a partial layout)."""
    check_device(placement, device)
    dt = _dtype_or(dtype, _dtypes.default_float)
    layout = layout_of(placement, sbp)
    if layout is not None and any(isinstance(x, Partial) for x in layout[1]):
        return zeros(size_of(dims, size), dtype=dtype, placement=placement, sbp=sbp,
                     requires_grad=requires_grad, device=device)
    return _filled(size_of(dims, size), lambda xp, s, d: xp.empty(s, d), dt, placement, sbp,
                   requires_grad, device)


def full(size: Sequence[int], fill_value: Any, dtype: Any = None,
         placement: Placement | None = None, sbp: Any = None, requires_grad: bool = False,
         device: Any = None) -> Tensor:
    """A tensor of shape ``size`` filled with ``fill_value`` (dtype inferred from it)."""
    check_device(placement, device)
    dt = _dtype_or(dtype, _dtypes.infer_dtype(fill_value))
    return _filled(size_of((size,)), lambda xp, s, d: xp.full(s, fill_value, d), dt, placement,
                   sbp, requires_grad, device)


def arange(start: Any, end: Any = None, step: Any = 1, dtype: Any = None,
           placement: Placement | None = None, sbp: Any = None, requires_grad: bool = False,
           device: Any = None) -> Tensor:
    """``[start, end)`` in steps of ``step`` (int64 for integer arguments, else float32).

    Each rank of a global result computes only its own elements.
    """
    xp = check_device(placement, device)
    if end is None:
        start, end = 0, start
    length = max(0, int(numpy.ceil((end - start) / step)))
    ints = all(isinstance(v, (int, numpy.integer)) for v in (start, end, step))
    dt = _dtype_or(dtype, _dtypes.int64 if ints else _dtypes.default_float)

    def fill(xp: Any, shape: tuple[int, ...], d: numpy.dtype, first: int = 0) -> Any:
        return (start + step * xp.arange(first, first + shape[0], dtype=numpy.float64
                                         if not ints else numpy.int64)).astype(d)

    layout = layout_of(placement, sbp)
    if layout is None or any(isinstance(x, Partial) for x in layout[1]):
        return _filled((length,), fill, dt, placement, sbp, requires_grad, device)
    p, s = layout
    if topology.rank not in p:
        return Tensor(xp.empty((0,), dtype=dt), p, s, (length,), requires_grad=requires_grad)
    coords = p.coordinates(topology.rank)
    assert coords is not None  # a member of the placement has coordinates
    region = shard_slices((length,), p.mesh_shape, s, coords)
    first = region[0].start or 0
    shard_len = local_shape((length,), p, s, topology.rank)[0]
    return Tensor(fill(xp, (shard_len,), dt, first), p, s, (length,),
                  requires_grad=requires_grad)


def _like(t: Tensor, dtype: Any, placement: Any, sbp: Any) -> dict[str, Any]:
    if placement is None and sbp is None and t.is_global:
        placement, sbp = t.placement, t.sbp
    return {"dtype": dtype if dtype is not None else t.dtype, "placement": placement, "sbp": sbp,
            "device": t.device if placement is None else None}


def zeros_like(t: Tensor, dtype: Any = None, placement: Any = None, sbp: Any = None,
               requires_grad: bool = False) -> Tensor:
    """Zeros with ``t``'s shape, dtype and layout."""
    return zeros(tuple(t.shape), requires_grad=requires_grad, **_like(t, dtype, placement, sbp))


def ones_like(t: Tensor, dtype: Any = None, placement: Any = None, sbp: Any = None,
              requires_grad: bool = False) -> Tensor:
    """Ones with ``t``'s shape, dtype and layout."""
    return ones(tuple(t.shape), requires_grad=requires_grad, **_like(t, dtype, placement, sbp))


def empty_like(t: Tensor, dtype: Any = None, placement: Any = None, sbp: Any = None,
               requires_grad: bool = False) -> Tensor:
    """An unset tensor with ``t``'s shape, dtype and layout."""
    return empty(tuple(t.shape), requires_grad=requires_grad, **_like(t, dtype, placement, sbp))


def full_like(t: Tensor, fill_value: Any, dtype: Any = None, placement: Any = None,
              sbp: Any = None, requires_grad: bool = False) -> Tensor:
    """``fill_value`` everywhere, with ``t``'s shape, dtype and layout."""
    return full(tuple(t.shape), fill_value, requires_grad=requires_grad,
                **_like(t, dtype, placement, sbp))




def _new(t: Tensor, size: Sequence[Any], dtype: Any, requires_grad: bool,
         fn: Callable[..., Tensor], *fill: Any, device: Any = None, placement: Any = None,
         sbp: Any = None) -> Tensor:
    """A new tensor of ``size`` with ``t``'s dtype and, if global, its placement and sbp;
    ``placement=`` and ``sbp=`` (as OneFlow's) replace those (one missing is ``t``'s), and make
    a global tensor of a local ``t`` (which then needs both)."""
    layout: dict[str, Any] = {}
    if placement is not None or sbp is not None or t._placement is not None:
        where = t._placement if placement is None else placement
        if where is None:
            raise GlobalTensorError("sbp was given without a placement, for a local tensor")
        how = t._sbp if sbp is None else sbp
        if how is None:
            raise GlobalTensorError("a global tensor needs an sbp as well as a placement")
        layout = {"placement": where, "sbp": how}
    elif device is None:
        device = t.device
    return fn(size_of(size), *fill, dtype=t.dtype if dtype is None else dtype,
              requires_grad=requires_grad, device=None if layout else device, **layout)


def new_zeros(t: Tensor, *size: Any, dtype: Any = None, device: Any = None,
              placement: Any = None, sbp: Any = None, requires_grad: bool = False) -> Tensor:
    """Zeros of shape ``size`` with ``t``'s dtype, device and layout (the method
    ``t.new_zeros(size)``); ``placement=``/``sbp=`` give another layout, as OneFlow's.

    Examples:
        >>> flow.tensor([1, 2]).new_zeros((2, 2))
        tensor([[0, 0],
                [0, 0]])
        >>> p = flow.placement("cpu", ranks=[0])
        >>> flow.tensor([1, 2]).new_zeros(3, placement=p, sbp=flow.sbp.broadcast).sbp
        (mpiflow.sbp.broadcast,)
    """
    return _new(t, size, dtype, requires_grad, zeros, device=device, placement=placement,
                sbp=sbp)


def new_ones(t: Tensor, *size: Any, dtype: Any = None, device: Any = None,
             placement: Any = None, sbp: Any = None, requires_grad: bool = False) -> Tensor:
    """Ones of shape ``size`` with ``t``'s dtype, device and layout (``t.new_ones(size)``);
    ``placement=``/``sbp=`` give another layout."""
    return _new(t, size, dtype, requires_grad, ones, device=device, placement=placement,
                sbp=sbp)


def new_empty(t: Tensor, *size: Any, dtype: Any = None, device: Any = None,
              placement: Any = None, sbp: Any = None, requires_grad: bool = False) -> Tensor:
    """An unset tensor of shape ``size`` with ``t``'s dtype, device and layout
    (``t.new_empty(size)``); ``placement=``/``sbp=`` give another layout."""
    return _new(t, size, dtype, requires_grad, empty, device=device, placement=placement,
                sbp=sbp)


def new_full(t: Tensor, size: Any, fill_value: Any, *, dtype: Any = None, device: Any = None,
             placement: Any = None, sbp: Any = None, requires_grad: bool = False) -> Tensor:
    """``fill_value`` everywhere, shape ``size``, ``t``'s dtype, device and layout
    (``t.new_full(size, fill_value)``); ``placement=``/``sbp=`` give another layout."""
    return _new(t, (size,), dtype, requires_grad, full, fill_value, device=device,
                placement=placement, sbp=sbp)


bind({"new_zeros": new_zeros, "new_ones": new_ones, "new_empty": new_empty, "new_full": new_full})
