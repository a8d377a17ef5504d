"""Data parallelism over the communication layer: gradient sync helpers and their buckets.

:class:`mpiflow.nn.parallel.DistributedDataParallel` is built on these; ``mpiflow.distributed``
re-exports the helpers with PyTorch-tutorial names.

Examples:
    >>> from mpiflow.parallel import sync_gradients, sync_initial_weights
"""

from .sync import sync_gradients, sync_initial_weights

__all__ = ["sync_gradients", "sync_initial_weights"]
