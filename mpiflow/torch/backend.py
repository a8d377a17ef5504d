"""The ``"mpiflow"`` backend: torch's creator function and its registration.

torch calls :func:`create_process_group` once per group whose backend is ``"mpiflow"``, on the
group's members only, with the group's world ranks (``extended_api=True``). The default group
runs on a duplicate of mpiflow's world communicator; every other group on a communicator made
with ``MPI_Comm_create_group`` over its members (collective over them alone, as torch's
``new_group`` and ``DeviceMesh`` expect).
"""

from __future__ import annotations

import zlib
from types import SimpleNamespace
from typing import Any

import torch.distributed as dist
from mpi4py import MPI

from ..communication.mpi.communicator import new_communicator
from ..communication.mpi.group import world_comm
from ..communication.watchdog import monitor as watchdog
from .process_group import BACKEND_NAME, ProcessGroupMPIFlow

__all__ = ["create_mpi_group", "create_process_group", "install_mpi", "register"]

_TORCH_DEFAULT = getattr(dist, "default_pg_timeout", None)


def create_process_group(opts: Any, pg_options: Any = None) -> ProcessGroupMPIFlow:
    """Make the process group torch asked for (torch's ``extended_api`` creator).

    Args:
        opts: torch's ``_DistributedBackendOptions`` (group rank and size, the world ranks
            of the group, timeout, group name).
        pg_options: backend options; the mpiflow backend takes none.

    Raises:
        RuntimeError: torch's ranks do not match MPI's (the job was not launched the way
            its RANK/WORLD_SIZE say).
    """
    world: Any = world_comm.mpi_comm  # an Intracomm; mpi4py's stubs say Comm
    ranks = list(opts.global_ranks_in_group) or list(range(world.Get_size()))
    me = world.Get_rank()
    if len(ranks) != opts.group_size or ranks[opts.group_rank] != me:
        raise RuntimeError(
            f"torch says this process is rank {opts.group_rank} of the group {ranks}, but "
            f"MPI says it is world rank {me} of {world.Get_size()}: launch with mpiexec/srun "
            f"and leave RANK and WORLD_SIZE unset (or equal to MPI's)")
    timeout = getattr(opts, "timeout", None)
    if ranks == list(range(world.Get_size())):
        comm = world.Dup()
        if not opts.global_ranks_in_group and timeout is not None and timeout != _TORCH_DEFAULT:
            # A timeout given to init_process_group bounds every blocking call: the watchdog's
            # limit. torch passes its default when none was given: MPIFLOW_TIMEOUT stays.
            watchdog.set_timeout(timeout.total_seconds())
    else:
        group = world.Get_group().Incl(ranks)
        tag = zlib.crc32(str(opts.group_id).encode()) % 32768
        try:
            comm = world.Create_group(group, tag)
        finally:
            group.Free()
    if comm == MPI.COMM_NULL:  # cannot happen for a member; be clear if it does
        raise RuntimeError(f"MPI made no communicator for the group {ranks}")
    return ProcessGroupMPIFlow(new_communicator(comm), timeout)


def create_mpi_group(ranks: list[int]) -> ProcessGroupMPIFlow | None:
    """Make the group torch's ``"mpi"`` backend asks for, on mpiflow (``ProcessGroupMPI.create``).

    Where torch has no MPI of its own, ``backend="mpi"`` reaches this through
    :func:`mpiflow.torch.install_mpi`. torch's MPI branch passes only the group's world ranks
    (none for the default group), no store and no timeout: the group's limit stays the
    watchdog's (``MPIFLOW_TIMEOUT``).

    Args:
        ranks: the group's world ranks; empty for the whole world.

    Returns:
        The process group, or ``None`` on a rank outside it (torch's non-member).
    """
    world: Any = world_comm.mpi_comm
    members = list(ranks) or list(range(world.Get_size()))
    me = world.Get_rank()
    if me not in members:
        return None
    opts = SimpleNamespace(global_ranks_in_group=list(ranks), group_size=len(members),
                           group_rank=members.index(me), timeout=None,
                           group_id="mpi:" + ",".join(map(str, members)))
    return create_process_group(opts)


def register() -> None:
    """Register the ``"mpiflow"`` backend with torch (idempotent), for CPU and CUDA tensors."""
    if BACKEND_NAME.upper() in dist.Backend._plugins:
        plugin = dist.Backend._plugins[BACKEND_NAME.upper()]
        if plugin.creator_fn is create_process_group:
            return
    dist.Backend.register_backend(BACKEND_NAME, create_process_group, extended_api=True,
                                  devices=["cpu", "cuda"])


def install_mpi() -> bool:
    """Let ``backend="mpi"`` run on mpiflow where torch has no MPI of its own (idempotent).

    torch's ``"mpi"`` branch is hard-coded (a backend named ``"mpi"`` cannot be registered):
    where ``torch.distributed.is_mpi_available()`` is false, its ``ProcessGroupMPI`` becomes
    one whose ``create`` makes mpiflow groups (:func:`create_mpi_group`), and the availability
    flag is set. A torch built with MPI is left alone; ``MPIFLOW_TORCH_MPI=0`` turns it off.

    Returns:
        Whether ``"mpi"`` runs on mpiflow.

    Examples:
        >>> import torch.distributed as dist
        >>> install_mpi() == dist.is_mpi_available()
        True
    """
    from _mpiflow_torch_autoload import install_mpi as install

    return bool(install())
