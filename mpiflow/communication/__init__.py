"""mpiflow's communication layer: the :class:`Communicator` interface and its MPI implementation.

The public faces :mod:`mpiflow.comm` (OneFlow) and :mod:`mpiflow.distributed` (PyTorch) are thin
shells over this layer; layouts and training build on it too.
"""

from ..core.reduce_op import ReduceOp, check_reduce_dtype

# debug_mode and device plug into mpi at import (new_communicator's debug kind, the route of
# device arrays): imported here, so that no communicator is made before they have.
from . import debug_mode, device  # noqa: F401
from .communicator import Communicator, Work
from .datatypes import ReducePlan, reduce_plan
from .debug import count_collectives
from .mpi import MPICommunicator, new_communicator

__all__ = [
    "Communicator",
    "MPICommunicator",
    "ReduceOp",
    "ReducePlan",
    "Work",
    "check_reduce_dtype",
    "count_collectives",
    "new_communicator",
    "reduce_plan",
]
