"""The blocking fast paths (mpiflow.communication.fast) and the general path they fall back to.

Each fast path either runs its collective (True) or does nothing (False) so that the general
path stages, copies or raises; the results must be the same either way, so every case here
compares with numpy and, where the fast path declines, checks that it really declined.
"""

from __future__ import annotations

from typing import Any

import numpy
import pytest
from numpy.testing import assert_array_equal

import mpiflow.distributed as dist
from mpiflow.communication import MPICommunicator, ReduceOp, count_collectives, fast
from mpiflow.communication.collectives import torch_api
from mpiflow.communication.fast import FastPaths
from mpiflow.communication.mpi.group import world_comm
from mpiflow.communication.watchdog.monitor import STATE

pytestmark = pytest.mark.mpi

RANK, SIZE = world_comm.rank, world_comm.size
FAST = world_comm.fast


@pytest.fixture(autouse=True)
def _no_check_due() -> Any:
    """These tests look at which path a call takes: the world's sampled argument check
    (MPIFLOW_CHECK, .debug.sampled) must not take a call they expect fast. Every rank sets
    and restores its schedule alike, so the ranks stay in step."""
    due = world_comm.check_due
    saved, due[0] = due[0], 1 << 29
    yield
    due[0] = saved


def ranks_rows(n: int, dtype: str = "f4") -> numpy.ndarray:
    """Every rank's ``numpy.arange(n) + 100 * rank``, stacked."""
    return numpy.stack([numpy.arange(n, dtype=dtype) + 100 * r for r in range(SIZE)])


def test_valid_calls_take_the_fast_paths_and_count_them_for_the_watchdog() -> None:
    dist.all_reduce(numpy.ones(1, "f4"))  # the general path learns that SUM of f4 is native
    seq, due, progress = STATE.seq, FAST.due[0], STATE.progress()
    x = numpy.full(3, RANK + 1, dtype="f4")
    assert FAST.all_reduce(x, ReduceOp.SUM)
    assert_array_equal(x, numpy.full(3, SIZE * (SIZE + 1) / 2))

    send, recv = numpy.arange(4, dtype="f4") + 100 * RANK, numpy.empty(4 * SIZE, "f4")
    assert FAST.all_gather(send, recv)
    assert_array_equal(recv, ranks_rows(4).reshape(-1))

    out = numpy.empty(2, "f4")
    big = numpy.arange(2 * SIZE, dtype="f4")
    assert FAST.reduce_scatter(big, out, ReduceOp.SUM)
    assert_array_equal(out, SIZE * big[2 * RANK:2 * RANK + 2])

    b = numpy.full(5, RANK, dtype="i8")
    assert FAST.broadcast(b, SIZE - 1)
    assert_array_equal(b, numpy.full(5, SIZE - 1))

    a_in = numpy.arange(2 * SIZE, dtype="i4") + 100 * RANK
    a_out = numpy.empty_like(a_in)
    assert FAST.all_to_all(a_in, a_out)
    assert_array_equal(a_out, ranks_rows(2 * SIZE, "i4")[:, 2 * RANK:2 * RANK + 2].reshape(-1))
    # Each counted itself down on the group's schedule, which is also the watchdog's mark of
    # them (CallState.progress reads every live FastPaths' count): no mark of their own.
    assert FAST.due[0] == due - 5 and STATE.seq == seq and STATE.progress() != progress


def test_multi_dimensional_concatenated_shapes_are_fast() -> None:
    dist.all_reduce(numpy.ones(1))  # SUM of f8 learnt as native
    send = numpy.arange(6, dtype="f8").reshape(2, 3) + RANK
    recv = numpy.empty((2 * SIZE, 3))
    assert FAST.all_gather(send, recv)
    assert_array_equal(recv, numpy.concatenate([numpy.arange(6.).reshape(2, 3) + r
                                                for r in range(SIZE)]))
    out = numpy.empty((2, 3))
    assert FAST.reduce_scatter(recv, out, ReduceOp.SUM)
    assert_array_equal(out, SIZE * recv[2 * RANK:2 * RANK + 2])


@pytest.mark.parametrize("case", ["dtype", "size", "stacked", "strided_1d", "strided_2d",
                                  "fortran", "same", "view_of_other", "common_base",
                                  "list", "bad_op"])
