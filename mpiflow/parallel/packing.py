"""Packing many small arrays into a few large flat buffers, so that one collective moves them.

Per-parameter collectives pay the latency of the network once per tensor; a model with a
hundred parameters pays it a hundred times. Packing by dtype into buffers of a bounded size
turns that into a handful of large messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy

from ..core.array_module import array_module

__all__ = ["Bucket", "make_buckets"]


@dataclass
class Bucket:
    """A flat buffer of one dtype and the arrays it carries, at their element offsets."""

    dtype: numpy.dtype
    members: list[int] = field(default_factory=list)   # indices into the caller's list
    offsets: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    flat: Any = None

    @property
    def numel(self) -> int:
        return (self.offsets[-1] + self.sizes[-1]) if self.offsets else 0

    def allocate(self, xp: Any = numpy) -> Any:
        """The flat buffer of array module ``xp`` (made once and reused)."""
        if self.flat is None or self.flat.size != self.numel or array_module(self.flat) is not xp:
            self.flat = xp.empty(self.numel, dtype=self.dtype)
        return self.flat

    def pack(self, arrays: Sequence[Any]) -> Any:
        """Copy the member arrays into the flat buffer (of their array module) and return it."""
        flat = self.allocate(array_module(arrays[self.members[0]]) if self.members else numpy)
        for index, offset, size in zip(self.members, self.offsets, self.sizes):
            flat[offset:offset + size] = arrays[index].reshape(-1)
        return flat

    def unpack(self, arrays: Sequence[Any], scale: float | None = None) -> None:
        """Copy the flat buffer back into the member arrays (in place), optionally scaled."""
        flat = self.flat
        for index, offset, size in zip(self.members, self.offsets, self.sizes):
            part = flat[offset:offset + size].reshape(arrays[index].shape)
            if scale is None:
                arrays[index][...] = part
            else:
                arrays[index][...] = part * scale


def make_buckets(shapes_dtypes: Sequence[tuple[tuple[int, ...], Any]], limit_bytes: int,
                 first_limit_bytes: int | None = None,
                 max_members: int | None = None) -> list[Bucket]:
    """Group arrays, in the given order, into buckets of one dtype and at most ``limit_bytes``.

    An array bigger than the limit gets a bucket of its own.

    Args:
        shapes_dtypes: (shape, dtype) of each array, in packing order.
        limit_bytes: the size a bucket may reach.
        first_limit_bytes: a smaller limit for the first bucket (PyTorch DDP starts the first
            all-reduce early with a 1 MiB bucket).
        max_members: at most this many arrays per bucket (OneFlow's DDP counts parameters).

    Returns:
        The buckets; ``members`` index into ``shapes_dtypes``.

    Examples:
        >>> [b.members for b in make_buckets([((4,), "f4"), ((4,), "f4"), ((2,), "f8")], 1 << 20)]
        [[0, 1], [2]]
    """
    buckets: list[Bucket] = []
    open_by_dtype: dict[numpy.dtype, Bucket] = {}
    for index, (shape, dtype) in enumerate(shapes_dtypes):
        dt = numpy.dtype(dtype)
        size = int(numpy.prod(shape, dtype=numpy.int64))
        bucket = open_by_dtype.get(dt)
        first = first_limit_bytes is not None and bool(buckets) and bucket is buckets[0]
        limit = first_limit_bytes if first and first_limit_bytes is not None else limit_bytes
        if (bucket is None or (bucket.numel + size) * dt.itemsize > limit
                or (max_members is not None and len(bucket.members) >= max_members)):
            bucket = Bucket(dt)
            buckets.append(bucket)
            open_by_dtype[dt] = bucket
        bucket.offsets.append(bucket.numel)
        bucket.members.append(index)
        bucket.sizes.append(size)
    return buckets
