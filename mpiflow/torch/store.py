"""A ``torch.distributed.Store`` served over MPI: rendezvous with no address, port or listener.

``torch.distributed.init_process_group`` needs a key-value store for its rendezvous and its
bookkeeping, and gloo groups exchange their addresses through it. Under ``mpiexec`` the ranks
can already reach each other, so :class:`MPIStore` keeps the store on rank 0 of an MPI
communicator and serves it over a private duplicate of that communicator: no
``MASTER_ADDR``/``MASTER_PORT``, no TCP listener. It behaves as ``torch.distributed.TCPStore``
does (blocking ``get``, ``add`` returning the new value, ``compare_set``, timeouts raising
``DistStoreError``), so any caller of a store, C++ (``PrefixStore``, ``ProcessGroupGloo``) or
Python, can use it.

How it works:

- rank 0 holds the data in a dict; its own calls use the dict directly, under a lock;
- a daemon thread on rank 0 answers the other ranks' requests (small pickled messages on the
  private communicator). It polls with ``MPI_Iprobe`` and sleeps between polls, from 50 us
  when busy up to 2 ms when idle, because a blocking MPI receive spins a core;
- a ``get`` or ``wait`` for a key that does not exist yet is parked on rank 0 and answered when
  the key is set; the caller polls for the answer until its deadline, and never longer;
- :meth:`MPIStore.close` (or the exit of the interpreter) says goodbye to rank 0, whose thread
  goes on serving until every rank has said goodbye or the store's timeout has passed; an
  ``atexit`` hook ends every store before mpi4py finalizes MPI.

Example:
    >>> import torch.distributed as dist
    >>> from mpi4py import MPI
    >>> from mpiflow.torch.store import MPIStore
    >>> store = MPIStore()                        # collective: every rank builds it
    >>> dist.init_process_group("gloo", store=dist.PrefixStore("pg", store),
    ...                         rank=MPI.COMM_WORLD.rank, world_size=MPI.COMM_WORLD.size)
"""

from __future__ import annotations

import atexit
import contextlib
import enum
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch.distributed as dist
from mpi4py import MPI

__all__ = ["MPIStore"]

_MIN_DELAY = 50e-6  # seconds between polls while messages come in
_MAX_DELAY = 2e-3  # ... growing to this while idle: about 500 cheap polls a second
_GROWTH = 1.5  # per idle poll: the slowest poll comes after ~10 polls, ~5 ms
_HOT = 0.02  # rank 0 polls at the fastest for this long after each request: the next one
# usually follows at once (a rendezvous is a burst of set, get, add)
_BYE_WAIT = 10.0  # longest a closing rank waits for rank 0 to acknowledge its goodbye
_DRAIN_WAIT = 1.0  # longest a closing rank waits for its own calls and sends to finish
_REQUEST_TAG = 0  # requests go to rank 0 with this tag; each answer has a tag of its own

Value = str | bytes | bytearray | memoryview


class _Op(enum.IntEnum):
    """What a request asks rank 0 to do (it travels in the message, so it is a small int)."""

    SET = enum.auto()
    ADD = enum.auto()
    COMPARE_SET = enum.auto()
    DELETE = enum.auto()
    NUM_KEYS = enum.auto()
    CHECK = enum.auto()
    APPEND = enum.auto()
    MULTI_SET = enum.auto()
    LOOKUP = enum.auto()  # get / wait / multi_get: answered once every key exists
    CANCEL = enum.auto()  # a lookup whose caller gave up
    BYE = enum.auto()  # this rank has closed its store


def _as_bytes(value: Value) -> bytes:
    """A store value as bytes: str is UTF-8 encoded, as TCPStore's Python binding does."""
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


# TCPStore reads a counter with std::stoll: leading blanks, a sign, digits, anything after.
_INTEGER = re.compile(rb"\s*([+-]?\d+)")


