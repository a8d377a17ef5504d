"""MPIFLOW_CHECK=sampled (the default): the ranks compare the arguments of the collectives of a
fixed schedule (every one of the first calls on a group, then sparse ones) and raise debug
mode's CollectiveMismatchError on every rank; the other calls take the fast paths.
"""

from __future__ import annotations

import textwrap

import numpy
import pytest
from mpi4py import MPI

import mpiflow as flow
import mpiflow.distributed as dist
from mpiflow.communication import CollectiveMismatchError
from mpiflow.communication.debug.mode import DebugMPICommunicator, Fingerprint, digest_of
from mpiflow.communication.debug.sampled import (
    FIRST,
    PERIOD,
    SampledMPICommunicator,
    check_mode,
    next_checked,
)
from mpiflow.communication.mpi.communicator import MPICommunicator, new_communicator
from mpiflow.communication.mpi.group import world_comm
from mpiflow.core.reduce_op import ReduceOp

RANK, SIZE = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()


def test_the_schedule_is_the_documented_one() -> None:
    checked, n = [], 1
    while n <= 100_000:
        checked.append(n)
        n = next_checked(n)
    # the first call, the powers of two up to PERIOD, then every PERIOD-th (docs/troubleshooting.md)
    assert FIRST == 1 and PERIOD == 4096
    assert checked[:13] == [2 ** k for k in range(13)]
    assert checked[13:] == list(range(2 * PERIOD, 100_001, PERIOD))
    assert sum(c <= 300 for c in checked) == 9 and len(checked) == 36  # as the docs say


def test_the_mode_comes_from_the_environment() -> None:
    assert check_mode({}) == "sampled"
    assert check_mode({"MPIFLOW_CHECK": "OFF"}) == "off"
    assert check_mode({"MPIFLOW_CHECK": "all"}) == "all"
    assert check_mode({"MPIFLOW_CHECK": "off", "MPIFLOW_DEBUG": "1"}) == "all"
    with pytest.raises(ValueError, match="MPIFLOW_CHECK must be one of off, sampled, all"):
        check_mode({"MPIFLOW_CHECK": "some"})


def test_the_default_communicator_is_sampled(monkeypatch: pytest.MonkeyPatch) -> None:
    kinds = {"sampled": SampledMPICommunicator, "all": DebugMPICommunicator,
             "off": MPICommunicator}
    assert type(world_comm) is kinds[check_mode()]  # the world's, made at import
    monkeypatch.delenv("MPIFLOW_DEBUG", raising=False)
    for mode, kind in kinds.items():
        monkeypatch.setenv("MPIFLOW_CHECK", mode)
        assert type(new_communicator(MPI.COMM_SELF.Dup())) is kind


def test_one_rank_keeps_its_fast_paths() -> None:
    comm = SampledMPICommunicator(MPI.COMM_SELF.Dup())
    x = numpy.ones(3)
    comm.all_reduce(x)  # the general path meets SUM of float64 first
    assert comm.fast.all_reduce(x, ReduceOp.SUM)  # then not declined: nothing is checked


def fresh() -> SampledMPICommunicator:
    return SampledMPICommunicator(MPI.COMM_WORLD.Dup())


def raises_everywhere(call: object, *what: str) -> None:
    with pytest.raises(CollectiveMismatchError) as info:
        call()  # type: ignore[operator]
    text = str(info.value)
    assert "the sampled check (MPIFLOW_CHECK=sampled, the default) checked" in text
    for w in what:
        assert w in text, text


@pytest.mark.mpi(min_size=2)
def test_same_size_dtypes_in_all_reduce_are_caught_on_every_rank() -> None:
    comm = fresh()
    for _ in range(7):  # in step first
        comm.all_reduce(numpy.ones(4, numpy.float32))
    x = numpy.ones(4, numpy.float32 if RANK == 0 else numpy.int32)
    raises_everywhere(lambda: comm.all_reduce(x), "rank 0: all_reduce(dtype=float32",
                      "all_reduce(dtype=int32", "they differ in: dtype", "[call 8 on this group]")
    y = numpy.ones(4, numpy.float32)
    comm.all_reduce(y)  # the ranks are in step again
    assert (y == SIZE).all()


@pytest.mark.mpi(min_size=2)
def test_same_size_dtypes_in_all_to_all_single_are_caught_through_the_face() -> None:
    group = dist.new_group(list(range(SIZE)))  # a new group: sampled by default, call 1
    dtype = numpy.float32 if RANK == 0 else numpy.int32
    out = flow.tensor(numpy.zeros(2 * SIZE, dtype))
    raises_everywhere(lambda: dist.all_to_all_single(out, flow.tensor(numpy.ones(2 * SIZE,
                                                                                 dtype)),
                                                     group=group),
                      "all_to_all(dtype=float32", "they differ in: dtype")


