"""The all-reduce fast paths of :class:`.fast.FastPaths`, in the form in force (:mod:`.form`).

Two kinds: of a plain numpy array (``all_reduce_path``) and of memory at an address, a torch
tensor's (``all_reduce_at_path``). Each makes one in-place call up to the size the form in
force allows, its first test; above it, a buffer larger than ``pieces[0]`` bytes goes in
pieces of ``pieces[1]`` bytes (the cuts :func:`.form.all_reduce_formed` makes, so that ranks
may take different paths in one call), and a buffer or piece of ``oop_from`` bytes or more is
copied into a reused scratch buffer and reduced from there by MPI's out-of-place form. The
loops stay in the paths themselves rather than calling ``all_reduce_formed``: the watchdog
knows a fast path by its innermost frame. ``FastPaths`` remakes them when the form changes.
They follow the rules of the other fast paths (:mod:`.fast`): the fewest checks inline, True
when they ran, False to send the call to the general path; a second thread inside a collective
on the group is reported by ``conflict`` (``fast.concurrent_use``, passed in: this module is
below it). The watchdog reads their frames as fast paths (``fast`` registers this file too).
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


def _limits(oop_from: int | None, pieces: tuple[int, int] | None) -> tuple[int, int, int, int]:
    """``(whole, above, piece, oop)``: one in-place call up to ``whole`` bytes; pieces of
    ``piece`` bytes above ``above``; the out-of-place form from ``oop`` bytes (1 << 62: never)."""
    above, piece = pieces if pieces is not None else (1 << 62, 1)
    oop = oop_from if oop_from is not None else 1 << 62
    return min(above, oop - 1), above, piece, oop


def all_reduce_path(comm: Any, native: dict[ReduceOp, dict[Any, MPI.Op]], due: list[int],
                    in_use: Any, mark: Callable[[], None], allreduce: Any, in_place: Any,
                    oop_from: int | None, pieces: tuple[int, int] | None, scratch: Scratch,
                    conflict: _Conflict) -> Callable[[Any, ReduceOp], bool]:
    """The all-reduce fast path of a plain numpy array, in place on the caller's buffer.

    Up to ``whole`` bytes (:func:`_limits`: every size when ``oop_from`` and ``pieces`` are
    None) one in-place call; above, a C-contiguous buffer larger than ``pieces[0]`` bytes goes
    in pieces of ``pieces[1]`` bytes, and a buffer or piece of ``oop_from`` bytes or more is
    copied into ``scratch`` and reduced from there into itself by MPI's out-of-place form.
    """
    like, copyto = scratch.like, numpy.copyto
    whole, above, piece, oop = _limits(oop_from, pieces)
    # The previous call's (dtype, op, MPI op), one tuple read at once: a call like it (the
    # common case) skips the two dict lookups (hashing a dtype costs about 55 ns); ``native``
    # only ever gains entries, so a hit is never stale.
    last: list[tuple[Any, Any, Any]] = [(None, None, None)]
    ndarray = _ndarray  # a closure's cell reads faster than a module's global

    def all_reduce(buf: Any, op: ReduceOp) -> bool:
        if type(buf) is ndarray and (buf.ndim < 2 or buf.flags.c_contiguous):
            # Only MPI ops are cached (never None), so a hit needs no test of its own.
            if (dtype := buf.dtype) is not (hit := last[0])[0] or op is not hit[1]:
                by_dtype = native.get(op)
                mpi_op = by_dtype.get(dtype) if by_dtype is not None else None
                if mpi_op is None:
                    return False
                last[0] = hit = (dtype, op, mpi_op)
            if (left := due[0]) > 1:
                due[0] = left - 1
                if in_use.owner is not None:
                    conflict(in_use, comm, "all_reduce")
                try:
                    in_use.owner = True
                    mark()  # the watchdog's mark: a new blocking call
                    if (nbytes := buf.nbytes) <= whole:
                        allreduce(in_place, buf, hit[2])
                    elif nbytes > above and buf.flags.c_contiguous:
                        flat = buf.reshape(-1)
                        step = max(1, piece // buf.itemsize)
                        for start in range(0, flat.size, step):
                            part = flat[start:start + step]
                            if part.nbytes >= oop:
                                send = like(part)
                                copyto(send, part)
                                allreduce(send, part, hit[2])
                            else:
                                allreduce(in_place, part, hit[2])
                    elif nbytes >= oop:
                        send = like(buf)
                        copyto(send, buf)
                        allreduce(send, buf, hit[2])
                    else:  # a strided 1-D view: mpi4py declines it, for the general path
                        allreduce(in_place, buf, hit[2])
                except _DECLINED:
                    due[0] += 1
                    return False
                except MPI.Exception as exc:
                    collective_failed("all_reduce", comm, exc, (buf,))
                finally:
                    in_use.owner = None
                return True
            # the due call: the general path checks it
        return False

    return all_reduce


def all_reduce_at_path(comm: Any, in_use: Any, mark: Callable[[], None], allreduce: Any,
                       in_place: Any, due: list[int], oop_from: int | None,
                       pieces: tuple[int, int] | None, scratch: Scratch,
                       conflict: _Conflict) -> Callable[[int, int, Any, Any], bool]:
    """The in-place all-reduce of ``nbytes`` of memory at ``address`` (a torch tensor's),
    typed by an MPI datatype and reduced by an MPI op that the caller knows to be native:
    no array object to make (``Tensor.numpy()`` costs 0.7 us, the address 0.2). Up to
    ``whole`` bytes (:func:`_limits`) one in-place call; larger than ``pieces[0]`` bytes it
    goes in pieces of ``pieces[1]`` bytes (whole elements); from ``oop_from`` bytes up (None:
    never) the memory or piece is copied into ``scratch`` and reduced from there by MPI's
    out-of-place form."""
    fromaddress = MPI.buffer.fromaddress
    raw, copyto, frombuffer, uint8 = scratch.raw, numpy.copyto, numpy.frombuffer, numpy.uint8
    whole, above, piece, oop = _limits(oop_from, pieces)

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
            if nbytes <= whole:
                allreduce(in_place, [fromaddress(address, nbytes), datatype], mpi_op)
                return True
            step = nbytes
            if nbytes > above:
                size = datatype.Get_size()
                step = max(1, piece // size) * size
            for start in range(0, nbytes, step):
                n = min(step, nbytes - start)
                memory: Any = fromaddress(address + start, n)
                if n >= oop:
                    send = raw(n)
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
