"""The shape type of tensors: a tuple of ints with ``numel()`` and mpiflow's repr."""

from __future__ import annotations

from collections.abc import Sequence

import numpy

__all__ = ["Size"]


class Size(tuple[int, ...]):
    """A tensor shape: a tuple of ints, printed as ``mpiflow.Size([2, 3])``.

    Examples:
        >>> Size([2, 3]).numel()
        6
    """

    def __new__(cls, dims: Sequence[int] = ()) -> Size:
        return super().__new__(cls, (int(d) for d in dims))

    def numel(self) -> int:
        """The number of elements of a tensor of this shape."""
        return int(numpy.prod(self, dtype=numpy.int64))

    def __repr__(self) -> str:
        return f"mpiflow.Size({list(self)})"
