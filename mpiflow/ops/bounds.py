"""Index bounds checks that traced plans keep: the same ``IndexError`` eager and on replay.

Ops that read rows by index (cross-entropy's and nll's targets, embedding lookups,
``take_along_dim``) check the index before their kernel runs. A traced plan
(:mod:`mpiflow.nn.graph.plan`) replays kernels only, so a check written as Python beside the
op would run at the trace and never again: a replay with a label out of range would read a
wrong row, or none. :func:`check_bounds` runs the check through
:func:`mpiflow.tensors.trace.call`, so it is a step of the plan and every replay makes it.

The check is the index's minimum and maximum (two reductions the size of the index, no copy
to the host for an index in range); only an index out of range, or one holding the ignored
value, looks further. An index split over ranks is agreed by one all-reduce of those two
numbers along its split mesh axes, so every rank raises the same error (or none).

Examples:
    >>> check_bounds(flow.tensor([0, 2]), 3, lambda v: IndexError(f"bad {v}"))
    >>> check_bounds(flow.tensor([0, 3]), 3, lambda v: IndexError(f"bad {v}"))
    Traceback (most recent call last):
    ...
    IndexError: bad 3
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy

from ..core.reduce_op import ReduceOp
from ..layouts.sbp import Broadcast
from ..tensors import trace
from ..tensors.tensor import Tensor

__all__ = ["check_bounds"]

_NONE = -(2**62)  # stands for "no entry" in the all-reduced (-min, max) pair


def _local_range(data: Any, low: int, high: int, ignore: int | None) -> tuple[int, int]:
    """``(min, max)`` of this shard's entries other than ``ignore`` (``_NONE`` pair: none)."""
    if data.size == 0:
        return -_NONE, _NONE
    lo, hi = int(data.min()), int(data.max())
    if low <= lo and hi < high:  # the common case: every entry in range
        return lo, hi
    if ignore is not None and lo <= ignore <= hi:
        used = data[data != ignore]
        if used.size == 0:
            return -_NONE, _NONE
        lo, hi = int(used.min()), int(used.max())
    return lo, hi


def _split_axes(index: Tensor) -> tuple[int, ...]:
    """The mesh axes along which ranks hold different entries of a global index."""
    return tuple(a for a, s in enumerate(index._sbp or ()) if not isinstance(s, Broadcast))


def _check(index: Tensor, low: int, high: int, ignore: int | None,
           error: Callable[[int], Exception]) -> None:
    lo, hi = _local_range(index._data, low, high, ignore)
    axes = _split_axes(index) if index.is_global else ()
    if axes:
        from ..boxing.execute import axes_communicator

        comm = axes_communicator(index.placement, axes)
        if comm is not None and comm.size > 1:
            pair = numpy.array([-lo, hi], dtype=numpy.int64)
            comm.all_reduce(pair, ReduceOp.MAX)
            lo, hi = -int(pair[0]), int(pair[1])
    if hi >= high:
        raise error(hi)
    if lo < low:
        raise error(lo)


def check_bounds(index: Tensor, high: int, error: Callable[[int], Exception], *, low: int = 0,
                 ignore: int | None = None) -> None:
    """Raise ``error(value)`` where ``index`` has an entry outside ``[low, high)``.

    The check is recorded into a plan being traced, so each replay of the plan makes it
    again (on the replay's index). Entries equal to ``ignore`` are skipped. ``value`` is the
    largest entry when one is too large, else the smallest; an index split over ranks gives
    the same value, and the same error, on every rank of its split axes.

    Args:
        index: an integer tensor, local or global.
        high: the first value out of range.
        error: makes the exception for an offending value.
        low: the smallest value in range.
        ignore: a value that is never out of range (a loss's ``ignore_index``).

    Raises:
        Exception: ``error(value)``, typically an ``IndexError``.

    Examples:
        >>> check_bounds(flow.tensor([-1, 1]), 2, lambda v: IndexError(v), low=-2)
    """
    trace.call(_check, index, low, high, ignore, error)
