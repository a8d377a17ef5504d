"""``MPIFLOW_DEBUG=1``: ranks compare each collective's arguments before running it.

Ranks that call different collectives, or one collective with different dtypes, shapes,
reduce ops or roots, deadlock or silently exchange garbage (an all-gather of mismatched
shapes "succeeds"). In debug mode every communicator is a :class:`DebugMPICommunicator`
(:func:`~.mpi.new_communicator` makes one, as this module registers at import):
before each collective, its ranks all-gather a small fixed-size fingerprint (operation,
call number on this communicator, dtype, shape, element count, reduce op, root, counts, group
size) on a shadow duplicate of the communicator and compare. On a mismatch *every* rank raises
the same :class:`CollectiveMismatchError`, naming the ranks and what differs, and the
collective does not run. ``all_to_all_v`` also checks that what each rank sends matches what
its peer expects. The ranks compare right before MPI, after each rank's own argument checks: a
rank whose checks raise (here, or in a public face: :meth:`DebugMPICommunicator.failed`) takes
part with a "raised" row, so that the other ranks raise too instead of running the collective
without it; when every rank raised, each raises its own error. A collective that a second
thread starts on a group while another thread of the rank is inside one on it raises
``RuntimeError`` on that thread (``.fast.concurrent_use``).

It costs one small all-gather per collective, so it is for finding a bug, not for production
runs; without it the plain :class:`~.mpi.MPICommunicator` pays nothing.

Example:
    Under ``MPIFLOW_DEBUG=1 mpiexec -n 2 python job.py``, where rank 0 calls
    ``dist.all_reduce(x)`` on float32 and rank 1 on float64, both ranks raise (a job of
    several ranks, so not a doctest)::

        CollectiveMismatchError: ranks called mismatched collectives on the world (ranks 0..1):
          rank 0: all_reduce(dtype=float32, shape=(4,), op=SUM)
          rank 1: all_reduce(dtype=float64, shape=(4,), op=SUM)
          they differ in: dtype
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import sys
import zlib
from _thread import get_ident
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy
from mpi4py import MPI

from ...core import settings
from ...core.reduce_op import ReduceOp
from ..fast import concurrent_use
from ..mpi.communicator import MPICommunicator
from ..mpi.interface import OPERATIONS
from ..watchdog import monitor as watchdog
from ..watchdog.report import describe_group, ranks_text
from ..watchdog.state import mark_call

__all__ = ["FINGERPRINT_SPECS", "CollectiveMismatchError", "DebugMPICommunicator", "Fingerprint",
           "digest_of", "enabled", "name_method"]


class CollectiveMismatchError(ValueError):
    """Ranks called different collectives, or one collective with different arguments.

    Raised on every rank of the communicator (``MPIFLOW_DEBUG=1``), before the collective runs.
    """


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``MPIFLOW_DEBUG`` asks for debug mode (an on value of :mod:`mpiflow.core.settings`).

    Raises:
        SettingError: a value that is neither on nor off.
    """
    return bool(settings.read("MPIFLOW_DEBUG", environ))


_MAGIC = 0x6D70_6966_6C6F_77  # "mpiflow": tells a fingerprint from stray data
_DIMS = 4  # dims sent as they are; longer shapes are compared by hash too
_OPS = list(ReduceOp)
# The fields of a fingerprint, in order; each names what differs in the error message.
_FIELDS = ("magic", "operation", "call number", "dtype", "ndim", *(f"dim {i}" for i in
           range(_DIMS)), "shape", "element count", "reduce op", "root", "counts", "ranks",
           "group size", "raised")
_LENGTH = len(_FIELDS)
_WHAT = {"ndim": "shape", "element count": "shape", **{f"dim {i}": "shape" for i in range(_DIMS)}}


def _hash(values: Sequence[int]) -> int:
    return int(zlib.crc32(numpy.asarray(list(values), dtype=numpy.int64).tobytes()))


_MASK = (1 << 63) - 1  # digests are 63-bit: -h is an int64 for every h
_MIX = 0x9E37_79B9_7F4A_7C15  # odd: call numbers map to distinct multiples mod 2**63


