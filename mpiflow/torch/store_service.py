"""The wire of :class:`~mpiflow.torch.store.MPIStore`: rank 0's table and server, the clients.

Requests are small pickled tuples on each store's private communicator; rank 0's one polling
thread serves every store of the process (see :mod:`mpiflow.torch.store` for the design).
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import torch.distributed as dist
from mpi4py import MPI

# Polling: every wake-up costs ~50 us of CPU here (mostly the kernel's), so the pause between
# polls grows while nothing comes: 2 ms costs ~2-3 % of a core, 10 ms well under 1 %.
_MIN_DELAY = 50e-6  # seconds between polls while messages come in
_MAX_DELAY = 2e-3  # ... growing to this while idle (after ~10 polls, ~5 ms)
_SLEEPY_DELAY = 10e-3  # ... and to this once idle for _SLEEPY_AFTER seconds
_SLEEPY_AFTER = 1.0
_GROWTH = 1.5  # per idle poll
_HOT = 0.02  # rank 0 polls at the fastest for this long after each request: the next one
# usually follows at once (a rendezvous is a burst of set, get, add)
BYE_WAIT = 10.0  # longest a closing rank waits for rank 0 to acknowledge its goodbye
EXIT_GRACE = 30.0  # longest rank 0 serves, at exit, the ranks that have not said goodbye
_DRAIN_WAIT = 1.0  # longest a closing rank waits for its own calls and sends to finish
_REQUEST_TAG = 0  # requests go to rank 0 with this tag; each answer has a tag of its own

def _next_delay(delay: float, idle: float) -> float:
    """The pause before the next poll, after ``delay`` and ``idle`` seconds of nothing."""
    return min(_GROWTH * delay, _SLEEPY_DELAY if idle >= _SLEEPY_AFTER else _MAX_DELAY)


# Request ids are unique in the process, across stores: MPI reuses the context of a freed
# communicator, and an answer that arrived after its caller gave up must never pass for the
# answer to a later store's request.
_request_ids = itertools.count(1)

Value = str | bytes | bytearray | memoryview


class Op(enum.IntEnum):
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


def as_bytes(value: Value) -> bytes:
    """A store value as bytes: str is UTF-8 encoded, as TCPStore's Python binding does."""
    if isinstance(value, str):
        return value.encode()
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError(f"a store value must be str or bytes (as TCPStore's), got "
                        f"{type(value).__name__}")
    return bytes(value)


def check_keys(*keys: object) -> None:
    """Refuse keys that are not str, as TCPStore does (TypeError).

    >>> check_keys("a", 1)
    Traceback (most recent call last):
    ...
    TypeError: a store key must be str (as TCPStore's), got int
    """
    for key in keys:
        if not isinstance(key, str):
            raise TypeError(f"a store key must be str (as TCPStore's), got "
                            f"{type(key).__name__}")


# TCPStore reads a counter with std::stoll: leading blanks, a sign, digits, anything after.
_INTEGER = re.compile(rb"\s*([+-]?\d+)")


