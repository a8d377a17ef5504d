"""Which communicator moves a group's device arrays: NCCL, CUDA-aware MPI or staged MPI.

Every :class:`~.mpi.MPICommunicator` (a process group's, a mesh line's, the world's) hands the
device arrays it is given to its *device communicator*, made here on first use and kept on the
MPI communicator for its life (this module registers :func:`device_communicator` as the maker
at import: :func:`~.mpi.set_device_maker`). The choice follows
:func:`~.transport.current_transport` (the same on every rank, from the environment): an
:class:`~.nccl.NCCLCommunicator`, a :class:`~.cuda_aware.CudaAwareCommunicator` or a
:class:`~.staging.StagedCommunicator`. Making one imports CuPy and selects this rank's
device; it never communicates (NCCL connects on the group's first NCCL collective).

Examples:
    >>> from mpiflow.communication.mpi.group import world_group
    >>> group_transport(world_group)        # on a machine with CuPy's NCCL
    'nccl'
"""

from __future__ import annotations

import threading
from typing import Any

from ..mpi.communicator import MPICommunicator, set_device_maker
from ..mpi.interface import Communicator
from .array_ops import CupyOps, DeviceOps
from .cuda_aware import CudaAwareCommunicator
from .staging import PinnedPool, StagedCommunicator
from .transport import Transport, TransportChoice, current_transport

__all__ = ["build_device_communicator", "device_communicator", "group_transport",
           "transport_of"]

_lock = threading.Lock()
_shared: dict[str, Any] = {}


def build_device_communicator(mpi: MPICommunicator, ops: DeviceOps, choice: TransportChoice,
                              pool: PinnedPool | None = None, nccl_backend: Any = None
                              ) -> Communicator:
    """Make the device communicator ``choice`` names, over ``mpi``.

    Args:
        mpi: the group's MPI communicator.
        ops: the device operations (:class:`~.device_ops.CupyOps`; ``HostOps`` in tests).
        choice: the transport and its fallback.
        pool: pinned buffers to share between communicators (a new pool by default).
        nccl_backend: the NCCL library (:class:`~.nccl_library.CupyNccl` by default).
    """
    cuda_aware = choice.fallback is Transport.CUDA_AWARE_MPI
    if choice.transport is Transport.NCCL:
        from .nccl import NCCLCommunicator
        from .nccl_library import CupyNccl

        backend = CupyNccl() if nccl_backend is None else nccl_backend
        return NCCLCommunicator(mpi, ops, backend, cuda_aware, pool)
    if choice.transport is Transport.CUDA_AWARE_MPI:
        return CudaAwareCommunicator(mpi, ops, pool)
    return StagedCommunicator(mpi, ops, pool)


def _defaults() -> tuple[DeviceOps, TransportChoice, PinnedPool, Any]:
    """CuPy's device operations, this process's transport, the shared pinned pool (once)."""
    if not _shared:
        from ... import cuda

        ops = CupyOps(cuda.require())
        choice = current_transport()
        backend = None
        if choice.transport is Transport.NCCL:
            from .nccl_library import CupyNccl

            backend = CupyNccl()
        _shared.update(ops=ops, choice=choice, pool=PinnedPool(ops), backend=backend)
    return _shared["ops"], _shared["choice"], _shared["pool"], _shared["backend"]


def device_communicator(mpi: MPICommunicator) -> Communicator:
    """The communicator that moves ``mpi``'s device arrays (made on first use, then cached).

    Raises:
        CudaUnavailableError: no CuPy or no CUDA device.
        RuntimeError: ``MPIFLOW_BACKEND=nccl`` without NCCL.
    """
    device = mpi.device_comm
    if device is None:
        with _lock:
            device = mpi.device_comm
            if device is None:
                ops, choice, pool, backend = _defaults()
                device = build_device_communicator(mpi, ops, choice, pool, backend)
                mpi.device_comm = device  # lives and dies with the MPI communicator
    return device


set_device_maker(device_communicator)


def transport_of(device: Communicator) -> Transport:
    """The transport of a device communicator made here."""
    from .nccl import NCCLCommunicator

    if isinstance(device, NCCLCommunicator):
        return Transport.NCCL
    if isinstance(device, CudaAwareCommunicator):
        return Transport.CUDA_AWARE_MPI
    if isinstance(device, StagedCommunicator):
        return Transport.STAGED_MPI
    raise TypeError(f"not a device communicator: {device!r}")


def group_transport(group: Any) -> str | None:
    """The transport name of a process group's device arrays; None on a non-member.

    Args:
        group: a :class:`~.group.ProcessGroup`.
    """
    comm = group.comm
    if comm is None:
        return None
    if not isinstance(comm, MPICommunicator):
        raise TypeError(f"{group!r} does not talk over an MPICommunicator")
    return transport_of(device_communicator(comm)).value
