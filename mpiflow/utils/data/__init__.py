"""Datasets, samplers and the data loader, as ``torch.utils.data``.

Examples:
    >>> from mpiflow.utils.data import DataLoader, DistributedSampler, TensorDataset
    >>> ds = TensorDataset(flow.randn(100, 8), flow.randint(0, 3, (100,)))
    >>> sampler = DistributedSampler(ds, shuffle=True, seed=0)     # this rank's share
    >>> loader = DataLoader(ds, batch_size=16, sampler=sampler)
    >>> for epoch in range(2):
    ...     sampler.set_epoch(epoch)
    ...     for x, y in loader:
    ...         pass
"""

from .dataloader import DataLoader, default_collate, default_convert
from .dataset import Dataset, Subset, TensorDataset
from .distributed import DistributedSampler
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["BatchSampler", "DataLoader", "Dataset", "DistributedSampler", "RandomSampler",
           "Sampler", "SequentialSampler", "Subset", "TensorDataset", "default_collate",
           "default_convert"]
