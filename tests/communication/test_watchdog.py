"""The collective watchdog in-process: call marks, descriptions, decisions, the report.

Nothing here lets a watchdog fire (that aborts the job: test_faults.py runs those cases
as separate mpiexec jobs). Every test is collective-safe: the only communication is on
COMM_SELF or the same collectives on every rank.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy
import pytest
from mpi4py import MPI

import mpiflow.distributed as dist
from mpiflow import runtime as _runtime
from mpiflow.communication import MPICommunicator
from mpiflow.communication.fast import _live_paths
from mpiflow.communication.mpi import communicator as mpi
from mpiflow.communication.mpi.group import world_comm
from mpiflow.communication.watchdog import monitor as watchdog
from mpiflow.communication.watchdog.monitor import (
    STATE,
    CallState,
    Watchdog,
    describe_stack,
    format_report,
    timeout_from_environment,
)

RANK, SIZE = world_comm.rank, world_comm.size
WORLD = tuple(range(SIZE))


def _plain(comm: MPI.Comm) -> MPICommunicator:
    """A plain communicator even under MPIFLOW_DEBUG=1 (these tests count its marks): the
    class itself, not new_communicator."""
    return MPICommunicator(comm)


PLAIN = _plain(MPI.COMM_WORLD.Dup())


# -- settings ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "seconds"), [("", 600.0), ("  ", 600.0), ("3", 3.0),
                                               ("0", 0.0), ("1.5", 1.5), ("600", 600.0)])
def test_timeout_from_environment(text: str, seconds: float) -> None:
    assert timeout_from_environment({"MPIFLOW_TIMEOUT": text}) == seconds
    assert timeout_from_environment({}) == watchdog.DEFAULT_TIMEOUT


@pytest.mark.parametrize("text", ["abc", "-1", "inf", "nan", "10s"])
def test_a_bad_timeout_is_refused_with_the_variable_named(text: str) -> None:
    with pytest.raises(ValueError, match="MPIFLOW_TIMEOUT must be a non-negative number"):
        timeout_from_environment({"MPIFLOW_TIMEOUT": text})


@pytest.mark.mpi
def test_set_timeout_starts_and_stops_the_thread() -> None:
    before = watchdog.get_timeout()
    try:
        watchdog.set_timeout(123)
        assert watchdog.get_timeout() == 123
        running = watchdog._dog is not None and watchdog._dog.running
        assert running == (SIZE > 1)
        if SIZE > 1:
            assert watchdog._dog is not None and watchdog._dog.timeout == 123
        watchdog.set_timeout(0)
        assert watchdog.get_timeout() == 0 and watchdog._dog is None
        with pytest.raises(ValueError, match="non-negative"):
            watchdog.set_timeout(-1)
    finally:
        watchdog.set_timeout(before)
    assert (watchdog._dog is not None) == (SIZE > 1 and before > 0)


@pytest.mark.mpi
def test_the_watchdog_runs_with_the_default_timeout_under_the_suite() -> None:
    expected = timeout_from_environment()
    assert watchdog.get_timeout() == expected
    assert (watchdog._dog is not None and watchdog._dog.running) == (SIZE > 1 and expected > 0)


# -- the marks of blocking calls --------------------------------------------------------------

def _dues() -> dict[int, int]:
    return {id(fast): fast.due[0] for fast in _live_paths()}


def _marks(call: Any) -> int:
    """The calls ``call()`` marked: the mark's steps, and the calls the collectives' fast paths
    counted down (their count is their mark, ``CallState.progress``)."""
    before, dues = STATE.seq, _dues()
    progress = STATE.progress()
    call()
    counted = sum(dues[key] - due for key, due in _dues().items() if key in dues)
    assert (STATE.progress() != progress) == bool((STATE.seq - before) % 256 + counted)
    return (STATE.seq - before) % 256 + counted  # the marks cycle through 0..255


@pytest.mark.mpi
def test_every_blocking_call_marks_its_start() -> None:
    x = numpy.ones(3)
    PLAIN.all_reduce(x)
    assert _marks(lambda: PLAIN.all_reduce(x)) == 1  # the fast path
    # A strided 1-D view: the fast path's attempt (refused by mpi4py) counts nothing in the
    # end, and the general path marks its own call.
    assert _marks(lambda: PLAIN.all_reduce(x[::2])) == 1
    assert _marks(lambda: PLAIN.broadcast(x, 0)) == 1
    assert _marks(lambda: PLAIN.barrier()) == 1
    assert _marks(lambda: PLAIN.all_gather_v(x, numpy.empty(3 * SIZE), [3] * SIZE)) == 1
    work: Any = None

    def start() -> None:
        nonlocal work
        work = PLAIN.all_reduce(x, async_op=True)

    assert _marks(start) == 0  # starting does not block
    assert _marks(work.wait) == 1
    assert _marks(work.wait) == 0  # already done: nothing blocks


@pytest.mark.mpi
def test_point_to_point_and_groups_mark_too() -> None:
    me = _plain(MPI.COMM_SELF)
    buf = numpy.zeros(2)
    work = me.irecv(buf, 0, tag=5)
    assert _marks(lambda: me.send(numpy.arange(2.0), 0, tag=5, async_op=True)) == 0
    assert _marks(work.wait) == 1
    numpy.testing.assert_array_equal(buf, [0, 1])
    sent = me.send(numpy.full(2, 7.0), 0, tag=6, async_op=True)
    assert _marks(lambda: me.recv(buf, 0, tag=6)) == 1
    assert sent is not None and sent.wait()
    assert _marks(lambda: PLAIN.split_by_color(0)) == 1


class _Spy:
    """An mpi4py communicator stand-in that runs ``probe`` inside the calls it names."""

    def __init__(self, comm: MPI.Comm, names: tuple[str, ...], probe: Any) -> None:
        self._comm, self._names, self._probe = comm, names, probe

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._comm, name)
        if name not in self._names:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self._probe(name)
            return attr(*args, **kwargs)

        return call


@pytest.mark.mpi
def test_inside_a_call_the_innermost_frame_is_a_blocking_site_and_the_stack_names_it(
        ) -> None:
    seen: list[tuple[str, int, Any]] = []

    def probe(name: str) -> None:  # called from the stand-in for MPI, by the blocking site
        site = sys._getframe(2)
        seen.append((name, watchdog.in_blocking_site(site), describe_stack(site)))

    comm = _plain(_Spy(MPI.COMM_WORLD.Dup(), ("Allreduce", "Bcast", "Barrier"),  # type: ignore
                       probe))
    x = numpy.ones(4)
    comm.all_reduce(x)  # the general path, which teaches the next one the fast path
    comm.all_reduce(x)  # the fast path
    comm.broadcast(x, 0)  # the fast path
    comm.all_reduce(x[::2])  # the general path: one attempt refused, then the staged call
    comm.barrier()
    assert [(name, inside) for name, inside, _ in seen] == [
        ("Allreduce", True), ("Allreduce", True), ("Bcast", True), ("Allreduce", True),
        ("Allreduce", True), ("Barrier", True)]
    for (_, _, call), op in zip(seen, ["all_reduce", "all_reduce", "broadcast", "all_reduce",
                                      "all_reduce", "barrier"], strict=True):
        assert call is not None
        assert call["op"] == op
        assert call["group"] == WORLD
        assert call["size"] == SIZE
        assert call["site"].startswith(__file__)
        assert call["site"].endswith("in test_inside_a_call_the_innermost_frame_is_a_blocking_"
                                     "site_and_the_stack_names_it")
        assert call["api"] == f"mpiflow.communication.mpi.communicator.{op}"
    assert not watchdog.in_blocking_site(sys._getframe())
    MPI.COMM_WORLD.Barrier()


@contextlib.contextmanager
def _probing(path: Any, name: str, probe: Any) -> Iterator[None]:
    """Run ``probe(name)`` inside each call the fast path ``path`` makes of its bound mpi4py
    method ``name`` (a free variable of the closure, swapped for the block)."""
    cell = path.__closure__[path.__code__.co_freevars.index(name)]
    method = cell.cell_contents

    def spied(*args: Any) -> Any:
        probe(name)
        return method(*args)

    cell.cell_contents = spied
    try:
        yield
    finally:
        cell.cell_contents = method


@pytest.mark.mpi
@pytest.mark.parametrize("fast", [True, False], ids=["fast", "checked"])
def test_the_public_entry_point_is_named(fast: bool) -> None:
    seen: list[Any] = []

    def probe(name: str) -> None:  # called by the frame that calls MPI
        seen.append(describe_stack(sys._getframe(2)))

    dist.all_reduce(numpy.ones(1))  # the general path learns that SUM of f8 is native
    due = world_comm.check_due
    saved, due[0] = due[0], (1 << 20 if fast else 1)  # the fast path's call, or a checked one
    real = world_comm.mpi_comm
    try:
        # mpiflow.distributed.all_reduce is the world's fast path itself (its frame is
        # fast_all_reduce's): named as the public function whichever path ran the call.
        with _probing(dist.all_reduce, "allreduce", probe):
            if not fast:  # the general path calls the communicator's methods
                world_comm.mpi_comm = _Spy(real, ("Allreduce",), probe)  # type: ignore
            dist.all_reduce(numpy.ones(1))
    finally:
        world_comm.mpi_comm = real
        if fast:
            due[0] = saved
    assert seen and all(call is not None and call["op"] == "all_reduce"
                        and call["group"] == WORLD and call["api"] ==
                        "mpiflow.communication.collectives.torch_api.all_reduce"
                        for call in seen), seen
    if SIZE > 1:
        seen.clear()
        peer = (RANK + 1) % SIZE
        with _probing(world_comm.fast.send, "mpi_send", probe), \
                _probing(world_comm.fast.recv, "mpi_recv", probe):
            if RANK % 2 == 0:
                dist.send(numpy.ones(1), peer)
            dist.recv(numpy.ones(1), (RANK - 1) % SIZE)
            if RANK % 2:
                dist.send(numpy.ones(1), peer)
        by_op = {call["op"]: call for call in seen}
        assert by_op["send"]["peer"] == (RANK + 1) % SIZE
        assert by_op["recv"]["peer"] == (RANK - 1) % SIZE
        assert by_op["recv"]["api"] == "mpiflow.communication.collectives.torch_api.recv"


def _blocked_thread(target: Any) -> threading.Thread:
    thread = threading.Thread(target=target, name="blocked", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not watchdog.in_blocking_site(sys._current_frames().get(thread.ident)):
        assert time.monotonic() < deadline, "the thread never blocked in an mpiflow call"
        time.sleep(0.01)
    return thread


@pytest.mark.mpi
def test_a_thread_blocked_in_recv_or_wait_is_described() -> None:
    me = _plain(MPI.COMM_SELF)
    buf = numpy.zeros(1)
    thread = _blocked_thread(lambda: me.recv(buf, 0, tag=9))
    call = describe_stack(sys._current_frames()[thread.ident])
    dog = Watchdog(5.0, None, CallState())
    assert dog.inside()  # a thread other than the watchdog's own is blocked in recv
    dog.stop()
    sent = me.send(numpy.ones(1), 0, tag=9, async_op=True)
    thread.join(10)
    assert sent is not None and sent.wait()
    assert call is not None and call["op"] == "recv" and call["group"] == (RANK,)
    assert call["peer"] == RANK

    work = me.irecv(buf, 0, tag=10)
    thread = _blocked_thread(work.wait)
    call = describe_stack(sys._current_frames()[thread.ident])
    sent = me.send(numpy.ones(1), 0, tag=10, async_op=True)
    thread.join(10)
    assert sent is not None and sent.wait()
    assert call is not None and call["op"] == "recv (Work.wait)"
    assert call["group"] == (RANK,) and call["peer"] == RANK


@pytest.mark.mpi
def test_async_works_remember_what_started_them() -> None:
    x = numpy.ones(2)
    works = {"broadcast": world_comm.broadcast(x, 0, async_op=True),
             "barrier": world_comm.barrier(async_op=True),
             "all_gather": world_comm.all_gather(x, numpy.empty(2 * SIZE), async_op=True)}
    for name, work in works.items():
        assert work is not None
        op, comm = watchdog.operation_of(work.what)
        assert op == name
        assert comm is world_comm.mpi_comm
        work.wait()


@pytest.mark.mpi
def test_watched_blocks_count_as_inside_and_keep_the_parity() -> None:
    dog = Watchdog(5.0, None, CallState())
    try:
        dog.state.note = None
        before = STATE.seq
        with watchdog.watched("checkpoint save", MPI.COMM_WORLD):
            assert STATE.note == ("checkpoint save", MPI.COMM_WORLD)
            PLAIN.barrier()  # the calls inside still mark themselves
        assert STATE.note is None and (STATE.seq - before) % 256 == 3
        dog.state.note = ("checkpoint save", MPI.COMM_WORLD)
        snap = dog.snapshot(time.monotonic())
        assert snap["inside"] and snap["call"]["op"] == "checkpoint save"
        assert snap["call"]["group"] == WORLD
    finally:
        dog.stop()


# -- decisions ------------------------------------------------------------------------------

class _Inside:
    """A stand-in for the thread sampling: whether a call is in progress, set by the test."""

    def __init__(self) -> None:
        self.value = False

    def __call__(self) -> bool:
        return self.value


def _dog(timeout: float = 5.0) -> tuple[Watchdog, _Inside]:
    dog = Watchdog(timeout, None, CallState(), rank=0, size=3)
    dog.inside = inside = _Inside()  # type: ignore[method-assign]
    return dog, inside


def _enter(dog: Watchdog, inside: _Inside) -> None:
    dog.state.mark()
    inside.value = True


def test_a_call_that_lasts_the_timeout_is_reported_and_progress_resets_the_clock() -> None:
    dog, inside = _dog()
    try:
        t = dog.seen_at
        assert dog.check(t + 100) is None  # idle for long: nothing to report
        _enter(dog, inside)
        assert dog.check(t + 100) is None
        assert dog.check(t + 104.9) is None
        assert dog.check(t + 105) == "timeout"
        _enter(dog, inside)  # finished it and entered the next one
        assert dog.check(t + 106) is None
        assert dog.check(t + 110.9) is None
        assert dog.check(t + 111) == "timeout"
        inside.value = False  # returned
        assert dog.check(t + 200) is None
        inside.value = True  # in a call that does not mark (an async start): the clock restarts
        assert dog.check(t + 201) is None
        assert dog.check(t + 205.9) is None
        assert dog.check(t + 206) == "timeout"
    finally:
        dog.stop()


def test_a_count_the_calls_step_is_progress_too() -> None:
    # The collectives' fast paths mark nothing: each counts its group's schedule down, and
    # the watchdog reads those counts (fast._due_counts) beside the mark.
    dog, inside = _dog()
    count = [10]
    dog.state.counters.append(lambda: count[0])
    try:
        t = dog.seen_at
        _enter(dog, inside)
        assert dog.check(t + 1) is None
        count[0] -= 1  # the next call ran, on a fast path
        assert dog.check(t + 5.5) is None  # the clock restarted
        assert dog.check(t + 10.4) is None
        assert dog.check(t + 10.5) == "timeout"
    finally:
        dog.stop()


def test_ctrl_c_while_blocked_is_reported_after_a_grace_period() -> None:
    dog, inside = _dog(timeout=100)
    sigint = bytes([signal.SIGINT])
    try:
        t = dog.seen_at
        assert dog.check(t, sigint) is None  # not inside a call: Python raises it itself
        assert dog.check(t + 1) is None
        _enter(dog, inside)
        assert dog.check(t + 2, sigint) is None
        assert dog.check(t + 2 + watchdog.INTERRUPT_GRACE) == "interrupt"
        dog.interrupt = None
        _enter(dog, inside)
        dog.check(t + 3, sigint)
        _enter(dog, inside)  # the call returned: a new one is not interrupted
        assert dog.check(t + 10) is None
    finally:
        dog.stop()


@pytest.mark.parametrize(("call", "gone", "reported"), [
    ({"op": "barrier", "group": (0, 1, 2), "peer": None}, [2], True),
    ({"op": "barrier", "group": (0, 1), "peer": None}, [2], False),
    ({"op": "recv", "group": (0, 1, 2), "peer": 2}, [2], True),
    ({"op": "recv", "group": (0, 1, 2), "peer": 1}, [2], False),
    ({"op": "recv", "group": (0, 1, 2), "peer": None}, [2], False),  # any source: 1 may send
    ({"op": "recv", "group": (0, 1, 2), "peer": None}, [1, 2], True),
    ({"op": "barrier", "group": None, "peer": None}, [2], False),  # unknown group: timeout only
])
def test_a_call_waiting_on_a_rank_that_exited_is_reported_after_the_grace(
        call: dict[str, Any], gone: list[int], reported: bool) -> None:
    dog, inside = _dog(timeout=100)
    try:
        dog._current_call = lambda: call  # type: ignore[method-assign]
        t = dog.seen_at
        _enter(dog, inside)
        assert dog.check(t) is None
        for r in gone:
            dog.exited[r] = {"how": "sys.exit(0) at x.py:1 in <module>", "seen": t + 1}
        grace = watchdog.EXIT_GRACE
        assert dog.check(t + grace) is None  # the notice is younger than the grace
        assert dog.check(t + 1 + grace) == ("exited" if reported else None)
    finally:
        dog.stop()


def test_the_exit_grace_is_never_longer_than_the_timeout() -> None:
    dog, inside = _dog(timeout=2)
    try:
        dog._current_call = lambda: {"op": "barrier", "group": (0, 1, 2)}  # type: ignore
        t = dog.seen_at
        _enter(dog, inside)
        dog.check(t)
        dog.exited[1] = {"how": None, "seen": t}
        assert dog.check(t + 1.9) is None
        assert dog.check(t + 2) == "timeout"
    finally:
        dog.stop()


# -- the report -----------------------------------------------------------------------------

def _state(call: dict[str, Any] | None, waited: float = 3.2, where: str = "") -> dict[str, Any]:
    return {"inside": call is not None, "waited": waited, "call": call, "where": where}


def _world_call(op: str, size: int = 4) -> dict[str, Any]:
    return {"op": op, "group": tuple(range(size)), "size": size, "peer": None, "debug": False,
            "api": "mpiflow.communication.collectives.torch_api." + op, "site": "job.py:7 in main"}


def test_the_report_names_the_operation_the_group_and_who_arrived() -> None:
    states = {0: _state(_world_call("all_reduce")), 2: _state(_world_call("all_reduce"), 3.0),
              1: _state(None, where="job.py:5 in main"), 3: None}
    text = format_report("timeout", 0, 5, 3.0, states,
                         {4: {"how": "sys.exit(0) at job.py:2 in <module>", "ago": 7.0}})
    lines = text.splitlines()
    assert all(line.startswith("[rank 0] ") for line in lines)
    assert "all_reduce on the group [0, 1, 2, 3] has not completed after 3.2 s " \
           "(MPIFLOW_TIMEOUT=3)" in lines[0]
    assert ("called at job.py:7 in main "
            "(through mpiflow.communication.collectives.torch_api.all_reduce)") in text
    assert "arrived (waiting in the same call): ranks 0, 2" in text
    assert "not arrived: ranks 1, 3" in text
    assert "ranks 0, 2: waiting in all_reduce on the group [0, 1, 2, 3], called at job.py:7 " \
           "in main for 3.0-3.2 s" in text
    assert "rank 1: not in an mpiflow call: running job.py:5 in main" in text
    assert "rank 3: did not answer" in text
    assert "rank 4: has exited (sys.exit(0) at job.py:2 in <module>) (7.0 s ago)" in text
    assert "skipped this call or is still computing" in text
    assert lines[-1].endswith("aborting the job (MPIFLOW_TIMEOUT sets the limit in seconds, "
                              "0 turns the watchdog off)")


def test_the_report_points_at_debug_mode_when_ranks_wait_in_different_calls() -> None:
    states = {0: _state(_world_call("all_reduce", 2)), 1: _state(_world_call("broadcast", 2))}
    text = format_report("timeout", 1, 2, 5.0, states, {})
    assert text.startswith("[rank 1] mpiflow watchdog: all_reduce on the world (ranks 0..1)") \
        is False
    assert "broadcast on the world (ranks 0..1) has not completed" in text
    assert "arrived (waiting in the same call): rank 1\n" in text
    assert "not arrived: rank 0\n" in text
    assert "MPIFLOW_DEBUG=1 names the first mismatch" in text


def test_other_reasons_and_a_report_of_this_rank_only() -> None:
    states = {0: _state(_world_call("barrier", 2), waited=12.0)}
    exited = {1: {"how": "its program ended or raised SystemExit", "ago": 12.5}}
    text = format_report("exited", 0, 2, 600, states, exited)
    assert "barrier on the world (ranks 0..1) has waited 12.0 s on a rank that has exited" in text
    assert "rank 1: has exited (its program ended or raised SystemExit) (12.5 s ago)" in text
    text = format_report("interrupt", 0, 2, 600, states, {})
    assert "interrupted (Ctrl-C) after 12.0 s in barrier on the world" in text
    text = format_report("timeout", 0, 2, 600, states, {}, asked=False,
                         thread_level="MPI_THREAD_SERIALIZED")
    assert "this rank only: the MPI library provides MPI_THREAD_SERIALIZED" in text
    assert "arrived" not in text


@pytest.mark.parametrize(("ranks", "text"), [([3], "rank 3"), ([0, 1], "ranks 0, 1"),
                                             ([0, 1, 2, 5], "ranks 0-2, 5"),
                                             ([7, 2, 3, 4, 9, 10], "ranks 2-4, 7, 9, 10"),
                                             ([], "none")])
def test_rank_lists_are_compressed(ranks: list[int], text: str) -> None:
    assert watchdog.ranks_text(ranks) == text


def test_groups_are_named_as_the_public_faces_do() -> None:
    assert watchdog.describe_group((0, 1, 2), 3, 3) == "the world (ranks 0..2)"
    assert watchdog.describe_group((1, 2), 2, 3) == "the group [1, 2]"
    assert watchdog.describe_group(None, 2, 3) == "a group of 2 rank(s)"


@pytest.mark.mpi
def test_a_snapshot_of_this_rank_when_idle_and_when_inside() -> None:
    dog = Watchdog(5.0, None, CallState(), rank=RANK, size=SIZE)
    try:
        snap = dog.snapshot(time.monotonic())
        assert snap["rank"] == RANK and not snap["inside"] and snap["call"] is None
        assert snap["where"].startswith(__file__)
    finally:
        dog.stop()


# -- threads --------------------------------------------------------------------------------

@pytest.mark.mpi
def test_an_exception_in_a_thread_prints_a_rank_tagged_traceback(
        capsys: pytest.CaptureFixture[str]) -> None:
    try:
        raise RuntimeError("boom in a thread")
    except RuntimeError as exc:
        args = threading.ExceptHookArgs([RuntimeError, exc, exc.__traceback__,
                                          threading.Thread(name="worker")])
    _runtime._thread_hook(args)
    err = capsys.readouterr().err
    if SIZE == 1:
        assert "RuntimeError: boom in a thread" in err and "[rank" not in err
    else:
        assert f"[rank {RANK}] Exception in thread worker (the thread ends, the job goes on)" \
            in err
        assert f"[rank {RANK}] RuntimeError: boom in a thread" in err
        assert all(line.startswith(f"[rank {RANK}] ") for line in err.splitlines())


@pytest.mark.mpi
def test_sys_exit_is_remembered_for_the_exit_notice() -> None:
    before = _runtime._exit_request
    try:
        _runtime._exit_request = None
        assert _runtime.exit_description() == "its program ended or raised SystemExit"
        with pytest.raises(SystemExit) as info:
            _runtime._recording_exit(3)
        assert info.value.code == 3
        assert _runtime.exit_description().startswith(f"sys.exit(3) at {__file__}:")
        assert (sys.exit is _runtime._recording_exit) == (SIZE > 1)
    finally:
        _runtime._exit_request = before


def test_the_marks_cycle_through_small_ints() -> None:
    state = watchdog.CallState()
    seen = []
    for _ in range(256):
        seen.append(state.seq)
        state.mark()
    assert seen == list(range(256)) and state.seq == 0
    assert state.mark() is None and state.seq == 1


def test_mark_call_marks_the_process_state() -> None:
    before = watchdog.STATE.seq
    watchdog.mark_call()
    assert (watchdog.STATE.seq - before) % 256 == 1


@pytest.mark.mpi
def test_the_overhead_benchmark_runs_and_leaves_the_watchdog_as_it_was() -> None:
    from mpiflow.bench.watchdog import format_result, measure_watchdog_overhead

    before = watchdog.get_timeout()
    result = measure_watchdog_overhead(nbytes=8, iters=20, rounds=2, warmup=5)
    assert watchdog.get_timeout() == before
    assert (watchdog._dog is not None) == (SIZE > 1 and before > 0)
    assert result["bytes"] == 8 and result["ranks"] == SIZE
    assert min(result["raw_us"], result["on_us"], result["off_us"]) > 0
    text = format_result(result)
    assert "watchdog overhead" in text and "raw mpi4py" in text


def test_other_layers_can_register_their_blocking_functions() -> None:
    def wait_for_the_device() -> bool:
        watchdog.mark_call()
        return watchdog.in_blocking_site(sys._getframe())

    assert not wait_for_the_device()
    watchdog.register_blocking_site(wait_for_the_device)
    try:
        assert wait_for_the_device()
        assert "run" in watchdog.blocking_sites()[mpi.__file__]
    finally:
        watchdog.unregister_blocking_site(wait_for_the_device)
    assert not wait_for_the_device()
    assert "run" in watchdog.blocking_sites()[mpi.__file__]


@pytest.mark.mpi
def test_init_process_group_timeout_sets_the_watchdog_limit() -> None:
    import datetime

    import mpiflow.distributed as dist

    before = watchdog.get_timeout()
    try:
        dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=42))
        assert watchdog.get_timeout() == 42.0
    finally:
        watchdog.set_timeout(before)


@pytest.mark.parametrize("call", ["all_gather_object([None] * 3, {'x': bytes(10)})",
                                  "broadcast_object_list([None], src=1)",
                                  "scatter_object_list([None], None, src=1)"])
def test_a_hung_object_collective_is_reported_by_name(call: str) -> None:
    # A job of its own (the watchdog aborts it): pkl5 blocks in mpi4py's Python code, outside
    # the layer's blocking sites, so the object collectives tell the watchdog themselves.
    import textwrap

    from helpers import run_job

    code = textwrap.dedent(f"""
        import time, mpiflow.distributed as dist
        if dist.get_rank() == 1:
            time.sleep(60)
        dist.{call}
        print("unreachable")
    """)
    result = run_job(3, code, timeout=60, env={"MPIFLOW_TIMEOUT": "3"})
    err = result.stderr
    assert result.returncode != 0, err
    assert result.seconds < 30, (result.seconds, err)
    assert "unreachable" not in result.stdout
    op = call.split("(")[0]
    assert f"{op} on the world (ranks 0..2) has not completed after" in err, err
    assert (f"called at <string>:5 in <module> "
            f"(through mpiflow.communication.collectives.objects.{op})") in err, err
    assert "arrived (waiting in the same call): ranks 0, 2" in err, err
    assert "not arrived: rank 1" in err, err
    assert "rank 1: not in an mpiflow call" in err, err