def digest_of(row: numpy.ndarray) -> int:
    """A 63-bit digest of a fingerprint row, the same on every rank (Python's ``hash`` of
    bytes is salted per process, so this is BLAKE2b's).

    Example:
        >>> row = Fingerprint("float32", (4,)).encode("all_reduce", 0, 2)
        >>> digest_of(row) == digest_of(row.copy()), 0 <= digest_of(row) < 2 ** 63
        (True, True)
    """
    return int.from_bytes(hashlib.blake2b(row.tobytes(), digest_size=8).digest(),
                          "little") & _MASK


def _dtype_code(dtype: Any) -> int:
    if dtype is None:
        return 0
    text = numpy.dtype(dtype).str.encode()
    if len(text) > 8:
        return -_hash(list(text)) - 1
    return int(numpy.frombuffer(text.ljust(8, b"\0"), dtype=numpy.int64)[0])


def _dtype_name(code: int) -> str:
    if code == 0:
        return "none"
    if code < 0:
        return f"a dtype of hash {-code - 1}"
    try:
        return str(numpy.dtype(numpy.int64(code).tobytes().rstrip(b"\0").decode()))
    except (TypeError, ValueError, UnicodeDecodeError):
        return f"dtype code {code}"


@dataclass(frozen=True)
class Fingerprint:
    """What every rank must agree on for one collective call.

    Attributes:
        dtype: the dtype of the buffers (None: no data).
        shape: the shape that must match across ranks (None: sizes may differ per rank).
        op: the reduce op, if any.
        root: the root rank of this communicator, if any.
        counts: per-rank counts that every rank must pass alike (the ``_v`` operations).
        ranks: ranks every rank must pass alike (``split``).
    """

    dtype: Any = None
    shape: tuple[int, ...] | None = None
    op: Any = None
    root: Any = None
    counts: tuple[int, ...] | None = None
    ranks: tuple[int, ...] | None = None

    def encode(self, operation: str, call: int, size: int, raised: bool = False
               ) -> numpy.ndarray:
        """The fixed-size int64 row the ranks all-gather (``raised``: this rank's call raised
        on its arguments before taking part)."""
        row = numpy.zeros(_LENGTH, dtype=numpy.int64)
        row[0], row[1], row[2] = _MAGIC, OPERATIONS.index(operation) + 1, call
        row[3] = _dtype_code(self.dtype)
        if self.shape is None:
            row[4] = -1
        else:
            row[4] = len(self.shape)
            for i, n in enumerate(self.shape[:_DIMS]):
                row[5 + i] = n
            row[5 + _DIMS] = _hash(self.shape) if len(self.shape) > _DIMS else 0
            row[6 + _DIMS] = math.prod(self.shape)
        row[7 + _DIMS] = _OPS.index(self.op) + 1 if isinstance(self.op, ReduceOp) else \
            (0 if self.op is None else -1)
        row[8 + _DIMS] = _as_int(self.root)
        row[9 + _DIMS] = -1 if self.counts is None else _hash(self.counts)
        row[10 + _DIMS] = -1 if self.ranks is None else _hash(self.ranks)
        row[11 + _DIMS] = size
        row[12 + _DIMS] = int(raised)
        return row


def _as_int(value: Any) -> int:
    if value is None:
        return -1
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return -2


def _shape(buf: Any) -> tuple[int, ...] | None:
    shape = getattr(buf, "shape", None)
    return None if shape is None else tuple(int(n) for n in shape)


def _counts(counts: Any) -> tuple[int, ...] | None:
    try:
        return tuple(int(c) for c in counts)
    except (TypeError, ValueError):
        return None


