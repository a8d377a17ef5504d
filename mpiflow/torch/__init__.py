"""PyTorch on MPI: the ``"mpiflow"`` torch.distributed backend for stock PyTorch wheels.

``import mpiflow.torch`` registers the backend; then unmodified torch code runs under
``mpiexec``/``srun`` with one change, the backend's name::

    import torch.distributed as dist
    import mpiflow.torch  # noqa: F401  (not needed where torch auto-loads backends, >= 2.5)

    dist.init_process_group(backend="mpiflow")   # rank and size from MPI, no MASTER_ADDR

``backend="mpi"`` runs on mpiflow too where torch has no MPI of its own (stock wheels):
:func:`install_mpi`, ``MPIFLOW_TORCH_MPI=0`` to turn it off.

Every collective, point-to-point operation, subgroup (``new_group``, ``init_device_mesh``),
object collective and functional collective of torch runs on mpiflow's MPI communicators,
with mpiflow's safety: abort of the whole job on an uncaught exception, the watchdog
(``init_process_group(timeout=...)`` sets its limit) and ``MPIFLOW_DEBUG`` checks.
Supported: torch 2.1 and newer (tested with 2.13); see docs/torch.md.
"""

from __future__ import annotations

from typing import Any

from ..core.extras import install_hint

try:
    import torch.distributed  # noqa: F401
except ModuleNotFoundError as _missing:
    if (_missing.name or "").split(".")[0] != "torch":
        raise
    raise ModuleNotFoundError(
        f"mpiflow.torch needs PyTorch, which is not installed: {install_hint('torch')}; "
        "the CPU build is enough on CPU nodes (docs/torch.md)", name="torch") from None

from .backend import create_process_group, install_mpi, register
from .process_group import BACKEND_NAME, ProcessGroupMPIFlow
from .rendezvous import install as _install_rendezvous

__all__ = ["BACKEND_NAME", "MPIStore", "ProcessGroupMPIFlow", "create_process_group",
           "install_mpi", "register"]

register()
_install_rendezvous()
install_mpi()


def __getattr__(name: str) -> Any:
    if name == "MPIStore":  # its module is imported when a rendezvous first needs it
        from .store import MPIStore

        return MPIStore
    raise AttributeError(f"module 'mpiflow.torch' has no attribute {name!r}")
