"""How device (CuPy) arrays cross the network: the transport choice, as pure functions.

Three transports move device arrays, in order of preference:

| transport | how |
|---|---|
| ``nccl`` | NCCL through CuPy (``cupy.cuda.nccl``), one NCCL communicator per group |
| ``cuda-aware-mpi`` | device buffers straight to mpi4py, when the MPI library takes them |
| ``staged-mpi`` | copies through reusable pinned host buffers, then ordinary MPI |

:func:`select_transport` turns what is known (``MPIFLOW_BACKEND``, whether CuPy's NCCL
imports, whether MPI is CUDA-aware) into a :class:`TransportChoice` with its reason;
:func:`nccl_reduction` says how NCCL reduces a (dtype, op) pair, or why it cannot (the
communicator then falls back to MPI for that call). Only :func:`nccl_status`,
:func:`library_cuda_support` and :func:`current_transport` look at the machine; none of them
communicates, and none imports CuPy before it is called.

Examples:
    >>> select_transport("auto", nccl_available=False, cuda_aware="unknown").transport
    <Transport.STAGED_MPI: 'staged-mpi'>
"""

from __future__ import annotations

import contextlib
import ctypes
import enum
import functools
import importlib
import os
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy

from ...core import settings
from ...core.reduce_op import ReduceOp

__all__ = [
    "BACKENDS",
    "NCCL_INSTALL_HINT",
    "NcclReduction",
    "Transport",
    "TransportChoice",
    "cuda_aware_mpi",
    "cuda_aware_source",
    "current_transport",
    "describe_transport",
    "library_cuda_support",
    "nccl_reduction",
    "nccl_status",
    "parse_backend",
    "parse_cuda_aware",
    "select_transport",
]

BACKENDS = ("auto", "mpi", "nccl")
_TRUE = ("1", "yes", "true", "on")
_FALSE = ("0", "no", "false", "off")
# The switches with which MPI libraries turn their GPU support on, in the order read.
_LIBRARY_SWITCHES = ("MPIR_CVAR_ENABLE_GPU", "MPICH_GPU_SUPPORT_ENABLED", "MV2_USE_CUDA")


class Transport(enum.Enum):
    """A way to move device arrays between ranks."""

    NCCL = "nccl"
    CUDA_AWARE_MPI = "cuda-aware-mpi"
    STAGED_MPI = "staged-mpi"


@dataclass(frozen=True)
class TransportChoice:
    """The transport of a communicator's device arrays, and why.

    Attributes:
        transport: what moves device arrays.
        fallback: what moves the calls NCCL cannot make (bitwise reductions, dtypes NCCL
            lacks); equal to ``transport`` when that is MPI already.
        reason: one line saying why, for ``python -m mpiflow info`` and errors.
    """

    transport: Transport
    fallback: Transport
    reason: str


# -- the environment --------------------------------------------------------------------------
def parse_backend(environ: Mapping[str, str] | None = None) -> str:
    """Return ``MPIFLOW_BACKEND`` as one of :data:`BACKENDS` (unset or empty: ``"auto"``).

    Raises:
        ValueError: any other value, naming the ones allowed.

    Examples:
        >>> parse_backend({"MPIFLOW_BACKEND": "NCCL"})
        'nccl'
    """
    return str(settings.read("MPIFLOW_BACKEND", environ))


def parse_cuda_aware(environ: Mapping[str, str] | None = None) -> bool | None:
    """Return the ``MPIFLOW_CUDA_AWARE`` override: True, False, or None when unset.

    Raises:
        ValueError: a value that is not 0/1 (or no/yes, false/true, off/on).
    """
    value = settings.read("MPIFLOW_CUDA_AWARE", environ)
    return None if value is None else bool(value)


# -- asking the MPI library -------------------------------------------------------------------
def _loaded_libmpi_paths() -> list[str]:
    """Paths of the MPI library mpi4py loaded: ``MPI4PY_LIBMPI``, mpi4py's own record, and
    the ``libmpi`` objects mapped into this process."""
    paths: list[str] = []
    env_path = os.environ.get("MPI4PY_LIBMPI")
    if env_path:
        paths.append(env_path)
    try:
        recorded = getattr(importlib.import_module("mpi4py._mpiabi"), "LIBMPI", None)
        if isinstance(recorded, str) and recorded:
            paths.append(recorded)
    except Exception:
        pass
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = line.rsplit(None, 1)[-1] if "/" in line else ""
                name = os.path.basename(path)
                if name.startswith(("libmpi.", "libmpi_", "libmpich")) and ".so" in name:
                    paths.append(path)
    except OSError:
        pass
    return list(dict.fromkeys(paths))


