"""The standard's ``fft`` extension, on ``mpiflow.fft`` (PyTorch's ``torch.fft`` names and
signatures): a function it lacks raises an ``AttributeError`` naming it. ``fftfreq`` and
``rfftfreq`` are creation functions here (distributed as every new array).

Examples:
    >>> from mpiflow import array_api as xp
    >>> xp.fft.fftfreq(4, d=0.5).tolist()
    [0.0, 0.5, -1.0, -0.5]
"""

from __future__ import annotations

import operator
from typing import Any

from ..ops import pointwise as pw
from ..tensors.tensor import Tensor
from .common import DEFAULT_FLOAT, array, module
from .creation import arange
from .data_types import dtype as checked_dtype

__all__ = ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft",
           "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_NORMS = ("backward", "ortho", "forward")


def _fft(name: str) -> Any:
    fn = getattr(module("fft"), name, None)
    if fn is None:
        raise AttributeError(f"mpiflow.fft has no '{name}' yet")
    return fn


def _norm(norm: str, name: str) -> str:
    if norm not in _NORMS:
        raise ValueError(f"{name}: norm must be one of {', '.join(_NORMS)}, got {norm!r}")
    return norm


def _one(name: str) -> Any:
    def f(x: Tensor, /, *, n: int | None = None, axis: int = -1, norm: str = "backward"
          ) -> Tensor:
        array(x, name)
        return _fft(name)(x, n=n, dim=axis, norm=_norm(norm, name))

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"The standard's ``fft.{name}`` along ``axis`` (``mpiflow.fft.{name}``)."
    return f


def _many(name: str) -> Any:
    def f(x: Tensor, /, *, s: Any = None, axes: Any = None, norm: str = "backward"
          ) -> Tensor:
        array(x, name)
        return _fft(name)(x, s=s, dim=axes, norm=_norm(norm, name))

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"The standard's ``fft.{name}`` over ``axes`` (``mpiflow.fft.{name}``)."
    return f


fft, ifft, rfft, irfft, hfft, ihfft = (_one(n) for n in ("fft", "ifft", "rfft", "irfft", "hfft",
                                                          "ihfft"))
fftn, ifftn, rfftn, irfftn = (_many(n) for n in ("fftn", "ifftn", "rfftn", "irfftn"))


def _freq(n: int, d: float, dtype: Any, device: Any, half: bool) -> Tensor:
    n = operator.index(n)
    if n <= 0:
        raise ValueError(f"fftfreq: n must be positive, got {n}")
    dt = DEFAULT_FLOAT if dtype is None else checked_dtype(dtype)
    count = n // 2 + 1 if half else n
    k = arange(count, device=device)
    if not half:  # 0, 1, ..., (n - 1) // 2, then -(n // 2), ..., -1
        k = pw.where(pw.lt(k, (n + 1) // 2), k, pw.sub(k, n))
    return pw.cast(pw.div(pw.cast(k, DEFAULT_FLOAT), n * d), dt)


def fftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: Any = None) -> Tensor:
    """The sample frequencies of an ``n``-point FFT with sample spacing ``d``."""
    return _freq(n, d, dtype, device, False)


def rfftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: Any = None) -> Tensor:
    """The sample frequencies of an ``n``-point real FFT (``n // 2 + 1`` of them)."""
    return _freq(n, d, dtype, device, True)


def fftshift(x: Tensor, /, *, axes: Any = None) -> Tensor:
    """``x`` with the zero frequency moved to the centre along ``axes`` (all by default)."""
    array(x, "fftshift")
    return _fft("fftshift")(x, dim=axes)


def ifftshift(x: Tensor, /, *, axes: Any = None) -> Tensor:
    """The inverse of :func:`fftshift`."""
    array(x, "ifftshift")
    return _fft("ifftshift")(x, dim=axes)
