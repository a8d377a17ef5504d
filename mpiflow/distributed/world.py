"""Process-group management with PyTorch's names: init, ranks, sizes, groups, backends.

MPI is initialized when mpiflow is imported, so the world group always exists and
``init_process_group`` only records the backend and checks what the caller claims; calling it
twice is harmless. ``is_initialized()`` is True whenever mpiflow is imported.
"""

from __future__ import annotations

from typing import Any

from ..communication.collectives.torch_api import resolve_group
from ..communication.mpi.group import ProcessGroup, group_from_mpi4py, world_group
from ..communication.mpi.group import new_group as _new_group

__all__ = [
    "Backend",
    "destroy_process_group",
    "get_backend",
    "get_global_rank",
    "get_process_group_ranks",
    "get_rank",
    "get_world_size",
    "group",
    "init_process_group",
    "is_available",
    "is_initialized",
    "is_mpi_available",
    "is_nccl_available",
    "new_group",
]


class Backend:
    """Names of the backends ``init_process_group`` accepts."""

    MPI = "mpi"
    NCCL = "nccl"
    GLOO = "gloo"


_KNOWN_BACKENDS = (Backend.MPI, Backend.NCCL, Backend.GLOO)
_backend = Backend.MPI


class group:
    """Namespace of the default groups: ``group.WORLD``."""

    WORLD = world_group


def is_available() -> bool:
    """Return True: mpiflow's distributed package is always usable."""
    return True


def is_mpi_available() -> bool:
    """Return True: mpiflow always runs on MPI."""
    return True


def is_nccl_available() -> bool:
    """Return whether CuPy's NCCL can be used (it imports and found libnccl)."""
    from ..communication.gpu.transport import nccl_status

    return nccl_status()[0]


def init_process_group(backend: str | None = None, init_method: str | None = None,
                       timeout: Any = None, world_size: int = -1, rank: int = -1,
                       store: Any = None, group_name: str = "", pg_options: Any = None,
                       device_id: Any = None) -> None:
    """Start the default group, as ``torch.distributed.init_process_group``.

    MPI's launcher already decided ranks and size; ``world_size``/``rank``, when given, are
    checked against it. ``init_method`` and ``store`` are not needed and are ignored.

    Args:
        backend: "mpi", "nccl", "gloo" or None (mpi).
        world_size: expected number of processes, or -1.
        rank: expected rank of this process, or -1.

    Examples:
        >>> dist.init_process_group(backend="mpi")
        >>> dist.is_initialized()
        True
    """
    global _backend
    name = Backend.MPI if backend is None else str(backend).lower()
    if name not in _KNOWN_BACKENDS:
        accepted = ", ".join(_KNOWN_BACKENDS)
        raise ValueError(f"unknown backend {backend!r}; mpiflow accepts {accepted} or None")
    if world_size not in (-1, None) and int(world_size) != world_group.size():
        raise ValueError(f"world_size={world_size} but the job was launched with "
                         f"{world_group.size()} processes")
    if rank not in (-1, None) and int(rank) != world_group.rank():
        raise ValueError(f"rank={rank} but MPI gave this process rank {world_group.rank()}")
    _backend = name
    if name == Backend.NCCL:
        global _connect_new_groups
        _connect_new_groups = _connect_nccl(world_group)
    if timeout is not None:  # PyTorch's timeout bounds every collective: the watchdog's limit
        from ..communication.watchdog import monitor as watchdog

        seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else timeout
        watchdog.set_timeout(float(seconds))