class _Table:
    """The key-value data on rank 0, shared by rank 0's own calls and the server thread.

    Every change bumps :attr:`version`, wakes the local waiters and sets :attr:`changed`,
    which the server thread sleeps on, so that parked remote lookups are answered at once.
    """

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.cond = threading.Condition()
        self.version = 0
        self.changed = threading.Event()

    def _touch(self) -> None:
        self.version += 1
        self.cond.notify_all()
        self.changed.set()

    def set(self, key: str, value: bytes) -> None:
        self.data[key] = value
        self._touch()

    def add(self, key: str, amount: int) -> int:
        old = self.data.get(key, b"0")
        match = _INTEGER.match(old)
        if match is None:
            raise ValueError(f"MPIStore.add: the value of key {key!r} is not an integer: "
                             f"{old[:64]!r}")
        new = int(match.group(1)) + int(amount)
        self.data[key] = str(new).encode()
        self._touch()
        return new

    def compare_set(self, key: str, expected: bytes, desired: bytes) -> bytes:
        current = self.data.get(key)
        if current is None and expected:
            # As TCPStore: a missing key is created only when the caller expected nothing;
            # otherwise the caller gets its own expected value back.
            return expected
        if current is None or current == expected:
            self.data[key] = desired
            self._touch()
            return desired
        return current

    def delete(self, key: str) -> bool:
        if self.data.pop(key, None) is None:
            return False
        self._touch()
        return True

    def num_keys(self) -> int:
        return len(self.data)

    def check(self, keys: Sequence[str]) -> bool:
        return all(k in self.data for k in keys)

    def append(self, key: str, value: bytes) -> None:
        self.data[key] = self.data.get(key, b"") + value
        self._touch()

    def multi_set(self, keys: Sequence[str], values: Sequence[bytes]) -> None:
        self.data.update(zip(keys, values))
        self._touch()

    def lookup(self, keys: Sequence[str]) -> list[bytes] | None:
        """The values of ``keys``, or None while one of them is missing."""
        if not all(k in self.data for k in keys):
            return None
        return [self.data[k] for k in keys]


# The operations that never wait, by request code: the same table serves rank 0's own calls
# and the server thread.
_APPLY: dict[_Op, Callable[..., Any]] = {
    _Op.SET: _Table.set,
    _Op.ADD: _Table.add,
    _Op.COMPARE_SET: _Table.compare_set,
    _Op.DELETE: _Table.delete,
    _Op.NUM_KEYS: _Table.num_keys,
    _Op.CHECK: _Table.check,
    _Op.APPEND: _Table.append,
    _Op.MULTI_SET: _Table.multi_set,
}


def _free(comm: MPI.Comm, sends: list[MPI.Request]) -> None:
    """Free ``comm`` once every send on it has completed; otherwise leave it (a leak is safe,
    freeing it under a pending send or before a late answer lands is not)."""
    deadline = time.monotonic() + _DRAIN_WAIT
    while sends and time.monotonic() < deadline and not MPI.Is_finalized():
        sends[:] = [r for r in sends if not r.Test()]
        if sends:
            time.sleep(_MAX_DELAY)
    if not sends and not MPI.Is_finalized():
        with contextlib.suppress(MPI.Exception):
            comm.Free()


@dataclass
class _Parked:
    """A remote lookup waiting on rank 0 for keys that do not exist yet."""

    source: int
    tag: int
    request_id: int
    keys: list[str]


