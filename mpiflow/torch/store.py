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
- a daemon thread on rank 0 (one for all the stores of the process) answers the other ranks'
  requests (small pickled messages on each store's private communicator). It polls with
  ``MPI_Iprobe`` and sleeps between polls, from 50 us when busy up to 2 ms when idle, and
  10 ms after a second of silence, because a blocking MPI receive spins a core;
- a ``get`` or ``wait`` for a key that does not exist yet is parked on rank 0 and answered when
  the key is set; the caller polls for the answer until its deadline, and never longer;
- :meth:`MPIStore.close` (or the exit of the interpreter) says goodbye to rank 0, whose thread
  goes on serving until every rank has said goodbye or the store's timeout has passed; an
  ``atexit`` hook ends every store before mpi4py finalizes MPI.

Rank 0's thread needs the GIL: while rank 0's main thread blocks in a call that holds it
(mpi4py's pickled ``bcast`` and ``allreduce`` do; its buffer calls and torch's collectives
do not), the other ranks' requests wait.

Example:
    >>> import torch.distributed as dist
    >>> from mpi4py import MPI
    >>> from mpiflow.torch.store import MPIStore
    >>> store = MPIStore()                        # collective: every rank builds it
    >>> dist.init_process_group("gloo", store=dist.PrefixStore("pg", store),
    ...                         rank=MPI.COMM_WORLD.rank, world_size=MPI.COMM_WORLD.size)
    >>> dist.destroy_process_group()
"""

from __future__ import annotations

import atexit
import contextlib
import operator
import secrets
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import torch.distributed as dist
from mpi4py import MPI

__all__ = ["MPIStore"]

# The wire: rank 0's table and server, the clients (store_service.py).
from .store_service import (
    APPLY,
    BYE_WAIT,
    EXIT_GRACE,
    Client,
    Op,
    Server,
    Table,
    Value,
    as_bytes,
    check_keys,
    poller,
    stay_forever,
)

_open: set[MPIStore] = set()


def _close_all() -> None:
    """Before mpi4py finalizes MPI: close every store, then wait for rank 0's servers.

    All are closed first: the ranks may list their stores in different orders, and a server
    can only end once every other rank has closed its side.
    """
    stores = list(_open)
    for store in stores:
        with contextlib.suppress(Exception):
            store._shutdown(join=False, exiting=True)
    for store in stores:
        with contextlib.suppress(Exception):
            store._shutdown(join=True, exiting=True)


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
        >>> if MPI.COMM_WORLD.rank == MPI.COMM_WORLD.size - 1:
        ...     store.set("ready", b"yes")
        >>> store.get("ready")                    # every rank; waits for the last one
        b'yes'
        >>> count = store.add("count", 1)         # an int, shared by all ranks
        >>> store.close()
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
        self._exiting = False  # closed by the exit hook
        self._table: Table | None = None
        self._server: Server | None = None
        self._client: Client | None = None
        private = base.Dup() if self._size > 1 else None  # collective
        token = 0
        if private is not None:
            with contextlib.suppress(MPI.Exception):
                private.Set_name("mpiflow MPIStore")
            # Every message carries this store's token: one left from an earlier store on a
            # communicator with the same (reused) context is recognized and dropped. (Bcast
            # on a buffer: mpi4py's pickled bcast holds the GIL while it waits.)
            token_bytes = bytearray(secrets.token_bytes(8))
            private.Bcast([token_bytes, MPI.BYTE], root=0)
            token = int.from_bytes(token_bytes, "little")
        if self._rank == 0:
            self._table = Table(poller.wake)
            if private is not None:
                self._server = Server(private, self._table, token)
                poller.add(self._server)
        else:
            assert private is not None  # a rank other than 0: there are two ranks at least
            self._client = Client(private, token)
        _open.difference_update([s for s in _open if s._finished()])
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

    def _no_answer(self, op: Op, args: tuple[Any, ...]) -> Callable[[bool], Exception]:
        seconds = self._seconds(None)
        size = sum(len(a) for a in args if isinstance(a, bytes | bytearray))
        what = op.name.lower() + (f" of {size / (1 << 30):.2f} GiB" if size >= 1 << 26 else "")

        def error(received: bool) -> Exception:
            if received:
                return dist.DistStoreError(
                    f"MPIStore: rank 0 received the {what} from rank {self._rank} but its "
                    f"answer did not arrive within {seconds:g} s (the store's timeout) after "
                    "that; the request may have taken effect (a set stored). Is rank 0 busy "
                    "or stopped? A longer timeout (set_timeout) gives it more time.")
            return dist.DistStoreError(
                f"MPIStore: rank 0 had not received the {what} from rank {self._rank} "
                f"within {seconds:g} s (the store's timeout): has rank 0 closed the store or "
                "exited? If it is only slow, the request still takes effect when it arrives"
                + (" (a large value takes seconds to move; set_timeout gives it longer)"
                   if size >= 1 << 26 else ""))

        return error

    def _call(self, op: Op, *args: Any) -> Any:
        """Run a request that never waits for keys, here (rank 0) or on rank 0."""
        if self._client is not None:
            deadline = time.monotonic() + self._seconds(None)
            return self._client.request(op, args, deadline, self._no_answer(op, args))
        table = self._local_table()
        with table.cond:
            return APPLY[op](table, *args)

    def _local_table(self) -> Table:
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
                Op.LOOKUP, (keys, park),
                deadline if park else time.monotonic() + self._seconds(None),
                lambda _received: self._timeout_error(keys, seconds))
            if values is None:
                raise self._timeout_error(keys, seconds)
            return list(values)
        table = self._local_table()
        with table.cond:
            while True:
                values = table.lookup(keys)
                if values is not None:
                    return values
                if self._closed and not self._exiting:
                    raise self._closed_error()
                if self._closed:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._timeout_error(keys, seconds)
                table.cond.wait(left)
        stay_forever()  # closed by the exit hook; outside the lock, which rank 0's thread needs

    # -- the Store interface ----------------------------------------------------------------

    def set(self, key: str, value: Value) -> None:
        """Set ``key`` to ``value`` and wake every rank waiting for it.

        Args:
            key: the key.
            value: bytes, or str (stored UTF-8 encoded).
        """
        check_keys(key)
        self._call(Op.SET, key, as_bytes(value))

    def get(self, key: str) -> bytes:
        """The value of ``key``, waiting for it to be set for at most the store's timeout.

        Args:
            key: the key.

        Returns:
            The value, as bytes.

        Raises:
            DistStoreError: the key was not set within the timeout.
        """
        check_keys(key)
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
        check_keys(key)
        if isinstance(value, bool) or not hasattr(value, "__index__"):
            raise TypeError(f"add() takes an integer amount (as TCPStore's), got "
                            f"{type(value).__name__}")
        return int(self._call(Op.ADD, key, operator.index(value)))

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
        check_keys(key)
        return bytes(self._call(Op.COMPARE_SET, key, as_bytes(expected_value),
                                as_bytes(desired_value)))

    def delete_key(self, key: str) -> bool:
        """Delete ``key``.

        Args:
            key: the key.

        Returns:
            Whether the key existed.
        """
        check_keys(key)
        return bool(self._call(Op.DELETE, key))

    def num_keys(self) -> int:
        """The number of keys in the store (every prefix's).

        Returns:
            The number of keys.
        """
        return int(self._call(Op.NUM_KEYS))

    def check(self, keys: list[str]) -> bool:
        """Whether every key of ``keys`` exists, without waiting.

        Args:
            keys: the keys.

        Returns:
            True if all exist (also for no keys).
        """
        check_keys(*keys)
        return bool(self._call(Op.CHECK, list(keys)))

    def wait(self, keys: list[str], timeout: timedelta | None = None) -> None:
        """Wait until every key of ``keys`` exists.

        Args:
            keys: the keys.
            timeout: how long to wait; the store's timeout if None; zero checks once.

        Raises:
            DistStoreError: some key was still missing after the timeout.
        """
        check_keys(*keys)
        self._lookup(list(keys), timeout)

    def append(self, key: str, value: Value) -> None:
        """Append ``value`` to the value of ``key`` (create it if missing).

        Args:
            key: the key.
            value: bytes, or str (UTF-8 encoded).
        """
        check_keys(key)
        self._call(Op.APPEND, key, as_bytes(value))

    def multi_get(self, keys: list[str]) -> list[bytes]:
        """The values of ``keys``, waiting for them all for at most the store's timeout.

        Args:
            keys: the keys.

        Returns:
            The values, in the order of ``keys``.

        Raises:
            DistStoreError: some key was not set within the timeout.
        """
        check_keys(*keys)
        return self._lookup(list(keys), None)

    def multi_set(self, keys: Sequence[str], values: Sequence[Value]) -> None:
        """Set every key of ``keys`` to the value at the same position of ``values``, at once.

        Args:
            keys: the keys.
            values: their values (bytes or str).

        Raises:
            ValueError: the two lists differ in length.
        """
        if len(keys) != len(values):
            raise ValueError(f"MPIStore.multi_set: {len(keys)} keys but {len(values)} values")
        check_keys(*keys)
        self._call(Op.MULTI_SET, list(keys), [as_bytes(v) for v in values])

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
        """Close the store on this rank; idempotent and not collective.

        Later calls on this rank raise ``DistStoreError``; calls waiting in other threads of
        this rank raise too. Another rank's close waits for rank 0 to acknowledge it
        (milliseconds; at most the store's timeout or 10 s). Rank 0's returns at once, but
        its thread goes on answering the other ranks until each has closed its store or the
        store's timeout has passed; the interpreter's exit waits for that.
        """
        self._shutdown(join=False, exiting=False)

    def _shutdown(self, join: bool, exiting: bool) -> None:
        if not self._closed:
            self._exiting = exiting
            self._closed = True
            if self._table is not None and not exiting:
                # Waiters in other threads see `closed` and raise. (At exit they are left
                # waiting, silently, as stay_forever explains: they never touch MPI.)
                with self._table.cond:
                    self._table.cond.notify_all()
            if self._client is not None:
                self._client.close(min(self._seconds(None), BYE_WAIT), exiting)
            if self._server is not None:
                # At exit rank 0 serves the ranks still using the store for a bounded time:
                # one that vanished without saying goodbye must not hold the job for the
                # store's whole timeout (30 minutes for the rendezvous's).
                grace = max(self._seconds(None), 0.0)
                self._server.close(min(grace, EXIT_GRACE) if exiting else grace)
        if join and self._server is not None:
            self._server.join()
        if self._finished():
            _open.discard(self)

    def _finished(self) -> bool:
        """Closed, and rank 0's server (if any) is done: nothing left for the exit hook."""
        return self._closed and (self._server is None or self._server.finished.is_set())

    def __enter__(self) -> MPIStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
