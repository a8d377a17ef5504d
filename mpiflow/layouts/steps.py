"""The steps of a redistribution plan: frozen values, each one collective (or none).

A step on a mesh ``axis`` runs on the mesh lines along that axis (ranks that differ only in
that axis' coordinate), each line independently; :class:`Transfer` runs on the whole world.

| step | from -> to on ``axis`` | communication |
|---|---|---|
| :class:`AllGather` | S(dim) -> B | all-gather (``all_gather_v`` when uneven) |
| :class:`AllReduce` | P(op) -> B | all-reduce |
| :class:`ReduceScatter` | P(op) -> S(dim) | reduce-scatter (``reduce_scatter_v`` when uneven) |
| :class:`AllToAll` | S(src_dim) -> S(dst_dim) | all-to-all (``all_to_all_v`` when uneven) |
| :class:`LocalSlice` | B -> S(dim) | none |
| :class:`ToPartial` | B or S -> P(op) | none |
| :class:`Transfer` | any non-partial layout -> any, any placements | one world ``all_to_all_v`` |

Examples:
    >>> AllReduce(axis=0, op=ReduceOp.SUM)
    AllReduce(axis=0, op=SUM)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..core.reduce_op import ReduceOp
from .layout import Layout
from .sbp import Broadcast, Partial, SbpParallel, Split

__all__ = [
    "AllGather",
    "AllReduce",
    "AllToAll",
    "AxisStep",
    "LocalSlice",
    "ReduceScatter",
    "Step",
    "ToPartial",
    "Transfer",
]


class Step:
    """Base of the plan steps: a frozen value that knows the layout it produces."""

    __slots__ = ()

    communicates = True

    def apply(self, layout: Layout) -> Layout:
        """The layout after this step.

        Args:
            layout: the layout before it.

        Returns:
            The layout after it.
        """
        raise NotImplementedError

    def __repr__(self) -> str:
        parts = []
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, field.name)
            text = value.name if isinstance(value, ReduceOp) else repr(value)
            parts.append(f"{field.name}={text}")
        return f"{type(self).__name__}({', '.join(parts)})"


class AxisStep(Step):
    """A step that changes the layout of one mesh axis, line by line."""

    __slots__ = ()
    axis: int

    def target(self) -> SbpParallel:
        """The layout of ``axis`` after the step."""
        raise NotImplementedError

    def apply(self, layout: Layout) -> Layout:
        return layout.with_axis(self.axis, self.target())


@dataclass(frozen=True, repr=False)
class AllGather(AxisStep):
    """S(dim) -> B on ``axis``: all-gather along the axis' lines."""

    axis: int
    dim: int

    def target(self) -> SbpParallel:
        return Broadcast()


@dataclass(frozen=True, repr=False)
class AllReduce(AxisStep):
    """P(op) -> B on ``axis``: all-reduce along the axis' lines."""

    axis: int
    op: ReduceOp

    def target(self) -> SbpParallel:
        return Broadcast()


@dataclass(frozen=True, repr=False)
class ReduceScatter(AxisStep):
    """P(op) -> S(dim) on ``axis``: reduce-scatter along the axis' lines."""

    axis: int
    dim: int
    op: ReduceOp

    def target(self) -> SbpParallel:
        return Split(self.dim)


@dataclass(frozen=True, repr=False)
class AllToAll(AxisStep):
    """S(src_dim) -> S(dst_dim) on ``axis``: all-to-all along the axis' lines."""

    axis: int
    src_dim: int
    dst_dim: int

    def target(self) -> SbpParallel:
        return Split(self.dst_dim)


@dataclass(frozen=True, repr=False)
class LocalSlice(AxisStep):
    """B -> S(dim) on ``axis``: each rank keeps its part; no communication."""

    axis: int
    dim: int
    communicates = False

    def target(self) -> SbpParallel:
        return Split(self.dim)


@dataclass(frozen=True, repr=False)
class ToPartial(AxisStep):
    """B or S -> P(op) on ``axis``: data where it is, the op's identity elsewhere; no messages."""

    axis: int
    op: ReduceOp
    communicates = False

    def target(self) -> SbpParallel:
        return Partial(self.op)


@dataclass(frozen=True, repr=False)
class Transfer(Step):
    """Any non-partial layout to any non-partial layout, across placements: one world exchange.

    Every rank works out from the shape and the two layouts which part of the value it holds
    and which it needs; each needed part comes from one holder, in one ``all_to_all_v`` over
    the world (ranks outside both placements send and receive nothing).
    """

    src: Layout
    dst: Layout

    def apply(self, layout: Layout) -> Layout:
        return self.dst
