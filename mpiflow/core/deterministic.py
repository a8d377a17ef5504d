"""The reproducibility switch: deterministic (exact, rank-count-independent) float reductions.

With the switch on, ``sum``, ``mean``, ``nansum``, ``var``/``std``, ``norm``, ``dot``/``vdot`` and
the SUM/AVG collectives on float data give the same bits for any rank count and layout (see
``docs/reproducibility.md``). It is read by the ops and the communication layers, so it lives
in the core. It starts from the environment variable ``MPIFLOW_DETERMINISTIC`` (an on value
of :mod:`.settings`: ``1``, ``true``, ``yes``, ``on``) and is per process: every rank must set
it the same way.

Example:
    >>> from mpiflow.core.deterministic import deterministic, are_deterministic_algorithms_enabled
    >>> with deterministic():
    ...     are_deterministic_algorithms_enabled()
    True
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from . import settings

__all__ = ["SWITCH", "Switch", "use_deterministic_algorithms",
           "are_deterministic_algorithms_enabled", "deterministic"]


class Switch:
    """The switch's state, read as ``SWITCH.on`` where a function call would cost: the fast
    paths of the collectives test it on every call (an attribute read is about 30 ns cheaper
    than :func:`are_deterministic_algorithms_enabled`)."""

    __slots__ = ("on",)

    def __init__(self, on: bool) -> None:
        self.on = on


SWITCH = Switch(bool(settings.read("MPIFLOW_DETERMINISTIC")))


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Turn the reproducible reductions on or off (PyTorch's name and signature).

    Args:
        mode: True for exact, rank-count-independent reductions and collectives.
        warn_only: accepted for PyTorch compatibility; mpiflow has no op that would raise.

    Example:
        >>> flow.use_deterministic_algorithms(True)
        >>> flow.are_deterministic_algorithms_enabled()
        True
        >>> flow.use_deterministic_algorithms(False)
    """
    SWITCH.on = bool(mode)


def are_deterministic_algorithms_enabled() -> bool:
    """Whether the reproducible reductions are on.

    Example:
        >>> flow.are_deterministic_algorithms_enabled()
        False
    """
    return SWITCH.on


@contextmanager
def deterministic(mode: bool = True) -> Iterator[None]:
    """A context in which the switch is ``mode``; the previous setting comes back on exit.

    Example:
        >>> with flow.deterministic():
        ...     flow.sum(flow.tensor([1e16, 1.0, -1e16, 1.0], dtype=flow.float64)).item()
        2.0
    """
    before = SWITCH.on
    SWITCH.on = bool(mode)
    try:
        yield
    finally:
        SWITCH.on = before
