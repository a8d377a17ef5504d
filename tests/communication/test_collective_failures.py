"""Collectives whose ranks disagree, without debug mode: never silent, never a bare MPI error.

Each case is its own job under ``mpiexec`` with a hard time limit (so these run in the 1-rank
session only). Where MPI reports the mismatch on some rank, that rank aborts the job with a
rank-tagged report naming the call (``CollectiveError``), not a bare ``mpi4py.MPI.Exception``
that a program could catch while the other ranks keep wrong data.
"""

from __future__ import annotations

import textwrap

import numpy
import pytest
from helpers import Job, run_job
from mpi4py import MPI

from mpiflow.communication.watchdog.failure import (
    CollectiveError,
    collective_failed,
    describe_failure,
)

LIMIT = 60


# These jobs test what MPI reports in calls no check compares: MPIFLOW_CHECK=off (the sampled
# check would raise CollectiveMismatchError first, tests/communication/test_sampled_check.py).
def job(ranks: int, code: str, **env: str) -> Job:
    return run_job(ranks, textwrap.dedent(code), timeout=LIMIT,
                   env={"MPIFLOW_TIMEOUT": "20", "MPIFLOW_CHECK": "off", **env})


def assert_reported(result: Job, operation: str, rank: int, ranks: int) -> None:
    err = result.stderr
    assert result.returncode != 0, err
    assert result.seconds < 30, (result.seconds, err)
    assert "unreachable" not in result.stdout
    assert (f"[rank {rank}] mpiflow.communication.watchdog.failure.CollectiveError: "
            f"{operation} on the "
            f"world (ranks 0..{ranks - 1}) failed inside MPI on rank {rank}") in err, err
    assert f"[rank {rank}] mpiflow: aborting the job because {operation} failed on rank {rank}" \
        in err
    assert "MPIFLOW_DEBUG=1" in err
    assert "mpi4py.MPI.Exception" not in err  # the bare error is not what the user sees
    assert err.count("CollectiveError:") == 1, err  # one report, not two


@pytest.mark.parametrize("ranks", [2, 3])
def test_all_to_all_of_different_sizes_aborts_naming_the_call(ranks: int) -> None:
    # Without the report, rank 0 raised a bare MPI.Exception and the others went on with
    # what they had received.
    result = job(ranks, """
        import numpy, mpiflow.distributed as dist
        rank, size = dist.get_rank(), dist.get_world_size()
        n = size * (1 if rank == 0 else 2)
        x, out = numpy.ones(n), numpy.zeros(n)
        try:
            dist.all_to_all_single(out, x)
        except Exception as exc:   # a program that catches everything cannot go on
            print("caught", type(exc).__name__)
        dist.barrier()
        print("unreachable")
    """)
    assert_reported(result, "all_to_all", 0, ranks)
    assert "caught" not in result.stdout
    assert "this rank passed send 2 x float64, receive 2 x float64" in result.stderr or \
        ranks != 2


def test_broadcast_into_a_larger_buffer_aborts_on_the_rank_that_sees_it() -> None:
    result = job(2, """
        import numpy, mpiflow.distributed as dist
        x = numpy.ones(2 if dist.get_rank() == 0 else 4)
        dist.broadcast(x, src=0)
        dist.barrier()
        print("unreachable")
    """)
    assert_reported(result, "broadcast", 1, 2)
    assert "message sizes do not match" in result.stderr


@pytest.mark.parametrize("how", ["group", "async"])
def test_the_general_path_and_async_waits_report_too(how: str) -> None:
    # A group's calls and non-blocking ones take the general path (MPICommunicator._run and
    # the Work's wait), not the world's fast paths.
    result = job(2, f"""
        import numpy, mpiflow.distributed as dist
        rank = dist.get_rank()
        x = numpy.ones(2 if rank == 0 else 4)
        if {how!r} == "group":
            dist.broadcast(x, src=0, group=dist.new_group([0, 1]))
        else:
            dist.broadcast(x, src=0, async_op=True).wait()
        dist.barrier()
        print("unreachable")
    """)
    err = result.stderr
    assert result.returncode != 0, err
    assert ("[rank 1] mpiflow.communication.watchdog.failure.CollectiveError: broadcast on "
            in err), err
    assert "failed inside MPI on rank 1" in err
    assert "mpi4py.MPI.Exception" not in err


def test_gather_of_different_sizes_aborts_on_the_root() -> None:
    result = job(2, """
        import numpy, mpiflow.distributed as dist
        rank = dist.get_rank()
        x = numpy.ones(4 if rank == 0 else 8)
        dist.gather(x, [numpy.zeros(4), numpy.zeros(4)] if rank == 0 else None, dst=0)
        dist.barrier()
        print("unreachable")
    """)
    assert_reported(result, "gather", 0, 2)
    assert "Message truncated" in result.stderr


def test_one_rank_raises_collective_error_with_the_call_named() -> None:
    error = describe_failure("all_reduce", MPI.COMM_SELF, MPI.Exception(MPI.ERR_TRUNCATE),
                             (numpy.zeros(4, numpy.float32),))
    assert error.startswith("all_reduce on ")
    assert f"failed inside MPI on rank {MPI.COMM_WORLD.Get_rank()}: Message truncated" in error
    assert "this rank passed buffer 4 x float32" in error
    if MPI.COMM_WORLD.Get_size() == 1:
        with pytest.raises(CollectiveError, match=r"^broadcast on .* Message truncated"):
            collective_failed("broadcast", MPI.COMM_WORLD, MPI.Exception(MPI.ERR_TRUNCATE))


@pytest.mark.parametrize("group", ["None", "dist.new_group([0, 1])"])
def test_mpiflow_communicators_return_mpi_errors_whatever_mpi4py_rc_says(group: str) -> None:
    # With mpi4py.rc.errors = "fatal", MPI aborted in C on its own (status 15, no Python).
    result = job(2, f"""
        import mpi4py
        mpi4py.rc.errors = "fatal"
        import numpy, mpiflow.distributed as dist
        x = numpy.ones(2 if dist.get_rank() == 0 else 4)
        dist.broadcast(x, src=0, group={group})
        dist.barrier()
        print("unreachable")
    """)
    assert_reported(result, "broadcast", 1, 2)
