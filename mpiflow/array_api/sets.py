"""Set functions of the standard: ``unique_all``, ``unique_counts``, ``unique_inverse``,
``unique_values``, on the torch-named ``unique`` (sorted, with ``return_inverse`` and
``return_counts``) of the flattened array; its values stay distributed.

``unique_all``'s ``indices`` (the first occurrence of each value) are the stable argsort's
positions at the starts of the groups: an exclusive scan of the counts, then a take.

Examples:
    >>> from mpiflow import array_api as xp
    >>> xp.unique_values(xp.asarray([3, 1, 3, 2])).tolist()  # doctest: +SKIP
    [1, 2, 3]
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..ops import pointwise as pw
from ..ops import scans, sorting
from ..ops import shape as shape_ops
from ..tensors.tensor import Tensor
from .common import array, face

__all__ = ["unique_all", "unique_counts", "unique_inverse", "unique_values"]


class UniqueAllResult(NamedTuple):
    """``unique_all``'s result."""

    values: Tensor
    indices: Tensor
    inverse_indices: Tensor
    counts: Tensor


class UniqueCountsResult(NamedTuple):
    """``unique_counts``'s result."""

    values: Tensor
    counts: Tensor


class UniqueInverseResult(NamedTuple):
    """``unique_inverse``'s result."""

    values: Tensor
    inverse_indices: Tensor


def _flat(x: Any, name: str) -> Tensor:
    return shape_ops.reshape(array(x, name), (-1,))


def unique_all(x: Tensor, /) -> UniqueAllResult:
    """The distinct values of ``x`` (sorted), the index of each one's first occurrence in the
    flattened ``x``, each element's index into the values (``x``'s shape), and the counts."""
    flat = _flat(x, "unique_all")
    values, inverse, counts = face("unique")(flat, sorted=True, return_inverse=True,
                                             return_counts=True)
    starts = pw.sub(scans.cumsum(counts, 0), counts)  # where each group starts, sorted
    order = sorting.argsort(flat, 0, stable=True)
    indices = order[starts]
    return UniqueAllResult(values, indices, shape_ops.reshape(inverse, tuple(x.shape)), counts)


def unique_counts(x: Tensor, /) -> UniqueCountsResult:
    """The distinct values of ``x`` (sorted) and how often each occurs."""
    values, counts = face("unique")(_flat(x, "unique_counts"), sorted=True,
                                    return_counts=True)
    return UniqueCountsResult(values, counts)


def unique_inverse(x: Tensor, /) -> UniqueInverseResult:
    """The distinct values of ``x`` (sorted) and each element's index into them (``x``'s
    shape)."""
    values, inverse = face("unique")(_flat(x, "unique_inverse"), sorted=True,
                                     return_inverse=True)
    return UniqueInverseResult(values, shape_ops.reshape(inverse, tuple(x.shape)))


def unique_values(x: Tensor, /) -> Tensor:
    """The distinct values of ``x``, sorted."""
    return face("unique")(_flat(x, "unique_values"), sorted=True)
