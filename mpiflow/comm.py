"""OneFlow's ``oneflow.comm`` API: collectives over the whole world, with OneFlow's signatures.

These are the same operations as :mod:`mpiflow.distributed` (one communication layer under both),
without groups or async handles, in place where OneFlow is in place.

Examples:
    >>> import numpy, mpiflow as flow
    >>> x = numpy.arange(4.0)
    >>> flow.comm.all_reduce(x)         # x is now world_size * [0, 1, 2, 3]
"""

from __future__ import annotations

from typing import Any

import numpy

from ._arrays import as_buffer
from .communication import ReduceOp
from .communication.group import world_comm, world_group
from .distributed import collectives as _c

__all__ = [
    "all_gather",
    "all_gather_into_tensor",
    "all_reduce",
    "all_to_all",
    "barrier",
    "broadcast",
    "gather",
    "recv",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
    "send",
]

# Tags of send/recv: the metadata message (shape and dtype) and the data itself.
_META_TAG = 32002
_DATA_TAG = 32003
_MAX_DIMS = 64
# dtypes that can cross the wire in a metadata message, by their index here.
_WIRE_DTYPES = [numpy.dtype(c) for c in "?bhilqBHILQefdgFDG"]
_SUM = ReduceOp.SUM  # Enum attribute lookups cost more than a module global on the hot path


def all_reduce(tensor: Any) -> None:
    """Sum ``tensor`` over all ranks, in place.

    Args:
        tensor: array or tensor; holds the sum afterwards on every rank.
    """
    buf = tensor if type(tensor) is numpy.ndarray else as_buffer(tensor)
    world_comm.all_reduce(buf, _SUM)


def all_gather(tensor_list: list[Any], tensor: Any) -> None:
    """Fill ``tensor_list[i]`` with rank ``i``'s ``tensor`` (one entry per rank)."""
    _c.all_gather(tensor_list, tensor)


def all_gather_into_tensor(output_tensor: Any, input_tensor: Any) -> None:
    """Gather every rank's ``input_tensor`` into ``output_tensor`` (concatenated on dim 0)."""
    _c.all_gather_into_tensor(output_tensor, input_tensor)


def all_to_all(output_tensor_list: list[Any], input_tensor_list: list[Any]) -> None:
    """Send ``input_tensor_list[i]`` to rank ``i``; receive rank ``i``'s into
    ``output_tensor_list[i]``."""
    _c.all_to_all(output_tensor_list, input_tensor_list)


def broadcast(tensor: Any, src: int) -> None:
    """Copy rank ``src``'s ``tensor`` into ``tensor`` on every rank."""
    _c.broadcast(tensor, src)


def barrier() -> None:
    """Block until every rank has entered."""
    world_comm.barrier()


def gather(tensor: Any, gather_list: list[Any] | None = None, dst: int = 0) -> None:
    """Collect every rank's ``tensor`` into ``gather_list`` on rank ``dst``."""
    _c.gather(tensor, gather_list, dst)


def reduce(tensor: Any, dst: int) -> None:
    """Sum ``tensor`` over all ranks into ``tensor`` on rank ``dst``."""
    _c.reduce(tensor, dst)


def reduce_scatter(output: Any, input_list: list[Any]) -> None:
    """Sum ``input_list[i]`` over all ranks into ``output`` on rank ``i``."""
    _c.reduce_scatter(output, input_list)


def reduce_scatter_tensor(output_tensor: Any, input_tensor: Any) -> None:
    """Sum ``input_tensor`` over all ranks; rank ``i`` keeps chunk ``i`` of dim 0.

    Example (2 ranks, input 1..12 as 4x3 on both): rank 0 gets ``[[2,4,6],[8,10,12]]``,
    rank 1 ``[[14,16,18],[20,22,24]]``.
    """
    _c.reduce_scatter_tensor(output_tensor, input_tensor)


def scatter(tensor: Any, scatter_list: list[Any] | None = None, src: int = 0) -> None:
    """Give rank ``i`` the array ``scatter_list[i]`` of rank ``src``, into ``tensor``."""
    _c.scatter(tensor, scatter_list, src)


def send(tensor: Any, dst: int, send_meta: bool = True) -> None:
    """Send ``tensor`` to rank ``dst`` (blocking).

    Args:
        tensor: array or tensor.
        dst: the receiving rank.
        send_meta: also send shape and dtype, so that :func:`recv` needs neither. The receiver
            must then call ``recv`` without ``shape``/``dtype``; with ``send_meta=False`` it must
            give both (OneFlow's rule).
    """
    buf = as_buffer(tensor)
    peer = _c._peer(world_group, dst, "dst")
    if send_meta:
        if buf.ndim > _MAX_DIMS or buf.dtype not in _WIRE_DTYPES:
            raise TypeError(f"cannot describe a {buf.ndim}-d {buf.dtype} array to the receiver")
        meta = numpy.zeros(2 + _MAX_DIMS, dtype=numpy.int64)
        meta[0], meta[1] = buf.ndim, _WIRE_DTYPES.index(buf.dtype)
        meta[2:2 + buf.ndim] = buf.shape
        world_comm.send(meta, peer, _META_TAG)
    world_comm.send(buf, peer, _DATA_TAG)


def recv(src: int | None = None, shape: Any | None = None, dtype: Any | None = None,
         device: Any = None, *, out: Any | None = None) -> Any | None:
    """Receive an array from rank ``src`` (None: any rank).

    Without ``shape`` and ``dtype`` the sender's metadata message says what arrives (the
    default of :func:`send`); give both when the sender used ``send_meta=False``.

    Args:
        src: the sending rank, or None for any.
        shape: what arrives, when the sender sends no metadata.
        dtype: what arrives, when the sender sends no metadata.
        device: "cuda" receives into a new CuPy array (what a device sender needs when
            device arrays travel over NCCL); None or "cpu" into a numpy array.
        out: receive into this array or tensor instead of a new one.

    Returns:
        The received array (numpy; CuPy with ``device="cuda"``), or None when ``out`` was
        given.

    Examples:
        >>> if rank == 0: flow.comm.send(numpy.arange(3.0), dst=1)
        >>> if rank == 1: x = flow.comm.recv(0)     # array([0., 1., 2.])
    """
    if (shape is None) != (dtype is None):
        raise ValueError("give both shape and dtype (sender used send_meta=False) or neither")
    source = None if src is None else _c._peer(world_group, src, "src")
    target = None if out is None else as_buffer(out, "out")
    if shape is None:
        meta = numpy.empty(2 + _MAX_DIMS, dtype=numpy.int64)
        source = world_comm.recv(meta, source, _META_TAG)
        ndim = int(meta[0])
        shape, dtype = tuple(int(n) for n in meta[2:2 + ndim]), _WIRE_DTYPES[int(meta[1])]
    else:
        shape = (int(shape),) if isinstance(shape, (int, numpy.integer)) else tuple(shape)
        dtype = numpy.dtype(dtype)
    result = _array_module_of(device).empty(shape, dtype=dtype)
    if target is not None and target.shape == result.shape and target.dtype == result.dtype:
        result = target
    world_comm.recv(result, source, _DATA_TAG)
    if target is None:
        return result
    if result is not target:
        raise ValueError(f"received a {result.dtype} array of shape {result.shape}, but out is a "
                         f"{target.dtype} array of shape {tuple(target.shape)}")
    return None


def _array_module_of(device: Any) -> Any:
    """numpy for no device or "cpu", CuPy (this rank's GPU) for "cuda"."""
    if device is None or str(device).split(":")[0] == "cpu":
        return numpy
    from .creation import _check_device

    return _check_device(None, device)
