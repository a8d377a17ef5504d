"""A real ``MPIFLOW_DEBUG=1`` job: ranks that pass different sbp to ``to_global`` of a global
tensor all raise the same error (issue #14: "a clear error on every rank, at least in debug
mode"), and the default mode catches a local tensor's mismatch the same way. Starts its own
mpiexec jobs, so it runs in the 1-rank session only."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import job_env

pytestmark = [pytest.mark.mpi, pytest.mark.single_process]

MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")

PROGRAM = """
import mpiflow as flow
rank = flow.env.get_rank()
p = flow.placement.all("cpu")
g = flow.zeros(4, placement=p, sbp=flow.sbp.broadcast)
target = flow.sbp.split(0) if rank == 0 else flow.sbp.broadcast
try:
    {what}
except ValueError as e:
    first = str(e).splitlines()[0]
    print(f"rank {{rank}} raised: {{first}}", flush=True)  # one write: lines do not interleave
flow.comm.barrier()
print(f"rank {{rank}} done", flush=True)
"""


def _run(what: str, debug: bool) -> subprocess.CompletedProcess[str]:
    env = job_env()
    env["MPIFLOW_DEBUG"] = "1" if debug else "0"
    return subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-c", PROGRAM.format(what=what)],
                          capture_output=True, text=True, timeout=120, env=env)


def test_debug_mode_global_to_global_mismatch_is_an_error_on_every_rank() -> None:
    job = _run("g.to_global(sbp=target)", debug=True)
    assert job.returncode == 0, job.stderr
    for rank in (0, 1):
        assert (f"rank {rank} raised: to_global: the ranks passed different sbps"
                in job.stdout), job.stdout
        assert f"rank {rank} done" in job.stdout


def test_default_mode_local_mismatch_is_an_error_on_every_rank() -> None:
    job = _run("flow.zeros(2 + rank).to_global(p, flow.sbp.broadcast)", debug=False)
    assert job.returncode == 0, job.stderr
    for rank in (0, 1):
        assert f"rank {rank} raised: to_global: the local shapes" in job.stdout, job.stdout
        assert f"rank {rank} done" in job.stdout