# What each collective's ranks must agree on, from its arguments (the method's signature).
FINGERPRINT_SPECS: dict[str, Callable[..., Fingerprint]] = {
    "barrier": lambda async_op=False: Fingerprint(),
    "all_reduce": lambda buf, op=ReduceOp.SUM, async_op=False:
        Fingerprint(getattr(buf, "dtype", None), _shape(buf), op),
    "reduce": lambda buf, op, root, async_op=False:
        Fingerprint(getattr(buf, "dtype", None), _shape(buf), op, root),
    "broadcast": lambda buf, root, async_op=False:
        Fingerprint(getattr(buf, "dtype", None), _shape(buf), root=root),
    "all_gather": lambda send, recv, async_op=False:
        Fingerprint(getattr(send, "dtype", None), _shape(send)),
    "all_gather_v": lambda send, recv, counts, async_op=False:
        Fingerprint(getattr(send, "dtype", None), counts=_counts(counts)),
    "gather": lambda send, recv, root, async_op=False:
        Fingerprint(getattr(send, "dtype", None), _shape(send), root=root),
    "scatter": lambda send, recv, root, async_op=False:
        Fingerprint(getattr(recv, "dtype", None), _shape(recv), root=root),
    "reduce_scatter": lambda send, recv, op=ReduceOp.SUM, async_op=False:
        Fingerprint(getattr(send, "dtype", None), _shape(send), op),
    "reduce_scatter_v": lambda send, recv, counts, op=ReduceOp.SUM, async_op=False:
        Fingerprint(getattr(send, "dtype", None), (getattr(send, "size", -1),), op,
                    counts=_counts(counts)),
    "all_to_all": lambda send, recv, async_op=False:
        Fingerprint(getattr(send, "dtype", None), _shape(send)),
    "all_to_all_v": lambda send, send_counts, recv, recv_counts, async_op=False:
        Fingerprint(getattr(send, "dtype", None)),
    "split": lambda ranks: Fingerprint(ranks=_counts(ranks)),
    "split_by_color": lambda color, key=0: Fingerprint(),
}


def _describe(row: Sequence[int], operation_names: Sequence[str] = OPERATIONS) -> str:
    """A fingerprint row as a call: ``all_reduce(dtype=float32, shape=(4,), op=SUM)``."""
    code = int(row[1])
    name = operation_names[code - 1] if 0 < code <= len(operation_names) else f"op #{code}"
    parts = []
    if row[3]:
        parts.append(f"dtype={_dtype_name(int(row[3]))}")
    ndim = int(row[4])
    if ndim >= 0:
        dims = [str(int(n)) for n in row[5:5 + min(ndim, _DIMS)]]
        if ndim > _DIMS:
            dims.append(f"... ({ndim} dims, {int(row[6 + _DIMS])} elements)")
        parts.append(f"shape=({', '.join(dims)}{',' if ndim == 1 else ''})")
    op = int(row[7 + _DIMS])
    if op:
        parts.append(f"op={_OPS[op - 1].name}" if 0 < op <= len(_OPS) else "op=<not a ReduceOp>")
    if int(row[8 + _DIMS]) != -1:
        parts.append(f"root={int(row[8 + _DIMS])}")
    if len(row) > 12 + _DIMS and row[12 + _DIMS]:
        return f"{name} raised before taking part [call {int(row[2])} on this group]"
    return f"{name}({', '.join(parts)}) [call {int(row[2])} on this group]"


def mismatch_message(table: numpy.ndarray, world_ranks: Sequence[int] | None,
                     world_size: int, errors: Sequence[str | None] = (),
                     checked_by: str = "MPIFLOW_DEBUG=1") -> str | None:
    """What differs between the ranks' fingerprint rows, or None when they all agree.

    Args:
        table: one row per rank of the communicator, in its rank order.
        world_ranks: the world rank of each row, or None to name communicator ranks.
        world_size: the world's size (to name the world as such).
        errors: per row, the error of a rank that raised before taking part (or None).
        checked_by: the setting that made the ranks compare, for the message's last line.

    Returns:
        The message every rank raises, the same on all of them.
    """
    if table.tobytes() == table[0].tobytes() * len(table):  # the common case, cheaply
        return None
    rows = [tuple(int(v) for v in row) for row in table]
    if all(row == rows[0] for row in rows):
        return None
    names = list(world_ranks) if world_ranks is not None else list(range(len(rows)))
    by_row: dict[tuple[int, ...], list[int]] = {}
    for i, row in enumerate(rows):
        by_row.setdefault(row, []).append(names[i])
    differ = []
    for j, field in enumerate(_FIELDS):
        if len({row[j] for row in rows}) > 1:
            what = _WHAT.get(field, field)
            if what not in differ:
                differ.append(what)
    if "raised" in differ:  # the ranks that raised sent no arguments to compare
        differ = ["raised"] + [d for d in differ if d in ("operation", "call number")]
    elif "operation" in differ:  # then the other arguments differ as a matter of course
        differ = [d for d in differ if d in ("operation", "call number")]
    group = describe_group(world_ranks, len(rows), world_size)
    lines = [f"ranks called mismatched collectives on {group}:"]
    lines += [f"  {ranks_text(ranks)}: {_describe(row)}" for row, ranks in by_row.items()]
    for i, error in enumerate(errors):
        if error:
            lines.append(f"  rank {names[i]} raised: {error}")
    if "raised" in differ:
        lines.append("  some ranks raised on their arguments while the others were ready to run "
                     "the collective: had it run, the others would have waited for them or "
                     "finished with data of another call")
    shown = ("whether they raised" if d == "raised" else d for d in differ)
    lines.append(f"  they differ in: {', '.join(shown)}")
    if "call number" in differ:
        lines.append("  (the call numbers differ: some ranks made more collectives on this group "
                     "before this one)")
    lines.append(f"  ({checked_by} checked the arguments; the collective did not run)")
    return "\n".join(lines)