@pytest.mark.mpi(min_size=2)
def test_each_rank_naming_itself_the_root_is_caught() -> None:
    comm = fresh()
    x = numpy.full(3, float(RANK))
    raises_everywhere(lambda: comm.broadcast(x, RANK), "they differ in: root",
                      "rank 1: broadcast(dtype=float64, shape=(3,), root=1)")
    assert (x == RANK).all()  # nothing was overwritten


@pytest.mark.mpi(min_size=2)
def test_sizes_that_differ_are_caught_before_mpi_aborts() -> None:
    comm = fresh()
    raises_everywhere(lambda: comm.all_reduce(numpy.ones(4 + RANK)), "they differ in: shape")
    raises_everywhere(lambda: comm.all_gather(numpy.ones(2 + RANK), numpy.ones(SIZE * 3)),
                      "all_gather")  # call 2
    comm.barrier()  # call 3: not checked
    raises_everywhere(lambda: comm.reduce_scatter(numpy.ones(SIZE * (1 + RANK)),
                                                  numpy.ones(1 + RANK)), "reduce_scatter")


@pytest.mark.mpi(min_size=2)
def test_after_the_first_calls_only_the_scheduled_ones_are_checked() -> None:
    comm = fresh()
    x = numpy.ones(2, numpy.float32)
    for _ in range(300):  # fast paths and general paths alike count
        comm.all_reduce(x, ReduceOp.SUM)
        comm.all_reduce(x, ReduceOp.MAX, async_op=True).wait()  # the general path
    assert comm.check_due[0] == 1024 - 600
    checks = []
    original = comm._exchange
    comm._exchange = lambda row, digest=False: (  # type: ignore[method-assign]
        checks.append(comm._calls) or original(row, digest))
    for _ in range(1024 - 600):
        comm.all_reduce(x)
    assert checks == [1024]
    assert comm.check_due[0] == 1024


def test_the_bench_reports_the_overhead() -> None:
    from mpiflow.bench.collective_check import format_result, measure_check_overhead

    result = measure_check_overhead(8, iters=400, rounds=1)
    assert result["goal"] == 0.03 and result["sampled_us"] > 0 and result["off_us"] > 0
    assert "sampled overhead" in format_result(result)


def test_the_issue_probes_fail_a_default_job_with_a_clear_error_on_every_rank() -> None:
    from helpers import run_job

    code = textwrap.dedent("""
        import numpy, mpiflow as flow, mpiflow.distributed as dist
        r = dist.get_rank()
        dist.all_reduce(flow.tensor(numpy.ones(4, numpy.float32 if r == 0 else numpy.int32)))
        print("unreachable")
    """)
    job = run_job(3, code, timeout=60)
    assert job.returncode == 1, job.stderr
    assert "unreachable" not in job.stdout
    assert "] mpiflow.communication.debug.mode.CollectiveMismatchError: ranks called " \
        "mismatched collectives on the world (ranks 0..2)" in job.stderr, job.stderr
    assert "they differ in: dtype" in job.stderr
    off = run_job(2, code, timeout=60, env={"MPIFLOW_CHECK": "off"})
    assert off.returncode == 0 and off.stdout.count("unreachable") == 2  # the silent case



def test_the_torch_backend_is_checked_by_default() -> None:
    pytest.importorskip("torch")
    from helpers import run_job

    code = textwrap.dedent("""
        import sys, torch, torch.distributed as dist
        dist.init_process_group(backend="mpiflow")
        r = dist.get_rank()
        try:
            dist.broadcast(torch.full((3,), float(r)), src=r)  # each rank its own root
        except ValueError as exc:
            sys.stdout.write(f"caught: {str(exc).splitlines()[0]}\\n")  # one write: one line
            sys.stdout.flush()
        dist.all_reduce(torch.ones(4, dtype=torch.float32 if r == 0 else torch.int32))
    """)
    job = run_job(2, code, timeout=90)
    assert job.stdout.count("caught: ranks called mismatched collectives") == 2, job.stderr
    assert job.returncode == 1
    assert "they differ in: dtype" in job.stderr, job.stderr

@pytest.mark.mpi(min_size=2)
def test_new_group_called_on_some_ranks_only_is_named() -> None:
    comm = fresh()
    if RANK == 0:  # as dist.new_group([0]) on rank 0 only: a split of the world
        raises_everywhere(lambda: comm.split([0]), "split", "they differ in: operation")
    else:
        raises_everywhere(lambda: comm.all_reduce(numpy.ones(2)), "rank 0: split",
                          "all_reduce(dtype=float64")
    x = numpy.ones(2)
    comm.all_reduce(x)  # in step again
    assert (x == SIZE).all()


