"""The collective watchdog: no blocking mpiflow call waits longer than ``MPIFLOW_TIMEOUT``.

Every blocking call of the communication layer (collectives, ``recv``, ``Work.wait()``) marks
its start with :func:`mark_call` (one C call that steps :data:`STATE`'s counter: no allocation,
no clock; both live in :mod:`.state`, and are re-exported here). A daemon thread per process
samples, about twice a second, the counter and the innermost frame of every thread: a thread
whose innermost frame is one of the layer's blocking sites (the Python functions that call a
blocking MPI function) is inside a call, and the watchdog remembers when it first saw it there
with the current counter. When one call has lasted ``MPIFLOW_TIMEOUT`` seconds (default 600; 0
turns the watchdog off), the thread asks every other rank's watchdog, over a communicator of
its own, what its process is doing, prints one report (rank-tagged, on stderr) naming the
operation, the group, the ranks that arrived and the ranks that did not and what they do
instead, and aborts the job (``MPI_Abort``, exit status 124).

The thread also

- answers the other ranks' questions (it polls for them with ``MPI_Iprobe``);
- hears of ranks that exit: an ``atexit`` hook on each rank tells the others, and a call that
  waits on a rank that has exited is reported (status 1) after ``min(timeout, 10 s)``;
- turns Ctrl-C into the same report (status 130) when the main thread is blocked inside MPI,
  where Python cannot raise ``KeyboardInterrupt``.

Without ``MPI_THREAD_MULTIPLE`` the thread calls no MPI function but ``MPI_Abort``, and the
report describes this rank only. Blocking code outside the communication layer (raw mpi4py,
MPI-IO) can be watched with :func:`watched`.

The watchdog imports none of the modules it watches: each registers with it at import. A
module that blocks names its blocking sites (:func:`register_blocking_site`,
:func:`register_blocking_names`), and one whose frames can tell which operation and group they
serve registers a reader for them (:func:`register_frame_reader`). ``mpiflow/__init__`` starts
the watchdog (:func:`start`) once the abort handlers are in place.

Example:
    >>> from mpiflow.communication import watchdog
    >>> watchdog.get_timeout()
    600.0
    >>> watchdog.set_timeout(3600)       # this process; 0 turns it off
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import select
import signal
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from typing import Any

from mpi4py import MPI

from ... import runtime as _runtime
from ...core import settings
from . import exits
from .report import describe_group, format_report, ranks_text  # noqa: F401
from .sites import (  # noqa: F401  (registration API and helpers, re-exported)
    PACKAGE_DIR,
    BlockedCall,
    FrameReader,
    blocking_sites,
    call_record,
    describe_stack,
    in_blocking_site,
    in_package,
    innermost_site,
    operation_of,
    read_frame,
    register_blocking_names,
    register_blocking_site,
    register_frame_reader,
    site_of,
    thread_level_name,
    thread_level_provided,
    thread_multiple,
    unregister_blocking_site,
    world_ranks,
)
from .state import STATE, CallState, mark_call, watched

__all__ = [
    "DEFAULT_TIMEOUT",
    "STATE",
    "BlockedCall",
    "CallState",
    "FrameReader",
    "Watchdog",
    "blocking_sites",
    "describe_stack",
    "announce_skip",
    "await_skips",
    "format_report",
    "get_timeout",
    "mark_call",
    "in_blocking_site",
    "operation_of",
    "register_blocking_names",
    "register_blocking_site",
    "register_frame_reader",
    "set_timeout",
    "start",
    "stop",
    "timeout_from_environment",
    "unregister_blocking_site",
    "watched",
]

DEFAULT_TIMEOUT: float = settings.get("MPIFLOW_TIMEOUT").default
REPLY_WAIT = 2.0  # seconds a reporting rank waits for the others' answers
EXIT_GRACE = 10.0  # a call still waiting this long after a member exited is reported
INTERRUPT_GRACE = 0.5  # after Ctrl-C, a call still blocked this long is reported
MAX_EXIT_NOTICES = 1024  # larger worlds do not announce exits (n^2 messages at the end)
EXIT_WAIT = 0.05  # longest the exit hook waits for its notices to leave

_TAG_QUERY, _TAG_STATE, _TAG_EXIT, _TAG_SKIP = 1, 2, 3, 4
_CODES = {"timeout": 124, "exited": 1, "interrupt": 130, "skipped": 1}


def timeout_from_environment(environ: Mapping[str, str] | None = None) -> float:
    """The watchdog timeout ``MPIFLOW_TIMEOUT`` asks for, in seconds (0: off).

    Args:
        environ: the environment (``os.environ`` by default).

    Returns:
        The timeout; :data:`DEFAULT_TIMEOUT` when the variable is unset or empty.

    Raises:
        ValueError: the value is not a non-negative number of seconds.
    """
    return float(settings.read("MPIFLOW_TIMEOUT", environ))


# -- the watchdog thread ----------------------------------------------------------------------

class Watchdog:
    """The per-process watchdog: :meth:`check` decides, the thread of :meth:`start` acts.

    Args:
        timeout: seconds a blocking call may last (> 0).
        side: the communicator the watchdogs talk on (every rank's own duplicate of the
            world), or None to ask nobody.
        state: the call state to sample.
        rank: this process's world rank.
        size: the world size.
    """

    def __init__(self, timeout: float, side: Any, state: CallState = STATE, rank: int = 0,
                 size: int = 1) -> None:
        self.timeout = float(timeout)
        self.poll = min(0.5, max(0.01, self.timeout / 4))
        self.side = side
        self.state = state
        self.rank, self.size = rank, size
        self.seen_seq, self.seen_at = state.progress(), time.monotonic()
        self.inside = self._threads_inside  # tests replace it
        self.was_inside = False
        self.exited: dict[int, dict[str, Any]] = {}
        self.deferred_until = 0.0
        self.interrupt: tuple[tuple[Any, ...], float] | None = None
        self._sends: list[Any] = []
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._old_wakeup: int | None = None

    # -- life cycle --
    def start(self) -> None:
        """Start the thread (and route Ctrl-C to it when called from the main thread)."""
        if threading.current_thread() is threading.main_thread():
            with contextlib.suppress(ValueError, OSError):
                old = signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
                if old != -1:  # someone else (asyncio) listens already: leave it theirs
                    signal.set_wakeup_fd(old)
                else:
                    self._old_wakeup = old
        self._thread = threading.Thread(target=self._main, name="mpiflow-watchdog",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and wait for it (it wakes at once)."""
        self._stopping = True
        if self._wake_w >= 0:
            with contextlib.suppress(OSError):
                os.write(self._wake_w, b"\0")
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2 * REPLY_WAIT)
        if self._old_wakeup is not None and threading.current_thread() is \
                threading.main_thread():
            with contextlib.suppress(ValueError, OSError):
                current = signal.set_wakeup_fd(self._old_wakeup)
                if current != self._wake_w:  # someone else's now: leave theirs in place
                    signal.set_wakeup_fd(current)
                self._old_wakeup = None
        alive = self._thread is not None and self._thread.is_alive()
        if self._old_wakeup is None and self._wake_r >= 0 and not alive:  # no one uses them
            for fd in (self._wake_r, self._wake_w):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._wake_r = self._wake_w = -1
        self._finish_sends(0.0)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stopping

    def _main(self) -> None:
        try:
            while not self._stopping:
                signals = self._sleep()
                if self._stopping:
                    break
                reason = self.check(time.monotonic(), signals)
                if reason is not None:
                    self._fire(reason)
        except Exception:
            text = "".join(traceback.format_exc())
            with contextlib.suppress(Exception):
                lines = ["mpiflow watchdog stopped after an error (hangs are no longer "
                         "reported):", *text.splitlines()]
                sys.stderr.write("".join(f"[rank {self.rank}] {line}\n" for line in lines))
                sys.stderr.flush()

    def _sleep(self) -> bytes:
        ready, _, _ = select.select([self._wake_r], [], [], self.poll)
        if not ready:
            return b""
        try:
            return os.read(self._wake_r, 512)
        except (BlockingIOError, InterruptedError):
            return b""

    # -- decisions --
    def check(self, now: float, signals: bytes = b"") -> str | None:
        """Answer the other ranks, then decide whether to report: a reason, or None.

        Args:
            now: ``time.monotonic()``.
            signals: the signal numbers that arrived since the last check, as bytes.
        """
        if self.side is not None:
            self._serve(now)
        seq = self.state.progress()
        inside = self.inside()
        if seq != self.seen_seq or not (inside and self.was_inside):  # a call starts: the clock
            self.seen_seq, self.seen_at = seq, now
        self.was_inside = inside
        if not inside:
            self.interrupt = None
            return None
        waited = now - self.seen_at
        if signal.SIGINT in signals and self.interrupt is None and \
                signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self.interrupt = (seq, now)
        if self.interrupt is not None and self.interrupt[0] == seq and \
                now - self.interrupt[1] >= INTERRUPT_GRACE:
            return "interrupt"
        grace = min(self.timeout, EXIT_GRACE)
        if _skips and waited >= grace and self._skipped_by(now, grace):
            return "skipped"  # says more than a timeout would
        if waited >= self.timeout:
            # A member that announced a skip explains the wait even when its notice came
            # late (it ran behind the others): name it rather than a bare timeout.
            return "skipped" if _skips and self._skipped_by(now, 0.0) else "timeout"
        if self.exited and waited >= grace and self._waits_on_exited(now, grace):
            return "exited"
        return None

    def _skipped_by(self, now: float, grace: float) -> dict[int, str]:
        """The members of the group this rank waits on that announced, ``grace`` s ago or
        more, a call on it that they raised in before taking part (:func:`announce_skip`).

        Not those of a call this rank has finished since (the notice came more than
        ``min(timeout, EXIT_GRACE)`` s before this call began: a root went on) nor of one it
        raised in too: such notices once made a healthy wait, minutes later, abort the job."""
        call = self._current_call()
        group = call.get("group") if call is not None else None
        if group is None:
            return {}
        group = tuple(group)
        since = self.seen_at - min(self.timeout, EXIT_GRACE)
        with _skip_lock:
            return {src: f"{n['op']} raised {n['error']}" for src, notices in _skips.items()
                    for n in notices
                    if src in group and tuple(n["group"]) == group
                    and since <= n["seen"] <= now - grace
                    and (group, n["count"]) not in _own_skips}

    def _threads_inside(self) -> bool:
        """Whether some thread (not this one) is blocked in a call, or a watched block runs."""
        if self.state.note is not None:
            return True
        me = threading.get_ident()
        return any(in_blocking_site(frame) for ident, frame in sys._current_frames().items()
                   if ident != me)

    def _current_call(self) -> dict[str, Any] | None:
        frames = sys._current_frames()
        main = threading.main_thread().ident
        order = [t for t in frames if t not in (main, threading.get_ident())]
        for ident in [main, *order] if main is not None else order:
            call = describe_stack(frames.get(ident))
            if call is not None:
                return call
        note = self.state.note
        if note is not None:
            return call_record(note[0], note[1], None, None)
        return None

    def _waits_on_exited(self, now: float, grace: float) -> bool:
        call = self._current_call()
        if call is None:
            return False
        gone = {r for r, e in self.exited.items() if now - e["seen"] >= grace}
        if call.get("peer") is not None:
            return call["peer"] in gone
        group = call.get("group")
        if group is None:
            return False
        others = [r for r in group if r != self.rank]
        if str(call["op"]).startswith("recv"):  # from any rank: only when all have gone
            return bool(others) and all(r in gone for r in others)
        return any(r in gone for r in others)

    def snapshot(self, now: float) -> dict[str, Any]:
        """This process's state, as the other ranks' watchdogs are told."""
        seq = self.state.progress()
        inside = self.inside()
        main = threading.main_thread().ident
        frame = sys._current_frames().get(main) if main is not None else None
        return {"rank": self.rank, "inside": inside,
                "waited": (now - self.seen_at) if inside and seq == self.seen_seq else 0.0,
                "call": self._current_call() if inside else None,
                "where": innermost_site(frame)}

    # -- the side channel --
    def _receive(self) -> tuple[int, int, Any] | None:
        status = MPI.Status()
        message = self.side.improbe(MPI.ANY_SOURCE, MPI.ANY_TAG, status)
        if message is None:
            return None
        return status.Get_tag(), status.Get_source(), message.recv()

    def _answer(self, dest: int, now: float) -> None:
        self._sends.append(self.side.isend(self.snapshot(now), dest=dest, tag=_TAG_STATE))

    def _record_exit(self, src: int, notice: Mapping[str, Any], now: float) -> None:
        self.exited[src] = {"how": notice.get("how"), "seen": now}

    def _serve(self, now: float) -> None:
        while self.serve_once(now):
            pass
        self._finish_sends(0.0)

    def serve_once(self, now: float) -> bool:
        """Read one message of the side channel and act on it; False if there was none."""
        got = self._receive()
        if got is None:
            return False
        tag, src, payload = got
        if tag == _TAG_QUERY:
            self._answer(src, now)
        elif tag == _TAG_EXIT:
            self._record_exit(src, payload, now)
        elif tag == _TAG_SKIP:
            _record_skip(src, payload, now)
        return True

    def _finish_sends(self, wait: float) -> None:
        deadline = time.monotonic() + wait
        while True:
            self._sends = [r for r in self._sends if not r.Test()]
            if not self._sends or time.monotonic() >= deadline:
                return
            time.sleep(0.001)

    def _ask_everyone(self, now: float) -> dict[int, dict[str, Any]] | None:
        """Every other rank's state; None when a lower rank reports (it will abort)."""
        others = [r for r in range(self.size) if r != self.rank and r not in self.exited]
        for r in others:
            self._sends.append(self.side.isend(None, dest=r, tag=_TAG_QUERY))
        answers: dict[int, dict[str, Any]] = {}
        deadline = now + REPLY_WAIT
        while len(answers) < len(others) and time.monotonic() < deadline:
            got = self._receive()
            if got is None:
                time.sleep(0.01)
                continue
            tag, src, payload = got
            if tag == _TAG_QUERY:
                self._answer(src, time.monotonic())
                if src < self.rank:
                    self.deferred_until = time.monotonic() + REPLY_WAIT + 5.0
                    return None
            elif tag == _TAG_STATE and src in others:
                answers[src] = payload
            elif tag == _TAG_EXIT:
                self._record_exit(src, payload, time.monotonic())
                others = [r for r in others if r != src]
            elif tag == _TAG_SKIP:
                _record_skip(src, payload, time.monotonic())
        return answers

    def _fire(self, reason: str) -> None:
        now = time.monotonic()
        if now < self.deferred_until:
            return
        states: dict[int, dict[str, Any] | None] = {self.rank: self.snapshot(now)}
        if self.side is not None:
            answers = self._ask_everyone(now)
            if answers is None:
                return
            for r in range(self.size):
                if r != self.rank:
                    states[r] = answers.get(r)
        now = time.monotonic()
        exited = {r: {"how": e["how"], "ago": now - e["seen"]} for r, e in self.exited.items()}
        skipped = self._skipped_by(now, 0.0) if reason == "skipped" else {}
        report = format_report(reason, self.rank, self.size, self.timeout, states, exited,
                               asked=self.side is not None, thread_level=thread_level_name(),
                               skipped=skipped)
        _runtime.abort_job(report, _CODES[reason])