def _matrix_message(send: numpy.ndarray, recv: numpy.ndarray,
                    names: Sequence[int]) -> str | None:
    """all_to_all_v: ``send[i][j]`` (rank i to j) must equal ``recv[j][i]`` (j from i)."""
    wrong = [(i, j) for i in range(len(names)) for j in range(len(names))
             if send[i][j] != recv[j][i]]
    if not wrong:
        return None
    lines = ["all_to_all_v counts do not match between ranks:"]
    lines += [f"  rank {names[i]} sends {int(send[i][j])} element(s) to rank {names[j]}, "
              f"which expects {int(recv[j][i])}" for i, j in wrong[:10]]
    if len(wrong) > 10:
        lines.append(f"  ... and {len(wrong) - 10} more pairs")
    return "\n".join(lines)


class DebugMPICommunicator(MPICommunicator):
    """An :class:`~.mpi.MPICommunicator` that checks every collective's arguments first.

    :func:`~.mpi.new_communicator` returns one when ``MPIFLOW_DEBUG=1``; it can also be made
    directly. The shadow communicator it compares on is made at its first collective (which
    every rank of the group makes).

    Args:
        comm: the MPI communicator (``MPI.COMM_WORLD`` by default).

    Raises:
        CollectiveMismatchError: from any collective whose arguments differ between ranks,
            on every rank.
    """

    checks_every_call = True
    checked_by = "MPIFLOW_DEBUG=1"  # named in the error's last line
    # Compare a digest of the rows first (one small all-reduce) and all-gather the rows only
    # when the digests differ (the sampled check); debug mode all-gathers them every call.
    digests = False

    def __init__(self, comm: MPI.Comm | None = None) -> None:
        super().__init__(comm)
        self._shadow: MPI.Comm | None = None
        self._world_ranks: tuple[int, ...] | None = None
        self._calls = 0
        # encoded fingerprints and their digests (:func:`digest_of`), by call kind
        self._rows: dict[Any, tuple[numpy.ndarray, int]] = {}

    def __repr__(self) -> str:
        return f"DebugMPICommunicator(rank={self.rank}, size={self.size})"

    def _exchange(self, row: numpy.ndarray, digest: bool = False) -> numpy.ndarray:
        """Every rank's row, in rank order (collective on the shadow communicator); with
        ``digest``, ``row`` is ``[h, -h]`` and comes back as the ranks' ``[min h, -max h]``
        (one MPI_Allreduce of 16 bytes with MPI_MIN)."""
        mark_call()  # the watchdog's mark: a new blocking call
        shadow = self._shadow
        if shadow is None:
            self._shadow = shadow = self.mpi_comm.Dup()
        if self._world_ranks is None:
            group, world = self.mpi_comm.Get_group(), MPI.COMM_WORLD.Get_group()
            ranks = MPI.Group.Translate_ranks(group, list(range(self.size)), world)
            group.Free()
            world.Free()
            self._world_ranks = tuple(int(r) for r in ranks)
        if digest:
            shadow.Allreduce(MPI.IN_PLACE, row, MPI.MIN)
            return row
        table = numpy.empty((self.size, row.size), dtype=row.dtype)
        shadow.Allgather(row, table)
        return table

    def _agree(self, operation: str, args: tuple[Any, ...], kwargs: dict[str, Any],
               error: BaseException | None = None) -> None:
        """Raise :class:`CollectiveMismatchError` on every rank unless all ranks agree.

        Args:
            operation, args, kwargs: the call.
            error: what this rank's call raised on its arguments before taking part; the
                other ranks learn of it instead of running the collective without this one.
                When every rank raised, each goes on to raise its own error.
        """
        if self.size == 1:
            return
        try:
            fingerprint = FINGERPRINT_SPECS[operation](*args, **kwargs)
        except Exception:  # a call that raised may not even fit the signature
            if error is None:
                raise
            fingerprint = Fingerprint()
        self._calls += 1
        key = (operation, fingerprint, error is not None)
        encoded = self._rows.get(key)
        if encoded is None:  # a new kind of call on this group: encoded once
            row = fingerprint.encode(operation, 0, self.size, raised=error is not None)
            encoded = (row, digest_of(row))
            if len(self._rows) < 4096:
                with contextlib.suppress(TypeError):  # unhashable arguments: not cached
                    self._rows[key] = encoded
        if self.digests:
            # The call number goes in by a bijection: rows alike but for it differ too.
            h = (encoded[1] ^ (self._calls * _MIX)) & _MASK
            agreed = self._exchange(numpy.array([h, -h], dtype=numpy.int64), digest=True)
            if agreed[0] == -agreed[1]:  # min == max: every rank sent this digest
                if operation == "all_to_all_v" and error is None:  # (raised: on every rank)
                    self._check_counts(args, kwargs, error)
                return
        row = encoded[0].copy()
        row[2] = self._calls
        table = self._exchange(row)
        raised = table[:, 12 + _DIMS]
        errors: list[str | None] = []
        if raised.any():
            text = None if error is None else f"{type(error).__name__}: {error}"
            assert self._shadow is not None
            errors = self._shadow.allgather(text)
            if raised.all():
                return  # no rank takes part: each raises its own error
        message = mismatch_message(table, self._world_ranks, MPI.COMM_WORLD.Get_size(), errors,
                                   self.checked_by)
        if message is None and operation == "all_to_all_v":
            self._check_counts(args, kwargs, error)
        elif message is not None:
            mismatch = CollectiveMismatchError(message)
            mismatch.mpiflow_agreed = True  # type: ignore[attr-defined]
            raise mismatch from error

    def _check_counts(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                      error: BaseException | None) -> None:
        """all_to_all_v, once the ranks agree on the rest: what each rank sends must be what
        its peer expects (a second exchange: the ranks' counts differ by design)."""
        send_counts = _counts(kwargs.get("send_counts", args[1] if len(args) > 1 else ()))
        recv_counts = _counts(kwargs.get("recv_counts", args[3] if len(args) > 3 else ()))
        row = numpy.full(2 * self.size, -1, dtype=numpy.int64)
        for offset, counts in ((0, send_counts), (self.size, recv_counts)):
            if counts is not None and len(counts) == self.size:
                row[offset:offset + self.size] = counts
        table = self._exchange(row)
        names = self._world_ranks or tuple(range(self.size))
        message = _matrix_message(table[:, :self.size], table[:, self.size:], names)
        if message is not None:
            mismatch = CollectiveMismatchError(message)
            mismatch.mpiflow_agreed = True  # type: ignore[attr-defined]
            raise mismatch from error

    # The agreement of a call on host arrays happens as late as it can: in run, right before
    # MPI, after the local checks of MPICommunicator's method. A call that raises in those
    # checks on some ranks only then tells the others, instead of leaving them in the MPI
    # call (or finishing it, a broadcast's root, and matching this rank's next call).
    _pending: tuple[int, str, tuple[Any, ...], dict[str, Any]] | None = None

    def run(self, *args: Any, **kwargs: Any) -> Any:
        pending = self._pending
        if pending is not None and pending[0] == get_ident():
            self._pending = None
            self._agree(*pending[1:])
        return super().run(*args, **kwargs)

    def failed(self, operation: str, error: BaseException) -> None:
        """Tell the other ranks that this rank's ``operation`` raised before taking part.

        The public faces call it when their own checks raise on a debug communicator; it
        returns when every rank raised (each raises its own error), and raises
        :class:`CollectiveMismatchError` on every rank otherwise. An error that the ranks
        have already agreed on (raised inside this communicator's own call) passes.
        """
        if getattr(error, "mpiflow_agreed", False) or self.size == 1:
            return
        error.mpiflow_agreed = True  # type: ignore[attr-defined]
        self._agree(operation, (), {}, error)


