"""The plugin that runs the array API suite under mpiexec (tests/array_api/xp_plugin.py): a
test that fails on one rank fails on every rank, each rank exits with the same status, and
rank 0 writes the outcomes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import MPIEXEC, job_env

TESTS = """
from mpi4py import MPI

def test_everywhere():
    pass

def test_on_rank_1_only():
    assert MPI.COMM_WORLD.rank != 1, "fails on rank 1"

def test_after_it():
    pass
"""


def test_a_failure_on_one_rank_fails_on_all(tmp_path: Path) -> None:
    (tmp_path / "test_ranks.py").write_text(TESTS)
    out = tmp_path / "outcomes.json"
    here = str(Path(__file__).resolve().parent)
    env = job_env({"PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])})
    done = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "pytest", "-q",
                           "-p", "xp_plugin", "-p", "no:cacheprovider", f"--xp-json={out}",
                           "test_ranks.py"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr  # (mpiexec: the ranks' status)
    assert "failed on rank(s) [1] of 2" in done.stdout  # rank 0 reports rank 1's failure
    assert done.stdout.count("1 failed, 2 passed") == 1  # one rank reports
    assert json.loads(out.read_text()) == {"test_ranks.py::test_after_it": "passed",
                                           "test_ranks.py::test_everywhere": "passed",
                                           "test_ranks.py::test_on_rank_1_only": "failed"}
