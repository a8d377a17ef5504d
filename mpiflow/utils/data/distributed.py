"""``DistributedSampler``: each rank's share of a dataset, with PyTorch's rules.

Examples:
    >>> from mpiflow.utils.data import DistributedSampler
    >>> list(DistributedSampler(range(10), num_replicas=4, rank=2, shuffle=False))
    [2, 6, 0]
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sized

import numpy

from ...runtime import topology
from .sampler import Sampler

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler):
    """The indices of one replica (rank): PyTorch's ``DistributedSampler`` semantics.

    Every rank builds the same index list: ``range(N)``, or with ``shuffle`` a permutation
    seeded by ``seed + epoch``; pads it to ``total_size = ceil(N / R) * R`` by repeating it
    from the start (or, with ``drop_last``, cuts it to ``floor(N / R) * R``); then rank ``r``
    takes ``indices[r::R]``. So every rank gets ``num_samples`` indices, and together they
    cover the dataset once per epoch (plus the padding).

    The permutation is ``numpy.random.default_rng(seed + epoch).permutation(N)``: the same on
    every rank and for every ``num_replicas``, but not PyTorch's ``torch.randperm`` order
    (that needs torch's generator); its properties are the same.

    Args:
        dataset: anything with ``len()``.
        num_replicas: the number of ranks (default: the world size).
        rank: this replica (default: this process's rank).
        shuffle: shuffle the indices, differently each epoch (``set_epoch``).
        seed: the base seed; must be the same on every rank.
        drop_last: drop the tail instead of padding.

    Examples:
        >>> [list(DistributedSampler(range(10), 4, r, shuffle=False, drop_last=True))
        ...  for r in range(4)]
        [[0, 4], [1, 5], [2, 6], [3, 7]]
    """

    def __init__(self, dataset: Sized, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        if num_replicas is None:
            num_replicas = topology.size
        if rank is None:
            rank = topology.rank
        if num_replicas <= 0:
            raise ValueError(f"num_replicas should be a positive integer, got {num_replicas}")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            rng = numpy.random.default_rng(self.seed + self.epoch)
            indices = [int(i) for i in rng.permutation(n)]
        else:
            indices = list(range(n))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[:self.total_size]
        assert len(indices) == self.total_size
        mine = indices[self.rank:self.total_size:self.num_replicas]
        assert len(mine) == self.num_samples
        return iter(mine)

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch: with ``shuffle``, each epoch has its own order (the same on every
        rank). Call it before each epoch's iteration."""
        self.epoch = epoch