# The collectives agreed on in run (a split or a device array's call never reaches it).
_LATE = frozenset(FINGERPRINT_SPECS) - {"split", "split_by_color"}


def _on_host(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    cupy = sys.modules.get("cupy")
    device_array = getattr(cupy, "ndarray", None)
    return device_array is None or not any(
        isinstance(a, device_array) for a in (*args, *kwargs.values()))


def _checked(name: str) -> Callable[..., Any]:
    late = name in _LATE

    def method(self: DebugMPICommunicator, *args: Any, **kwargs: Any) -> Any:
        # Two threads in collectives on one group at once mix their data between ranks: the
        # second one raises instead (the mark is the one the fast paths use; .fast).
        in_use = self.fast.in_use
        owner = in_use.owner
        if owner is not None:
            concurrent_use(in_use, self.mpi_comm, name)  # passes a nested call of its own
        else:
            in_use.owner = get_ident()
        try:
            if late and self.size > 1 and _on_host(args, kwargs):
                self._pending = (get_ident(), name, args, kwargs)
                try:
                    # looked up at call time, so that count_collectives' wrappers count it
                    out = getattr(MPICommunicator, name)(self, *args, **kwargs)
                except (ValueError, TypeError) as exc:
                    pending, self._pending = self._pending, None
                    if pending is not None:  # raised before the agreement: tell the others
                        self.failed(name, exc)
                    raise
                finally:
                    self._pending = None
            else:
                self._agree(name, args, kwargs)
                out = getattr(MPICommunicator, name)(self, *args, **kwargs)
        finally:
            if owner is None:
                in_use.owner = None
        if isinstance(out, MPICommunicator) and not isinstance(out, DebugMPICommunicator):
            out = DebugMPICommunicator(out.mpi_comm)  # a group of a checked group is checked
        return out

    return name_method(method, name, "DebugMPICommunicator",
                       f"``{name}``, after checking that every rank calls it alike.")


def name_method(method: Callable[..., Any], name: str, owner: str,
                doc: str) -> Callable[..., Any]:
    """Give a generated collective method the collective's name, so the watchdog's report
    (which reads the frame's code name) and tracebacks name the call.

    Args:
        method: the generated function.
        name: the collective's name, e.g. ``"all_reduce"``.
        owner: the class it is set on.
        doc: its docstring.

    Returns:
        ``method``, renamed.

    Example:
        >>> def f(): pass
        >>> name_method(f, "barrier", "C", "Barrier.").__qualname__
        'C.barrier'
    """
    method.__code__ = method.__code__.replace(co_name=name)
    method.__name__ = name
    method.__qualname__ = f"{owner}.{name}"
    method.__doc__ = doc
    return method


for _name in FINGERPRINT_SPECS:
    setattr(DebugMPICommunicator, _name, _checked(_name))


def _blocked_call(frame: Any) -> watchdog.BlockedCall | None:
    """A frame of the argument check's exchange: the collective it checks, for the watchdog's
    report (``debug``: the ranks have not agreed on the call yet)."""
    code = frame.f_code
    if code.co_name != "_exchange" or code.co_filename != _FILE:
        return None
    me = frame.f_locals.get("self")
    outer = frame.f_back
    while outer is not None and outer.f_code is not _AGREE:
        outer = outer.f_back
    operation = outer.f_locals.get("operation") if outer is not None else None
    return watchdog.BlockedCall(str(operation or "a collective"), getattr(me, "mpi_comm", None),
                                getattr(me, "size", None), None, debug=True)


_FILE = DebugMPICommunicator._exchange.__code__.co_filename
_AGREE = DebugMPICommunicator._agree.__code__
watchdog.register_blocking_site(DebugMPICommunicator._exchange)
watchdog.register_frame_reader(_blocked_call)
# .sampled registers the communicator kind (MPIFLOW_CHECK / MPIFLOW_DEBUG) with the MPI layer.
