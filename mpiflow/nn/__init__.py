"""Neural-network building blocks. ``mpiflow.nn.functional`` holds the stateless functions."""

from . import functional

__all__ = ["functional"]
