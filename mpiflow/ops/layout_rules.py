"""Rules that ops of several families share: PyTorch's dim wrapping, the partial layouts.

Examples:
    >>> wrap_dim(-1, 3), len(keep_partial(2))
    (2, 3)
"""

from __future__ import annotations

from ..layouts.sbp import partial_max, partial_min, partial_sum
from .engine import Signature

__all__ = ["keep_partial", "wrap_dim"]

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
