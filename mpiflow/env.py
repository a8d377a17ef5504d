"""Where this process runs: rank, world size, and its place on the node and in the cluster.

All values are computed once when mpiflow is imported, so these functions never communicate:
calling them on some ranks only is safe. They are correct under ``mpiexec``, ``srun`` and other
batch-system launchers, and under a plain ``python script.py`` (one rank).

Examples:
    >>> import mpiflow as flow
    >>> flow.env.get_rank(), flow.env.get_world_size()
    (0, 1)
"""

from __future__ import annotations

from .layouts.placement import Placement
from .runtime import topology

__all__ = [
    "all_device_placement",
    "get_rank",
    "get_world_size",
    "get_local_rank",
    "get_local_world_size",
    "get_node_size",
    "get_node_rank",
    "get_gpu_transport",
]


def all_device_placement(device_type: str) -> Placement:
    """The placement of every rank of the world on ``device_type`` ("cpu" or "cuda").

    OneFlow's ``flow.env.all_device_placement``; the same as ``flow.placement.all``.

    Examples:
        >>> flow.env.all_device_placement("cpu") == flow.placement.all("cpu")
        True
    """
    return Placement.all(device_type)


def get_rank() -> int:
    """Return this process's rank in the world (``MPI.COMM_WORLD``).

    Returns:
        An integer in ``[0, get_world_size())``.
    """
    return topology.rank


def get_world_size() -> int:
    """Return the number of processes in the job."""
    return topology.size


def get_local_rank() -> int:
    """Return this process's rank among the processes on its node (shared-memory domain).

    Use it to pick a GPU: ``local_rank % device_count``.
    """
    return topology.local_rank


def get_local_world_size() -> int:
    """Return the number of processes on this process's node."""
    return topology.local_size


def get_node_size() -> int:
    """Return the number of nodes the job spans."""
    return topology.node_size


def get_node_rank() -> int:
    """Return the index of this process's node, nodes numbered by their lowest global rank."""
    return topology.node_rank


def get_gpu_transport() -> str:
    """Return how device (CuPy) arrays travel between ranks, and why, in one line.

    ``"nccl (...)"``, ``"cuda-aware-mpi (...)"`` or ``"staged-mpi (...)"``, chosen from
    ``MPIFLOW_BACKEND``, CuPy's NCCL and the MPI library's CUDA support (see docs/gpu.md);
    ``"error: ..."`` when those settings are malformed. Imports CuPy when it is installed;
    never communicates.
    """
    from .communication.gpu.transport import describe_transport

    return describe_transport()