# -- calls that some ranks raised in before taking part ---------------------------------------
# A rank whose public collective raised on its arguments (and whose program caught that and
# went on) announces it to the other ranks of the group; its next call on that group waits
# until every other member announced the same (they all raised: in step), and the watchdog of
# a member that ran the call and then waits on the group reports it (.skew).
_skips: dict[int, list[dict[str, Any]]] = {}  # source rank -> its notices not yet consumed
_own_skips: set[tuple[tuple[int, ...], int]] = set()  # (group, count) this rank announced
_skip_lock = threading.Lock()
_skip_sends: list[Any] = []


def _record_skip(src: int, notice: Mapping[str, Any], now: float) -> None:
    with _skip_lock:
        _skips.setdefault(src, []).append({**notice, "seen": now})


def announce_skip(group: tuple[int, ...], count: int, op: str, error: str) -> bool:
    """Tell the other ranks of ``group`` (world ranks) that this rank's ``count``-th such call
    on it, ``op``, raised ``error`` before taking part. Returns False, telling no one, when
    the watchdog cannot talk to the other ranks (off, one rank, no MPI_THREAD_MULTIPLE)."""
    dog = _dog
    if dog is None or dog.side is None or len(group) > MAX_EXIT_NOTICES:
        return False
    notice = {"group": tuple(group), "count": count, "op": op, "error": error}
    for r in group:
        if r != dog.rank:
            _skip_sends.append(dog.side.isend(notice, dest=r, tag=_TAG_SKIP))
    with _skip_lock:
        _own_skips.add((tuple(group), count))
    return True


