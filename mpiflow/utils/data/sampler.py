"""Samplers: the order in which a :class:`DataLoader` visits a dataset.

Examples:
    >>> from mpiflow.utils.data import BatchSampler, SequentialSampler
    >>> list(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=False))
    [[0, 1], [2, 3], [4]]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sized
from typing import Any

import numpy

__all__ = ["BatchSampler", "RandomSampler", "Sampler", "SequentialSampler", "permutation"]


class Sampler:
    """Base of the samplers: an iterable of dataset indices (``__len__`` where known)."""

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError

    def __len__(self) -> int:
        raise TypeError(f"{type(self).__name__} has no len()")


class SequentialSampler(Sampler):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


def permutation(n: int, generator: numpy.random.Generator | None = None) -> list[int]:
    """A random permutation of ``range(n)``: from ``generator``, else from mpiflow's default
    (counter-based) generator, so that ranks making the same calls draw the same order."""
    if generator is not None:
        return [int(i) for i in generator.permutation(n)]
    from ...tensors.random import randperm

    return [int(i) for i in randperm(n).numpy()]


class RandomSampler(Sampler):
    """The indices in a new random order each pass.

    Args:
        data_source: the dataset (only its length is used).
        generator: a ``numpy.random.Generator`` (default: mpiflow's default generator).
        seed: make a generator ``numpy.random.default_rng(seed)``: the passes then follow a
            fixed sequence of orders.

    Examples:
        >>> sorted(RandomSampler(range(4), seed=0))
        [0, 1, 2, 3]
    """

    def __init__(self, data_source: Sized, generator: numpy.random.Generator | None = None,
                 seed: int | None = None) -> None:
        self.data_source = data_source
        if generator is None and seed is not None:
            generator = numpy.random.default_rng(seed)
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        return iter(permutation(len(self.data_source), self.generator))

    def __len__(self) -> int:
        return len(self.data_source)


class BatchSampler(Sampler):
    """Lists of ``batch_size`` indices from ``sampler`` (the last one shorter unless
    ``drop_last``).

    Examples:
        >>> len(BatchSampler(range(10), 3, drop_last=True))
        3
    """

    def __init__(self, sampler: Iterable[Any], batch_size: int, drop_last: bool) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[Any]]:
        batch: list[Any] = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)
