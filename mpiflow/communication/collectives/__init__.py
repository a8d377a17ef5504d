"""The collectives the upper layers call: PyTorch's ``torch.distributed`` signatures
(``torch_api``), the object collectives (``objects``, on ``mpi4py.util.pkl5``) and the
deterministic SUM/AVG collectives (``deterministic``). ``mpiflow.communication.collectives.<name>``
keeps giving the public names of ``torch_api``.
"""

from .torch_api import *  # noqa: F403
from .torch_api import __all__ as __all__
