"""The collective registry: each operation, its debug fingerprint, who implements it, who shows it.

A collective touches several places: the :class:`~.communicator.Communicator` interface
(``OPERATIONS``), the MPI communicator and its fast paths, debug mode's fingerprint table, the
device communicators (CUDA-aware MPI, staged through host memory, NCCL), and the public
faces (``mpiflow.distributed``, ``mpiflow.comm``, the torch backend's process group). This
module names all of them for every operation, as data (it imports nothing), and
``tests/communication/test_registry.py`` checks the table against the code: an operation without
a fingerprint, a communicator kind that lacks a method it claims, or a face name the table
does not know fails there, not in a user's job under ``MPIFLOW_DEBUG=1``. docs/registries.md
is the checklist for adding a collective.

Examples:
    >>> entry = COLLECTIVES["all_gather"]
    >>> entry.fingerprint, entry.kinds
    ('all_gather', ('mpi', 'debug', 'sampled', 'cuda_aware', 'staged', 'nccl', 'fast'))
    >>> entry.distributed
    ('all_gather', 'all_gather_into_tensor')
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["COLLECTIVES", "DELEGATES", "KINDS", "NOT_COLLECTIVES", "Collective"]

#: Communicator kinds: name -> the class that implements the operations (``pkl5``: the object
#: collectives' functions in ``objects``, over ``mpi4py.util.pkl5``).
KINDS: dict[str, str] = {
    "mpi": "MPICommunicator",
    "debug": "DebugMPICommunicator",
    "sampled": "SampledMPICommunicator",  # debug's checks on a schedule (MPIFLOW_CHECK)
    "cuda_aware": "CudaAwareCommunicator",
    "staged": "StagedCommunicator",
    "nccl": "NCCLCommunicator",
    "fast": "FastPaths",
    "pkl5": "objects",
}

#: Communicator subclasses that implement nothing themselves: name -> the kind they inherit
#: every operation from.
DELEGATES: dict[str, str] = {
    "DirectMPICommunicator": "mpi",  # CUDA-aware MPI's direct path: MPICommunicator on device
}

_COMMUNICATORS = ("mpi", "debug", "sampled", "cuda_aware", "staged", "nccl")
_POINT_TO_POINT = ("mpi", "cuda_aware", "staged", "nccl")


@dataclass(frozen=True)
class Collective:
    """One operation and everything that must know of it.

    Attributes:
        name: the operation (a :class:`~.communicator.Communicator` method, or an object
            collective of ``objects``).
        fingerprint: the key of its debug-mode check: in ``debug_mode``'s fingerprint table
            for communicator operations, in ``objects``' (operation, root) check for the
            object collectives; None only for point-to-point calls, whose two sides differ.
        kinds: the communicator kinds (:data:`KINDS`) that implement it.
        fast: the names of its blocking fast paths (``FastPaths`` attributes), if any.
        distributed: the names of ``mpiflow.distributed.__all__`` that run it.
        comm: the names of ``mpiflow.comm.__all__`` that run it.
        torch: the methods of the torch backend's ``ProcessGroupMPIFlow`` that run it.
        point_to_point: a send or receive (no fingerprint: the ranks' calls differ).
    """

    name: str
    fingerprint: str | None
    kinds: tuple[str, ...] = _COMMUNICATORS
    fast: tuple[str, ...] = ()
    distributed: tuple[str, ...] = ()
    comm: tuple[str, ...] = ()
    torch: tuple[str, ...] = ()
    point_to_point: bool = False


def _collective(name: str, *, fast: tuple[str, ...] = (), distributed: tuple[str, ...] = (),
                comm: tuple[str, ...] = (), torch: tuple[str, ...] = ()) -> Collective:
    """A communicator collective: fingerprinted under its own name, on every kind."""
    kinds = (*_COMMUNICATORS, "fast") if fast else _COMMUNICATORS
    return Collective(name, name, kinds, fast, distributed, comm, torch)


def _object(name: str) -> Collective:
    return Collective(name, name, ("pkl5",), distributed=(name,))


_ENTRIES = (
    _collective("barrier", distributed=("barrier",), comm=("barrier",), torch=("barrier",)),
    _collective("all_reduce", fast=("all_reduce", "all_reduce_at"), distributed=("all_reduce",),
                comm=("all_reduce",), torch=("allreduce", "allreduce_coalesced")),
    _collective("reduce", distributed=("reduce",), comm=("reduce",), torch=("reduce",)),
    _collective("broadcast", fast=("broadcast",), distributed=("broadcast",),
                comm=("broadcast",), torch=("broadcast",)),
    _collective("all_gather", fast=("all_gather",),
                distributed=("all_gather", "all_gather_into_tensor"),
                comm=("all_gather", "all_gather_into_tensor"),
                torch=("allgather", "all_gather_single", "_allgather_base", "allgather_coalesced",
                       "all_gather_single_coalesced", "allgather_into_tensor_coalesced")),
    _collective("all_gather_v"),  # uneven shards: the boxing executor's S -> B
    _collective("gather", distributed=("gather",), comm=("gather",), torch=("gather",)),
    _collective("scatter", distributed=("scatter",), comm=("scatter",), torch=("scatter",)),
    _collective("reduce_scatter", fast=("reduce_scatter",),
                distributed=("reduce_scatter", "reduce_scatter_tensor"),
                comm=("reduce_scatter", "reduce_scatter_tensor"),
                torch=("reduce_scatter", "reduce_scatter_single", "_reduce_scatter_base",
                       "reduce_scatter_single_coalesced", "reduce_scatter_tensor_coalesced")),
    _collective("reduce_scatter_v"),  # uneven shards: the boxing executor's P -> S
    _collective("all_to_all", fast=("all_to_all",), distributed=("all_to_all_single",),
                torch=("all_to_all_single", "alltoall_base")),
    _collective("all_to_all_v", distributed=("all_to_all", "all_to_all_single"),
                comm=("all_to_all",), torch=("alltoall", "all_to_all_single", "alltoall_base")),
    # Point to point: no fingerprint, so the debug communicator inherits MPI's methods as
    # they are; the torch group's recv_anysource posts MPI's Irecv on its communicator itself.
    Collective("send", None, (*_POINT_TO_POINT, "fast"), fast=("send",),
               distributed=("send", "isend"), comm=("send",), torch=("send",),
               point_to_point=True),
    Collective("recv", None, (*_POINT_TO_POINT, "fast"), fast=("recv",), distributed=("recv",),
               comm=("recv",), point_to_point=True),
    Collective("irecv", None, _POINT_TO_POINT, distributed=("irecv",),
               torch=("recv", "recv_anysource"), point_to_point=True),
    _collective("split", distributed=("new_group",)),  # groups and mesh lines
    _collective("split_by_color"),
    _object("broadcast_object_list"),
    _object("all_gather_object"),
    _object("gather_object"),
    _object("scatter_object_list"),
)

#: Every collective operation, by name.
COLLECTIVES: dict[str, Collective] = {c.name: c for c in _ENTRIES}

#: Public names of the faces that are not collective operations, with what they are.
NOT_COLLECTIVES: dict[str, dict[str, str]] = {
    "distributed": {
        "Backend": "a type", "ProcessGroup": "a type", "ReduceOp": "a type", "Work": "a type",
        "reduce_op": "ReduceOp's deprecated name", "group": "the default group's holder",
        "init_process_group": "sets up the default group (NCCL connects it, by broadcast)",
        "destroy_process_group": "forgets a group", "get_backend": "a query",
        "get_global_rank": "a query", "get_process_group_ranks": "a query",
        "get_rank": "a query", "get_world_size": "a query", "is_available": "a query",
        "is_initialized": "a query", "is_mpi_available": "a query",
        "is_nccl_available": "a query",
        "sync_gradients": "a composite of all_reduce (the parallel layer)",
        "sync_initial_weights": "a composite of broadcast (the parallel layer)",
    },
    "comm": {"from_mpi4py": "wraps a user's mpi4py communicator as a group (a duplicate)"},
    "torch": {
        "getBackendName": "a query", "name": "a query", "group_name": "a query",
        "group_desc": "a query", "communicator": "the group's MPICommunicator",
        "shutdown": "frees the group's communicator (destroy_process_group calls it)",
    },
}
