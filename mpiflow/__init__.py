"""mpiflow: MPI-native tensors with a consistent global view, collectives and training.

``import mpiflow`` initializes MPI, checks that the launcher matches the MPI library, and makes an
uncaught exception on any rank abort the whole job instead of leaving the others waiting.

Example:
    >>> import mpiflow as flow
    >>> flow.env.get_rank(), flow.env.get_world_size()
    (0, 1)
"""

from . import _runtime

_runtime.install_abort_handler()

from . import comm, distributed, env  # noqa: E402
from ._version import __version__  # noqa: E402
from .communication import ReduceOp  # noqa: E402

__all__ = ["ReduceOp", "__version__", "comm", "distributed", "env"]
