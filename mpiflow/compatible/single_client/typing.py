"""``flow.typing``: the annotations of a job function's arguments and results.

``tp.Numpy.Placeholder(shape, dtype)`` is one numpy array of that shape (the logical batch in
the consistent view, this rank's batch in the mirrored view); ``tp.ListNumpy.Placeholder``
a list of arrays, one per device (one per rank, or just this rank's). As a return annotation
``tp.Numpy`` makes the job return numpy arrays, ``tp.ListNumpy`` lists of them (one per rank).

Examples:
    >>> import mpiflow.compatible.single_client.typing as tp
    >>> tp.Numpy.Placeholder((4, 3)).shape
    (4, 3)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy

from ... import dtypes as _dtypes

__all__ = ["ListNumpy", "Numpy", "Placeholder"]


@dataclass(frozen=True)
class Placeholder:
    """An argument of a job function: its shape, dtype and whether it is a list per device."""

    shape: tuple[int, ...]
    dtype: Any = None
    listed: bool = False

    @property
    def numpy_dtype(self) -> numpy.dtype:
        """The numpy dtype (float32 by default)."""
        return (_dtypes.as_dtype(self.dtype).numpy if self.dtype is not None
                else numpy.dtype(numpy.float32))


class Numpy:
    """One numpy array (argument: ``Numpy.Placeholder``; return: the array)."""

    @staticmethod
    def Placeholder(shape: Any, dtype: Any = None, batch_axis: int = 0) -> Placeholder:
        """An argument of ``shape`` and ``dtype`` (OneFlow's spelling)."""
        return Placeholder(tuple(int(n) for n in shape), dtype)


class ListNumpy:
    """A list of numpy arrays, one per device (argument: ``ListNumpy.Placeholder``)."""

    @staticmethod
    def Placeholder(shape: Any, dtype: Any = None, batch_axis: int = 0) -> Placeholder:
        """A list argument: arrays of ``shape`` (at most) and ``dtype``."""
        return Placeholder(tuple(int(n) for n in shape), dtype, listed=True)
