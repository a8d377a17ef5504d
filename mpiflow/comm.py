"""OneFlow's ``oneflow.comm`` API: collectives over the whole world, with OneFlow's signatures.

These are the same operations as :mod:`mpiflow.distributed` (one communication layer under both),
without groups or async handles, in place where OneFlow is in place; :func:`recv` returns an
mpiflow tensor, as OneFlow's returns a OneFlow tensor. They take numpy arrays,
mpiflow tensors, CuPy arrays and ``torch.Tensor``s (CPU zero-copy; CUDA through CuPy or pinned
host memory), as :mod:`mpiflow.distributed` does.

Examples:
    >>> import numpy, mpiflow as flow
    >>> x = numpy.arange(4.0)
    >>> flow.comm.all_reduce(x)         # x is now world_size * [0, 1, 2, 3]
"""

from __future__ import annotations

import sys
from typing import Any

import numpy

from .communication import ReduceOp
from .communication.collectives import deterministic
from .communication.collectives import torch_api as _c
from .communication.mpi.group import ProcessGroup, group_from_mpi4py, world_comm, world_group
from .core.torch_arrays import is_torch_tensor, numpy_dtype
from .dtypes import DType
from .tensors.tensor import Tensor

__all__ = [
    "all_gather",
    "all_gather_into_tensor",
    "all_reduce",
    "all_to_all",
    "barrier",
    "broadcast",
    "from_mpi4py",
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
# torch dtypes numpy lacks, by their index after _WIRE_DTYPES, with the integer dtype of their
# size that carries their bits (what core.torch_arrays.host_array makes of them).
_TORCH_WIRE: dict[str, numpy.dtype] = {
    "bfloat16": numpy.dtype(numpy.int16), "float8_e4m3fn": numpy.dtype(numpy.uint8),
    "float8_e5m2": numpy.dtype(numpy.uint8), "complex32": numpy.dtype(numpy.int32)}
_TORCH_NAMES = list(_TORCH_WIRE)
_SUM = ReduceOp.SUM  # Enum attribute lookups cost more than a module global on the hot path


def all_reduce(tensor: Any) -> None:
    """Sum ``tensor`` over all ranks, in place.

    Args:
        tensor: array or tensor; holds the sum afterwards on every rank.
    """
    if type(tensor) is numpy.ndarray and not deterministic.wanted(tensor, _SUM):
        world_comm.all_reduce(tensor, _SUM)
    else:  # mpiflow and torch tensors: through the face that stages (bfloat16, CUDA)
        _c.all_reduce(tensor, _SUM)


def all_gather(tensor_list: list[Any], tensor: Any) -> None:
    """Fill ``tensor_list[i]`` with rank ``i``'s ``tensor`` (one entry per rank)."""
    _c.all_gather(tensor_list, tensor)


def all_gather_into_tensor(output_tensor: Any, input_tensor: Any) -> None:
    """Gather every rank's ``input_tensor`` into ``output_tensor`` (concatenated on dim 0).

    As in OneFlow, a contiguous ``output_tensor`` of any shape with ``world_size`` times the
    input's elements receives them in rank order (a (2, 3, 2) output of two (2, 3) inputs).
    """
    _c.all_gather_into_tensor(_viewed(output_tensor, _stacked(input_tensor)), input_tensor)


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
    rank 1 ``[[14,16,18],[20,22,24]]``. As in OneFlow, a contiguous input of any shape with
    ``world_size`` times the output's elements is taken in order (1..12 as 2x3x2 works too).
    """
    _c.reduce_scatter_tensor(output_tensor, _viewed(input_tensor, _stacked(output_tensor)))


def _stacked(t: Any) -> tuple[int, ...] | None:
    """The shape of ``world_size`` copies of ``t`` stacked on dim 0 (None: ``t`` has no shape,
    which the collective's own argument checks report)."""
    shape = getattr(t, "shape", None)
    if shape is None:
        return None
    shape = tuple(shape)
    size = world_comm.size
    return (size * shape[0], *shape[1:]) if shape else (size,)


def _viewed(t: Any, shape: tuple[int, ...] | None) -> Any:
    """``t`` viewed (same memory) as ``shape`` when it holds that many elements contiguously:
    OneFlow's collectives go by element count; anything else is left to the shape checks."""
    have = getattr(t, "shape", None)
    if shape is None or have is None:
        return t
    try:
        have = tuple(int(n) for n in have)
    except (TypeError, ValueError):
        return t
    if have == shape or int(numpy.prod(shape)) != int(numpy.prod(have)):
        return t
    if isinstance(t, Tensor):
        if t.is_local and t._data.flags.c_contiguous:
            return Tensor(t._data.reshape(shape))
        return t
    if is_torch_tensor(t):
        return t.view(shape) if t.is_contiguous() else t
    flags = getattr(t, "flags", None)
    return t.reshape(shape) if flags is not None and flags.c_contiguous else t


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
    buf, post = _c.buffer_arg(tensor, "tensor")
    peer = _c.peer_rank(world_group, dst, "dst")
    if send_meta:
        torch_name = _torch_only_name(tensor)
        if torch_name is not None and torch_name in _TORCH_WIRE:
            code = len(_WIRE_DTYPES) + _TORCH_NAMES.index(torch_name)
        elif torch_name is None and buf.dtype in _WIRE_DTYPES:
            code = _WIRE_DTYPES.index(buf.dtype)
        else:
            code = -1
        if buf.ndim > _MAX_DIMS or code < 0:
            described = tensor.dtype if torch_name is not None else buf.dtype
            raise TypeError(f"cannot describe a {buf.ndim}-d {described} array to the receiver")
        meta = numpy.zeros(2 + _MAX_DIMS, dtype=numpy.int64)
        meta[0], meta[1] = buf.ndim, code
        meta[2:2 + buf.ndim] = buf.shape
        world_comm.send(meta, peer, _META_TAG)
    world_comm.send(buf, peer, _DATA_TAG)
    if post is not None:
        post()


def _torch_only_name(obj: Any) -> str | None:
    """The dtype name of a torch tensor of a dtype numpy lacks ("bfloat16"), else None."""
    if type(obj) is numpy.ndarray or not is_torch_tensor(obj) or numpy_dtype(obj.dtype):
        return None
    return str(obj.dtype).removeprefix("torch.")


def _wire_dtype(dtype: Any) -> tuple[numpy.dtype, str | None]:
    """The numpy dtype that carries ``dtype``, and its torch name when numpy lacks it.

    Raises:
        TypeError: a torch dtype that cannot be sent (quantized, or unknown here).
    """
    if isinstance(dtype, DType):
        return dtype.numpy, None
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(dtype, torch.dtype):
        return numpy.dtype(dtype), None
    found = numpy_dtype(dtype)
    if found is not None:
        return found, None
    name = str(dtype).removeprefix("torch.")
    if name not in _TORCH_WIRE:
        raise TypeError(f"cannot receive {dtype} tensors")
    return _TORCH_WIRE[name], name


def recv(src: int | None = None, shape: Any | None = None, dtype: Any | None = None,
         device: Any = None, *, out: Any | None = None) -> Any | None:
    """Receive an array from rank ``src`` (None: any rank).

    Without ``shape`` and ``dtype`` the sender's metadata message says what arrives (the
    default of :func:`send`); give both when the sender used ``send_meta=False``.

    Args:
        src: the sending rank, or None for any.
        shape: what arrives, when the sender sends no metadata.
        dtype: what arrives, when the sender sends no metadata: an mpiflow dtype, a numpy
            dtype (or what ``numpy.dtype`` takes), or a ``torch.dtype``.
        device: "cuda" (or ``mpiflow.device("cuda")``) receives into a new tensor on this
            rank's GPU (what a device sender needs when device arrays travel over NCCL); None
            or "cpu" into a host tensor.
        out: receive into this array or tensor (numpy, mpiflow, CuPy, or a CPU or CUDA
            ``torch.Tensor`` of any strides) instead of a new one.

    Returns:
        The received data as an mpiflow tensor (OneFlow's return type; CuPy-backed with
        ``device="cuda"``), or None when ``out`` was given. A tensor of a dtype numpy lacks
        (a bfloat16 tensor sent with its metadata, or ``dtype=torch.bfloat16``) arrives as a
        ``torch.Tensor`` of that dtype (on ``device``).

    Examples:
        >>> rank = flow.env.get_rank()
        >>> if rank == 0: flow.comm.send(numpy.arange(3.0), dst=1)
        >>> if rank == 1: x = flow.comm.recv(0)     # tensor([0., 1., 2.])
    """
    if (shape is None) != (dtype is None):
        raise ValueError("give both shape and dtype (sender used send_meta=False) or neither")
    source = None if src is None else _c.peer_rank(world_group, src, "src")
    target, post = (None, None) if out is None else _c.buffer_arg(out, "out", write=True)
    torch_name: str | None  # the dtype that arrives, where numpy lacks it
    if shape is None:
        meta = numpy.empty(2 + _MAX_DIMS, dtype=numpy.int64)
        source = world_comm.recv(meta, source, _META_TAG)
        ndim, code = int(meta[0]), int(meta[1])
        shape = tuple(int(n) for n in meta[2:2 + ndim])
        if code < len(_WIRE_DTYPES):
            dtype, torch_name = _WIRE_DTYPES[code], None
        else:
            torch_name = _TORCH_NAMES[code - len(_WIRE_DTYPES)]
            dtype = _TORCH_WIRE[torch_name]
    else:
        shape = (int(shape),) if isinstance(shape, (int, numpy.integer)) else tuple(shape)
        dtype, torch_name = _wire_dtype(dtype)
    # A dtype numpy lacks lands in host memory as its bits, then becomes a torch tensor.
    result = _array_module_of(None if torch_name else device).empty(shape, dtype=dtype)
    if (target is not None and target.shape == result.shape and target.dtype == result.dtype
            and _torch_only_name(out) == torch_name):
        result = target
    world_comm.recv(result, source, _DATA_TAG)
    if target is None:
        if torch_name is None:
            return Tensor(result)
        import torch  # the sender sent a torch tensor, or the caller named a torch dtype

        received = torch.from_numpy(result).view(getattr(torch, torch_name))
        return received if device is None else received.to(str(device))
    if result is not target:
        got = torch_name or result.dtype
        raise ValueError(f"received a {got} array of shape {result.shape}, but out is a "
                         f"{_torch_only_name(out) or target.dtype} array of shape "
                         f"{tuple(target.shape)}")
    if post is not None:
        post()
    return None


def _array_module_of(device: Any) -> Any:
    """numpy for no device or "cpu", CuPy (this rank's GPU) for "cuda"."""
    if device is None or str(device).split(":")[0] == "cpu":
        return numpy
    from .tensors.creation import check_device

    return check_device(None, device)


def from_mpi4py(comm: Any) -> ProcessGroup:
    """Hand mpiflow an mpi4py communicator the program made itself.

    The group runs mpiflow's collectives over ``comm``'s processes, in ``comm``'s rank order
    (pass it as ``group=`` to :mod:`mpiflow.distributed`'s functions). Collective over
    ``comm`` only; mpiflow talks on a duplicate of it, so the program's own messages on
    ``comm`` never mix with mpiflow's.

    Args:
        comm: an ``mpi4py.MPI.Intracomm`` (``COMM_WORLD.Split(...)``, ``Create_group``...).

    Returns:
        The process group.

    Examples:
        >>> from mpi4py import MPI
        >>> import numpy, mpiflow as flow, mpiflow.distributed as dist
        >>> half = flow.comm.from_mpi4py(MPI.COMM_WORLD.Split(MPI.COMM_WORLD.Get_rank() % 2))
        >>> x = numpy.ones(2)
        >>> dist.all_reduce(x, group=half)   # summed over this rank's half of the world
    """
    return group_from_mpi4py(comm)