def test_the_digest_tells_every_field_apart() -> None:
    row = Fingerprint("float32", (4, 3), ReduceOp.SUM).encode("all_reduce", 0, 2)
    seen = {digest_of(row)}
    for j in range(len(row)):
        other = row.copy()
        other[j] += 1
        seen.add(digest_of(other))
    assert len(seen) == len(row) + 1  # no field's change leaves the digest as it was


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("what", ["dtype", "shape", "reduce op", "root"])
def test_a_mismatch_in_a_groups_first_call_is_caught_on_every_rank(what: str) -> None:
    comm = fresh()
    last = RANK == SIZE - 1  # the odd one out
    others = "rank 0" if SIZE == 2 else ("ranks 0, 1" if SIZE == 3 else f"ranks 0-{SIZE - 2}")
    x = numpy.ones(4 + (what == "shape" and last),
                   numpy.float64 if what == "dtype" and last else numpy.float32)
    if what == "root":
        call = lambda: comm.broadcast(x, SIZE - 1 if last else 0)  # noqa: E731
        seen = f"rank {SIZE - 1}: broadcast(dtype=float32, shape=(4,), root={SIZE - 1})"
    else:
        op = ReduceOp.MAX if what == "reduce op" and last else ReduceOp.SUM
        call = lambda: comm.all_reduce(x, op)  # noqa: E731  # the fast path's kind of call
        dtype = "float64" if what == "dtype" else "float32"
        seen = (f"rank {SIZE - 1}: all_reduce(dtype={dtype}, shape=({5 if what == 'shape' else 4},"
                f"), op={'MAX' if what == 'reduce op' else 'SUM'})")
    raises_everywhere(call, f"{others}: ", seen, "[call 1 on this group]",
                      f"they differ in: {what}")
    y = numpy.ones(2)
    comm.all_reduce(y)  # the call did not run: the ranks are in step
    assert (y == SIZE).all()


class CountedComm:
    """An mpi4py communicator that records each of its calls (name, bytes of the first buffer)
    and the checked call's number on the group, then makes the call."""

    def __init__(self, comm: MPI.Comm, owner: SampledMPICommunicator) -> None:
        self.comm, self.owner, self.calls = comm, owner, []

    def __getattr__(self, name: str) -> object:
        method = getattr(self.comm, name)

        def call(*args: object) -> object:
            buf = args[1] if args and args[0] is MPI.IN_PLACE else (args[0] if args else None)
            self.calls.append((name, getattr(buf, "nbytes", None), self.owner._calls))
            return method(*args)

        return call


@pytest.mark.mpi(min_size=2)
def test_a_checked_call_costs_one_small_all_reduce_on_the_schedule() -> None:
    comm = fresh()
    shadow = CountedComm(comm.mpi_comm.Dup(), comm)
    comm._shadow = shadow  # type: ignore[assignment]
    x, out = numpy.ones(3, numpy.float32), numpy.zeros(3 * SIZE, numpy.float32)
    for i in range(70):  # the fast paths and the general paths, several kinds of call
        if i % 3 == 0:
            comm.all_gather(x, out)
        elif i % 3 == 1:
            comm.all_reduce(x, ReduceOp.MAX, async_op=True).wait()
        else:
            comm.all_reduce(x)
    # one MPI_Allreduce of 16 bytes (the digest) per checked call, nothing else
    assert shadow.calls == [("Allreduce", 16, n) for n in (1, 2, 4, 8, 16, 32, 64)]
    shadow.calls.clear()
    for _ in range(127 - 70):
        comm.barrier()  # calls 71..127: none checked
    assert shadow.calls == []
    bad = numpy.ones(2 + (RANK == 0), numpy.float32)
    raises_everywhere(lambda: comm.all_reduce(bad), "[call 128 on this group]")
    # the digests differ: then, and only then, the ranks all-gather their rows
    assert [c[0] for c in shadow.calls] == ["Allreduce", "Allgather"]


@pytest.mark.mpi(min_size=2)
def test_all_to_all_v_counts_that_do_not_pair_up_are_caught_past_the_digest() -> None:
    comm = fresh()  # the digests agree (counts differ between ranks by design): then the counts
    send_counts, recv_counts = [1] * SIZE, [1] * SIZE
    if RANK == 0:
        send_counts[1] = 2  # rank 1 expects 1 from rank 0
    send, recv = numpy.zeros(sum(send_counts)), numpy.zeros(sum(recv_counts))
    with pytest.raises(CollectiveMismatchError, match="rank 0 sends 2 element"):
        comm.all_to_all_v(send, send_counts, recv, recv_counts)
