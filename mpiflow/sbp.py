"""``mpiflow.sbp``: how a global tensor is laid out on each mesh axis: ``split(dim)``,
``broadcast``, ``partial_sum`` (the implementation is :mod:`mpiflow.layouts.sbp`).

Example:
    >>> print(flow.sbp.split(0))
    S(0)
"""

from .layouts.sbp import *  # noqa: F403
from .layouts.sbp import __all__ as __all__
