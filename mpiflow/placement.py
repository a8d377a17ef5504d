"""``mpiflow.placement``: the ranks (and device type) a global tensor lives on (the
implementation is :mod:`mpiflow.layouts.placement`).
"""

from .layouts.placement import *  # noqa: F403
from .layouts.placement import __all__ as __all__
