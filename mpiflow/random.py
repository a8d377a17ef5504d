"""``mpiflow.random``: the generator and the random fills (the implementation is
:mod:`mpiflow.tensors.random`).
"""

from .tensors.random import *  # noqa: F403
from .tensors.random import __all__ as __all__