def is_initialized() -> bool:
    """Return True: the default group exists as soon as mpiflow is imported."""
    return True


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    """Release a group made by :func:`new_group`; every later call on it raises
    ``RuntimeError`` (on members and non-members alike). Destroying it again does nothing.

    The world group stays usable, unlike PyTorch's default group: mpiflow's own layers
    (``mpiflow.comm``, global tensors, the watchdog) run on it for the whole job, so
    ``destroy_process_group()`` with no group (or ``group.WORLD``) does nothing and
    ``is_initialized()`` stays True.
    """
    if group is None or group is world_group:
        return
    if not isinstance(group, ProcessGroup):
        raise TypeError(f"group must be a group from new_group() or None, got {group!r}")
    if group.destroyed:
        return
    free = getattr(getattr(group.comm, "mpi_comm", None), "Free", None)
    if free is not None:
        free()
    group.comm = None
    group.destroyed = True


def get_backend(group: ProcessGroup | None = None) -> str:
    """Return the backend name given to :func:`init_process_group` ("mpi" by default)."""
    resolve_group(group)
    return _backend


def get_rank(group: ProcessGroup | None = None) -> int:
    """Return this process's rank in ``group`` (the world by default), -1 outside it."""
    return resolve_group(group).rank()


def get_world_size(group: ProcessGroup | None = None) -> int:
    """Return the number of ranks in ``group`` (the world by default), -1 outside it."""
    g = resolve_group(group)
    return g.size() if g.is_member else -1


def get_global_rank(group: ProcessGroup, group_rank: int) -> int:
    """Translate a rank of ``group`` into a world rank."""
    g = resolve_group(group)
    if not 0 <= group_rank < g.size():
        raise ValueError(f"group_rank={group_rank} is not a rank of {g.describe()}")
    return g.ranks[group_rank]


def get_process_group_ranks(group: ProcessGroup) -> list[int]:
    """Return the world ranks of ``group`` in group-rank order."""
    return list(resolve_group(group).ranks)


def new_group(ranks: list[int] | None = None, timeout: Any = None, backend: str | None = None,
              pg_options: Any = None, *, comm: Any = None, **kwargs: Any) -> ProcessGroup:
    """Make a group of world ``ranks`` (None: all). Every rank of the world must call it.

    With ``comm``, an mpi4py communicator the program made itself (``Split``...), the group
    is that communicator's processes in its rank order, and only they call it
    (:func:`mpiflow.comm.from_mpi4py`).

    Args:
        ranks: world ranks; None for all (or, with ``comm``, those of ``comm``).
        timeout: accepted for torch's signature; unused.
        backend: accepted for torch's signature; unused.
        pg_options: accepted for torch's signature; unused.
        comm: an mpi4py intracommunicator to make the group over.

    Returns:
        The group.

    Examples:
        >>> x = numpy.ones(3)
        >>> evens = dist.new_group([r for r in range(dist.get_world_size()) if r % 2 == 0])
        >>> dist.all_reduce(x, group=evens)   # a no-op on odd ranks
        >>> from mpi4py import MPI
        >>> mine = dist.new_group(comm=MPI.COMM_WORLD.Split(dist.get_rank() % 2))
        >>> dist.all_reduce(x, group=mine)    # over the ranks of this rank's parity
    """
    group = group_from_mpi4py(comm, ranks) if comm is not None else _new_group(ranks)
    if _connect_new_groups and group.comm is not None:
        _connect_nccl(group)
    return group


_connect_new_groups = False  # set by init_process_group(backend="nccl") on a GPU


def _connect_nccl(group: ProcessGroup) -> bool:
    """Make ``group``'s NCCL communicator now, when its device arrays go over NCCL.

    Collective over the group. With it, point-to-point messages use the group's communicator,
    which exists before any message, instead of a pair's made at the first one (see
    :mod:`mpiflow.communication.gpu.nccl`). Returns whether it did; without CuPy, a device, or
    NCCL as the transport, it does nothing.
    """
    from .. import cuda
    from ..communication.mpi.communicator import MPICommunicator

    if not isinstance(group.comm, MPICommunicator) or not cuda.is_available():
        return False
    from ..communication.gpu.maker import device_communicator
    from ..communication.gpu.nccl import NCCLCommunicator

    device = device_communicator(group.comm)
    if not isinstance(device, NCCLCommunicator):
        return False
    device.connect()
    return True
