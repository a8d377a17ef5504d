"""PyTorch tensors as the arrays mpiflow's communicators move, zero-copy where the memory allows.

A CPU tensor becomes a numpy view of its own memory (strided tensors give strided views, which
the MPI layer stages and writes back itself). Dtypes numpy lacks travel as integers of their
size when bytes only move, and are reduced through a float32 (complex64) copy that is rounded
back once, never as integers:

| torch dtype | moved as | reduced as |
|---|---|---|
| float16/32/64, complex64/128, ints, bool | itself (zero-copy) | itself |
| bfloat16, float8 variants | int16 / uint8 bits | float32, rounded back |
| complex32 | int32 bits | complex64, rounded back |

A CUDA tensor is handed to CuPy zero-copy when CuPy imports (mpiflow's device communicator then
picks NCCL, CUDA-aware MPI or staging), else copied through pinned host memory. Either way the
tensor's current stream is synchronised before MPI or NCCL reads the memory.

Nothing here imports torch: the functions are reached only with a tensor in hand.

Examples:
    >>> import torch
    >>> t = torch.ones(3, dtype=torch.bfloat16)
    >>> host_array(t).dtype
    dtype('int16')
    >>> a, post = stage(t, reduce=True, write=True)
    >>> a.dtype, post is not None
    (dtype('float32'), True)
"""

from __future__ import annotations

import importlib
import sys
import warnings
from typing import Any

import numpy

from .completion import Post, chain

__all__ = ["Post", "chain", "check_writable", "cupy_or_none", "host_array", "is_torch_tensor",
           "numpy_dtype", "overlaps_itself", "stage"]



def is_torch_tensor(obj: Any) -> bool:
    """Whether ``obj`` is a ``torch.Tensor``, without importing torch.

    Examples:
        >>> is_torch_tensor(numpy.zeros(1))
        False
    """
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _torch() -> Any:
    return sys.modules["torch"]


# Integer dtypes of each element size, for moving the bits of dtypes numpy has no name for.
def _bits_dtype(t: Any) -> Any:
    torch = _torch()
    return {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64,
            16: torch.complex128}[t.element_size()]


def _reduce_dtype(dtype: Any) -> Any:
    """The dtype a tensor of ``dtype`` is reduced in: itself, or float32/complex64 for the
    floating dtypes numpy lacks (None: it cannot be reduced)."""
    torch = _torch()
    if dtype.is_complex:
        return dtype if dtype in (torch.complex64, torch.complex128) else torch.complex64
    if dtype.is_floating_point:
        return dtype if dtype in (torch.float16, torch.float32, torch.float64) else torch.float32
    return dtype


def numpy_dtype(dtype: Any) -> numpy.dtype | None:
    """The numpy dtype of a torch dtype, or None where numpy has none (bfloat16, float8...).

    Examples:
        >>> import torch
        >>> numpy_dtype(torch.float32), numpy_dtype(torch.bfloat16)
        (dtype('float32'), None)
    """
    cached = _NUMPY.get(dtype)
    if cached is not None or dtype in _NUMPY:
        return cached
    torch = _torch()
    try:
        found: numpy.dtype | None = torch.empty(0, dtype=dtype).numpy().dtype
    except (TypeError, RuntimeError):
        found = None
    _NUMPY[dtype] = found
    return found


_NUMPY: dict[Any, numpy.dtype | None] = {}


def _cpu_view(t: Any) -> numpy.ndarray:
    """The numpy view of a CPU tensor's memory, in its own dtype or as bits of its size."""
    if t.requires_grad:
        t = t.detach()
    if t.is_conj():  # a lazily conjugated view: its memory holds the unconjugated values
        raise TypeError("a conjugated view cannot be communicated in place; "
                        "call .resolve_conj() first")
    if t.is_neg():
        raise TypeError("a lazily negated view cannot be communicated in place; "
                        "call .resolve_neg() first")
    if numpy_dtype(t.dtype) is None:
        t = t.view(_bits_dtype(t))
    return t.numpy()


