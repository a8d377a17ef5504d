"""SBP layouts: how a global tensor's logical value is laid out along one placement (mesh) axis.

- ``split(dim)`` (``S(d)``): each rank holds a slab of dimension ``dim``, by the balanced rule
  (the first ``n % k`` ranks hold one more row, as ``numpy.array_split``);
- ``broadcast`` (``B``): every rank holds the whole value;
- ``partial_sum`` / ``partial_max`` / ``partial_min`` (``P``, ``P(max)``, ``P(min)``): every rank
  holds a value of the full shape and the logical value is their sum (max, min).

Examples:
    >>> import mpiflow as flow
    >>> flow.sbp.split(0)
    mpiflow.sbp.split(dim=0)
    >>> str(flow.sbp.split(0)), str(flow.sbp.broadcast), str(flow.sbp.partial_sum)
    ('S(0)', 'B', 'P')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..core.errors import GlobalTensorError
from ..core.reduce_op import ReduceOp

__all__ = [
    "Broadcast",
    "Partial",
    "SbpParallel",
    "Split",
    "balanced_bounds",
    "balanced_sizes",
    "broadcast",
    "normalize_sbp",
    "partial_max",
    "partial_min",
    "partial_sum",
    "sbp",
    "split",
]


class SbpParallel:
    """Base of the three layout kinds; instances are small frozen values."""

    __slots__ = ()

    def is_split(self) -> bool:
        return isinstance(self, Split)

    def is_broadcast(self) -> bool:
        return isinstance(self, Broadcast)

    def is_partial(self) -> bool:
        return isinstance(self, Partial)

    def __call__(self) -> SbpParallel:
        """The layout itself: OneFlow's programs write ``flow.sbp.broadcast()`` as well as
        ``flow.sbp.broadcast``."""
        return self


sbp = SbpParallel  # OneFlow's name of the type: isinstance(x, flow.sbp.sbp)


@dataclass(frozen=True, repr=False)
class Split(SbpParallel):
    """``S(dim)``: ranks hold balanced slabs of dimension ``dim``."""

    dim: int

    def __post_init__(self) -> None:
        if isinstance(self.dim, bool) or not isinstance(self.dim, int) or self.dim < 0:
            raise GlobalTensorError(f"split dim must be a non-negative int, got {self.dim!r}")

    def __repr__(self) -> str:
        return f"mpiflow.sbp.split(dim={self.dim})"

    def __str__(self) -> str:
        return f"S({self.dim})"


@dataclass(frozen=True, repr=False)
class Broadcast(SbpParallel):
    """``B``: every rank holds the whole value."""

    def __repr__(self) -> str:
        return "mpiflow.sbp.broadcast"

    def __str__(self) -> str:
        return "B"


_PARTIAL_OPS = (ReduceOp.SUM, ReduceOp.MAX, ReduceOp.MIN)


@dataclass(frozen=True, repr=False)
class Partial(SbpParallel):
    """``P``: every rank holds a full-shape value; the logical value is their reduction."""

    op: ReduceOp = ReduceOp.SUM

    def __post_init__(self) -> None:
        if self.op not in _PARTIAL_OPS:
            raise GlobalTensorError(f"partial layouts reduce with SUM, MAX or MIN, got {self.op!r}")

    def __repr__(self) -> str:
        return f"mpiflow.sbp.partial_{self.op.name.lower()}"

    def __str__(self) -> str:
        return "P" if self.op is ReduceOp.SUM else f"P({self.op.name.lower()})"


def split(dim: int = 0) -> Split:
    """Return the layout that splits dimension ``dim`` across the ranks of a mesh axis.

    Args:
        dim: the tensor dimension (non-negative).

    Examples:
        >>> split(1)
        mpiflow.sbp.split(dim=1)
    """
    return Split(dim)


broadcast = Broadcast()
partial_sum = Partial(ReduceOp.SUM)
partial_max = Partial(ReduceOp.MAX)
partial_min = Partial(ReduceOp.MIN)

SbpLike = SbpParallel | Sequence[SbpParallel]


def normalize_sbp(value: Any, mesh_ndim: int) -> tuple[SbpParallel, ...]:
    """Return ``value`` (one layout or one per mesh axis) as a tuple of ``mesh_ndim`` layouts.

    Raises:
        TypeError: an entry is not a layout.
        ValueError: the number of entries differs from the mesh's dimensions.
    """
    items = (value,) if isinstance(value, SbpParallel) else tuple(value)
    for item in items:
        if not isinstance(item, SbpParallel):
            raise TypeError(f"sbp entries must be mpiflow.sbp layouts, got {item!r}")
    if len(items) != mesh_ndim:
        raise GlobalTensorError(
            f"the placement has {mesh_ndim} mesh dimension(s) but {len(items)} sbp "
            f"entries were given: {'(' + ', '.join(map(str, items)) + ')'}")
    return items


def balanced_sizes(n: int, k: int) -> list[int]:
    """Sizes of the ``k`` parts of ``n`` rows: the first ``n % k`` parts hold one more.

    Examples:
        >>> balanced_sizes(5, 2)
        [3, 2]
    """
    base, extra = divmod(n, k)
    return [base + (1 if i < extra else 0) for i in range(k)]


def balanced_bounds(n: int, k: int, i: int) -> tuple[int, int]:
    """The ``[start, stop)`` rows of part ``i`` of ``n`` rows split in ``k`` balanced parts."""
    base, extra = divmod(n, k)
    start = i * base + min(i, extra)
    return start, start + base + (1 if i < extra else 0)