def _handles() -> list[Any]:
    handles: list[Any] = []
    mode = getattr(os, "RTLD_NOLOAD", 0) | getattr(os, "RTLD_LOCAL", 0)
    for path in _loaded_libmpi_paths():
        try:  # RTLD_NOLOAD: only libraries already loaded, never a second MPI
            handles.append(ctypes.CDLL(path, mode=mode))
        except OSError:
            continue
    with contextlib.suppress(OSError):
        handles.append(ctypes.CDLL(None))
    return handles


def _query_library() -> tuple[bool | None, str]:
    """The loaded MPI library's answer and the function that gave it (None, "" if none)."""
    try:
        from mpi4py import MPI

        if not MPI.Is_initialized() or MPI.Is_finalized():
            return None, ""
        for handle in _handles():
            query = getattr(handle, "MPIX_Query_cuda_support", None)
            if query is not None:
                query.restype = ctypes.c_int
                query.argtypes = []
                return bool(query()), "MPIX_Query_cuda_support()"
            gpu_query = getattr(handle, "MPIX_GPU_query_support", None)
            if gpu_query is not None:
                answer = ctypes.c_int(0)
                gpu_query.restype = ctypes.c_int
                gpu_query.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
                if gpu_query(0, ctypes.byref(answer)) == 0:  # 0: MPIX_GPU_SUPPORT_CUDA
                    return bool(answer.value), "MPIX_GPU_query_support(CUDA)"
    except Exception:
        return None, ""
    return None, ""


def library_cuda_support() -> bool | None:
    """Ask the loaded MPI library whether it takes CUDA buffers; None when it cannot say.

    Open MPI answers through ``MPIX_Query_cuda_support()``, MPICH (4.0 and later) through
    the same or ``MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &answer)``. They are looked
    up with ctypes in the library mpi4py loaded; a library without them gives None, never an
    error.
    """
    return _query_library()[0]


def cuda_aware_source(environ: Mapping[str, str] | None = None,
                      library: Callable[[], bool | None] | None = None) -> tuple[str, str]:
    """Whether the MPI library takes GPU buffers ("yes", "no", "unknown") and who said so.

    The first that answers wins: ``MPIFLOW_CUDA_AWARE=0/1``, the library itself
    (:func:`library_cuda_support`), then the switches MPI libraries are turned on with:
    MPICH ``MPIR_CVAR_ENABLE_GPU``, Cray ``MPICH_GPU_SUPPORT_ENABLED``, MVAPICH
    ``MV2_USE_CUDA``.

    Args:
        environ: the environment; None reads ``os.environ``.
        library: the library query. None asks the loaded library
            (:func:`library_cuda_support`) when ``environ`` is None too; with an explicit
            ``environ`` and no ``library``, only that environment is read.

    Returns:
        ``(answer, source)``, e.g. ``("yes", "MPIX_Query_cuda_support")``.
    """
    env = os.environ if environ is None else environ
    override = parse_cuda_aware(env)
    if override is not None:
        return ("yes" if override else "no"), f"MPIFLOW_CUDA_AWARE={int(override)}"
    if library is None and environ is None:
        answer, name = _query_library()
    else:
        answer, name = (None if library is None else library()), "the MPI library's own query"
    if answer is not None:
        return ("yes" if answer else "no"), f"{name} = {int(answer)}"
    for var in _LIBRARY_SWITCHES:
        value = env.get(var)
        if value is not None:
            return ("yes" if value.strip().lower() in _TRUE else "no"), f"{var}={value}"
    return "unknown", "no MPI query or switch answered"


def cuda_aware_mpi(environ: Mapping[str, str] | None = None,
                   library: Callable[[], bool | None] | None = None) -> str:
    """Say whether the MPI library can take GPU buffers: "yes", "no" or "unknown".

    See :func:`cuda_aware_source` for the order in which the answer is looked for. A wrong
    "yes" crashes MPI on the first device buffer, so only "yes" enables the transport.

    Examples:
        >>> cuda_aware_mpi({"MPIFLOW_CUDA_AWARE": "1"})
        'yes'
    """
    return cuda_aware_source(environ, library)[0]


# -- NCCL -------------------------------------------------------------------------------------
NCCL_INSTALL_HINT = "pip install nvidia-nccl-cu12, or nvidia-nccl-cu13 with CUDA 13"