class _Server:
    """Rank 0's thread: answers the other ranks' requests on the private communicator."""

    def __init__(self, comm: MPI.Comm, table: _Table) -> None:
        self.comm = comm
        self.table = table
        self.peers = comm.Get_size() - 1
        self.gone: set[int] = set()  # ranks that said goodbye
        self.parked: list[_Parked] = []
        self.sends: list[MPI.Request] = []
        self.give_up_at: float | None = None  # set by close(): serve until then at most
        self.thread = threading.Thread(target=self._main, name="mpiflow-store", daemon=True)
        self.thread.start()

    def close(self, grace: float) -> None:
        """Serve the ranks still using the store for at most ``grace`` more seconds."""
        if self.give_up_at is None:
            self.give_up_at = time.monotonic() + grace
            self.table.changed.set()

    def join(self) -> None:
        """Wait for the thread (it ends once every rank said goodbye or the grace passed)."""
        if self.thread is not threading.current_thread():
            self.thread.join()

    def _done(self) -> bool:
        if self.give_up_at is None:
            return False
        return len(self.gone) == self.peers or time.monotonic() >= self.give_up_at

    def _main(self) -> None:
        try:
            self._serve()
        except Exception:
            # The thread must never take the process down: the other ranks' calls time out.
            with contextlib.suppress(Exception):
                sys.stderr.write("[rank 0] mpiflow MPIStore server stopped after an error:\n"
                                 + traceback.format_exc())
            return
        _free(self.comm, self.sends)

    def _serve(self) -> None:
        status = MPI.Status()
        delay = _MIN_DELAY
        seen = -1
        hot_until = 0.0
        while not self._done():
            self.table.changed.clear()
            while (message := self.comm.improbe(MPI.ANY_SOURCE, _REQUEST_TAG, status)) is not None:
                self._handle(status.Get_source(), message.recv())
                hot_until = time.monotonic() + _HOT
            with self.table.cond:
                if self.table.version != seen:
                    seen = self.table.version
                    self._answer_parked()
            if self.sends:
                self.sends = [r for r in self.sends if not r.Test()]
            # Sleep on the table's event: a change made by rank 0 itself wakes the thread.
            if self.table.changed.wait(delay) or time.monotonic() < hot_until:
                delay = _MIN_DELAY
            else:
                delay = min(_GROWTH * delay, _MAX_DELAY)

    def _reply(self, dest: int, tag: int, request_id: int, error: Exception | None,
               result: Any) -> None:
        self.sends.append(self.comm.isend((request_id, error, result), dest=dest, tag=tag))

    def _handle(self, source: int, request: tuple[int, int, int, tuple[Any, ...]]) -> None:
        op, tag, request_id, args = request
        if op == _Op.BYE:
            self.gone.add(source)
            self.parked = [p for p in self.parked if p.source != source]
            self._reply(source, tag, request_id, None, None)
        elif op == _Op.CANCEL:
            self.parked = [p for p in self.parked
                           if (p.source, p.request_id) != (source, args[0])]
        elif op == _Op.LOOKUP:
            keys, park = args
            with self.table.cond:
                values = self.table.lookup(keys)
            if values is not None or not park:
                self._reply(source, tag, request_id, None, values)
            else:
                self.parked.append(_Parked(source, tag, request_id, keys))
        else:
            try:
                with self.table.cond:
                    result = _APPLY[_Op(op)](self.table, *args)
            except Exception as error:  # the caller's to handle: it is raised there
                self._reply(source, tag, request_id, error, None)
            else:
                self._reply(source, tag, request_id, None, result)

    def _answer_parked(self) -> None:
        """Answer the parked lookups whose keys all exist now (called under the table lock)."""
        waiting = []
        for p in self.parked:
            values = self.table.lookup(p.keys)
            if values is None:
                waiting.append(p)
            else:
                self._reply(p.source, p.tag, p.request_id, None, values)
        self.parked = waiting


