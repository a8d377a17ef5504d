"""The form of ``MPI_Allreduce`` this process uses, and the scratch buffer of the out-of-place one.

:mod:`mpiflow.core.all_reduce_form` holds the table (which library runs which form faster, from
which size); this module applies it to the MPI library mpi4py loaded, once per process:
:func:`out_of_place_from` is the size from which mpiflow's blocking all-reduce copies its
buffer into a :class:`Scratch` buffer and calls the out-of-place form, None when it never does
(every library but Intel MPI, as measured). The fast paths (:mod:`.fast`) read it when they are
made, so where the form is in place at every size they run exactly as before, with no test per
call; :func:`set_form` changes it for the whole process (the tests force both forms with it).

Examples:
    >>> out_of_place_from() is None or out_of_place_from() >= 0
    True
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy
from mpi4py import MPI

from ..core import all_reduce_form as table

__all__ = ["Scratch", "describe", "library_version", "on_change", "out_of_place_from",
           "set_form"]

_state: dict[str, Any] = {}  # "form": the form set in the process (None: the environment's)
_listeners: list[Callable[[], None]] = []


def library_version() -> str:
    """``MPI.Get_library_version()`` without Open MPI's trailing NUL byte."""
    version = _state.get("library")
    if version is None:
        version = _state["library"] = MPI.Get_library_version().replace("\0", "").strip()
    return str(version)


def out_of_place_from() -> int | None:
    """The buffer size in bytes from which the blocking all-reduce runs out of place (0: every
    size), or None: in place at every size. Computed once (table and environment).

    Raises:
        ValueError: ``MPIFLOW_ALLREDUCE_FORM`` holds something other than ``auto``,
            ``in_place`` or ``out_of_place``.
    """
    if "from" not in _state:
        form = _state.get("form")
        _state["from"] = form if type(form) is int else table.out_of_place_from(
            library_version(), os.environ, form)
    result: int | None = _state["from"]
    return result


def set_form(form: str | int | None) -> None:
    """Use ``form`` in this process from now on: ``"auto"``, ``"in_place"``,
    ``"out_of_place"``, a size in bytes from which to use the out-of-place form, or None:
    ``MPIFLOW_ALLREDUCE_FORM``'s again. Every rank must make the same call before its next
    all-reduce (MPI needs the same form on every rank of a call).

    Raises:
        ValueError: any other form, or a negative size.

    Examples:
        >>> set_form("out_of_place"); out_of_place_from()
        0
        >>> set_form(None)
    """
    if type(form) is int:
        if form < 0:
            raise ValueError(f"the size from which to all-reduce out of place must be at least "
                             f"0 bytes, got {form}")
    elif form is not None and form not in table.FORMS:
        raise ValueError(f"the all-reduce form must be one of {', '.join(table.FORMS)} or a "
                         f"size in bytes, got {form!r}")
    _state["form"] = form
    _state.pop("from", None)
    for listener in _listeners:
        listener()


def on_change(listener: Callable[[], None]) -> None:
    """Call ``listener`` after every :func:`set_form` (the fast paths remake their all-reduce)."""
    _listeners.append(listener)


def describe() -> str:
    """The form in force, for ``python -m mpiflow info``."""
    form = _state.get("form")
    return table.describe_form(library_version(), os.environ, out_of_place_from(),
                               "size" if type(form) is int else form)


class Scratch:
    """A buffer that grows to the largest size asked of it and is reused, never shrunk.

    One per communicator: two threads never run collectives on one communicator at once (the
    fast paths' in-use mark), so a call's copy is never overwritten under it.

    Examples:
        >>> s = Scratch()
        >>> s.like(numpy.ones((2, 3))).shape, s.raw(5).nbytes
        ((2, 3), 5)
    """

    __slots__ = ("buffer",)

    def __init__(self) -> None:
        self.buffer = numpy.empty(0, numpy.uint8)

    def raw(self, nbytes: int) -> numpy.ndarray:
        """``nbytes`` bytes of the buffer (uint8), grown first if it is smaller."""
        if self.buffer.nbytes < nbytes:
            self.buffer = numpy.empty(0, numpy.uint8)  # free the old one before the new
            self.buffer = numpy.empty(nbytes, numpy.uint8)
        return self.buffer[:nbytes]

    def like(self, array: numpy.ndarray) -> numpy.ndarray:
        """A C-contiguous array of ``array``'s shape and dtype over the buffer."""
        return self.raw(array.nbytes).view(array.dtype).reshape(array.shape)
