"""MPIFLOW_DEBUG's argument check: matching calls run, mismatched ones raise on every rank.

The tests make their own :class:`DebugMPICommunicator` (debug mode of the suite's world is
off). A mismatch raises on every rank before the collective runs, so every test is
collective-safe even when ranks pass different arguments on purpose.
"""

from __future__ import annotations

import numpy
import pytest
from mpi4py import MPI

from mpiflow.communication import MPICommunicator, ReduceOp, count_collectives, new_communicator
from mpiflow.communication.debug.mode import (
    CollectiveMismatchError,
    DebugMPICommunicator,
    Fingerprint,
    enabled,
    mismatch_message,
)
from mpiflow.communication.mpi.group import world_comm

pytestmark = pytest.mark.mpi

RANK, SIZE = world_comm.rank, world_comm.size
needs_two = pytest.mark.mpi(min_size=2)  # a mismatch needs two ranks


@pytest.fixture(scope="module")
def comm() -> DebugMPICommunicator:
    return DebugMPICommunicator(MPI.COMM_WORLD.Dup())


def test_enabled_reads_mpiflow_debug() -> None:
    assert not enabled({})
    assert not enabled({"MPIFLOW_DEBUG": ""})
    assert not enabled({"MPIFLOW_DEBUG": "0"})
    assert enabled({"MPIFLOW_DEBUG": "1"})
    assert enabled({"MPIFLOW_DEBUG": "yes"})
    assert not enabled({"MPIFLOW_DEBUG": "false"}) and not enabled({"MPIFLOW_DEBUG": " OFF "})


