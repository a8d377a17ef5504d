"""mpiflow's communication layer: the :class:`Communicator` interface and its MPI implementation.

The public faces :mod:`mpiflow.comm` (OneFlow) and :mod:`mpiflow.distributed` (PyTorch) are thin
shells over this layer; layouts and training build on it too.
"""

from .communicator import Communicator, Work
from .datatypes import ReducePlan, reduce_plan
from .debug import count_collectives
from .mpi import MPICommunicator
from .reduce_op import ReduceOp, check_reduce_dtype

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