class Table:
    """The key-value data on rank 0, shared by rank 0's own calls and the server thread.

    Every change bumps :attr:`version`, wakes the local waiters and sets ``wake``, which the
    server thread sleeps on, so that parked remote lookups are answered at once.
    """

    def __init__(self, wake: threading.Event) -> None:
        self.data: dict[str, bytes] = {}
        self.cond = threading.Condition()
        self.version = 0
        self.wake = wake

    def _touch(self) -> None:
        self.version += 1
        self.cond.notify_all()
        self.wake.set()

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
APPLY: dict[Op, Callable[..., Any]] = {
    Op.SET: Table.set,
    Op.ADD: Table.add,
    Op.COMPARE_SET: Table.compare_set,
    Op.DELETE: Table.delete,
    Op.NUM_KEYS: Table.num_keys,
    Op.CHECK: Table.check,
    Op.APPEND: Table.append,
    Op.MULTI_SET: Table.multi_set,
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


class Server:
    """Rank 0's side of one store: answers the other ranks' requests on its communicator.

    It owns no thread: :data:`poller`'s one thread polls every store of the process, so an
    idle process pays for one polling thread however many stores it made (a program may make
    one per ``init_process_group`` and close none of them before its exit).
    """

    def __init__(self, comm: MPI.Comm, table: Table, token: int) -> None:
        self.comm = comm
        self.table = table
        self.token = token
        self.peers = comm.Get_size() - 1
        self.gone: set[int] = set()  # ranks that said goodbye
        self.parked: list[_Parked] = []
        self.sends: list[MPI.Request] = []
        self.give_up_at: float | None = None  # set by close(): serve until then at most
        self.finished = threading.Event()  # the poller is done with this store
        self._status = MPI.Status()
        self._seen = -1  # the table's version when the parked lookups were last looked at

    def close(self, grace: float) -> None:
        """Serve the ranks still using the store for at most ``grace`` more seconds."""
        if self.give_up_at is None:
            self.give_up_at = time.monotonic() + grace
            self.table.wake.set()

    def join(self) -> None:
        """Wait until every rank said goodbye or the grace passed."""
        self.finished.wait()

    def done(self) -> bool:
        """Closed here, and every other rank has said goodbye or the grace has passed."""
        if self.give_up_at is None:
            return False
        return len(self.gone) == self.peers or time.monotonic() >= self.give_up_at

    def poll(self) -> bool:
        """Answer what has come (one pass, never waits); whether a request came."""
        busy = False
        while (message := self.comm.improbe(MPI.ANY_SOURCE, _REQUEST_TAG,
                                            self._status)) is not None:
            self._handle(self._status.Get_source(), message.recv())
            busy = True
        if self.table.version != self._seen:  # (an int read: no lock needed to look)
            with self.table.cond:
                self._seen = self.table.version
                self._answer_parked()
        if self.sends:
            self.sends = [r for r in self.sends if not r.Test()]
        return busy

    def finish(self) -> None:
        """Drop what is still queued (stale: every rank's goodbye was its last message, or it
        was given up on) and free the communicator."""
        with contextlib.suppress(Exception):
            while (message := self.comm.improbe(MPI.ANY_SOURCE, MPI.ANY_TAG)) is not None:
                message.recv()
            _free(self.comm, self.sends)
        self.finished.set()

    def _reply(self, dest: int, tag: int, request_id: int, error: Exception | None,
               result: Any) -> None:
        self.sends.append(self.comm.isend((request_id, error, result), dest=dest, tag=tag))

    def _handle(self, source: int, request: tuple[int, int, int, int, tuple[Any, ...]]) -> None:
        token, op, tag, request_id, args = request
        if token != self.token:
            return  # left over from an earlier store whose communicator had the same context
        if op == Op.BYE:
            self.gone.add(source)
            self.parked = [p for p in self.parked if p.source != source]
            self._reply(source, tag, request_id, None, None)
        elif op == Op.CANCEL:
            self.parked = [p for p in self.parked
                           if (p.source, p.request_id) != (source, args[0])]
        elif op == Op.LOOKUP:
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
                    result = APPLY[Op(op)](self.table, *args)
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


class _Poller:
    """Rank 0's one thread for the servers of every store of the process.

    It polls with ``MPI_Iprobe`` and sleeps between polls, as the module docstring says; it
    starts with the first store and ends when the last one is done.
    """

    def __init__(self) -> None:
        self.wake = threading.Event()  # set by any change to a table, or a close
        self._servers: list[Server] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def add(self, server: Server) -> None:
        """Serve ``server`` too (starts the thread if it is not running)."""
        with self._lock:
            self._servers.append(server)
            if self._thread is None:
                self._thread = threading.Thread(target=self._main, name="mpiflow-store",
                                                daemon=True)
                self._thread.start()
        self.wake.set()

    def _main(self) -> None:
        delay = _MIN_DELAY
        last = time.monotonic()  # when the last request came
        while True:
            self.wake.clear()
            with self._lock:
                servers = list(self._servers)
                if not servers:
                    self._thread = None
                    return
            for server in servers:
                try:
                    if server.poll():
                        last = time.monotonic()
                    ended = server.done()
                except Exception:
                    # Never take the process down: this store's callers time out instead.
                    with contextlib.suppress(Exception):
                        sys.stderr.write("[rank 0] mpiflow MPIStore: a store stopped after "
                                         "an error:\n" + traceback.format_exc())
                    ended = True
                if ended:
                    with self._lock:
                        self._servers.remove(server)
                    server.finish()
            # Sleep on the event: a change made by rank 0 itself wakes the thread at once.
            woken = self.wake.wait(delay)
            idle = time.monotonic() - last
            delay = _MIN_DELAY if woken or idle < _HOT else _next_delay(delay, idle)


poller = _Poller()
_NEVER = threading.Event()  # never set


def stay_forever() -> NoReturn:
    """Where a call waiting in another thread goes when the interpreter exits.

    Only daemon threads are left then (Python waits for the others before the exit hooks), and
    Python stops them wherever they are: the call must not touch MPI again (it is about to be
    finalized), and raising would print a traceback for a thread nobody waits for, or reach a
    C++ caller that may not expect it. So it waits, without CPU, for the end of the process.
    """
    _NEVER.wait()
    raise AssertionError("unreachable: the event is never set")


class Client:
    """A rank other than 0: sends requests to rank 0 and polls for each answer."""

    def __init__(self, comm: MPI.Comm, token: int) -> None:
        self.comm = comm
        self.token = token
        self.rank = comm.Get_rank()
        self.closed = False
        self.exiting = False  # closed by the exit hook, not by close()
        self.sends: list[MPI.Request] = []  # fire-and-forget sends (cancellations)
        self.inflight = 0
        self._lock = threading.Lock()
        self._last_tag = _REQUEST_TAG
        self._tag_ub = min(int(comm.Get_attr(MPI.TAG_UB) or 32767), 1 << 20)

    def _ticket(self) -> tuple[int, int]:
        """A fresh answer tag and request id (threads may share a store: one tag each)."""
        with self._lock:
            self._last_tag = self._last_tag % self._tag_ub + 1
            return self._last_tag, next(_request_ids)

    def request(self, op: Op, args: tuple[Any, ...], deadline: float,
                on_timeout: Callable[[bool], Exception]) -> Any:
        """Send one request to rank 0 and wait for its answer until ``deadline``.

        The time a large request takes to reach rank 0 does not count: once rank 0 has
        received it, the answer gets as long again as was left when it was sent.
        ``on_timeout(received)`` makes the error; ``received`` says whether rank 0 had
        received the request (a ``set`` then may have been stored).
        """
        tag, request_id = self._ticket()
        with self._lock:
            if self.closed:
                raise dist.DistStoreError(f"MPIStore: the store is closed on rank {self.rank}")
            self.inflight += 1
        try:
            send = self._send(op, tag, request_id, args)
            start = time.monotonic()
            allowed = deadline - start
            received = False
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
                    if self.exiting:
                        with self._lock:
                            self.inflight -= 1  # the `finally` below never runs
                        stay_forever()
                    raise dist.DistStoreError(
                        f"MPIStore: the store was closed on rank {self.rank} during a call")
                now = time.monotonic()
                if not received and send.Test():  # rank 0 has the whole request now
                    received = True
                    deadline = max(deadline, now + allowed)
                if now >= deadline:
                    self._forget(send, op, request_id)
                    raise on_timeout(received)
                time.sleep(min(delay, deadline - now))
                delay = _next_delay(delay, now - start)
        finally:
            with self._lock:
                self.inflight -= 1

    def _send(self, op: Op, tag: int, request_id: int, args: tuple[Any, ...]) -> MPI.Request:
        return self.comm.isend((self.token, int(op), tag, request_id, args), dest=0,
                               tag=_REQUEST_TAG)

    def _forget(self, send: MPI.Request, op: Op, request_id: int) -> None:
        """Give up on a request: tell rank 0 to drop it if it is parked there."""
        self.sends.append(send)
        if op == Op.LOOKUP:
            self.sends.append(self._send(Op.CANCEL, 0, 0, (request_id,)))
        self.sends = [r for r in self.sends if not r.Test()]

    def close(self, bye_wait: float, exiting: bool = False) -> None:
        """Stop new calls, let the running ones notice, say goodbye to rank 0 and free.

        Args:
            bye_wait: how long to wait for rank 0's acknowledgement of the goodbye.
            exiting: closed by the exit hook (see :func:`stay_forever`).
        """
        with self._lock:
            if self.closed:
                return
            self.exiting = exiting
            self.closed = True
        if MPI.Is_finalized():
            return
        deadline = time.monotonic() + _DRAIN_WAIT
        while self.inflight and time.monotonic() < deadline:
            time.sleep(_MAX_DELAY)  # each running call polls, sees `closed` and leaves
        tag, request_id = self._ticket()
        self.sends.append(self._send(Op.BYE, tag, request_id, ()))
        deadline = time.monotonic() + bye_wait
        while time.monotonic() < deadline:
            message = self.comm.improbe(0, tag)
            if message is not None and message.recv()[0] == request_id:
                # Rank 0 has our last message and has sent us its last one: drop the late
                # answers to calls that gave up, then free.
                while (late := self.comm.improbe(0, MPI.ANY_TAG)) is not None:
                    late.recv()
                _free(self.comm, self.sends)
                return
            time.sleep(_MAX_DELAY)
        # No answer: rank 0 has stopped serving. Leave the communicator to MPI_Finalize.


# Every store endpoint still open in this process, for the exit hook.