def test_mpi_communicator_is_the_debug_one_in_debug_mode(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPIFLOW_DEBUG", "1")
    assert type(new_communicator(MPI.COMM_SELF)) is DebugMPICommunicator
    assert type(MPICommunicator(MPI.COMM_SELF)) is MPICommunicator  # the class: always plain
    monkeypatch.setenv("MPIFLOW_DEBUG", "0")
    monkeypatch.setenv("MPIFLOW_CHECK", "off")
    assert type(new_communicator(MPI.COMM_SELF)) is MPICommunicator
    assert type(DebugMPICommunicator(MPI.COMM_SELF)) is DebugMPICommunicator


def test_matching_collectives_run_and_give_the_plain_results(comm: DebugMPICommunicator) -> None:
    x = numpy.arange(4.0) + RANK
    comm.all_reduce(x)
    numpy.testing.assert_array_equal(x, SIZE * numpy.arange(4.0) + SIZE * (SIZE - 1) / 2)
    y = numpy.full(3, float(RANK))
    comm.broadcast(y, SIZE - 1)
    numpy.testing.assert_array_equal(y, numpy.full(3, SIZE - 1.0))
    out = numpy.empty(2 * SIZE)
    comm.all_gather(numpy.full(2, float(RANK)), out)
    numpy.testing.assert_array_equal(out, numpy.repeat(numpy.arange(SIZE, dtype=float), 2))
    counts = [r + 1 for r in range(SIZE)]
    out = numpy.empty(sum(counts))
    comm.all_gather_v(numpy.full(RANK + 1, float(RANK)), out, counts)
    numpy.testing.assert_array_equal(out, numpy.repeat(numpy.arange(SIZE, dtype=float), counts))
    red = numpy.empty(1)
    comm.reduce_scatter(numpy.ones(SIZE), red)
    assert red[0] == SIZE
    send = numpy.arange(float(SIZE))
    got = numpy.empty(SIZE)
    comm.all_to_all(send, got)
    numpy.testing.assert_array_equal(got, numpy.full(SIZE, float(RANK)))
    send_counts, recv_counts = [1] * SIZE, [1] * SIZE
    comm.all_to_all_v(send, send_counts, got, recv_counts)
    work = comm.all_reduce(numpy.ones(2), ReduceOp.MAX, async_op=True)
    assert work is not None and work.wait()
    comm.barrier()
    sub = comm.split(list(range(SIZE)))
    assert isinstance(sub, DebugMPICommunicator)
    sub.barrier()
    assert isinstance(comm.split_by_color(RANK % 2, RANK), DebugMPICommunicator)


def test_a_one_rank_communicator_checks_nothing() -> None:
    me = DebugMPICommunicator(MPI.COMM_SELF)
    me.all_reduce(numpy.ones(2, dtype=numpy.float32))
    me.broadcast(numpy.ones(3), 0)
    assert me._shadow is None


def _raises_everywhere(call: object, *patterns: str) -> str:
    with pytest.raises(CollectiveMismatchError) as info:
        call()  # type: ignore[operator]
    text = str(info.value)
    for pattern in patterns:
        assert pattern in text, text
    return text


@needs_two
def test_different_dtypes(comm: DebugMPICommunicator) -> None:
    dtype = numpy.float32 if RANK == 0 else numpy.float64
    text = _raises_everywhere(lambda: comm.all_reduce(numpy.zeros(4, dtype=dtype)),
                              "ranks called mismatched collectives on the world",
                              "rank 0: all_reduce(dtype=float32, shape=(4,), op=SUM)",
                              "all_reduce(dtype=float64, shape=(4,), op=SUM)",
                              "they differ in: dtype\n", "the collective did not run")
    assert ("rank 1: " if SIZE == 2 else f"ranks 1{', ' if SIZE == 3 else '-'}") in text


@needs_two
def test_different_operations(comm: DebugMPICommunicator) -> None:
    x = numpy.zeros(3)
    call = (lambda: comm.all_reduce(x)) if RANK == 0 else (lambda: comm.broadcast(x, 0))
    _raises_everywhere(call, "rank 0: all_reduce(dtype=float64, shape=(3,), op=SUM)",
                       "broadcast(dtype=float64, shape=(3,), root=0)",
                       "they differ in: operation")
    comm.barrier()  # the communicator is still usable: every rank counted the call


@needs_two
def test_all_gather_of_different_shapes_does_not_succeed_silently(
        comm: DebugMPICommunicator) -> None:
    inp = numpy.zeros((2, 3) if RANK == 0 else (3, 2))
    out = numpy.empty(6 * SIZE)
    _raises_everywhere(lambda: comm.all_gather(inp, out), "shape=(2, 3)", "shape=(3, 2)",
                       "they differ in: shape")


@needs_two
def test_different_roots_and_reduce_ops(comm: DebugMPICommunicator) -> None:
    x = numpy.zeros(2)
    _raises_everywhere(lambda: comm.broadcast(x, RANK % 2), "root=0", "root=1",
                       "they differ in: root")
    op = ReduceOp.SUM if RANK == 0 else ReduceOp.MAX
    _raises_everywhere(lambda: comm.all_reduce(x, op), "op=SUM", "op=MAX",
                       "they differ in: reduce op")
    _raises_everywhere(lambda: comm.reduce(x, ReduceOp.SUM, RANK % 2), "they differ in: root")


@needs_two
def test_call_numbers_show_a_rank_that_made_an_extra_collective(
        comm: DebugMPICommunicator) -> None:
    calls = comm._calls
    comm._calls += 1 if RANK == 1 else 0  # as if rank 1 had made one more collective
    try:
        _raises_everywhere(lambda: comm.barrier(), "they differ in: call number",
                           f"[call {calls + 1} on this group]", f"[call {calls + 2} on this "
                           "group]", "some ranks made more collectives")
    finally:
        comm._calls = calls + 1


@needs_two
def test_all_to_all_v_counts_that_do_not_pair_up(comm: DebugMPICommunicator) -> None:
    send_counts = [1] * SIZE
    recv_counts = [1] * SIZE
    if RANK == 0:
        send_counts[1] = 2  # rank 1 expects 1 from rank 0
    send = numpy.zeros(sum(send_counts))
    recv = numpy.zeros(sum(recv_counts))
    _raises_everywhere(lambda: comm.all_to_all_v(send, send_counts, recv, recv_counts),
                       "all_to_all_v counts do not match between ranks",
                       "rank 0 sends 2 element(s) to rank 1, which expects 1")


@needs_two
def test_v_counts_and_split_ranks_must_agree(comm: DebugMPICommunicator) -> None:
    counts = [1] * SIZE if RANK == 0 else [2] + [1] * (SIZE - 1)
    send = numpy.zeros(counts[RANK])
    _raises_everywhere(lambda: comm.all_gather_v(send, numpy.zeros(sum(counts)), counts),
                       "they differ in: counts")
    ranks = [0, 1] if RANK == 0 else [0]
    _raises_everywhere(lambda: comm.split(ranks), "split(", "they differ in: ranks")


@pytest.mark.mpi(min_size=3)
def test_a_group_names_world_ranks() -> None:
    sub = world_comm.split(list(range(1, SIZE)))
    if sub is None:
        return
    mine = DebugMPICommunicator(sub.mpi_comm)
    dtype = numpy.float32 if RANK == 1 else numpy.float64
    _raises_everywhere(lambda: mine.all_reduce(numpy.zeros(1, dtype=dtype)),
                       f"on the group {list(range(1, SIZE))}", "rank 1: all_reduce")


def test_debug_calls_are_still_counted(comm: DebugMPICommunicator) -> None:
    with count_collectives() as calls:
        comm.all_reduce(numpy.ones(2))
        comm.barrier()
    assert calls == {"all_reduce": 1, "barrier": 1}


def test_the_message_of_a_table() -> None:
    rows = [Fingerprint(numpy.dtype("int64"), (5, 2), ReduceOp.SUM).encode("all_reduce", 4, 3),
            Fingerprint(numpy.dtype("int64"), (5, 2), ReduceOp.SUM).encode("all_reduce", 4, 3),
            Fingerprint(numpy.dtype("int64"), (2, 5), ReduceOp.SUM).encode("all_reduce", 4, 3)]
    table = numpy.stack(rows)
    assert mismatch_message(table[:2], (0, 1), 3) is None
    text = mismatch_message(table, (0, 2, 5), 6)
    assert text is not None
    assert text.splitlines() == [
        "ranks called mismatched collectives on the group [0, 2, 5]:",
        "  ranks 0, 2: all_reduce(dtype=int64, shape=(5, 2), op=SUM) [call 4 on this group]",
        "  rank 5: all_reduce(dtype=int64, shape=(2, 5), op=SUM) [call 4 on this group]",
        "  they differ in: shape",
        "  (MPIFLOW_DEBUG=1 checked the arguments; the collective did not run)",
    ]
    long = Fingerprint(numpy.dtype("float32"), (1, 2, 3, 4, 5, 6)).encode("all_gather", 1, 2)
    text = mismatch_message(numpy.stack([long, table[0][:long.size]]), None, 2)
    assert text is not None and "shape=(1, 2, 3, 4, ... (6 dims, 720 elements))" in text
