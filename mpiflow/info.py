"""What ``python -m mpiflow info`` reports: versions, the MPI library, the job, GPU transports."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from mpi4py import MPI

from . import _runtime
from ._version import __version__

__all__ = ["collect", "cuda_aware_mpi", "format_report"]

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


def _cupy_status() -> tuple[str, str]:
    try:
        cupy = importlib.import_module("cupy")
    except Exception:
        return "not installed", "no (CuPy not installed)"
    try:
        importlib.import_module("cupy.cuda.nccl")
        nccl = "yes"
    except Exception as exc:
        nccl = f"no ({type(exc).__name__})"
    return str(cupy.__version__), nccl


def cuda_aware_mpi(environ: Any = None) -> str:
    """Say whether the MPI library can take GPU buffers: "yes", "no" or "unknown".

    ``MPIFLOW_CUDA_AWARE=0/1`` overrides; otherwise the library's own switches are read
    (MPICH ``MPIR_CVAR_ENABLE_GPU``, Cray ``MPICH_GPU_SUPPORT_ENABLED``, MVAPICH
    ``MV2_USE_CUDA``).
    """
    env = os.environ if environ is None else environ
    override = env.get("MPIFLOW_CUDA_AWARE")
    if override in ("0", "1"):
        return "yes" if override == "1" else "no"
    for var in ("MPIR_CVAR_ENABLE_GPU", "MPICH_GPU_SUPPORT_ENABLED", "MV2_USE_CUDA"):
        value = env.get(var)
        if value is not None:
            return "yes" if value.strip() in ("1", "yes", "true", "on") else "no"
    return "unknown"


def collect() -> dict[str, str]:
    """Return the report as ordered (label, value) pairs. Never communicates."""
    import mpi4py
    import numpy

    topo = _runtime.topology
    cupy_version, nccl = _cupy_status()
    library = " ".join(MPI.Get_library_version().strip().splitlines()[0].split())
    major, minor = MPI.Get_version()
    return {
        "mpiflow": __version__,
        "python": sys.version.split()[0],
        "mpi4py": mpi4py.__version__,
        "numpy": numpy.__version__,
        "MPI library": library,
        "MPI standard": f"{major}.{minor}",
        "thread level": _THREAD_LEVELS.get(MPI.Query_thread(), str(MPI.Query_thread())),
        "world size": str(topo.size),
        "nodes": str(topo.node_size),
        "ranks on this node": str(topo.local_size),
        "cupy": cupy_version,
        "nccl (cupy.cuda.nccl)": nccl,
        "CUDA-aware MPI": cuda_aware_mpi(),
        "torch": _version_of("torch"),
    }


def format_report(info: dict[str, str]) -> str:
    """Align the report as ``label : value`` lines."""
    width = max(len(k) for k in info)
    return "\n".join(f"{k:<{width}} : {v}" for k, v in info.items())