def await_skips(group: tuple[int, ...], count: int, timeout: float) -> list[int]:
    """Wait until every other rank of ``group`` announced its ``count``-th skipped call on it.

    Returns:
        The ranks that did not within ``timeout`` seconds (or that exited meanwhile): they ran
        the call. An empty list when all announced it; their notices are then consumed.
    """
    dog = _dog
    if dog is None or dog.side is None:
        return [r for r in group if r != _runtime.world.Get_rank()]
    others = [r for r in group if r != dog.rank]
    deadline = time.monotonic() + timeout

    def matches(n: Mapping[str, Any]) -> bool:
        return tuple(n["group"]) == tuple(group) and n["count"] == count

    while True:
        _skip_sends[:] = [r for r in _skip_sends if not r.Test()]
        for r in others:  # a matched probe: the watchdog's thread may take them too
            message = dog.side.improbe(r, _TAG_SKIP)
            if message is not None:
                _record_skip(r, message.recv(), time.monotonic())
        with _skip_lock:
            missing = [r for r in others if not any(matches(n) for n in _skips.get(r, ()))]
            if not missing:
                for r in others:
                    _skips[r] = [n for n in _skips[r] if not matches(n)]
                    if not _skips[r]:
                        del _skips[r]
                _own_skips.discard((tuple(group), count))
                return []
        if time.monotonic() >= deadline or any(r in dog.exited for r in missing):
            return missing
        time.sleep(0.0005)


