"""What the device transports need from an array library: copies, streams, pointers, pins.

The staging, CUDA-aware and NCCL communicators are written against :class:`DeviceOps`, never
against CuPy directly. :class:`CupyOps` is the real one; :class:`HostOps` treats numpy arrays
as if they were device arrays (its "pinned" buffers are plain numpy memory and its stream is
always idle), so the very same communicator code runs in CI without a GPU, and it counts
what it does so that tests can check, e.g., that staging buffers are reused.

Examples:
    >>> ops = HostOps()
    >>> host = ops.pinned(16)
    >>> ops.to_host(numpy.arange(4, dtype=numpy.int32), host[:16].view(numpy.int32))
    >>> ops.pinned_allocations
    1
"""

from __future__ import annotations

import abc
from types import ModuleType
from typing import Any, Protocol

import numpy

__all__ = ["CupyOps", "DeviceOps", "HostOps", "Marker"]


class Marker(Protocol):
    """A point in a stream: the work queued before it either is done or can be waited for."""

    def wait(self) -> None:
        """Block until the work before the marker has finished."""

    def done(self) -> bool:
        """Whether the work before the marker has finished."""


class _Reached:
    """A marker whose work is already done (streams that never run behind the host)."""

    __slots__ = ()

    def wait(self) -> None:
        return None

    def done(self) -> bool:
        return True


class DeviceOps(abc.ABC):
    """The operations on device arrays that the device transports use.

    "Device" arrays belong to :attr:`xp`; host arrays are numpy arrays. Copies between them
    are blocking: when a copy returns, its destination holds the data and its source may be
    reused.
    """

    name: str

    @property
    @abc.abstractmethod
    def xp(self) -> ModuleType:
        """The array module of device arrays."""

    @abc.abstractmethod
    def is_device(self, array: Any) -> bool:
        """Whether ``array`` lives on the device (else it is a host numpy array)."""

    @abc.abstractmethod
    def synchronize(self) -> None:
        """Wait for the work queued on the current stream (what produced the buffers)."""

    @abc.abstractmethod
    def stream(self) -> int:
        """The handle of the current stream, for NCCL."""

    @abc.abstractmethod
    def pointer(self, array: Any) -> int:
        """The address of a contiguous device array's first byte."""

    @abc.abstractmethod
    def record(self) -> Marker:
        """A marker at the current position of the current stream."""

    @abc.abstractmethod
    def pinned(self, nbytes: int) -> numpy.ndarray:
        """A new page-locked host buffer of ``nbytes`` bytes (a uint8 numpy array)."""

    @abc.abstractmethod
    def to_host(self, src: Any, dst: numpy.ndarray) -> None:
        """Copy the device array ``src`` into the host array ``dst`` (same shape and dtype)."""

    @abc.abstractmethod
    def to_device(self, src: numpy.ndarray, dst: Any) -> None:
        """Copy the host array ``src`` into the device array ``dst`` (same shape and dtype)."""

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """A new C-contiguous device array."""
        return self.xp.empty(shape, dtype=dtype)

    def contiguous(self, array: Any) -> Any:
        """``array`` itself when C-contiguous, else a C-contiguous device copy."""
        return array if array.flags.c_contiguous else self.xp.ascontiguousarray(array)

    def from_host(self, array: numpy.ndarray) -> Any:
        """A new C-contiguous device array holding the host array's values."""
        out = self.empty(array.shape, array.dtype)
        self.to_device(array, out)
        return out


class HostOps(DeviceOps):
    """Numpy arrays standing in for device arrays: the device transports' code path in CI.

    Attributes:
        pinned_allocations: how many "pinned" buffers were made.
        to_host_copies, to_device_copies: how many copies each way.
        synchronizations: how many times the stream was synchronized.
    """

    name = "host"

    def __init__(self) -> None:
        self.pinned_allocations = 0
        self.to_host_copies = 0
        self.to_device_copies = 0
        self.synchronizations = 0

    @property
    def xp(self) -> ModuleType:
        return numpy

    def is_device(self, array: Any) -> bool:
        return isinstance(array, numpy.ndarray)

    def synchronize(self) -> None:
        self.synchronizations += 1

    def stream(self) -> int:
        return 0

    def pointer(self, array: Any) -> int:
        return int(array.ctypes.data)

    def record(self) -> Marker:
        return _Reached()

    def pinned(self, nbytes: int) -> numpy.ndarray:
        self.pinned_allocations += 1
        return numpy.empty(nbytes, dtype=numpy.uint8)

    def to_host(self, src: Any, dst: numpy.ndarray) -> None:
        self.to_host_copies += 1
        dst[...] = src

    def to_device(self, src: numpy.ndarray, dst: Any) -> None:
        self.to_device_copies += 1
        dst[...] = src


class _Event:
    """A CUDA event recorded on a stream, as a :class:`Marker`."""

    __slots__ = ("_event",)

    def __init__(self, event: Any) -> None:
        self._event = event

    def wait(self) -> None:
        self._event.synchronize()

    def done(self) -> bool:
        return bool(self._event.done)


class CupyOps(DeviceOps):
    """The device operations of CuPy arrays, on CuPy's current stream.

    Args:
        cupy: the CuPy module (imported by the caller, with the device selected).
    """

    name = "cupy"

    def __init__(self, cupy: ModuleType) -> None:
        self._cupy = cupy
        self._ndarray = cupy.ndarray

    @property
    def xp(self) -> ModuleType:
        return self._cupy

    def is_device(self, array: Any) -> bool:
        return isinstance(array, self._ndarray)

    def _current(self) -> Any:
        return self._cupy.cuda.get_current_stream()

    def synchronize(self) -> None:
        self._current().synchronize()

    def stream(self) -> int:
        return int(self._current().ptr)

    def pointer(self, array: Any) -> int:
        return int(array.data.ptr)

    def record(self) -> Marker:
        event = self._cupy.cuda.Event(disable_timing=True)
        event.record(self._current())
        return _Event(event)

    def pinned(self, nbytes: int) -> numpy.ndarray:
        memory = self._cupy.cuda.alloc_pinned_memory(max(nbytes, 1))
        return numpy.ndarray((nbytes,), dtype=numpy.uint8, buffer=memory)  # keeps memory alive

    def to_host(self, src: Any, dst: numpy.ndarray) -> None:
        if src.size == 0:
            return
        if dst.flags.c_contiguous:
            src.get(out=dst, blocking=True)  # makes a strided src contiguous on the device
        else:
            dst[...] = src.get(blocking=True)

    def to_device(self, src: numpy.ndarray, dst: Any) -> None:
        if dst.size == 0:
            return
        target = dst if dst.flags.c_contiguous else self.empty(dst.shape, dst.dtype)
        # numpy.ascontiguousarray makes a 0-d array 1-d, which CuPy's set() refuses for a 0-d
        # target: reshape back (a view, no copy).
        target.set(numpy.ascontiguousarray(src).reshape(target.shape))
        self.synchronize()  # src (often a pinned buffer about to be reused) is free again
        if target is not dst:
            dst[...] = target
