"""What MPI takes as a buffer, count or tag, and the clear errors for what it refuses.

A non-contiguous view goes to MPI as a contiguous stand-in (:func:`readable`,
:func:`writable`, which also gives the step that writes an output back); counts become
displacements; tags are checked against this MPI's ``TAG_UB``. What mpi4py or MPI raise for
a buffer they cannot take, or a bad tag or size, becomes an error that says what to change
(:func:`unmappable`, :func:`p2p_error`). The communicators of :mod:`.communicator` and of the
GPU layer share these.

Example:
    >>> from mpiflow.communication.mpi.buffers import check_tag
    >>> check_tag(7)
    7
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy
from mpi4py import MPI

from ...core.message_size import MessageSizeError
from .interface import Array

__all__ = ["TAG_UB", "UNMAPPABLE", "check_same_dtype", "check_tag", "displacements",
           "p2p_error", "readable", "unmappable", "writable"]

# What mpi4py raises for a dtype it cannot map to an MPI datatype (object, str, datetime...).
UNMAPPABLE = (KeyError, BufferError)


def unmappable(exc: Exception) -> Exception:
    """The clear error for what mpi4py refused to take as a buffer."""
    text = str(exc)
    if "writable" in text:
        return ValueError(f"a collective writes into an array that is read-only ({text}); "
                          "pass a writable array (numpy.array(x) makes one)")
    if "byte order" in text:
        return TypeError(f"collectives need the machine's byte order ({text}); convert first: "
                         "x.astype(x.dtype.newbyteorder('='))")
    return TypeError(f"collectives move arrays of numeric or bool dtypes only ({text})")


def readable(buf: Array) -> Array:
    """``buf`` as MPI may read it: itself when C-contiguous, else a contiguous copy.

    Example:
        >>> readable(numpy.arange(6).reshape(2, 3)[:, 0]).flags.c_contiguous
        True
    """
    return buf if buf.flags.c_contiguous else numpy.ascontiguousarray(buf)


def writable(buf: Array, keep_contents: bool) -> tuple[Array, Callable[[], None] | None]:
    """Return a contiguous stand-in for ``buf`` and the step that writes it back, if needed.

    A read-only ``buf`` gets a scratch stand-in whose step raises ``ValueError`` once the call
    has completed: the call still runs, so no rank is left out of step.

    Args:
        buf: the array MPI writes into.
        keep_contents: the stand-in starts with ``buf``'s values (MPI reads them too).

    Returns:
        ``(stand_in, write_back)``: ``write_back`` is None when ``buf`` is contiguous.

    Example:
        >>> column = numpy.zeros((2, 2))[:, 0]
        >>> stand_in, write_back = writable(column, keep_contents=False)
        >>> stand_in[:] = 1.0
        >>> write_back()
        >>> column.tolist()
        [1.0, 1.0]
    """
    flags = buf.flags
    if flags.c_contiguous and getattr(flags, "writeable", True):
        return buf, None
    if not getattr(flags, "writeable", True):
        return _read_only_stand_in(buf, keep_contents)
    stage = numpy.ascontiguousarray(buf) if keep_contents else numpy.empty_like(buf, order="C")

    def write_back() -> None:
        buf[...] = stage

    return stage, write_back


def _read_only_stand_in(buf: Array, keep_contents: bool
                        ) -> tuple[Array, Callable[[], None]]:
    """A scratch buffer the call writes into instead of the read-only ``buf``, and the step
    that raises once the call has completed.

    mpi4py refuses a read-only buffer before anything is sent, but the other ranks of a
    collective have entered it by then (a broadcast's root has even finished it), and this
    rank's next call would take their data. So the call runs into a scratch buffer, which
    keeps every rank in step and leaves no message behind, and the error comes after it.
    """
    stage = numpy.array(buf, order="C") if keep_contents else numpy.empty_like(buf, order="C")

    def refuse() -> None:
        raise ValueError("a collective writes into an array that is read-only; pass a writable "
                         "array (numpy.array(x) makes one). The call completed on every rank "
                         "(the others have their results); this rank's result was dropped")

    return stage, refuse


def displacements(counts: Sequence[int]) -> list[int]:
    """The offset of each block of ``counts`` laid end to end (MPI's ``displs``).

    Example:
        >>> displacements([2, 0, 3])
        [0, 2, 2]
    """
    displs, total = [], 0
    for c in counts:
        displs.append(total)
        total += c
    return displs


TAG_UB: int = int(MPI.COMM_WORLD.Get_attr(MPI.TAG_UB) or 32767)
"""The largest tag this MPI accepts (at least 32767): tags are 0..TAG_UB."""


def check_tag(tag: Any) -> int:
    """Return ``tag`` as an int, with a ``ValueError`` outside 0..TAG_UB (a ``TypeError`` for a
    non-integer)."""
    if isinstance(tag, bool) or not isinstance(tag, (int, numpy.integer)):
        raise TypeError(f"tag must be an int, got {tag!r}")
    if not 0 <= tag <= TAG_UB:
        raise ValueError(f"tag={tag} is out of range: tags are 0..{TAG_UB} (MPI's TAG_UB)")
    return int(tag)


def p2p_error(exc: MPI.Exception | OverflowError, what: str, peer: int | None, tag: Any,
              buf: Array | None = None) -> Exception:
    """The clear error for what MPI (or mpi4py, an ``OverflowError`` for a tag past a C int)
    raised in a send or receive (see :func:`check_tag`)."""
    if MPI.Is_finalized():
        return RuntimeError(f"{what}: MPI is finalized; mpiflow cannot communicate after "
                            "MPI.Finalize()")
    try:
        check_tag(tag)
    except (TypeError, ValueError) as bad:
        return bad
    if (buf is not None and isinstance(exc, MPI.Exception)
            and exc.Get_error_class() == MPI.ERR_TRUNCATE):
        return MessageSizeError(peer, tag, buf, None)
    return exc


def check_same_dtype(a: Array, b: Array) -> None:
    """Raise ``TypeError`` when a send and a receive buffer differ in dtype."""
    if a.dtype != b.dtype:
        raise TypeError(f"send and receive dtypes differ: {a.dtype} and {b.dtype}")