# -- the process's watchdog -------------------------------------------------------------------

_side: Any = None  # this process's duplicate of COMM_WORLD for the watchdogs
_dog: Watchdog | None = None
_timeout = 0.0
_exit_hook_installed = False


def get_timeout() -> float:
    """The watchdog timeout of this process in seconds (0: off, or one rank only)."""
    return _timeout


def set_timeout(seconds: float) -> None:
    """Change this process's watchdog timeout; 0 turns the watchdog off.

    Call it on every rank alike (a rank whose watchdog is off answers no questions).

    Args:
        seconds: how long a blocking call may last, >= 0.

    Raises:
        ValueError: a negative or non-finite value.
    """
    global _dog, _timeout
    seconds = float(seconds)
    if not seconds >= 0 or math.isinf(seconds):
        raise ValueError(f"the watchdog timeout must be a non-negative number of seconds, "
                         f"got {seconds!r}")
    if _dog is not None:
        _dog.stop()
        _dog = None
    _timeout = seconds
    size = MPI.COMM_WORLD.Get_size()
    if seconds > 0 and size > 1 and _side is not None:
        _dog = Watchdog(seconds, _side if thread_multiple() else None, STATE,
                        MPI.COMM_WORLD.Get_rank(), size)
        _dog.start()


def start(timeout: float | None = None) -> None:
    """Start the watchdog of this process (collective over the world: call it on every rank).

    ``mpiflow/__init__`` calls it on ``import mpiflow``, after
    ``_runtime.install_abort_handler()``; it starts no thread with one rank. Makes the
    watchdogs' communicator and installs the exit hook that tells the other ranks when this
    one exits.

    Args:
        timeout: seconds; None reads ``MPIFLOW_TIMEOUT`` (default 600).
    """
    global _side, _exit_hook_installed
    seconds = timeout_from_environment() if timeout is None else float(timeout)
    world = MPI.COMM_WORLD
    if world.Get_size() > 1 and _side is None:
        _side = world.Dup()
        with contextlib.suppress(Exception):
            _side.Set_name("mpiflow watchdog")
    if not _exit_hook_installed:
        atexit.register(_at_exit)
        _runtime.on_os_exit(_at_os_exit)  # os._exit runs no atexit hook
        _exit_hook_installed = True
    set_timeout(seconds)