def test_all_gather_declines_everything_but_the_plain_case(case: str) -> None:
    send: Any = numpy.arange(4, dtype="f4") + 100 * RANK
    recv: Any = numpy.full(4 * SIZE, -1, dtype="f4")
    if case == "dtype":
        recv = recv.astype("f8")
    elif case == "size":
        recv = numpy.full(4 * SIZE + 1, -1, dtype="f4")
    elif case == "stacked":
        recv = recv.reshape(SIZE, 4)
    elif case == "strided_1d":
        recv = numpy.full(8 * SIZE, -1, dtype="f4")[::2]
    elif case == "strided_2d":
        send = numpy.zeros((4, 2), "f4")[:, :1]
        recv = numpy.full((4 * SIZE, 1), -1, dtype="f4")
    elif case == "fortran":
        send = numpy.asfortranarray(numpy.zeros((2, 3), "f4"))
        recv = numpy.full((2 * SIZE, 3), -1, dtype="f4")
    elif case == "same":
        send = recv = numpy.zeros(4, "f4")
    elif case == "view_of_other":
        send = recv[4 * RANK:4 * RANK + 4]
    elif case == "common_base":
        base = numpy.zeros(5 * SIZE + 4, "f4")
        send, recv = base[:4], base[4:]
    elif case == "list":
        send = list(send)
    elif case == "bad_op":
        out = numpy.zeros(1, "f4")
        assert not FAST.reduce_scatter(numpy.zeros(SIZE, "f4"), out, "sum")  # type: ignore
        return
    before = recv.copy()
    assert not FAST.all_gather(send, recv)
    assert_array_equal(recv, before)  # it did nothing


def test_other_fast_paths_decline_bad_arguments() -> None:
    x = numpy.zeros(4, "f4")
    assert not FAST.broadcast(x, SIZE)
    assert not FAST.broadcast(x, -1)
    assert not FAST.broadcast(x, numpy.int64(0))  # type: ignore[arg-type]  # plain ints only
    assert not FAST.broadcast(x.tolist(), 0)
    assert not FAST.send(x, RANK, 0)  # to itself
    assert not FAST.recv(x, SIZE, 0)
    assert not FAST.all_to_all(numpy.zeros(()), numpy.zeros(()))
    assert not FAST.all_to_all(numpy.zeros(SIZE + 1), numpy.zeros(SIZE + 1)) or SIZE == 1
    assert not FAST.all_to_all(x, x)
    assert not FAST.all_reduce(numpy.zeros(4, dtype=object), ReduceOp.SUM)
    assert not FAST.all_reduce(numpy.zeros((4, 2))[:, 0], ReduceOp.SUM)  # strided: BufferError
    assert not FAST.all_reduce(x, "sum")  # type: ignore[arg-type]


def test_aliased_buffers_are_correct_through_the_general_path() -> None:
    # PyTorch allows gathering into a tensor whose chunk is the input; MPI needs them apart.
    out = numpy.zeros(3 * SIZE, "f8")
    out[3 * RANK:3 * RANK + 3] = RANK + 1
    dist.all_gather_into_tensor(out, out[3 * RANK:3 * RANK + 3])
    assert_array_equal(out, numpy.repeat(numpy.arange(1, SIZE + 1, dtype="f8"), 3))

    x = numpy.arange(2 * SIZE, dtype="i8") + 100 * RANK
    dist.all_to_all_single(x, x)
    assert_array_equal(x, ranks_rows(2 * SIZE, "i8")[:, 2 * RANK:2 * RANK + 2].reshape(-1))

    big = numpy.ones(2 * SIZE, "f4")
    dist.reduce_scatter_tensor(big[:2], big)
    assert_array_equal(big[:2], numpy.full(2, SIZE))


def test_group_and_async_calls_skip_the_fast_paths() -> None:
    group = dist.new_group(list(range(SIZE)))
    group.comm.check_due[0] = 1 << 62  # no sampled check (its exchange is a blocking call)
    x = numpy.full(2, RANK, dtype="f8")
    seq = STATE.seq
    work = dist.all_reduce(x, group=group, async_op=True)
    assert STATE.seq == seq  # no blocking call was marked: the async path ran
    assert work is not None
    work.wait()
    assert_array_equal(x, numpy.full(2, SIZE * (SIZE - 1) / 2))


