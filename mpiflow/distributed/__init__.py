"""PyTorch's ``torch.distributed`` API on MPI: collectives, point-to-point, groups, objects.

Everything PyTorch's own MPI backend lacks works here: reduce_scatter, all_gather_into_tensor,
AVG and the bitwise ops, groups on every call, and async handles with ``wait()`` and
``is_completed()``.

Examples:
    >>> import numpy, mpiflow.distributed as dist
    >>> x = numpy.ones(4, dtype=numpy.float32)
    >>> dist.all_reduce(x, op=dist.ReduceOp.SUM)
"""

from ..communication import ReduceOp, Work
from ..communication.collectives.objects import (
    all_gather_object,
    broadcast_object_list,
    gather_object,
    scatter_object_list,
)
from ..communication.collectives.torch_api import (
    all_gather,
    all_gather_into_tensor,
    all_reduce,
    all_to_all,
    all_to_all_single,
    barrier,
    broadcast,
    gather,
    irecv,
    isend,
    recv,
    reduce,
    reduce_scatter,
    reduce_scatter_tensor,
    scatter,
    send,
)
from ..communication.mpi.group import ProcessGroup
from ..parallel.sync import sync_gradients, sync_initial_weights
from .world import (
    Backend,
    destroy_process_group,
    get_backend,
    get_global_rank,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    group,
    init_process_group,
    is_available,
    is_initialized,
    is_mpi_available,
    is_nccl_available,
    new_group,
)

reduce_op = ReduceOp  # the deprecated PyTorch spelling that older scripts (and the seeds) use

__all__ = [
    "Backend",
    "ProcessGroup",
    "ReduceOp",
    "Work",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_reduce",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "broadcast",
    "broadcast_object_list",
    "destroy_process_group",
    "gather",
    "gather_object",
    "get_backend",
    "get_global_rank",
    "get_process_group_ranks",
    "get_rank",
    "get_world_size",
    "group",
    "init_process_group",
    "irecv",
    "is_available",
    "is_initialized",
    "is_mpi_available",
    "is_nccl_available",
    "isend",
    "new_group",
    "recv",
    "reduce",
    "reduce_op",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
    "scatter_object_list",
    "send",
    "sync_gradients",
    "sync_initial_weights",
]