@functools.lru_cache(maxsize=1)
def nccl_status() -> tuple[bool, str]:
    """Whether CuPy's NCCL can be used, and what was found (imports CuPy; cached).

    Returns:
        ``(available, detail)``: detail is the NCCL version when available, else the reason.
    """
    try:
        with warnings.catch_warnings():  # CuPy warns at import when libnccl is missing
            warnings.simplefilter("ignore")
            nccl = importlib.import_module("cupy.cuda.nccl")
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] == "cupy":
            return False, "CuPy is not installed"
        return False, f"cupy.cuda.nccl does not import ({exc})"
    except Exception as exc:
        return False, f"cupy.cuda.nccl does not import ({type(exc).__name__}: {exc})"
    if not getattr(nccl, "available", True) or not hasattr(nccl, "NcclCommunicator"):
        return False, f"CuPy was installed without NCCL ({NCCL_INSTALL_HINT})"
    try:
        version = int(nccl.get_version())
    except Exception:
        version = 0
    return True, f"NCCL {nccl_version_text(version)}" if version else "NCCL (version unknown)"


def nccl_version_text(code: int) -> str:
    """``"2.21.5"`` from NCCL's version code (``ncclGetVersion``).

    NCCL 2.9 and later code X.Y.Z as ``X*10000 + Y*100 + Z``, earlier versions as
    ``X*1000 + Y*100 + Z``.

    Examples:
        >>> nccl_version_text(22105), nccl_version_text(2804)
        ('2.21.5', '2.8.4')
    """
    if code >= 10000:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def select_transport(backend: str, nccl_available: bool, cuda_aware: str,
                     nccl_detail: str = "", ranks_per_gpu: int = 1) -> TransportChoice:
    """Choose the transport of device arrays from what is known (a pure function).

    | ``MPIFLOW_BACKEND`` | NCCL | CUDA-aware | transport (fallback) |
    |---|---|---|---|
    | auto / nccl | available | any | nccl (cuda-aware or staged MPI) |
    | nccl | missing | any | error |
    | auto / mpi | any / missing | yes | cuda-aware-mpi |
    | auto / mpi | any / missing | no, unknown | staged-mpi |

    NCCL needs a GPU of its own per rank: with more ranks than GPUs on a node, the automatic
    choice is MPI (``MPIFLOW_BACKEND=nccl`` still picks NCCL, which will refuse).

    Args:
        backend: one of :data:`BACKENDS`.
        nccl_available: whether CuPy's NCCL imports.
        cuda_aware: "yes", "no" or "unknown" (:func:`cuda_aware_mpi`).
        nccl_detail: the NCCL version or why it is missing, for the reason.
        ranks_per_gpu: the most ranks of a node that share one GPU.

    Raises:
        RuntimeError: ``backend="nccl"`` without NCCL.
        ValueError: an unknown backend or CUDA-awareness answer.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if cuda_aware not in ("yes", "no", "unknown"):
        raise ValueError(f"cuda_aware must be 'yes', 'no' or 'unknown', got {cuda_aware!r}")
    mpi = Transport.CUDA_AWARE_MPI if cuda_aware == "yes" else Transport.STAGED_MPI
    mpi_why = ("the MPI library is CUDA-aware" if cuda_aware == "yes" else
               "the MPI library is not CUDA-aware" if cuda_aware == "no" else
               "the MPI library's CUDA-awareness is unknown (MPIFLOW_CUDA_AWARE=1 asserts it)")
    detail = f" ({nccl_detail})" if nccl_detail else ""
    if backend == "nccl" and not nccl_available:
        raise RuntimeError(f"MPIFLOW_BACKEND=nccl, but CuPy's NCCL is not available{detail}")
    if nccl_available and (backend == "nccl" or (backend == "auto" and ranks_per_gpu <= 1)):
        why = "MPIFLOW_BACKEND=nccl" if backend == "nccl" else "CuPy's NCCL is available"
        return TransportChoice(Transport.NCCL, mpi,
                               f"{why}{detail}; what NCCL lacks goes over {mpi.value} "
                               f"({mpi_why})")
    if backend == "mpi":
        return TransportChoice(mpi, mpi, f"MPIFLOW_BACKEND=mpi; {mpi_why}")
    if nccl_available and ranks_per_gpu > 1:
        return TransportChoice(mpi, mpi, f"{ranks_per_gpu} ranks share a GPU and NCCL needs one "
                                         f"per rank; {mpi_why}")
    return TransportChoice(mpi, mpi, f"NCCL is not available{detail}; {mpi_why}")


def current_transport(environ: Mapping[str, str] | None = None) -> TransportChoice:
    """The transport this process gives device arrays, from its environment (imports CuPy).

    Every rank must choose the same: set ``MPIFLOW_BACKEND`` and ``MPIFLOW_CUDA_AWARE`` alike
    on all ranks (as the ``NCCL_*`` variables).

    Raises:
        ValueError: a malformed ``MPIFLOW_BACKEND`` or ``MPIFLOW_CUDA_AWARE``.
        RuntimeError: ``MPIFLOW_BACKEND=nccl`` without NCCL.
    """
    backend = parse_backend(environ)
    available, detail = nccl_status() if backend != "mpi" else (False, "not asked for")
    return select_transport(backend, available, cuda_aware_mpi(environ), detail,
                            _ranks_per_gpu() if available else 1)


def _ranks_per_gpu() -> int:
    """The most ranks of this node on one GPU (local ranks over visible devices, rounded up)."""
    from ... import cuda
    from ...runtime import topology

    devices = cuda.device_count()
    return -(-topology.local_size // devices) if devices else 1


def describe_transport(environ: Mapping[str, str] | None = None) -> str:
    """One line for ``python -m mpiflow info``: the transport and why, or what is wrong."""
    try:
        choice = current_transport(environ)
    except (ValueError, RuntimeError) as exc:
        return f"error: {exc}"
    return f"{choice.transport.value} ({choice.reason})"


# -- what NCCL can reduce ---------------------------------------------------------------------
# NCCL's datatypes, named as numpy names the same dtype (bfloat16 has no numpy dtype).
NCCL_DTYPES = frozenset({"int8", "uint8", "int32", "uint32", "int64", "uint64", "float16",
                         "float32", "float64"})
_NCCL_OPS = {ReduceOp.SUM: "sum", ReduceOp.PRODUCT: "prod", ReduceOp.MIN: "min",
             ReduceOp.MAX: "max"}
# bool buffers are bytes of 0 and 1: "any" is a max and "all" a min over uint8.
_BOOL_OPS = {ReduceOp.SUM: "max", ReduceOp.MAX: "max", ReduceOp.BOR: "max",
             ReduceOp.PRODUCT: "min", ReduceOp.MIN: "min", ReduceOp.BAND: "min"}


@dataclass(frozen=True)
class NcclReduction:
    """How NCCL reduces one (dtype, op) pair.

    Attributes:
        dtype: the NCCL datatype the buffer is reduced as (a numpy dtype name).
        op: ``"sum"``, ``"prod"``, ``"min"``, ``"max"`` or ``"avg"``.
        count_factor: elements of ``dtype`` per buffer element (2 for complex as floats).
        divide: divide by the group size afterwards (AVG where NCCL has no ``ncclAvg``).
    """

    dtype: str
    op: str
    count_factor: int = 1
    divide: bool = False


def nccl_reduction(dtype: Any, op: ReduceOp, has_avg: bool) -> NcclReduction | str:
    """How NCCL reduces ``dtype`` with ``op``, or the reason it cannot (then MPI does).

    The pair must already be valid (:func:`~mpiflow.core.reduce_op.check_reduce_dtype`).

    Args:
        dtype: a numpy dtype.
        op: the reduction.
        has_avg: whether the NCCL library has ``ncclAvg`` (2.10 and later).

    Examples:
        >>> nccl_reduction(numpy.complex64, ReduceOp.SUM, True)
        NcclReduction(dtype='float32', op='sum', count_factor=2, divide=False)
        >>> nccl_reduction(numpy.int32, ReduceOp.BXOR, True)
        'NCCL has no bitwise reductions'
    """
    dt = numpy.dtype(dtype)
    if dt.kind == "b":
        name = _BOOL_OPS.get(op)
        if name is None:
            return "NCCL has no logical xor"
        return NcclReduction("uint8", name)
    if op.is_bitwise:
        return "NCCL has no bitwise reductions"
    factor = 1
    if dt.kind == "c":
        if op is ReduceOp.PRODUCT:
            return "NCCL has no complex product"
        dt = numpy.dtype(f"f{dt.itemsize // 2}")
        factor = 2
    if dt.name not in NCCL_DTYPES:
        return f"NCCL has no {numpy.dtype(dtype).name} type"
    if op is ReduceOp.AVG:
        if dt.kind != "f":  # ncclAvg truncates integer means toward zero, as MPI's path does
            return NcclReduction(dt.name, "avg") if has_avg else \
                f"NCCL before 2.10 cannot average {dt.name}"
        return NcclReduction(dt.name, "avg", factor) if has_avg else \
            NcclReduction(dt.name, "sum", factor, divide=True)
    return NcclReduction(dt.name, _NCCL_OPS[op], factor)
