"""Rules that ops of several families share: PyTorch's dim wrapping, the partial layouts,
the columns a distributed algorithm along one dim runs one by one, the short table that a
lookup makes whole rather than routing its many queries.

Examples:
    >>> wrap_dim(-1, 3), len(keep_partial(2)), few_columns((100, 3), 0)
    (2, 3, True)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..layouts.sbp import partial_max, partial_min, partial_sum
from .engine import Signature

__all__ = ["COLUMNS", "SHORT", "few_columns", "keep_partial", "short_table", "wrap_dim"]

# The most columns (elements per row beside the dim) that a distributed algorithm along a
# split dim (a sort, a selection, a scatter) runs one by one; with more, converting to a
# split of another dim (one all-to-all) and working locally moves the same bytes in one
# collective instead of several per column.
COLUMNS = 8


def few_columns(shape: Sequence[int], dim: int) -> bool:
    """Whether a tensor of ``shape`` has at most :data:`COLUMNS` columns beside ``dim``."""
    return bool(shape) and math.prod(shape) // max(shape[dim], 1) <= COLUMNS


# The most elements of a split table (a sorted sequence searched, rows taken by index) that a
# lookup with more queries makes whole (B) rather than running its collective signature: that
# routes every query to the rank holding its entry, so a few class labels would draw all the
# queries onto one or two ranks, while making the table whole moves at most this much.
SHORT = 4096


def short_table(table: Sequence[int], queries: int) -> bool:
    """Whether a split table of ``table``'s shape is made whole for ``queries`` lookups: at
    most :data:`SHORT` elements, fewer rows than queries.

    Examples:
        >>> short_table((3,), 1000), short_table((3,), 2), short_table((10**6,), 10**7)
        (True, False, False)
    """
    return bool(table) and math.prod(table) <= SHORT and table[0] < queries

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
