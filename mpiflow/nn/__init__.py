"""Neural networks, as ``torch.nn``: modules and parameters, layers, losses, initialization.

``mpiflow.nn.functional`` holds the stateless functions, ``mpiflow.nn.init`` the initializers.
Modules hold local or global parameters; ``module.to_global(placement, sbp)`` lays out a whole
model (data parallel with ``B`` weights and an ``S(0)`` batch, or model parallel with split
weights), and the same code trains it.

Examples:
    >>> import mpiflow.nn as nn
    >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    >>> loss = nn.CrossEntropyLoss()(net(flow.randn(5, 4)), flow.tensor([0, 1, 2, 0, 1]))
    >>> loss.backward()
"""

from . import (
    functional,
    graph,
    init,
    parallel,
    utils,
)
from .graph import Graph
from .modules import *  # noqa: F403 - the layers are this package's API
from .modules import __all__ as _modules_all

__all__ = ["Graph", "functional", "graph", "init", "parallel", "utils", *_modules_all]
