"""Debugging aids for the communication layer: count the operations a piece of code issues.

Examples:
    >>> from mpiflow.communication import count_collectives
    >>> from mpiflow.communication.mpi.group import world_comm
    >>> x = numpy.ones(3)
    >>> with count_collectives() as calls:
    ...     world_comm.all_reduce(x)
    >>> calls
    Counter({'all_reduce': 1})
"""

from __future__ import annotations

import contextlib
import functools
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from .. import fast
from ..mpi.communicator import MPICommunicator
from ..mpi.interface import OPERATIONS

__all__ = ["OPERATIONS", "count_collectives"]

_active: list[Counter[str]] = []
_originals: dict[str, Any] = {}


def _counting(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for counter in _active:
            counter[name] += 1
        return method(*args, **kwargs)

    return wrapper


@contextlib.contextmanager
def count_collectives() -> Iterator[Counter[str]]:
    """Count the operations every :class:`MPICommunicator` performs inside the ``with`` block.

    The class's methods are wrapped only while at least one such block is open, so counting
    costs nothing outside it. Blocks may nest; each counts every call made while it is open.

    Returns:
        A context manager yielding a ``collections.Counter`` keyed by method name
        (``"all_gather_v"``, ``"all_reduce"``, ...), filled in as the calls happen.

    Examples:
        >>> from mpiflow.communication.mpi.group import world_comm as comm
        >>> with count_collectives() as calls:
        ...     comm.barrier()
        >>> calls["barrier"]
        1
    """
    counter: Counter[str] = Counter()
    if not _active:
        fast.pause()  # the faces' fast paths would skip the counted methods
        for name in OPERATIONS:
            original = MPICommunicator.__dict__[name]
            _originals[name] = original
            setattr(MPICommunicator, name, _counting(name, original))
    _active.append(counter)
    try:
        yield counter
    finally:
        _active.remove(counter)
        if not _active:
            for name, original in _originals.items():
                setattr(MPICommunicator, name, original)
            _originals.clear()
            fast.resume()
