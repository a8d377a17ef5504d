"""Shared by the tests of the sorting-and-statistics algorithms and ops: this rank's part of a
value, and :func:`received`, which records how many elements each collective brought to this
rank (to show that a distributed algorithm never gathers the whole array).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import numpy

from mpiflow.algorithms.ranges import balanced, offsets
from mpiflow.communication import count_collectives
from mpiflow.communication.mpi.communicator import MPICommunicator
from mpiflow.communication.mpi.group import world_comm as comm

RANK, SIZE = comm.rank, comm.size

# per collective: which positional argument is the array it fills (all_to_all_v: counts)
_RECEIVES = {"all_gather": 1, "all_gather_v": 1, "all_to_all": 1, "all_reduce": 0,
             "broadcast": 0, "reduce_scatter": 1, "all_to_all_v": 3}


def part(value: numpy.ndarray, axis: int = 0) -> numpy.ndarray:
    """This rank's balanced part of ``value`` along ``axis`` (as ``S(axis)`` lays it out)."""
    at = offsets(balanced(value.shape[axis], SIZE))
    return numpy.take(value, numpy.arange(at[RANK], at[RANK + 1]), axis=axis)


def _recording(name: str, method: Callable[..., Any], sizes: list[int]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        got = args[_RECEIVES[name]]
        sizes.append(int(sum(got)) if name == "all_to_all_v" else int(numpy.size(got)))
        return method(self, *args, **kwargs)

    return wrapper


@contextlib.contextmanager
def received() -> Iterator[list[int]]:
    """The number of elements every collective inside the block delivered to this rank."""
    sizes: list[int] = []
    with count_collectives():  # the fast paths off: every collective goes through the class
        saved = {name: MPICommunicator.__dict__[name] for name in _RECEIVES}
        for name, method in saved.items():
            setattr(MPICommunicator, name, _recording(name, method, sizes))
        try:
            yield sizes
        finally:
            for name, method in saved.items():
                setattr(MPICommunicator, name, method)