def host_array(t: Any, what: str = "tensor") -> numpy.ndarray:
    """The numpy array sharing a CPU tensor's memory, for operations that only move bytes.

    Args:
        t: a CPU ``torch.Tensor`` (any dtype, any strides).
        what: the argument's name, for errors.

    Returns:
        A view of ``t``'s memory; dtypes numpy lacks appear as integers of their size.

    Raises:
        TypeError: ``t`` is not on the CPU (use :func:`stage`), or a lazily conjugated view.
    """
    if not t.is_cpu:  # a flag read: t.device builds a torch.device object (~1 us)
        raise TypeError(f"{what} is on {t.device}; stage() moves device tensors")
    return _cpu_view(t)


def _copy_back(dst: Any, src: Any) -> Post:
    def post() -> None:
        dst.copy_(src)

    return post


def check_writable(t: Any, what: str = "output") -> None:
    """Refuse an output tensor whose elements share memory (an ``expand``-ed, stride-0 view).

    Several results would land in one memory cell, the last one winning: torch's in-place
    operations refuse such tensors too. Contiguous tensors pass at the cost of one flag read.

    Args:
        t: the ``torch.Tensor`` a collective writes into.
        what: the argument's name, for the error.

    Raises:
        ValueError: ``t`` overlaps itself.
    """
    if overlaps_itself(t):
        raise _overlap_error(t, what)


def overlaps_itself(t: Any) -> bool:
    """Whether tensor ``t``'s elements share memory (an ``expand``-ed, stride-0 view).

    Contiguous tensors answer at the cost of one flag read.
    """
    return not t.is_contiguous() and _torch()._debug_has_internal_overlap(t) == 1


def _overlap_error(t: Any, what: str, completed: bool = False) -> ValueError:
    return ValueError(
        f"{what} overlaps itself (shape {tuple(t.shape)}, strides {tuple(t.stride())}): "
        f"several results would land in one element; pass a tensor whose elements have "
        f"their own memory (.clone() or torch.empty)" + (
            ". The call completed on every rank (the others have their results); this rank's "
            "result was dropped" if completed else ""))


def _scratch_then_refuse(t: Any, what: str, reduce: bool) -> tuple[Any, Post]:
    """Stage a copy of the self-overlapping output ``t``; the step raises after the call.

    The other ranks of the collective cannot know this rank's output is unusable, so the
    call runs into the copy (the values it reads are ``t``'s), keeping every rank in step with
    no message left behind, and the error comes once it has completed.
    """
    scratch = t.clone(memory_format=torch_contiguous())
    array, post = stage(scratch, what, reduce=reduce, write=True)
    error = _overlap_error(t, what, completed=True)

    def refuse() -> None:
        raise error

    step = chain(post, refuse)
    assert step is not None
    return array, step


def stage(t: Any, what: str = "tensor", *, reduce: bool = False,
          write: bool = False) -> tuple[Any, Post | None]:
    """The array a collective operates on for tensor ``t``, and the step that finishes it.

    Args:
        t: a ``torch.Tensor`` on the CPU or a CUDA device.
        what: the argument's name, for errors.
        reduce: the collective reduces ``t``'s values (sum, max...), so dtypes numpy lacks go
            through a float32 (complex64) copy instead of their bits.
        write: the collective writes into ``t``: a copy is written back by the returned step.

    Returns:
        ``(array, post)``: a numpy (or CuPy) array sharing ``t``'s memory where possible, and
        None or the step to run once the operation has completed (copies results back).

    Raises:
        TypeError: a dtype that cannot be reduced (integers narrower than their bits are fine;
            e.g. ``torch.float8_e4m3fn`` reduces through float32, quantized dtypes do not).
        ValueError: ``write`` and ``t`` overlaps itself (:func:`check_writable`): raised by
            the returned step, once the operation has completed; the operation writes into a
            copy, so every rank takes part and none is left out of step.
    """
    if t.requires_grad:
        t = t.detach()
    if write and overlaps_itself(t):
        return _scratch_then_refuse(t, what, reduce)
    if t.is_cpu:  # flag reads: t.device builds a torch.device object (~1 us)
        if not reduce or numpy_dtype(t.dtype) is not None:
            return _cpu_view(t), None
        wide = _reduce_dtype(t.dtype)
        if wide == t.dtype or t.is_quantized:
            raise TypeError(f"{what} has dtype {t.dtype}, which cannot be reduced")
        copy = t.to(wide, memory_format=torch_contiguous())
        return copy.numpy(), (_copy_back(t, copy) if write else None)
    if t.is_cuda:
        return _stage_cuda(t, what, reduce=reduce, write=write)
    raise TypeError(f"{what} is on {t.device}: mpiflow moves CPU and CUDA tensors only")


