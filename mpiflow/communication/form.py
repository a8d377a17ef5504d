"""How this process runs its blocking ``MPI_Allreduce``: in pieces or whole, in place or not.

:mod:`mpiflow.core.all_reduce_form` holds the table (how each library runs its all-reduce
fastest); this module applies it to the MPI library mpi4py loaded, once per process:
:func:`pieces` is ``(above, piece)``: buffers larger than ``above`` bytes are all-reduced in
pieces of ``piece`` bytes, one call each (None: in one call); the table's pieces apply to jobs
on one node, where they were measured (across nodes the libraries' own algorithms for large
messages, tuned for networks, get the whole buffer; a size set explicitly applies anyway);
:func:`out_of_place_from` is the size from which a call copies its buffer into a
:class:`Scratch` buffer and uses the out-of-place form, None when it never does (no library
measured needs it). The fast paths (:mod:`.fast`) read both when they are made (below both
sizes a call is the plain in-place call after one size test); :func:`set_form` and
:func:`set_pieces` change them for the whole process (the tests force every combination with
them). :func:`all_reduce_formed` is the general path's blocking call in the form in force.

Examples:
    >>> out_of_place_from() is None or out_of_place_from() >= 0
    True
    >>> set_pieces(4096); pieces()
    (4096, 4096)
    >>> set_pieces(None)
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy
from mpi4py import MPI

from ..core import all_reduce_form as table

__all__ = ["Scratch", "all_reduce_formed", "describe", "library_version", "on_change",
           "out_of_place_from", "pieces", "set_form", "set_pieces"]

# "form", "pieces": the settings made in the process (None: the environment's); "from",
# "in pieces": what they come to, computed once.
_state: dict[str, Any] = {}
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


def pieces() -> tuple[int, int] | None:
    """``(above, piece)``: buffers larger than ``above`` bytes are all-reduced in pieces of
    ``piece`` bytes; None: in one call. Computed once (table and environment).

    Raises:
        ValueError: ``MPIFLOW_ALLREDUCE_PIECES`` holds something other than ``auto``, ``off``
            or a size in bytes.
    """
    if "in pieces" not in _state:
        _state["in pieces"] = table.pieces(library_version(), os.environ, _state.get("pieces"),
                                           _nodes())
    result: tuple[int, int] | None = _state["in pieces"]
    return result


def set_pieces(setting: str | int | None) -> None:
    """All-reduce in pieces as ``setting`` says from now on: ``"auto"`` (the table), ``"off"``
    (one call), a piece size in bytes (for buffers larger than it), or None:
    ``MPIFLOW_ALLREDUCE_PIECES``'s again. Every rank must make the same call before its next
    all-reduce (the pieces are calls that must match).

    Raises:
        ValueError: any other setting, or a size below 1 byte.
    """
    if type(setting) is int:
        if setting < 1:
            raise ValueError(f"an all-reduce piece must be at least 1 byte, got {setting}")
    elif setting is not None and setting not in ("auto", "off"):
        raise ValueError(f"the all-reduce pieces must be auto, off or a size in bytes, got "
                         f"{setting!r}")
    _settle("pieces", "in pieces", setting)


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
    _settle("form", "from", form)


def _settle(key: str, derived: str, setting: Any) -> None:
    """Make ``setting`` the process's ``key``, forget what it came to (``derived``, computed
    again on the next read), and let the fast paths remake their all-reduce."""
    _state[key] = setting
    _state.pop(derived, None)
    for listener in _listeners:
        listener()


def on_change(listener: Callable[[], None]) -> None:
    """Call ``listener`` after every :func:`set_form` and :func:`set_pieces` (the fast paths
    remake their all-reduce)."""
    _listeners.append(listener)


def describe() -> str:
    """The form in force, for ``python -m mpiflow info``."""
    form = _state.get("form")
    return (table.describe_form(library_version(), os.environ, out_of_place_from(),
                                "size" if type(form) is int else form)
            + "; " + table.describe_pieces(library_version(), os.environ, _state.get("pieces"),
                                           _nodes()))


def _nodes() -> int:
    from ..runtime import topology  # the job's node count, found when MPI started

    return topology.node_size


def all_reduce_formed(allreduce: Callable[..., Any], stage: numpy.ndarray,
                      spec: Callable[[numpy.ndarray], Any], op: Any, scratch: Scratch) -> None:
    """All-reduce the C-contiguous ``stage`` in place, blocking, in the form in force.

    In :func:`pieces` (element-aligned, the same on every rank: they have the same dtype and
    count), each in place or, from :func:`out_of_place_from` bytes, from a copy in
    ``scratch``. The fast paths (:mod:`.fast_all_reduce`) cut the same pieces, so a call may
    take a fast path on one rank and this one on another.

    Args:
        allreduce: the communicator's ``Allreduce``.
        stage: the buffer (the general path's staged copy or the caller's own).
        spec: makes the MPI buffer argument of a part of ``stage`` (datatype, count).
        op: the MPI op.
        scratch: the communicator's scratch buffer.
    """
    oop_from, in_pieces = out_of_place_from(), pieces()
    flat = stage.reshape(-1)
    step = flat.size or 1
    if in_pieces is not None and stage.nbytes > in_pieces[0]:
        step = max(1, in_pieces[1] // stage.itemsize)
    for start in range(0, flat.size or 1, step):
        part = flat[start:start + step]
        if oop_from is not None and part.nbytes >= oop_from:
            send = scratch.like(part)
            numpy.copyto(send, part)
            allreduce(spec(send), spec(part), op)
        else:
            allreduce(MPI.IN_PLACE, spec(part), op)


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
