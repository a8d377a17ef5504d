"""Parallel wrappers of modules: ``DistributedDataParallel``."""

from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
