"""Layouts: where a global tensor lives (a placement) and how it is laid out there (an sbp tuple).

Examples:
    >>> from mpiflow.layouts.placement import Placement
    >>> from mpiflow.layouts.sbp import broadcast, split
    >>> Layout(Placement("cpu", [[0, 1], [2, 3]]), (split(0), broadcast))
    Layout(ranks=[[0, 1], [2, 3]], sbp=(S(0), B))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .placement import Placement
from .sbp import Broadcast, Partial, SbpParallel, Split, normalize_sbp

__all__ = ["Layout", "format_sbp"]


def format_sbp(sbp: tuple[SbpParallel, ...]) -> str:
    """The short form of an sbp tuple, as ``(S(0), B)``.

    Args:
        sbp: one layout per mesh axis.

    Returns:
        The layouts' short strings in parentheses (a trailing comma for one entry).

    Examples:
        >>> from mpiflow.layouts.sbp import split
        >>> format_sbp((split(1),))
        '(S(1),)'
    """
    inner = ", ".join(str(s) for s in sbp)
    return f"({inner},)" if len(sbp) == 1 else f"({inner})"


@dataclass(frozen=True, repr=False)
class Layout:
    """A placement and one sbp entry per mesh axis: the layout of a global tensor.

    Args:
        placement: the ranks (a mesh) the tensor lives on.
        sbp: one :class:`~mpiflow.layouts.sbp.SbpParallel` per mesh axis (one value for a 1-D mesh).

    Raises:
        TypeError, ValueError: as :func:`mpiflow.layouts.sbp.normalize_sbp`.
    """

    placement: Placement
    sbp: tuple[SbpParallel, ...]

    def __init__(self, placement: Placement, sbp: Any) -> None:
        if not isinstance(placement, Placement):
            raise TypeError(f"placement must be an mpiflow Placement, got {placement!r}")
        object.__setattr__(self, "placement", placement)
        object.__setattr__(self, "sbp", normalize_sbp(sbp, placement.ndim))
        # Kept: the planner hashes layouts millions of times (dict keys, its caches).
        object.__setattr__(self, "_hash", hash((placement, self.sbp)))

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined]

    def __reduce__(self) -> tuple[Any, ...]:
        # Not the instance dict: a hash is only good in the process that computed it.
        return (Layout, (self.placement, self.sbp))

    @property
    def is_partial(self) -> bool:
        """Whether any mesh axis holds a partial value."""
        return any(isinstance(s, Partial) for s in self.sbp)

    def with_axis(self, axis: int, value: SbpParallel) -> Layout:
        """This layout with mesh axis ``axis`` laid out as ``value``.

        Args:
            axis: the mesh axis.
            value: its new layout.

        Returns:
            A new :class:`Layout` on the same placement.
        """
        return Layout(self.placement, (*self.sbp[:axis], value, *self.sbp[axis + 1:]))

    def without_partial(self) -> Layout:
        """This layout with every partial axis replaced by broadcast."""
        return Layout(self.placement,
                      tuple(Broadcast() if isinstance(s, Partial) else s for s in self.sbp))

    def split_dims(self) -> set[int]:
        """The tensor dimensions that some mesh axis splits."""
        return {s.dim for s in self.sbp if isinstance(s, Split)}

    def __repr__(self) -> str:
        return f"Layout(ranks={self.placement.ranks.tolist()}, sbp={format_sbp(self.sbp)})"
