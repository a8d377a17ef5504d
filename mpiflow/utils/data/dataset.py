"""Datasets: ``Dataset`` (map-style), ``TensorDataset``, ``Subset``.

Examples:
    >>> from mpiflow.utils.data import TensorDataset
    >>> ds = TensorDataset(flow.arange(6).reshape(3, 2), flow.tensor([0, 1, 0]))
    >>> len(ds), ds[1][1].item()
    (3, 1)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, TypeVar

import numpy

from ...tensors.tensor import Tensor

__all__ = ["Dataset", "Subset", "TensorDataset"]

T_co = TypeVar("T_co", covariant=True)


class Dataset(Generic[T_co]):
    """A map-style dataset: ``dataset[i]`` is sample ``i``; subclasses define ``__getitem__``
    and ``__len__``.

    Examples:
        >>> class Squares(Dataset):
        ...     def __len__(self): return 4
        ...     def __getitem__(self, i): return i * i
        >>> Squares()[3]
        9
    """

    def __getitem__(self, index: int) -> T_co:
        raise NotImplementedError(f"{type(self).__name__} lacks __getitem__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} lacks __len__")


def _rows(value: Any) -> Any:
    """Row access for a local tensor or array: the tensor's array (no copy)."""
    if isinstance(value, Tensor):
        if value.is_global:
            raise TypeError("TensorDataset holds local data (each rank's own samples); call "
                            "to_local() or numpy() on a global tensor first")
        return value._data
    return numpy.asarray(value)


class TensorDataset(Dataset[tuple[Tensor, ...]]):
    """Samples are rows of tensors (or arrays) of the same first dim: ``ds[i]`` is the tuple
    of their rows ``i``, as tensors sharing memory with them.

    Args:
        tensors: local tensors or numpy arrays with equal ``shape[0]``.

    Examples:
        >>> ds = TensorDataset(flow.zeros(4, 3), flow.arange(4))
        >>> [tuple(t.shape) for t in ds[0]]
        [(3,), ()]
    """

    def __init__(self, *tensors: Any) -> None:
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        arrays = [_rows(t) for t in tensors]
        if any(a.ndim == 0 for a in arrays) or any(a.shape[0] != arrays[0].shape[0]
                                                   for a in arrays):
            raise ValueError("Size mismatch between tensors: "
                             + ", ".join(str(tuple(a.shape)) for a in arrays))
        self.tensors = tuple(t if isinstance(t, Tensor) else Tensor(a)
                             for t, a in zip(tensors, arrays))
        self._arrays = arrays

    def __getitem__(self, index: int) -> tuple[Tensor, ...]:
        return tuple(Tensor(a[index, ...]) for a in self._arrays)

    def __len__(self) -> int:
        return int(self._arrays[0].shape[0])


class Subset(Dataset[T_co]):
    """The samples of ``dataset`` at ``indices``, in that order.

    Examples:
        >>> len(Subset(TensorDataset(flow.zeros(10)), [0, 5, 7]))
        3
    """

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, index: int) -> T_co:
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)
