"""mpiflow's communication layer: the :class:`Communicator` interface and its MPI implementation.

The public faces :mod:`mpiflow.comm` (OneFlow) and :mod:`mpiflow.distributed` (PyTorch) are thin
shells over this layer; layouts and training build on it too. Its subpackages, from the bottom
up (``setup.cfg``'s contracts keep the imports pointing down):

- ``watchdog``: the per-call marker, the watchdog thread, hang and failure reports;
- ``fast``: the fast paths of the common collectives on host arrays;
- ``mpi``: the ``Communicator`` interface, ``MPICommunicator``, datatypes and groups;
- ``debug`` and ``gpu``, independent of each other: debug mode's checks and the collective
  counter; the NCCL, CUDA-aware and staged communicators of device arrays;
- ``collectives``: the torch-signature collectives, the object collectives and the
  deterministic SUM/AVG collectives that the faces call.
"""

from ..core.reduce_op import ReduceOp, check_reduce_dtype

# debug mode and the gpu maker plug into mpi at import (new_communicator's debug kind, the
# route of device arrays): imported here, so that no communicator is made before they have.
from .debug import mode as _debug_mode  # noqa: F401
from .debug import sampled as _sampled  # noqa: F401  (registers the communicator kind)
from .debug.counting import count_collectives
from .debug.mode import CollectiveMismatchError
from .gpu import maker as _gpu_maker  # noqa: F401
from .mpi.communicator import MessageSizeError, MPICommunicator, new_communicator
from .mpi.datatypes import ReducePlan, reduce_plan
from .mpi.interface import Communicator, Work
from .watchdog.failure import CollectiveError

__all__ = [
    "CollectiveError",
    "CollectiveMismatchError",
    "Communicator",
    "MPICommunicator",
    "MessageSizeError",
    "ReducePlan",
    "ReduceOp",
    "Work",
    "check_reduce_dtype",
    "count_collectives",
    "new_communicator",
    "reduce_plan",
]
