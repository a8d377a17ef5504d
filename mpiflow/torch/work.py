"""torch ``Work`` handles over mpiflow's requests, and the thread that completes their futures.

torch's callers ask a process group's work for two things: ``wait()`` (``dist.all_reduce``,
``isend().wait()``) and ``get_future()`` (DDP's reducer, comm hooks, FSDP). DDP never calls
``wait()``: it chains callbacks on the future and waits on it at the end of backward, so a
future completed only inside ``wait()`` would hang backward. A pending work's future is
therefore handed to :class:`Progress`, one daemon thread per process that tests the pending
MPI requests (backing off while nothing completes) and completes each future, running its
callbacks, as soon as the data is there. Testing requests from that thread is also what lets
MPI make progress on them while the main thread computes (MPICH moves data only inside MPI
calls).

A request is never tested by two threads at once: each work has a lock, ``wait()`` holds it
while blocking, and the progress thread only tries it.
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Callable
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.futures import Future

from ..communication import Work as MPIWork
from ..core.torch_arrays import Post

__all__ = ["DoneWork", "PendingWork", "Progress", "progress"]


class DoneWork(dist._Work):
    """A completed operation: its results are already in place.

    Args:
        result: what ``result()`` and the future give (the output tensors).
        source: the sender's group rank, for a receive from any source.
    """

    def __init__(self, result: list[torch.Tensor], source: int = -1) -> None:
        super().__init__()
        self._result = result
        self._source = source

    def wait(self, timeout: timedelta | None = None) -> bool:
        """Return True at once: nothing is pending."""
        return True

    def is_completed(self) -> bool:
        """Return True."""
        return True

    def is_success(self) -> bool:
        """Return True."""
        return True

    def result(self) -> list[torch.Tensor]:
        """The output tensors."""
        return self._result

    def get_future(self) -> Future:
        """A future that is already complete, holding the output tensors."""
        future: Future = Future()
        future.set_result(self._result)
        return future

    def _source_rank(self) -> int:
        return self._source

    def source_rank(self) -> int:
        """The group rank a receive from any source got its message from."""
        return self._source


class PendingWork(dist._Work):
    """A started MPI operation: ``wait()`` or the progress thread completes it.

    Args:
        work: mpiflow's handle of the MPI requests.
        result: the output tensors, for ``result()`` and the future.
        post: the step that finishes the operation once MPI has (copies results back).
        source: callable giving the sender's group rank after a receive from any source.
    """

    def __init__(self, work: MPIWork, result: list[torch.Tensor], post: Post | None = None,
                 source: Callable[[], int] | None = None) -> None:
        super().__init__()
        self._work = work
        self._result = result
        self._post = post
        self._source = source
        self._lock = threading.Lock()
        self._done = False
        self._error: BaseException | None = None
        self._future: Future | None = None

    def _finish(self) -> None:
        """Run the post step once and complete the future (the lock is held)."""
        self._done = True
        post, self._post = self._post, None
        try:
            if post is not None:
                post()
        except BaseException as exc:
            self._error = exc
        future = self._future
        if future is not None:
            if self._error is None:
                future.set_result(self._result)
            else:
                future.set_exception(self._error)

    def wait(self, timeout: timedelta | None = None) -> bool:
        """Block until the operation has completed and its results are in place.

        Args:
            timeout: the longest wait; None (or torch's zero default) waits as long as it takes
                (the watchdog still bounds it).

        Returns:
            True.

        Raises:
            TimeoutError: not complete within ``timeout`` (it stays pending).
        """
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        with self._lock:
            if not self._done:
                self._work.wait(seconds if seconds else None)
                self._finish()
        if self._error is not None:
            raise self._error
        return True

    def poll(self) -> bool:
        """Complete the operation if MPI has; never blocks. Returns whether it is done."""
        if self._done:
            return True
        if not self._lock.acquire(blocking=False):
            return False  # wait() holds it and will complete the work
        try:
            if not self._done:
                try:
                    if self._work.is_completed():
                        self._finish()
                except BaseException as exc:
                    self._error = exc
                    self._finish()
            return self._done
        finally:
            self._lock.release()

    def is_completed(self) -> bool:
        """Return True once the operation has completed (testing it, without blocking)."""
        return self.poll()

    def is_success(self) -> bool:
        """Return True once completed without error."""
        return self._done and self._error is None

    def exception(self) -> BaseException | None:
        """The error the operation ended with, or None."""
        return self._error

    def result(self) -> list[torch.Tensor]:
        """The output tensors."""
        return self._result

    def get_future(self) -> Future:
        """A future completed with the output tensors as soon as the operation completes,
        whether or not anyone waits (the progress thread completes it)."""
        with self._lock:
            if self._future is None:
                self._future = Future()
                if self._done:
                    if self._error is None:
                        self._future.set_result(self._result)
                    else:
                        self._future.set_exception(self._error)
                    return self._future
            else:
                return self._future
        progress.add(self)
        return self._future

    def _source_rank(self) -> int:
        self.wait()
        return -1 if self._source is None else self._source()

    def source_rank(self) -> int:
        """The group rank a receive from any source got its message from (waits first)."""
        return self._source_rank()


class Progress:
    """One daemon thread that completes pending works whose futures someone holds.

    It sleeps on a condition while nothing is pending; while something is, it tests each work
    and sleeps between rounds, from 20 us up to 1 ms while nothing completes.
    """

    _MIN_SLEEP = 20e-6
    _MAX_SLEEP = 1e-3

    def __init__(self) -> None:
        self._pending: list[PendingWork] = []
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def add(self, work: PendingWork) -> None:
        """Complete ``work``'s future once its operation completes."""
        with self._cond:
            self._pending.append(work)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="mpiflow-torch-progress",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        sleep = self._MIN_SLEEP
        while True:
            with self._cond:
                while not self._pending and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                pending = list(self._pending)
            finished = [w for w in pending if w.poll()]
            if finished:
                with self._cond:
                    self._pending = [w for w in self._pending if w not in finished]
                sleep = self._MIN_SLEEP
            else:
                time.sleep(sleep)
                sleep = min(sleep * 2, self._MAX_SLEEP)

    def stop(self) -> None:
        """Stop the thread (at exit, before MPI is finalized): no MPI call after this."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)


progress = Progress()
# Registered after mpi4py's own exit handler, so it runs first: the thread stops testing
# requests before MPI_Finalize.
atexit.register(progress.stop)