class _Client:
    """A rank other than 0: sends requests to rank 0 and polls for each answer."""

    def __init__(self, comm: MPI.Comm) -> None:
        self.comm = comm
        self.rank = comm.Get_rank()
        self.closed = False
        self.sends: list[MPI.Request] = []  # fire-and-forget sends (cancellations)
        self.inflight = 0
        self._lock = threading.Lock()
        self._last_tag = _REQUEST_TAG
        self._last_id = 0
        self._tag_ub = min(int(comm.Get_attr(MPI.TAG_UB) or 32767), 1 << 20)

    def _ticket(self) -> tuple[int, int]:
        """A fresh answer tag and request id (threads may share a store: one tag each)."""
        with self._lock:
            self._last_tag = self._last_tag % self._tag_ub + 1
            self._last_id += 1
            return self._last_tag, self._last_id

    def request(self, op: _Op, args: tuple[Any, ...], deadline: float,
                on_timeout: Callable[[], Exception]) -> Any:
        """Send one request to rank 0 and wait for its answer until ``deadline``."""
        tag, request_id = self._ticket()
        with self._lock:
            if self.closed:
                raise dist.DistStoreError(f"MPIStore: the store is closed on rank {self.rank}")
            self.inflight += 1
        try:
            send = self.comm.isend((int(op), tag, request_id, args), dest=0, tag=_REQUEST_TAG)
            delay = _MIN_DELAY
            while True:
                message = self.comm.improbe(0, tag)
                if message is not None:
                    answer_id, error, result = message.recv()
                    if answer_id != request_id:  # a late answer to a call that timed out
                        continue
                    send.Wait()  # answered, so received: completes at once
                    if error is not None:
                        raise error
                    return result
                if self.closed:
                    self._forget(send, op, request_id)
                    raise dist.DistStoreError(
                        f"MPIStore: the store was closed on rank {self.rank} during a call")
                now = time.monotonic()
                if now >= deadline:
                    self._forget(send, op, request_id)
                    raise on_timeout()
                time.sleep(min(delay, deadline - now))
                delay = min(_GROWTH * delay, _MAX_DELAY)
        finally:
            with self._lock:
                self.inflight -= 1

    def _forget(self, send: MPI.Request, op: _Op, request_id: int) -> None:
        """Give up on a request: tell rank 0 to drop it if it is parked there."""
        self.sends.append(send)
        if op == _Op.LOOKUP:
            self.sends.append(self.comm.isend((int(_Op.CANCEL), 0, 0, (request_id,)),
                                              dest=0, tag=_REQUEST_TAG))
        self.sends = [r for r in self.sends if not r.Test()]

    def close(self) -> None:
        """Stop new calls, let the running ones notice, say goodbye to rank 0 and free."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        if MPI.Is_finalized():
            return
        deadline = time.monotonic() + _DRAIN_WAIT
        while self.inflight and time.monotonic() < deadline:
            time.sleep(_MAX_DELAY)  # each running call polls, sees `closed` and leaves
        tag, request_id = self._ticket()
        self.sends.append(self.comm.isend((int(_Op.BYE), tag, request_id, ()), dest=0,
                                          tag=_REQUEST_TAG))
        deadline = time.monotonic() + _BYE_WAIT
        while time.monotonic() < deadline:
            message = self.comm.improbe(0, tag)
            if message is not None and message.recv()[0] == request_id:
                _free(self.comm, self.sends)  # rank 0 has our last message: safe to free
                return
            time.sleep(_MAX_DELAY)
        # No answer: rank 0 has stopped serving. Leave the communicator to MPI_Finalize.


# Every store endpoint still open in this process, for the exit hook.
_open: set[MPIStore] = set()


def _close_all() -> None:
    """Before mpi4py finalizes MPI: close every store and wait for rank 0's server threads."""
    for store in list(_open):
        with contextlib.suppress(Exception):
            store._shutdown(join=True)


# mpi4py finalizes MPI in an exit hook registered when MPI was initialized (before this module
# was imported); exit hooks run last-registered first, so this one runs before it.
atexit.register(_close_all)


