"""Training frameworks on torch.distributed under mpiexec, compared with torchrun on gloo.

Lightning (``DDPStrategy(process_group_backend="mpiflow")``, ``self.log(..., sync_dist=True)``,
a checkpoint saved and resumed from) and Accelerate (a plain ``Accelerator(cpu=True)`` loop,
which picks ``"mpi"``: mpiflow's, on stock wheels) run at 2 ranks as programs of their own
(``programs/``), importing neither mpiflow nor mpi4py; the same program under ``torchrun`` on
gloo is the reference: the weights, losses and synced metrics must be the same numbers. These
tests start their own jobs: they run in the 1-rank session.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import MPIEXEC, job_env

pytest.importorskip("torch")
LIMIT = 120  # seconds for one job
PROGRAMS = Path(__file__).resolve().parent / "programs"


def result(program: str, backend: str, out: Path) -> dict[str, Any]:
    """Run ``program`` at 2 ranks (torchrun for gloo, mpiexec otherwise); rank 0's record."""
    out.mkdir()
    script = [str(PROGRAMS / program), str(out), backend]
    if backend == "gloo":
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc-per-node", "2", *script]
    else:
        cmd = [MPIEXEC, "-n", "2", sys.executable, *script]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=LIMIT,
                          env=job_env({"OMP_NUM_THREADS": "1"}))
    assert proc.returncode == 0, f"{program} on {backend}:\n{proc.stderr[-3000:]}"
    return json.loads((out / "result.json").read_text())


def needs(package: str) -> None:
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed (pip install -e '.[test]')")


@pytest.mark.timeout(2 * LIMIT + 30)  # two jobs, each bounded by LIMIT
def test_lightning_ddp_with_synced_logging_and_a_resumed_checkpoint(tmp_path: Path) -> None:
    needs("lightning")
    ours = result("lightning_ddp.py", "mpiflow", tmp_path / "mpiflow")
    gloo = result("lightning_ddp.py", "gloo", tmp_path / "gloo")
    assert ours["epoch"] == 3 and ours["metrics"]["seen"] == 48.0, ours  # 2 ranks x 24 rows
    assert ours["first"] != ours["resumed"]  # the resumed fit trained on
    assert ours == gloo


@pytest.mark.timeout(2 * LIMIT + 30)
def test_accelerate_loop_on_mpi_as_on_gloo(tmp_path: Path) -> None:
    needs("accelerate")
    ours = result("accelerate_loop.py", "mpi", tmp_path / "mpi")
    gloo = result("accelerate_loop.py", "gloo", tmp_path / "gloo")
    assert ours["state"] == ["mpi", "mpi", "ProcessGroupMPIFlow", 2], ours["state"]
    assert gloo["state"][:2] == ["gloo", "gloo"] and len(ours["losses"]) == 12
    assert (ours["losses"], ours["weights"]) == (gloo["losses"], gloo["weights"])
