"""Optimizers and learning-rate schedules, as ``torch.optim``.

Updates are mpiflow ops under ``no_grad``, written into the parameters in place: a global
parameter keeps its layout, and its state has the same layout.

Examples:
    >>> import mpiflow.optim as optim
    >>> net = nn.Linear(4, 2)
    >>> opt = optim.Adam(net.parameters(), lr=1e-3)
    >>> sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
"""

from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "lr_scheduler"]