class MPIStore(dist.Store):
    """A ``torch.distributed.Store`` kept on rank 0 of an MPI communicator, served over MPI.

    Built collectively (every rank of ``comm`` calls the constructor in the same order). It
    behaves like ``TCPStore``: values are bytes (str is UTF-8 encoded), ``get`` blocks until
    the key exists or the timeout passes (``DistStoreError``), ``add`` stores the counter as
    decimal text and returns the new value. It opens no socket.

    Args:
        comm: the mpi4py communicator whose rank 0 holds the data; it is duplicated, so the
            store's messages never mix with others. Default: ``MPI.COMM_WORLD``.
        timeout: how long ``get``, ``wait`` (without its own timeout) and ``multi_get`` wait
            for missing keys, and how long rank 0 goes on serving after it closed; changed
            by :meth:`set_timeout` as on every store.

    Examples:
        >>> store = MPIStore()
        >>> if MPI.COMM_WORLD.rank == 1:
        ...     store.set("ready", b"yes")
        >>> store.get("ready")                    # every rank; waits for rank 1
        b'yes'
        >>> store.add("count", 1)                 # an int, shared by all ranks
    """

    timeout: timedelta  # the base class's property (torch's stubs leave it out)

    def __init__(self, comm: MPI.Comm | None = None,
                 timeout: timedelta = timedelta(seconds=300)) -> None:
        super().__init__()
        self.set_timeout(timeout)
        base = MPI.COMM_WORLD if comm is None else comm
        self._rank = base.Get_rank()
        self._size = base.Get_size()
        self._closed = False
        self._table: _Table | None = None
        self._server: _Server | None = None
        self._client: _Client | None = None
        private = base.Dup() if self._size > 1 else None  # collective
        if private is not None:
            with contextlib.suppress(MPI.Exception):
                private.Set_name("mpiflow MPIStore")
        if self._rank == 0:
            self._table = _Table()
            if private is not None:
                self._server = _Server(private, self._table)
        else:
            assert private is not None  # a rank other than 0: there are two ranks at least
            self._client = _Client(private)
        _open.add(self)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"MPIStore(rank={self._rank}, size={self._size}, {state})"

    # -- helpers ----------------------------------------------------------------------------

    def _seconds(self, timeout: timedelta | float | None) -> float:
        if timeout is None:
            timeout = self.timeout
        if isinstance(timeout, timedelta):
            return timeout.total_seconds()
        return float(timeout)

    def _closed_error(self) -> dist.DistStoreError:
        return dist.DistStoreError(f"MPIStore: the store is closed on rank {self._rank}")

    def _timeout_error(self, keys: Sequence[str], seconds: float) -> dist.DistStoreError:
        return dist.DistStoreError(
            f"wait timeout after {round(seconds * 1000)}ms, keys: {', '.join(keys)} "
            f"(MPIStore on rank {self._rank} of {self._size}: no rank set "
            f"{'it' if len(keys) == 1 else 'them all'} in time)")

    def _no_answer(self, op: _Op) -> Callable[[], Exception]:
        seconds = self._seconds(None)
        return lambda: dist.DistStoreError(
            f"MPIStore: rank 0 did not answer {op.name.lower()} within {seconds:g} s on "
            f"rank {self._rank} (has rank 0 closed the store or exited?)")

    def _call(self, op: _Op, *args: Any) -> Any:
        """Run a request that never waits for keys, here (rank 0) or on rank 0."""
        if self._client is not None:
            deadline = time.monotonic() + self._seconds(None)
            return self._client.request(op, args, deadline, self._no_answer(op))
        table = self._local_table()
        with table.cond:
            return _APPLY[op](table, *args)

    def _local_table(self) -> _Table:
        if self._closed or self._table is None:
            raise self._closed_error()
        return self._table

    def _lookup(self, keys: list[str], timeout: timedelta | float | None) -> list[bytes]:
        """The values of ``keys`` once they all exist; DistStoreError after ``timeout``."""
        seconds = self._seconds(timeout)
        deadline = time.monotonic() + max(seconds, 0.0)
        if self._client is not None:
            # A zero timeout asks once; a positive one parks the lookup on rank 0.
            park = seconds > 0
            values = self._client.request(
                _Op.LOOKUP, (keys, park),
                deadline if park else time.monotonic() + self._seconds(None),
                lambda: self._timeout_error(keys, seconds))
            if values is None:
                raise self._timeout_error(keys, seconds)
            return list(values)
        table = self._local_table()
        with table.cond:
            while True:
                values = table.lookup(keys)
                if values is not None:
                    return values
                if self._closed:
                    raise self._closed_error()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._timeout_error(keys, seconds)
                table.cond.wait(left)

    # -- the Store interface ----------------------------------------------------------------

    def set(self, key: str, value: Value) -> None:
        """Set ``key`` to ``value`` and wake every rank waiting for it.

        Args:
            key: the key.
            value: bytes, or str (stored UTF-8 encoded).
        """
        self._call(_Op.SET, key, _as_bytes(value))

    def get(self, key: str) -> bytes:
        """The value of ``key``, waiting for it to be set for at most the store's timeout.

        Args:
            key: the key.

        Returns:
            The value, as bytes.

        Raises:
            DistStoreError: the key was not set within the timeout.
        """
        return self._lookup([key], None)[0]

    def add(self, key: str, value: int) -> int:
        """Add ``value`` to the counter ``key`` (0 if missing); stored as its decimal text.

        Args:
            key: the key.
            value: the amount, possibly negative.

        Returns:
            The new value.

        Raises:
            ValueError: the key holds something that is not an integer.
        """
        return int(self._call(_Op.ADD, key, int(value)))

    def compare_set(self, key: str, expected_value: Value, desired_value: Value) -> bytes:
        """Set ``key`` to ``desired_value`` if it holds ``expected_value``, as TCPStore does.

        A missing key is set when ``expected_value`` is empty; otherwise it stays missing and
        ``expected_value`` is returned.

        Args:
            key: the key.
            expected_value: the value the key must hold for the swap.
            desired_value: the new value.

        Returns:
            The value of the key after the call (``expected_value`` for a missing key that
            was not set).
        """
        return bytes(self._call(_Op.COMPARE_SET, key, _as_bytes(expected_value),
                                _as_bytes(desired_value)))

    def delete_key(self, key: str) -> bool:
        """Delete ``key``.

        Args:
            key: the key.

        Returns:
            Whether the key existed.
        """
        return bool(self._call(_Op.DELETE, key))

    def num_keys(self) -> int:
        """The number of keys in the store (every prefix's).

        Returns:
            The number of keys.
        """
        return int(self._call(_Op.NUM_KEYS))

    def check(self, keys: list[str]) -> bool:
        """Whether every key of ``keys`` exists, without waiting.

        Args:
            keys: the keys.

        Returns:
            True if all exist (also for no keys).
        """
        return bool(self._call(_Op.CHECK, list(keys)))

    def wait(self, keys: list[str], timeout: timedelta | None = None) -> None:
        """Wait until every key of ``keys`` exists.

        Args:
            keys: the keys.
            timeout: how long to wait; the store's timeout if None; zero checks once.

        Raises:
            DistStoreError: some key was still missing after the timeout.
        """
        self._lookup(list(keys), timeout)

    def append(self, key: str, value: Value) -> None:
        """Append ``value`` to the value of ``key`` (create it if missing).

        Args:
            key: the key.
            value: bytes, or str (UTF-8 encoded).
        """
        self._call(_Op.APPEND, key, _as_bytes(value))

    def multi_get(self, keys: list[str]) -> list[bytes]:
        """The values of ``keys``, waiting for them all for at most the store's timeout.

        Args:
            keys: the keys.

        Returns:
            The values, in the order of ``keys``.

        Raises:
            DistStoreError: some key was not set within the timeout.
        """
        return self._lookup(list(keys), None)

    def multi_set(self, keys: list[str], values: list[Value]) -> None:
        """Set every key of ``keys`` to the value at the same position of ``values``, at once.

        Args:
            keys: the keys.
            values: their values (bytes or str).

        Raises:
            ValueError: the two lists differ in length.
        """
        if len(keys) != len(values):
            raise ValueError(f"MPIStore.multi_set: {len(keys)} keys but {len(values)} values")
        self._call(_Op.MULTI_SET, list(keys), [_as_bytes(v) for v in values])

    def has_extended_api(self) -> bool:
        """Whether append, multi_get and multi_set are native (they are).

        Returns:
            True.
        """
        return True

    def clone(self) -> MPIStore:
        """A store for another thread: this one, since every method is thread-safe.

        Returns:
            This store.
        """
        return self

    # C++ callers (PrefixStore, ProcessGroupGloo) reach these two through the C++ names.
    def deleteKey(self, key: str) -> bool:
        """Delete ``key`` (``delete_key`` under its C++ name, for C++ callers)."""
        return self.delete_key(key)

    def getNumKeys(self) -> int:
        """The number of keys (``num_keys`` under its C++ name, for C++ callers)."""
        return self.num_keys()

    # -- life cycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the store on this rank; idempotent, never collective, never long.

        Later calls on this rank raise ``DistStoreError``; calls waiting in other threads of
        this rank raise too. Rank 0 goes on answering the other ranks until each has closed
        its store or the store's timeout has passed; the interpreter's exit waits for that.
        """
        self._shutdown(join=False)

    def _shutdown(self, join: bool) -> None:
        if not self._closed:
            self._closed = True
            if self._table is not None:
                with self._table.cond:
                    self._table.cond.notify_all()  # local waiters see `closed` and leave
            if self._client is not None:
                self._client.close()
            if self._server is not None:
                self._server.close(max(self._seconds(None), 0.0))
        if join and self._server is not None:
            self._server.join()
        if self._server is None or not self._server.thread.is_alive():
            _open.discard(self)

    def __enter__(self) -> MPIStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
