"""What ``python -m mpiflow info`` reports: versions, the MPI library, the job, GPU transports."""

from __future__ import annotations

import importlib
import os
import sys

from mpi4py import MPI

from . import runtime as _runtime
from ._version import __version__
from .algorithms import kernels
from .algorithms.fftlocal import kernel_name
from .communication.form import describe as describe_form
from .communication.gpu.transport import (
    cuda_aware_mpi,
    cuda_aware_source,
    describe_transport,
    nccl_status,
)
from .communication.mpi.quirks import describe_quirks, library_quirks
from .core import settings
from .core.mpi_settings import job_launcher, library_family, mpi_settings

__all__ = ["collect", "cuda_aware_mpi", "cupy_report", "describe_settings", "format_report",
           "mpiflow_settings"]

_THREAD_LEVELS = {
    MPI.THREAD_SINGLE: "single",
    MPI.THREAD_FUNNELED: "funneled",
    MPI.THREAD_SERIALIZED: "serialized",
    MPI.THREAD_MULTIPLE: "multiple",
}


def _version_of(module: str) -> str:
    try:
        return str(importlib.import_module(module).__version__)
    except Exception:
        return "not installed"


def cupy_report() -> dict[str, str]:
    """The report's CuPy and NCCL lines: a CuPy that is installed but does not import says
    so, with its error (CUDA tensors are then staged through the host)."""
    from . import cuda

    problem = cuda.cupy_problem()
    if problem == "missing":
        cupy, nccl = "not installed", "no (CuPy not installed)"
    elif problem is not None:
        cupy, nccl = f"installed but does not import ({problem})", "no (CuPy does not import)"
    else:
        cupy = str(importlib.import_module("cupy").__version__)
        available, detail = nccl_status()
        nccl = f"yes ({detail})" if available else f"no ({detail})"
    return {"cupy": cupy, "nccl (cupy.cuda.nccl)": nccl}


def _cuda_aware() -> str:
    try:
        answer, source = cuda_aware_source()
    except ValueError as exc:
        return f"error: {exc}"
    return f"{answer} ({source})"


def _devices() -> str:
    from . import cuda

    reason = cuda.unavailable_reason()
    return str(cuda.device_count()) if reason is None else f"none ({reason.split(': ', 1)[-1]})"


def describe_settings(settings: dict[str, str]) -> str:
    """The MPI settings of the environment as one line (``NAME=value, ...``).

    Examples:
        >>> describe_settings({"I_MPI_FABRICS": "shm:ofi", "FI_PROVIDER": "tcp"})
        'I_MPI_FABRICS=shm:ofi, FI_PROVIDER=tcp'
        >>> describe_settings({})
        "none set (the library's defaults)"
    """
    if not settings:
        return "none set (the library's defaults)"
    return ", ".join(f"{name}={value}" for name, value in settings.items())


def mpiflow_settings(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Each mpiflow setting's effective value and where it came from (docs/configuration.md).

    Examples:
        >>> mpiflow_settings({"MPIFLOW_TIMEOUT": "30"})["MPIFLOW_TIMEOUT"]
        '30 (environment)'
        >>> mpiflow_settings({})["MPIFLOW_CHECK"]
        'sampled (default)'
    """
    return {name: f"{value} ({where})" for name, value, where in settings.effective(environ)}


def collect() -> dict[str, str]:
    """Return the report as ordered (label, value) pairs. Never communicates."""
    import mpi4py
    import numpy

    topo = _runtime.topology
    # Open MPI's string ends in a NUL byte, which made the report a "binary file" to grep.
    version = MPI.Get_library_version().replace("\0", "").strip()
    library = " ".join(version.splitlines()[0].split())
    major, minor = MPI.Get_version()
    family = library_family(version)
    settings = mpi_settings(family, os.environ)
    return {
        "mpiflow": __version__,
        "python": sys.version.split()[0],
        "mpi4py": mpi4py.__version__,
        "numpy": numpy.__version__,
        "MPI library": library,
        "MPI standard": f"{major}.{minor}",
        "thread level": _THREAD_LEVELS.get(MPI.Query_thread(), str(MPI.Query_thread())),
        "launcher": job_launcher(os.environ, family),
        "MPI settings": describe_settings(settings),
        "reductions unlike numpy": describe_quirks(library_quirks()),
        "all-reduce form": describe_form(),
        "world size": str(topo.size),
        "nodes": str(topo.node_size),
        "ranks on this node": str(topo.local_size),
        **cupy_report(),
        "CUDA devices": _devices(),
        "CUDA-aware MPI": _cuda_aware(),
        "GPU transport": describe_transport(),
        "torch": _version_of("torch"),
        "FFT kernel": kernel_name(numpy),
        "linalg kernels": kernels.describe(),
    }


def format_report(info: dict[str, str], settings: dict[str, str] | None = None) -> str:
    """Align the report as ``label : value`` lines; then, under a heading, the settings
    (:func:`mpiflow_settings`) aligned alike.

    Examples:
        >>> print(format_report({"a": "1", "bc": "2"}, {"MPIFLOW_DEBUG": "off (default)"}))
        a  : 1
        bc : 2
        <BLANKLINE>
        settings (docs/configuration.md):
        MPIFLOW_DEBUG : off (default)
    """
    lines = [f"{k:<{width}} : {v}" for width in [max(len(k) for k in info)]
             for k, v in info.items()]
    if settings:
        width = max(len(k) for k in settings)
        lines += ["", "settings (docs/configuration.md):"]
        lines += [f"{k:<{width}} : {v}" for k, v in settings.items()]
    return "\n".join(lines)