def stop() -> None:
    """Stop this process's watchdog thread (the timeout then reads 0)."""
    set_timeout(0)


def _at_exit(os_exit: bool = False) -> None:
    """Before MPI_Finalize: stop the thread, tell the other ranks that this one exits, and
    wait (at most ``exits.EXIT_GATHER`` s) to hear the same from them: then run the exit
    checks, or, leaving by ``os._exit`` while some have not finished, abort the job."""
    global _dog
    dog, _dog = _dog, None
    if dog is None:
        return
    dog.stop()
    if dog.side is None or dog.size > MAX_EXIT_NOTICES or MPI.Is_finalized():
        return
    how = _runtime.exit_description()
    others = [r for r in range(dog.size) if r != dog.rank]
    try:
        for r in others:
            dog._sends.append(dog.side.isend({"how": how}, dest=r, tag=_TAG_EXIT))
        dog._finish_sends(EXIT_WAIT)
        running = exits.gather_exits(lambda: dog.serve_once(time.monotonic()), others,
                                     lambda: set(dog.exited))
    except Exception:
        return
    if running and os_exit:
        status = _runtime.exit_status()
        code = status if type(status) is int and 0 < status < 256 else 1
        _runtime.abort_job(exits.os_exit_report(dog.rank, how, running, exits.EXIT_GATHER),
                           code)
    if not running:
        exits.run_exit_checks(dog.rank)


def _at_os_exit() -> None:
    _at_exit(os_exit=True)
