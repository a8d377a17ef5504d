"""The communicator interface and its MPI implementation.

Modules: ``interface`` (``Communicator``, ``Work``: what every implementation provides),
``communicator`` (``MPICommunicator`` and ``new_communicator``), ``datatypes`` (how a dtype
and a ``ReduceOp`` become an MPI reduction) and ``group`` (process groups: a set of world ranks
and their communicator). ``mpiflow.communication.mpi.<name>`` keeps giving the public names of
``communicator``.
"""

from .communicator import *  # noqa: F403
from .communicator import __all__ as __all__
