"""python -m mpiflow info."""

from __future__ import annotations

import re

import pytest
from helpers import MPIEXEC, run_job, shared_memory_nodes
from mpi4py import MPI

from mpiflow.info import collect, cuda_aware_mpi, format_report


def test_report_names_everything_the_issue_asks_for() -> None:
    info = collect()
    for key in ("mpiflow", "mpi4py", "numpy", "MPI library", "MPI standard", "thread level",
                "world size", "ranks on this node", "cupy", "nccl (cupy.cuda.nccl)",
                "reductions unlike numpy", "all-reduce form", "launcher", "MPI settings",
                "CUDA-aware MPI", "linalg kernels"):
        assert info[key], key
    assert re.match(r"gemm (numpy|torch), qr (numpy|torch), .*; \d+ thread",
                    info["linalg kernels"])
    text = format_report(info)
    assert text.splitlines()[0].startswith("mpiflow")


@pytest.mark.mpi
@pytest.mark.node_layout
def test_report_gives_the_jobs_node_layout() -> None:
    """What ``info`` reports in the running job: its size, node count and ranks per node as
    MPI's shared-memory view finds them, and the all-reduce's pieces rule for that count."""
    from mpiflow.communication.form import set_pieces

    nodes, on_node = shared_memory_nodes()
    set_pieces("auto")  # the rule itself, whatever MPIFLOW_ALLREDUCE_PIECES says
    try:
        info = collect()
    finally:
        set_pieces(None)
    assert info["world size"] == str(MPI.COMM_WORLD.Get_size())
    assert (info["nodes"], info["ranks on this node"]) == (str(nodes), str(on_node))
    spans = f"auto: the job spans {nodes} nodes, and the table is for one"
    assert (spans in info["all-reduce form"]) == (nodes > 1), info["all-reduce form"]
    if nodes > 1:
        assert f"in one call at every size ({spans})" in info["all-reduce form"]


@pytest.mark.parametrize(
    ("environ", "answer"),
    [
        ({}, "unknown"),
        ({"MPIFLOW_CUDA_AWARE": "1"}, "yes"),
        ({"MPIFLOW_CUDA_AWARE": "0", "MPIR_CVAR_ENABLE_GPU": "1"}, "no"),
        ({"MPIR_CVAR_ENABLE_GPU": "1"}, "yes"),
        ({"MPICH_GPU_SUPPORT_ENABLED": "0"}, "no"),
        ({"MV2_USE_CUDA": "1"}, "yes"),
    ],
)
def test_cuda_awareness_from_the_environment(environ: dict, answer: str) -> None:
    assert cuda_aware_mpi(environ) == answer


def test_info_prints_once_per_job() -> None:
    # MPIFLOW_ALLREDUCE_FORM reaches the job's all-reduce (the scratch copy runs) and info.
    code = ("import numpy, mpiflow.distributed as dist; from mpiflow.__main__ import main; "
            "from mpiflow.communication.mpi.group import world_comm as w; "
            "x = numpy.arange(5.0); dist.all_reduce(x); assert (x == 2 * numpy.arange(5)).all()"
            "; assert w.fast.scratch.buffer.nbytes == 40; main(['info'])")
    # MPIFLOW_DEBUG=False is off (it used to turn debug mode on): the sampled communicator.
    code += "; assert type(w).__name__ == 'SampledMPICommunicator', type(w)"
    job = run_job(2, code, launcher=[MPIEXEC, "-n", "2"],
                  env={"MPIFLOW_ALLREDUCE_FORM": "out_of_place", "MPIFLOW_DEBUG": "False",
                       "MPIFLOW_CHECK": "", "MPIFLOW_JOB_EAGER": ""})
    assert job.returncode == 0, job.stderr
    assert re.search(r"^all-reduce form +: out of place at every size "
                     r"\(MPIFLOW_ALLREDUCE_FORM=out_of_place\); in ", job.stdout, re.M), job.stdout
    assert job.stdout.count("MPI standard") == 1  # printed by rank 0 only
    assert re.search(r"^world size +: 2$", job.stdout, re.M)
    library = MPI.Get_library_version()
    launcher = ("Open MPI / PRRTE mpirun" if "Open MPI" in library else
                "Intel MPI Hydra mpiexec" if "Intel" in library else "MPICH Hydra mpiexec")
    assert re.search(rf"^launcher +: {re.escape(launcher)}$", job.stdout, re.M), job.stdout
    assert re.search(r"^MPI settings +: \S", job.stdout, re.M), job.stdout
    # the effective settings, each with where it came from (docs/configuration.md)
    assert "\nsettings (docs/configuration.md):\n" in job.stdout, job.stdout
    for line in (r"MPIFLOW_DEBUG +: off \(environment\)", r"MPIFLOW_CHECK +: sampled \(default\)",
                 r"MPIFLOW_ALLREDUCE_FORM +: out_of_place \(environment\)",
                 r"MPIFLOW_JOB_EAGER +: off \(default\)"):
        assert re.search(rf"^{line}$", job.stdout, re.M), (line, job.stdout)


@pytest.mark.skipif(not MPI.Get_library_version().startswith("MPICH"),
                    reason="simulates two nodes with MPICH's Hydra (-hosts, -launcher fork)")
def test_info_counts_the_nodes_of_a_simulated_two_node_job() -> None:
    """Hydra takes localhost and 127.0.0.1 for two hosts: 2 nodes of 2 ranks on one machine."""
    job = run_job(4, "from mpiflow.__main__ import main; main(['info'])",
                  launcher=[MPIEXEC, "-n", "4", "-ppn", "2", "-hosts", "localhost,127.0.0.1",
                            "-launcher", "fork"])
    assert job.returncode == 0, job.stderr
    assert re.search(r"^nodes +: 2$", job.stdout, re.M), job.stdout
    assert re.search(r"^ranks on this node +: 2$", job.stdout, re.M), job.stdout
    # The table's all-reduce pieces are measured on one node: across nodes, one call.
    assert re.search(r"; in one call at every size \(auto: the job spans 2 nodes",
                     job.stdout, re.M), job.stdout