def test_a_groups_plain_call_takes_the_groups_fast_path(monkeypatch: Any) -> None:
    group = dist.new_group(list(range(SIZE)))
    due = group.comm.check_due
    due[0] = 1 << 29  # no sampled check
    x = numpy.full(2, RANK, dtype="f8")
    dist.all_reduce(x, group=group)  # the general path learns that SUM of f8 is native
    staged: list[Any] = []
    real = torch_api.reduce_arg
    monkeypatch.setattr(torch_api, "reduce_arg", lambda *a, **k: staged.append(a) or real(*a, **k))
    seq, left = STATE.seq, due[0]
    dist.all_reduce(x, group=group)
    # Straight to the group's fast path: no argument staging (the general path's 1 us)
    assert not staged and (STATE.seq, due[0]) == (seq, left - 1)
    assert_array_equal(x, numpy.full(2, SIZE * SIZE * (SIZE - 1) / 2))
    dist.all_reduce(numpy.ones(4)[::2], group=group)  # strided: the general path stages it
    assert len(staged) == 1


def test_a_communicator_that_checks_every_call_has_no_fast_paths() -> None:
    disabled = FastPaths.disabled()
    assert not disabled.all_reduce(numpy.zeros(2), ReduceOp.SUM)
    assert not disabled.broadcast(numpy.zeros(2), 0)

    class Checking(MPICommunicator):
        checks_every_call = True

    comm = Checking(world_comm.mpi_comm)
    assert not comm.fast.all_gather(numpy.zeros(1), numpy.zeros(SIZE))
    x = numpy.ones(2)
    comm.all_reduce(x)  # the general path still works
    assert_array_equal(x, numpy.full(2, SIZE))


def test_counting_collectives_sends_the_faces_through_the_counted_methods() -> None:
    x = numpy.ones(2)
    dist.all_reduce(x)
    with count_collectives() as calls:
        dist.all_reduce(x)
        dist.broadcast(x, 0)
        assert not FAST.all_reduce(x, ReduceOp.SUM)  # paused while counting
    assert calls["all_reduce"] == 1 and calls["broadcast"] == 1
    assert FAST.all_reduce(x, ReduceOp.SUM)  # back afterwards


def test_pause_nests_and_new_communicators_start_paused_inside() -> None:
    x = numpy.ones(2)
    dist.all_reduce(x)
    with fast.paused():
        with fast.paused():
            assert not FAST.all_reduce(x, ReduceOp.SUM)
            made = FastPaths(world_comm.mpi_comm, world_comm._native)
            assert not made.all_reduce(x, ReduceOp.SUM)
        assert not FAST.all_reduce(x, ReduceOp.SUM)
    assert FAST.all_reduce(x, ReduceOp.SUM) and made.all_reduce(x, ReduceOp.SUM)
    with pytest.raises(RuntimeError, match="without a matching pause"):
        fast.resume()


def test_a_communicator_that_never_checks_counts_again_when_its_count_runs_out() -> None:
    # A plain communicator's count only bounds the fast paths' int (one machine digit, cheap
    # to count down): the general path starts it again, and the fast paths go on.
    mpi_comm = world_comm.mpi_comm.Dup()
    comm = MPICommunicator(mpi_comm)
    assert comm.never_due and comm.check_due[0] == fast.UNCHECKED < 1 << 30
    x = numpy.ones(2)
    comm.all_reduce(x)  # the general path learns that SUM of f8 is native
    comm.check_due[0] = 3
    assert comm.fast.all_reduce(x, ReduceOp.SUM) is True
    assert comm.fast.all_reduce(x, ReduceOp.SUM) is True
    assert comm.fast.all_reduce(x, ReduceOp.SUM) is False  # counted out: the general path's
    comm.all_reduce(x)
    assert comm.check_due[0] == fast.UNCHECKED
    assert comm.fast.all_reduce(x, ReduceOp.SUM) is True
    assert_array_equal(x, numpy.full(2, float(SIZE) ** 5))
    mpi_comm.Free()