def torch_contiguous() -> Any:
    """``torch.contiguous_format`` (a function so that torch stays unimported here)."""
    return _torch().contiguous_format


_UNPROBED = object()
_cupy_module: Any = _UNPROBED


def cupy_or_none() -> Any:
    """CuPy, or None where it is not installed or does not import (then CUDA tensors are
    copied through host memory). Imported once per process.

    CuPy not installed is a supported setup and says nothing. An installed CuPy whose import
    fails (a missing CUDA library, a driver too old, a wheel for another CUDA) warns once per
    process (``RuntimeWarning``, naming the error): the job still runs, staged through the
    host, without NCCL or CUDA-aware MPI.
    """
    global _cupy_module
    if _cupy_module is _UNPROBED:
        cupy = sys.modules.get("cupy")
        if cupy is None:
            try:
                cupy = importlib.import_module("cupy")
            except ModuleNotFoundError as exc:
                if (exc.name or "").split(".")[0] != "cupy":  # cupy's own import is broken
                    _warn_broken(exc)
            except Exception as exc:  # ImportError, OSError, CUDA errors: a broken install
                _warn_broken(exc)
        _cupy_module = cupy
    return _cupy_module


def _warn_broken(exc: BaseException) -> None:
    warnings.warn(f"CuPy is installed but does not import ({type(exc).__name__}: {exc}): "
                  "CUDA tensors are copied through host memory, without NCCL or CUDA-aware "
                  "MPI. `python -m mpiflow info` reports it; repair the CuPy install (or "
                  "uninstall it) to move them on the device", RuntimeWarning, stacklevel=4)


def _sync_current_stream(torch: Any, cupy: Any, index: int) -> None:
    """Wait for the work queued on torch's current stream of device ``index``.

    Through the raw stream handle when this torch has it (about 1 us, against 4-5 us for
    ``torch.cuda.current_stream(device).synchronize()``, measured on an H100).
    """
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None and cupy is not None:
        cupy.cuda.runtime.streamSynchronize(raw(index))
    else:
        torch.cuda.current_stream(index).synchronize()


def _cupy_view(cupy: Any, t: Any, index: int) -> Any:
    """A CuPy array on the memory of CUDA tensor ``t`` (a numpy-typed dtype), zero-copy.

    A contiguous tensor is wrapped from its pointer directly (2-3 us); anything else goes
    through ``__cuda_array_interface__`` (``cupy.asarray``, 7-8 us on an H100).
    """
    dtype = numpy_dtype(t.dtype)
    if dtype is None or not t.is_contiguous() or t.numel() == 0:
        with cupy.cuda.Device(index):
            return cupy.asarray(t)
    memory = cupy.cuda.UnownedMemory(t.data_ptr(), t.numel() * t.element_size(), t, index)
    return cupy.ndarray(tuple(t.shape), dtype, cupy.cuda.MemoryPointer(memory, 0))


def _stage_cuda(t: Any, what: str, *, reduce: bool, write: bool) -> tuple[Any, Post | None]:
    torch = _torch()
    cupy = cupy_or_none()
    index = t.get_device()
    # Kernels queued on the tensor's current stream may still be writing it: MPI and NCCL
    # (on CuPy's stream) must not read the memory before they finish.
    _sync_current_stream(torch, cupy, index)
    if cupy is not None:
        work, post = t, None
        if reduce and numpy_dtype(t.dtype) is None:
            work = t.to(_reduce_dtype(t.dtype), memory_format=torch.contiguous_format)
            post = _copy_back(t, work) if write else None
        elif numpy_dtype(t.dtype) is None:
            work = t.view(_bits_dtype(t))
        array = _cupy_view(cupy, work, index)

        def synced() -> None:
            # The device communicator may leave work queued on CuPy's stream.
            cupy.cuda.get_current_stream().synchronize()
            if post is not None:
                post()

        return array, synced
    # No CuPy: through pinned host memory (copy_ from the device blocks until it is done).
    host = torch.empty(t.shape, dtype=t.dtype, pin_memory=torch.cuda.is_available())
    host.copy_(t)
    array, host_post = stage(host, what, reduce=reduce, write=write)
    return array, (chain(host_post, _copy_back(t, host)) if write else None)
