"""Rules that ops of several families share: PyTorch's dim wrapping, the partial layouts,
the columns a distributed algorithm along one dim runs one by one.

Examples:
    >>> wrap_dim(-1, 3), len(keep_partial(2)), few_columns((100, 3), 0)
    (2, 3, True)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..layouts.sbp import partial_max, partial_min, partial_sum
from .engine import Signature

__all__ = ["COLUMNS", "few_columns", "keep_partial", "wrap_dim"]

# The most columns (elements per row beside the dim) that a distributed algorithm along a
# split dim (a sort, a selection, a scatter) runs one by one; with more, converting to a
# split of another dim (one all-to-all) and working locally moves the same bytes in one
# collective instead of several per column.
COLUMNS = 8


def few_columns(shape: Sequence[int], dim: int) -> bool:
    """Whether a tensor of ``shape`` has at most :data:`COLUMNS` columns beside ``dim``."""
    return bool(shape) and math.prod(shape) // max(shape[dim], 1) <= COLUMNS

_PARTIALS = (partial_sum, partial_max, partial_min)


def keep_partial(n_inputs: int = 1) -> list[Signature]:
    """``P..P -> P`` for every reduction: for ops that only move or select elements."""
    return [((p,) * n_inputs, p) for p in _PARTIALS]


def wrap_dim(dim: int, ndim: int, *, extra: int = 0) -> int:
    """``dim`` as a non-negative index into ``ndim + extra`` dims (PyTorch's wrapping).

    Raises:
        IndexError: ``dim`` outside ``[-(ndim + extra), ndim + extra - 1]``.
    """
    n = max(ndim + extra, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    return dim % n
