"""``DataLoader``: batches of a dataset as mpiflow tensors, and ``default_collate``.

Each rank runs its own loader on its own samples (give it a :class:`DistributedSampler` for
data parallel training); batches are local tensors, which ``to_global(placement, split(0))``
joins into one global batch.

Examples:
    >>> from mpiflow.utils.data import DataLoader, TensorDataset
    >>> loader = DataLoader(TensorDataset(flow.arange(10)), batch_size=4)
    >>> [batch[0].tolist() for batch in loader]
    [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
"""

from __future__ import annotations

import collections.abc
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy

from ...core.array_module import array_module
from ...tensors.tensor import Tensor
from .dataset import Dataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader", "default_collate", "default_convert"]


def _stack_tensors(batch: Sequence[Tensor]) -> Tensor:
    if any(t.is_global for t in batch):
        from ...ops.join import stack

        return stack(list(batch))
    shapes = {tuple(t.shape) for t in batch}
    if len(shapes) > 1:
        raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                           f"{sorted(shapes)}")
    xp = array_module(batch[0]._data)
    return Tensor(xp.stack([t._data for t in batch]))


def default_collate(batch: Sequence[Any]) -> Any:
    """Merge a list of samples into a batch, as PyTorch's ``default_collate``.

    Tensors and numpy arrays are stacked along a new first dim; Python floats give a float64
    tensor, ints int64, bools bool; strings stay a list; dicts, named tuples and sequences are
    collated field by field (tuples and lists give lists).

    Examples:
        >>> out = default_collate([(flow.zeros(2), 1), (flow.ones(2), 0)])
        >>> tuple(out[0].shape), out[1].tolist()
        ((2, 2), [1, 0])
    """
    elem = batch[0]
    if isinstance(elem, Tensor):
        return _stack_tensors(batch)
    if isinstance(elem, (numpy.ndarray, numpy.generic)):
        if elem.dtype.kind in "OSUV":
            raise TypeError(f"default_collate: numpy arrays of dtype {elem.dtype} cannot be "
                            "made into tensors")
        return Tensor(numpy.stack([numpy.asarray(e) for e in batch]))
    if isinstance(elem, float):
        return Tensor(numpy.array(batch, dtype=numpy.float64))
    if isinstance(elem, bool):
        return Tensor(numpy.array(batch, dtype=bool))
    if isinstance(elem, int):
        return Tensor(numpy.array(batch, dtype=numpy.int64))
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        merged = {key: default_collate([d[key] for d in batch]) for key in elem}
        try:
            return type(elem)(merged)  # type: ignore[call-arg]
        except TypeError:
            return merged
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a named tuple
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(sample) != len(elem) for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        return [default_collate(list(s)) for s in zip(*batch)]
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, "
                    f"dicts or lists; found {type(elem)}")


def default_convert(data: Any) -> Any:
    """One sample with numpy arrays made tensors (for ``batch_size=None``).

    Examples:
        >>> default_convert({"x": numpy.zeros(2)})["x"].shape
        mpiflow.Size([2])
    """
    if isinstance(data, numpy.ndarray) and data.dtype.kind not in "OSUV":
        return Tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return {key: default_convert(value) for key, value in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, (list, tuple)):
        return type(data)(default_convert(d) for d in data)
    return data


class DataLoader:
    """Iterate over a dataset in batches.

    Args:
        dataset: a map-style dataset (``__getitem__`` and ``__len__``).
        batch_size: samples per batch; None yields single samples, uncollated.
        shuffle: a new random order each epoch (from ``generator``, ``seed`` or mpiflow's
            default generator).
        sampler: the order of the indices (excludes ``shuffle``), e.g. a
            :class:`DistributedSampler`.
        batch_sampler: yields lists of indices (excludes ``batch_size``, ``shuffle``,
            ``sampler``, ``drop_last``).
        num_workers: accepted for compatibility; loading runs in this process.
        collate_fn: merges a list of samples (default: :func:`default_collate`).
        drop_last: drop the last, incomplete batch.
        generator: a ``numpy.random.Generator`` for shuffling.
        seed: shuffle with ``numpy.random.default_rng(seed)`` (a fixed sequence of orders).

    Examples:
        >>> from mpiflow.utils.data import TensorDataset
        >>> loader = DataLoader(TensorDataset(flow.arange(10)), batch_size=4, drop_last=True)
        >>> len(loader)
        2
    """

    def __init__(self, dataset: Any, batch_size: int | None = 1, shuffle: bool = False,
                 sampler: Sampler | Iterable[Any] | None = None,
                 batch_sampler: Iterable[Sequence[Any]] | None = None, num_workers: int = 0,
                 collate_fn: Callable[[list[Any]], Any] | None = None,
                 pin_memory: bool = False, drop_last: bool = False,
                 generator: numpy.random.Generator | None = None,
                 seed: int | None = None) -> None:
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None:
            sampler = RandomSampler(dataset, generator, seed) if shuffle else \
                SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset: Dataset[Any] | Any = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if batch_sampler is not None else default_convert)

    def __iter__(self) -> Iterator[Any]:
        if self.batch_sampler is None:
            for index in self.sampler:
                yield self.collate_fn(self.dataset[index])
            return
        for indices in self.batch_sampler:
            yield self.collate_fn([self.dataset[i] for i in indices])

    def __len__(self) -> int:
        source = self.batch_sampler if self.batch_sampler is not None else self.sampler
        return len(source)  # type: ignore[arg-type]
