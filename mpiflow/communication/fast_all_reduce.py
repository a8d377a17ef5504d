"""The all-reduce fast paths of :class:`.fast.FastPaths`, in the form in force (:mod:`.form`).

Two kinds: of a plain numpy array (``all_reduce_path``) and of memory at an address, a torch
tensor's (``all_reduce_at_path``). Each is made in one of two shapes: the plain in-place call
where the form is in place at every size (every library but Intel MPI), and one that copies a
buffer of ``oop_from`` bytes or more into a reused scratch buffer and reduces it from there by
MPI's out-of-place form. ``FastPaths`` remakes them when the form changes. They follow the
rules of the other fast paths (:mod:`.fast`): the fewest checks inline, True when they ran,
False to send the call to the general path; a second thread inside a collective on the group
is reported by ``conflict`` (``fast.concurrent_use``, passed in: this module is below it).
The watchdog reads their frames as fast paths (``fast`` registers this file too).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy
from mpi4py import MPI

from ..core.reduce_op import ReduceOp
from .form import Scratch
from .watchdog.failure import collective_failed

__all__ = ["DECLINED", "all_reduce_at_path", "all_reduce_path"]

_ndarray = numpy.ndarray
#: What mpi4py raises, before sending anything, for a buffer it cannot take as it is (a strided
#: view) or a dtype it cannot map (object, structured...): the general path stages the one and
#: raises a clear TypeError for the other.
DECLINED = (BufferError, KeyError)
_DECLINED = DECLINED
_Conflict = Callable[[Any, Any, str], None]


def all_reduce_path(comm: Any, native: dict[ReduceOp, dict[Any, MPI.Op]], due: list[int],
                in_use: Any, mark: Callable[[], None], allreduce: Any, in_place: Any,
                oop_from: int | None, scratch: Scratch,
                    conflict: _Conflict) -> Callable[[Any, ReduceOp], bool]:
    """The all-reduce fast path of a plain numpy array, in place on the caller's buffer.

    With ``oop_from`` None (the form is in place at every size) it calls MPI's in-place form
    and tests nothing more; otherwise a buffer of ``oop_from`` bytes or more is copied into
    ``scratch`` and reduced from there into itself by MPI's out-of-place form (:mod:`.form`).
    """
    if oop_from is None:
        return _all_reduce_in_place(comm, native, due, in_use, mark, allreduce, in_place,
                                    conflict)
    like, copyto = scratch.like, numpy.copyto

    def all_reduce(buf: Any, op: ReduceOp) -> bool:
        if type(buf) is _ndarray and (buf.ndim < 2 or buf.flags.c_contiguous):
            by_dtype = native.get(op)
            mpi_op = by_dtype.get(buf.dtype) if by_dtype is not None else None
            if mpi_op is not None:
                if due[0] <= 1:
                    return False  # the general path checks this call
                due[0] -= 1
                if in_use.owner is not None:
                    conflict(in_use, comm, "all_reduce")
                try:
                    in_use.owner = True
                    mark()  # the watchdog's mark: a new blocking call
                    if buf.nbytes >= oop_from:
                        send = like(buf)
                        copyto(send, buf)
                        allreduce(send, buf, mpi_op)
                    else:
                        allreduce(in_place, buf, mpi_op)
                except _DECLINED:
                    due[0] += 1
                    return False
                except MPI.Exception as exc:
                    collective_failed("all_reduce", comm, exc, (buf,))
                finally:
                    in_use.owner = None
                return True
        return False

    return all_reduce


def _all_reduce_in_place(comm: Any, native: dict[ReduceOp, dict[Any, MPI.Op]],
                         due: list[int], in_use: Any, mark: Callable[[], None],
                         allreduce: Any, in_place: Any,
                         conflict: _Conflict) -> Callable[[Any, ReduceOp], bool]:
    """:func:`all_reduce_path` where the form is in place at every size."""

    def all_reduce(buf: Any, op: ReduceOp) -> bool:
        if type(buf) is _ndarray and (buf.ndim < 2 or buf.flags.c_contiguous):
            by_dtype = native.get(op)
            mpi_op = by_dtype.get(buf.dtype) if by_dtype is not None else None
            if mpi_op is not None:
                if due[0] <= 1:
                    return False  # the general path checks this call
                due[0] -= 1
                if in_use.owner is not None:
                    conflict(in_use, comm, "all_reduce")
                try:
                    in_use.owner = True
                    mark()  # the watchdog's mark: a new blocking call
                    allreduce(in_place, buf, mpi_op)
                except _DECLINED:
                    due[0] += 1
                    return False
                except MPI.Exception as exc:
                    collective_failed("all_reduce", comm, exc, (buf,))
                finally:
                    in_use.owner = None
                return True
        return False

    return all_reduce


def all_reduce_at_path(comm: Any, in_use: Any, mark: Callable[[], None], allreduce: Any,
                   in_place: Any, due: list[int], oop_from: int | None,
                   scratch: Scratch,
                       conflict: _Conflict) -> Callable[[int, int, Any, Any], bool]:
    """The in-place all-reduce of ``nbytes`` of memory at ``address`` (a torch tensor's),
    typed by an MPI datatype and reduced by an MPI op that the caller knows to be native:
    no array object to make (``Tensor.numpy()`` costs 0.7 us, the address 0.2). From
    ``oop_from`` bytes up (None: never) the memory is copied into ``scratch`` and reduced from
    there by MPI's out-of-place form."""
    fromaddress = MPI.buffer.fromaddress
    if oop_from is None:
        return _all_reduce_at_in_place(comm, in_use, mark, allreduce, in_place, due, conflict)
    raw, copyto, frombuffer, uint8 = scratch.raw, numpy.copyto, numpy.frombuffer, numpy.uint8

    # Named as the operation: the watchdog reports a fast path by its function's name.
    def all_reduce(address: int, nbytes: int, datatype: Any, mpi_op: Any) -> bool:
        if due[0] <= 1:
            return False  # the general path checks this call
        due[0] -= 1
        if in_use.owner is not None:
            conflict(in_use, comm, "all_reduce")
        try:
            in_use.owner = True
            mark()  # the watchdog's mark: a new blocking call
            memory: Any = fromaddress(address, nbytes)
            if nbytes >= oop_from:
                send = raw(nbytes)
                copyto(send, frombuffer(memory, uint8))
                allreduce([send, datatype], [memory, datatype], mpi_op)
            else:
                allreduce(in_place, [memory, datatype], mpi_op)
        except MPI.Exception as exc:
            collective_failed("all_reduce", comm, exc)
        finally:
            in_use.owner = None
        return True

    return all_reduce


def _all_reduce_at_in_place(comm: Any, in_use: Any, mark: Callable[[], None],
                            allreduce: Any, in_place: Any,
                            due: list[int],
                            conflict: _Conflict) -> Callable[[int, int, Any, Any], bool]:
    """:func:`all_reduce_at_path` where the form is in place at every size."""
    fromaddress = MPI.buffer.fromaddress

    def all_reduce(address: int, nbytes: int, datatype: Any, mpi_op: Any) -> bool:
        if due[0] <= 1:
            return False  # the general path checks this call
        due[0] -= 1
        if in_use.owner is not None:
            conflict(in_use, comm, "all_reduce")
        try:
            in_use.owner = True
            mark()  # the watchdog's mark: a new blocking call
            allreduce(in_place, [fromaddress(address, nbytes), datatype], mpi_op)
        except MPI.Exception as exc:
            collective_failed("all_reduce", comm, exc)
        finally:
            in_use.owner = None
        return True

    return all_reduce
