"""CUDA devices for mpiflow: is CuPy there, how many devices, and which one this rank uses.

Nothing here imports CuPy until a function is called, so ``import mpiflow`` never does. The
first call that needs a device (:func:`require`, through a ``"cuda"`` placement, ``.cuda()`` or
``.to("cuda")``) selects device ``local_rank % device_count`` for this process, once: ranks
sharing a node spread over its GPUs, and a launcher that gives each rank one visible device
(``CUDA_VISIBLE_DEVICES`` per rank, ``srun --gpus-per-task=1``) gets device 0 everywhere.

Examples:
    >>> import mpiflow.cuda
    >>> mpiflow.cuda.is_available()          # False on a machine without CuPy or a GPU
    False
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Mapping
from types import ModuleType

from .core.extras import install_hint

__all__ = [
    "CudaUnavailableError",
    "cupy_problem",
    "current_device",
    "device_count",
    "explain",
    "is_available",
    "require",
    "synchronize",
    "unavailable_reason",
]

INSTALL_HINT = install_hint("gpu", "cupy-cuda12x")


class CudaUnavailableError(RuntimeError):
    """A ``"cuda"`` tensor or transport was asked for where CuPy or a CUDA device is missing."""


_lock = threading.RLock()
_probed = False
_cupy: ModuleType | None = None
_import_error: BaseException | None = None
_count: int | None = None
_count_error: str | None = None
_selected: int | None = None


def _import_cupy() -> ModuleType | None:
    """Import CuPy once (lazily); None when it is not installed or does not import."""
    global _probed, _cupy, _import_error
    with _lock:
        if not _probed:
            try:
                _cupy = importlib.import_module("cupy")
            except Exception as exc:  # ImportError, or a broken install raising its own error
                _import_error = exc
            _probed = True
    return _cupy


def cupy_problem() -> str | None:
    """Why CuPy is unusable: None when it imports, ``"missing"`` when it is not installed,
    else the error its import raised (``"OSError: libcudart.so.12: ..."``: a broken install).

    Examples:
        >>> mpiflow.cuda.cupy_problem()      # on a machine without CuPy
        'missing'
    """
    return _import_problem()


def _import_problem() -> str | None:
    """Why CuPy is unusable, as :func:`explain` takes it: None when it imported."""
    if _import_cupy() is not None:
        return None
    exc = _import_error
    if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] == "cupy":
        return "missing"
    return f"{type(exc).__name__}: {exc}"


def device_count() -> int:
    """Return the number of CUDA devices this process sees (0 without CuPy or a driver).

    Examples:
        >>> mpiflow.cuda.device_count()      # on a node with 4 GPUs
        4
    """
    global _count, _count_error
    cupy = _import_cupy()
    if cupy is None:
        return 0
    with _lock:
        if _count is None:
            try:
                _count = int(cupy.cuda.runtime.getDeviceCount())
            except Exception as exc:  # CUDARuntimeError: no driver, no device, driver too old
                _count, _count_error = 0, f"{type(exc).__name__}: {exc}"
    return _count


def explain(cupy_problem: str | None, count: int, count_error: str | None = None,
            environ: Mapping[str, str] | None = None) -> str | None:
    """Say why ``"cuda"`` tensors cannot be made, or None when they can (a pure function).

    Args:
        cupy_problem: None when CuPy imported, ``"missing"`` when it is not installed, else
            the error its import raised.
        count: the number of visible CUDA devices.
        count_error: what the CUDA runtime said when it counted none, if anything.
        environ: the environment (for ``CUDA_VISIBLE_DEVICES``); ``os.environ`` by default.

    Returns:
        The message, or None.

    Examples:
        >>> print(explain("missing", 0))  # doctest: +ELLIPSIS
        'cuda' tensors need CuPy and a CUDA device: CuPy is not installed (pip install cupy...)
    """
    head = "'cuda' tensors need CuPy and a CUDA device: "
    if cupy_problem == "missing":
        return head + f"CuPy is not installed ({INSTALL_HINT})"
    if cupy_problem is not None:
        return head + f"CuPy is installed but does not import ({cupy_problem})"
    if count > 0:
        return None
    env = os.environ if environ is None else environ
    visible = env.get("CUDA_VISIBLE_DEVICES")
    shown = "unset" if visible is None else repr(visible)
    text = head + f"CuPy is installed but no CUDA device is visible (CUDA_VISIBLE_DEVICES={shown})"
    if count_error:
        text += f"; the CUDA runtime says {count_error}"
    return text


def unavailable_reason() -> str | None:
    """Why ``"cuda"`` tensors cannot be made here, or None when they can (imports CuPy)."""
    problem = _import_problem()
    count = device_count() if problem is None else 0
    return explain(problem, count, _count_error)


def is_available() -> bool:
    """Return True when CuPy imports and at least one CUDA device is visible."""
    return unavailable_reason() is None


def require() -> ModuleType:
    """Return CuPy with this rank's device selected, or raise the reason it cannot be.

    The first call selects device ``local_rank % device_count`` (the current device of the
    calling thread); later calls return at once.

    Raises:
        CudaUnavailableError: CuPy is not installed, does not import, or sees no device; the
            message says which.

    Examples:
        >>> cp = mpiflow.cuda.require()
        >>> cp.zeros(3).device.id == mpiflow.cuda.current_device()
        True
    """
    global _selected
    cupy = _cupy if _selected is not None else None
    if cupy is not None:
        return cupy
    reason = unavailable_reason()
    if reason is not None:
        raise CudaUnavailableError(reason)
    cupy = _import_cupy()
    assert cupy is not None
    with _lock:
        if _selected is None:
            from .runtime import topology

            index = topology.local_rank % device_count()
            cupy.cuda.Device(index).use()
            _selected = index
    return cupy


def current_device() -> int:
    """Return the index of this rank's CUDA device, selecting it if need be."""
    require()
    assert _selected is not None
    return _selected


def synchronize() -> None:
    """Wait until the work queued on this rank's device has finished."""
    require().cuda.Device(current_device()).synchronize()
