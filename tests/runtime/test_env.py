"""mpiflow.env and the process runtime: topology, launcher mismatch, abort on failure."""

from __future__ import annotations

import os

import pytest
from helpers import MPIEXEC, run_job, shared_memory_nodes
from mpi4py import MPI

import mpiflow as flow
import mpiflow.distributed as dist
from mpiflow.core.launcher_env import launcher_values
from mpiflow.runtime import launcher_size


@pytest.mark.mpi
def test_rank_and_size_match_mpi() -> None:
    assert flow.env.get_rank() == MPI.COMM_WORLD.Get_rank()
    assert flow.env.get_world_size() == MPI.COMM_WORLD.Get_size()


@pytest.mark.mpi
@pytest.mark.node_layout
def test_local_ranks_number_the_processes_of_each_node() -> None:
    """A node is what MPI finds sharing memory, not a host name: a simulated multi-node job
    (scripts/test's 2-node step: MPICH ``-hosts localhost,127.0.0.1 -launcher fork``) runs
    several nodes on one host. With ``MPIFLOW_TEST_PPN`` set, the job placed that many
    consecutive ranks on each node."""
    rank, size = flow.env.get_rank(), flow.env.get_world_size()
    shared = MPI.COMM_WORLD.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
    node = shared.allreduce(rank, op=MPI.MIN)  # the node's lowest rank names it
    shared.Free()
    everyone: list = [None] * size
    dist.all_gather_object(everyone, (node, flow.env.get_local_rank(),
                                      flow.env.get_local_world_size(), flow.env.get_node_rank(),
                                      flow.env.get_node_size()))
    nodes = sorted({node for node, *_ in everyone})
    assert {e[4] for e in everyone} == {len(nodes)}
    for node in nodes:
        on_node = [e for e in everyone if e[0] == node]
        assert sorted(e[1] for e in on_node) == list(range(len(on_node)))
        assert {e[2] for e in on_node} == {len(on_node)}
        assert {e[3] for e in on_node} == {nodes.index(node)}  # numbered by lowest rank
    ppn = int(os.environ.get("MPIFLOW_TEST_PPN", "0"))
    if ppn:
        assert [e[1:4] for e in everyone] == [
            (r % ppn, min(ppn, size - r // ppn * ppn), r // ppn) for r in range(size)]


@pytest.mark.mpi
@pytest.mark.node_layout
def test_torchruns_variables_are_the_node_layout() -> None:
    """torchrun's variables, set at import for programs that read them, say what MPI's
    shared-memory view says: the node count, this rank's place on its node and its node's."""
    if flow.env.get_world_size() == 1 and launcher_values(os.environ) is None:
        pytest.skip("a process started without a launcher gets no torchrun variables")
    nodes, on_node = shared_memory_nodes()
    rank, size = flow.env.get_rank(), flow.env.get_world_size()
    env = {k: int(os.environ[k]) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK",
                                           "LOCAL_WORLD_SIZE", "GROUP_RANK")}
    assert (env["RANK"], env["WORLD_SIZE"]) == (rank, size)
    assert env["LOCAL_WORLD_SIZE"] == on_node == flow.env.get_local_world_size()
    # LOCAL_RANK is the launcher's own numbering where it gives one: Open MPI's follows its
    # mapping, not always the ranks' order; the pairs below must still name each rank once.
    assert 0 <= env["LOCAL_RANK"] < on_node
    assert flow.env.get_local_rank() < on_node
    assert env["GROUP_RANK"] == flow.env.get_node_rank() < nodes == flow.env.get_node_size()
    everyone: list = [None] * size
    dist.all_gather_object(everyone, (env["GROUP_RANK"], env["LOCAL_RANK"]))
    assert len(set(everyone)) == size  # (node, local rank) names each rank once
    assert {node for node, _ in everyone} == set(range(nodes))


@pytest.mark.parametrize(
    ("environ", "size"),
    [
        ({}, 0),
        ({"PMI_SIZE": "4"}, 4),
        ({"OMPI_COMM_WORLD_SIZE": "3"}, 3),
        ({"MV2_COMM_WORLD_SIZE": "2"}, 2),
        ({"SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "8"}, 8),
        # a batch script runs as Slurm's batch step: one process, whatever the allocation
        ({"SLURM_STEP_ID": "4294967294", "SLURM_STEP_NUM_TASKS": "8"}, 0),
        ({"SLURM_NTASKS": "8"}, 0),
        ({"PMI_SIZE": "not a number"}, 0),
    ],
)
def test_launcher_size_reads_the_launchers_variables(environ: dict, size: int) -> None:
    announced, who = launcher_size(environ)
    assert announced == size
    assert bool(who) == bool(size)


def test_mismatched_mpiexec_stops_with_an_explanation() -> None:
    # Removing PMI_FD makes each process start as an MPI singleton although the launcher
    # announced 2 processes: exactly what a foreign mpiexec produces.
    code = "import mpiflow; print('imported')"
    job = run_job(2, code, launcher=[MPIEXEC, "-n", "2", "env", "-u", "PMI_FD",
                                     "-u", "PMI_PORT"])
    assert job.returncode != 0
    assert "imported" not in job.stdout
    assert "launcher started 2 processes" in job.stderr
    assert "MPI4PY_LIBMPI" in job.stderr


def test_mismatch_check_can_be_switched_off() -> None:
    job = run_job(1, "import mpiflow; print(mpiflow.env.get_world_size())", launcher=[],
                  env={"PMI_SIZE": "4", "MPIFLOW_IGNORE_LAUNCHER": "1"})
    assert job.returncode == 0, job.stderr
    assert job.stdout.strip() == "1"


def test_a_rank_that_raises_aborts_the_whole_job_quickly() -> None:
    code = (
        "import time, mpiflow, mpiflow.distributed as dist\n"
        "if dist.get_rank() == 1:\n"
        "    time.sleep(0.5)\n"
        "    raise ValueError('boom on purpose')\n"
        "dist.barrier()\n"  # the others would wait here forever without the abort
        "print('unreachable')\n"
    )
    job = run_job(3, code, timeout=60)
    assert job.returncode != 0
    assert job.seconds < 30
    assert "[rank 1] ValueError: boom on purpose" in job.stderr
    assert "[rank 1] Traceback" in job.stderr
    assert "unreachable" not in job.stdout


def test_keyboard_interrupt_on_one_rank_aborts_the_job() -> None:
    code = (
        "import mpiflow, mpiflow.distributed as dist\n"
        "if dist.get_rank() == 0:\n"
        "    raise KeyboardInterrupt\n"
        "dist.barrier()\n"
    )
    job = run_job(2, code, timeout=60)
    assert job.returncode != 0
    assert job.seconds < 30
    assert "[rank 0] KeyboardInterrupt" in job.stderr


def test_one_rank_keeps_the_ordinary_traceback() -> None:
    job = run_job(1, "import mpiflow\nraise RuntimeError('plain')", launcher=[])
    assert job.returncode == 1
    assert "RuntimeError: plain" in job.stderr
    assert "[rank" not in job.stderr


def test_env_is_correct_under_mpiexec_and_as_plain_python() -> None:
    code = ("import mpiflow as f; e = f.env\n"
            "row = [e.get_rank(), e.get_world_size(), e.get_local_rank(),\n"
            "       e.get_local_world_size(), e.get_node_rank(), e.get_node_size()]\n"
            "rows = [None] * e.get_world_size()\n"
            "f.distributed.all_gather_object(rows, row)\n"
            "if e.get_rank() == 0:\n"
            "    print('\\n'.join(' '.join(map(str, r)) for r in rows))\n")
    plain = run_job(1, code, launcher=[])
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.split() == ["0", "1", "0", "1", "0", "1"]
    job = run_job(3, code)
    assert job.returncode == 0, job.stderr
    rows = sorted(line.split() for line in job.stdout.strip().splitlines())
    assert rows == [[str(r), "3", str(r), "3", "0", "1"] for r in range(3)]


def test_a_program_started_by_torchrun_is_told_to_use_an_mpi_launcher() -> None:
    """torchrun starts processes without MPI: each would be a job of one. It is refused,
    naming torchrun and the command to use instead."""
    torchrun = os.path.join(os.path.dirname(MPIEXEC), "torchrun")
    if not os.path.exists(torchrun):
        pytest.skip("torch (torchrun) is not installed")
    job = run_job(1, "import mpiflow\nprint('started')", timeout=90,
                  launcher=[torchrun, "--standalone", "--nproc-per-node", "2", "--no-python"])
    assert job.returncode != 0
    assert "started" not in job.stdout
    assert "started by torchrun (WORLD_SIZE=2)" in job.stderr, job.stderr[-2000:]
    assert "mpiexec -n 2 python PROGRAM.py" in job.stderr
