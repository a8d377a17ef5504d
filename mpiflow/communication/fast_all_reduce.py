"""The all-reduce fast paths of :class:`.fast.FastPaths`, in the form in force (:mod:`.form`).

Two kinds: of a plain numpy array (``all_reduce_path``) and of memory at an address, a torch
tensor's (``all_reduce_at_path``). Each makes one in-place call up to the size the form in
force allows, its first test; above it, a buffer larger than ``pieces[0]`` bytes goes in
pieces of ``pieces[1]`` bytes (the cuts :func:`.form.all_reduce_formed` makes, so that ranks
may take different paths in one call), and a buffer or piece of ``oop_from`` bytes or more is
copied into a reused scratch buffer and reduced from there by MPI's out-of-place form. The
loops stay in the paths themselves rather than calling ``all_reduce_formed``: the watchdog
knows a fast path by its innermost frame. The numpy path reads the form from a
:class:`Limits` value that ``FastPaths`` changes in place (one function for the life of the
group: ``mpiflow.distributed.all_reduce`` is the world's); the path of an address is remade.
They follow the rules of the other fast paths (:mod:`.fast`): the fewest checks inline, True
when they ran, False to send the call to the general path (the public form: None, and the
general path's result); a second thread inside a collective on the group is reported by
``conflict`` (``fast.concurrent_use``, passed in: this module is below it). The watchdog reads
their frames as fast paths (``fast`` registers this file too), and their count of ``due`` as
their mark.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy
from mpi4py import MPI

from ..core.reduce_op import ReduceOp
from .form import Scratch
from .watchdog.failure import collective_failed

__all__ = ["DECLINED", "NEVER_ON", "Limits", "all_reduce_at_path", "all_reduce_path", "declined"]

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


class Limits:
    """The form in force for :func:`all_reduce_path`, changed in place (its path stays one
    function: ``mpiflow.distributed.all_reduce`` is one).

    Attributes:
        whole: one in-place call up to this many bytes; -1 while ``off``.
        above, piece, oop: pieces of ``piece`` bytes above ``above`` bytes; the out-of-place
            form from ``oop`` bytes (:func:`_limits`).
        off: the path declines every call (``fast.pause``).

    Example:
        >>> limits = Limits(None, (4096, 1024))
        >>> limits.whole, limits.piece
        (4096, 1024)
        >>> limits.off = True; limits.whole
        -1
    """

    __slots__ = ("_off", "_whole", "above", "oop", "piece", "whole")

    def __init__(self, oop_from: int | None, pieces: tuple[int, int] | None) -> None:
        self._off = False
        self.set(oop_from, pieces)

    def set(self, oop_from: int | None, pieces: tuple[int, int] | None) -> None:
        """Take the form ``(oop_from, pieces)`` (:mod:`.form`)."""
        self._whole, self.above, self.piece, self.oop = _limits(oop_from, pieces)
        self.whole = -1 if self._off else self._whole

    @property
    def off(self) -> bool:
        return self._off

    @off.setter
    def off(self, value: bool) -> None:
        self._off = value
        self.whole = -1 if value else self._whole


class _Never:
    """A deterministic switch that is never on (the fast paths below the public face)."""

    __slots__ = ()
    on = False


NEVER_ON = _Never()


def declined(tensor: Any, op: Any = None, group: Any = None, async_op: bool = False) -> bool:
    """What a fast path below the public face returns for a call it does not run."""
    return False


def all_reduce_path(comm: Any, native: dict[ReduceOp, dict[Any, MPI.Op]], due: list[int],
                    in_use: Any, allreduce: Any, in_place: Any, limits: Limits,
                    scratch: Scratch, conflict: _Conflict, *, ran: Any = True,
                    otherwise: Callable[..., Any] = declined, switch: Any = NEVER_ON,
                    default_op: ReduceOp = ReduceOp.SUM) -> Callable[..., Any]:
    """The all-reduce fast path of a plain numpy array, in place on the caller's buffer.

    Up to ``limits.whole`` bytes one in-place call; above, a C-contiguous buffer larger than
    ``limits.above`` bytes goes in pieces of ``limits.piece`` bytes, and a buffer or piece of
    ``limits.oop`` bytes or more is copied into ``scratch`` and reduced from there into itself
    by MPI's out-of-place form.

    The function takes ``(tensor, op, group=None, async_op=False)``, as
    ``mpiflow.distributed.all_reduce`` does, and returns ``ran`` for a call it ran;
    ``otherwise(tensor, op, group, async_op)`` makes any other call (a group, ``async_op``,
    another type, a due check, ``switch.on``) and gives the result. Below the public face
    ``ran`` is True and ``otherwise`` returns False; the world's public function
    (:meth:`.fast.FastPaths.public_all_reduce`) is one such path whose ``otherwise`` is the
    general path, so that a call costs one Python frame. It marks no call for the watchdog:
    counting down ``due`` is the mark (:meth:`.state.CallState.progress`).
    """
    like, copyto = scratch.like, numpy.copyto
    # The previous call's (dtype, op, MPI op), one tuple replaced at once (threads never see
    # a dtype with another op's MPI op): a call like it (the common case) skips the two dict
    # lookups; ``native`` only ever gains entries, so a hit is never stale.
    hit: tuple[Any, Any, Any] = (None, None, None)
    ndarray = _ndarray  # a closure's cell reads faster than a module's global

    def all_reduce(tensor: Any, op: Any = default_op, group: Any = None,
                   async_op: bool = False) -> Any:
        nonlocal hit
        # Any layout mpi4py takes whole (C or Fortran order) reduces element by element in
        # place alike; a strided view raises BufferError before anything is sent.
        if group is None and not async_op and type(tensor) is ndarray and not switch.on:
            if (dtype := tensor.dtype) is not (h := hit)[0] or op is not h[1]:
                by_dtype = native.get(op)
                mpi_op = by_dtype.get(dtype) if by_dtype is not None else None
                if mpi_op is None:  # only MPI ops are cached (never None)
                    return otherwise(tensor, op, group, async_op)
                hit = h = (dtype, op, mpi_op)
            if (left := due[0]) > 1:  # else the due call: the general path checks it
                due[0] = left - 1
                if in_use.owner is not None:
                    conflict(in_use, comm, "all_reduce")
                try:
                    in_use.owner = True
                    if (nbytes := tensor.nbytes) <= limits.whole:
                        allreduce(in_place, tensor, h[2])
                        return ran
                    # Larger, in the form's pieces: C order only, as every rank cuts it (the
                    # general path stages another layout and cuts it alike).
                    if not limits.off and tensor.flags.c_contiguous:
                        if nbytes > limits.above:
                            flat = tensor.reshape(-1)
                            step = max(1, limits.piece // tensor.itemsize)
                            for start in range(0, flat.size, step):
                                part = flat[start:start + step]
                                if part.nbytes >= limits.oop:
                                    send = like(part)
                                    copyto(send, part)
                                    allreduce(send, part, h[2])
                                else:
                                    allreduce(in_place, part, h[2])
                        elif nbytes >= limits.oop:
                            send = like(tensor)
                            copyto(send, tensor)
                            allreduce(send, tensor, h[2])
                        else:
                            allreduce(in_place, tensor, h[2])
                        return ran
                except _DECLINED:
                    pass
                except MPI.Exception as exc:
                    collective_failed("all_reduce", comm, exc, (tensor,))
                finally:
                    in_use.owner = None
                due[0] += 1  # declined: the general path counts it
        return otherwise(tensor, op, group, async_op)

    return all_reduce


def all_reduce_at_path(comm: Any, in_use: Any, allreduce: Any,
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
        if (left := due[0]) <= 1:
            return False  # the general path checks this call
        due[0] = left - 1
        if in_use.owner is not None:
            conflict(in_use, comm, "all_reduce")
        try:
            in_use.owner = True  # counting down ``due`` was the watchdog's mark
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
