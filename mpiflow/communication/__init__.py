"""mpiflow's communication layer: the :class:`Communicator` interface and its MPI implementation.

The public faces :mod:`mpiflow.comm` (OneFlow) and :mod:`mpiflow.distributed` (PyTorch) are thin
shells over this layer; layouts and training build on it too.
"""

from ..core.reduce_op import ReduceOp, check_reduce_dtype
from .communicator import Communicator, Work
from .datatypes import ReducePlan, reduce_plan
from .debug import count_collectives
from .mpi import MPICommunicator

__all__ = [
    "Communicator",
    "MPICommunicator",
    "ReduceOp",
    "ReducePlan",
    "Work",
    "check_reduce_dtype",
    "count_collectives",
    "reduce_plan",
]
