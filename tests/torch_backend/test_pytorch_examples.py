"""Programs of the pytorch/examples repository under mpiexec, on "mpiflow" and on gloo.

The programs are not part of this repository (they are PyTorch's, BSD-3-Clause): the tests
read them from a checkout named by ``MPIFLOW_PYTORCH_EXAMPLES`` (``git clone
https://github.com/pytorch/examples``) and are skipped, saying so, without one. Each program is
copied to a temporary folder and changed only as ``EDITS`` lists: the backend's name, and a
device the program hard-codes for CUDA replaced by the CPU. No program imports mpiflow; torch
loads the backend itself. Every program runs twice under ``mpiexec -n N``, once with "gloo" and
once with "mpiflow", through ``programs/observe.py`` (same seeds, a record of every optimizer
step); the records must be the same bits. Programs that save a snapshot run again in the same
folder and resume from it. These tests start their own jobs: they run in the 1-rank session.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers import MPIEXEC, job_env

pytest.importorskip("torch")
LIMIT = 120  # seconds for one job
OBSERVE = Path(__file__).resolve().parent / "programs" / "observe.py"
SOURCE = os.environ.get("MPIFLOW_PYTORCH_EXAMPLES", "")

# (file, text, replacement): each text must occur exactly once in the upstream file;
# "{backend}" is the backend under test ("gloo" or "mpiflow").
CPU_DDP = [("DDP(self.model, device_ids=[self.{r}])", "DDP(self.model)"),
           ("model.to(self.{r})", 'model.to("cpu")'),
           ("source.to(self.{r})", 'source.to("cpu")'),
           ("targets.to(self.{r})", 'targets.to("cpu")')]
EDITS: dict[str, list[tuple[str, str]]] = {
    "ddp-tutorial-series/multigpu_torchrun.py": [
        ('init_process_group(backend="nccl")', 'init_process_group(backend="{backend}")'),
        *[(a.format(r="gpu_id"), b) for a, b in CPU_DDP]],
    "ddp-tutorial-series/multinode.py": [
        ('init_process_group(backend="gloo")', 'init_process_group(backend="{backend}")'),
        *[(a.format(r="local_rank"), b) for a, b in CPU_DDP]],
    "ddp/example.py": [
        ('dist.init_process_group(backend="nccl")', 'dist.init_process_group(backend="{backend}")'),
        ("model = ToyModel().cuda(device_ids[0])", "model = ToyModel()"),
        ("ddp_model = DDP(model, device_ids)", "ddp_model = DDP(model)"),
        ("labels = torch.randn(20, 5).to(device_ids[0])", "labels = torch.randn(20, 5)")],
    "FSDP2/example.py": [
        ("if not verify_min_gpu_count(min_gpus=_min_gpu_count):", "if False:"),
        ("backend = torch.distributed.get_default_backend_for_device(device)",
         'backend = "{backend}"'),
        # torch takes only an accelerator as device_id (ValueError for the CPU, gloo too)
        ("init_process_group(backend=backend, device_id=device)",
         "init_process_group(backend=backend)")],
    # Not a device edit: upstream's Transformer.reset_parameters leaves its blocks as
    # to_empty() made them (uninitialized memory, NaN here, a different run every time).
    "FSDP2/model.py": [
        ("        self.output.reset_parameters()\n",
         "        self.output.reset_parameters()\n"
         "        for layer in self.layers:\n            layer.reset_parameters()\n")],
}


@dataclass
class Program:
    folder: str
    script: str
    args: list[str]
    runs: int = 1  # runs in the same folder: the later ones resume from the first's checkpoint
    ranks: tuple[int, ...] = (2,)
    replicated: bool = True  # DDP: every rank holds the same parameters after each step
    env: dict[str, str] = field(default_factory=dict)


# The tutorial's model is Linear(20, 1) under a cross entropy over one class: its gradients
# are zero and its parameters stay rank 0's (broadcast by DDP), so for it the comparison
# checks the start-up, DDP's broadcast and the sampler; the other two learn.
PROGRAMS = {
    "ddp-tutorial torchrun": Program("ddp-tutorial-series", "multigpu_torchrun.py", ["2", "1"]),
    "ddp-tutorial multinode": Program("ddp-tutorial-series", "multinode.py", ["2", "1"]),
    # It reads MASTER_ADDR and MASTER_PORT first (KeyError without them): torch's auto-load
    # hook sets them under mpiexec, as torchrun does; the job's environment has neither.
    "ddp example": Program("ddp", "example.py", [], ranks=(2, 4)),
    "FSDP2 with resume": Program("FSDP2", "example.py", [], runs=2, replicated=False),
}
CASES = [(name, n) for name, program in PROGRAMS.items() for n in program.ranks]


def prepared(name: str, backend: str, into: Path) -> Path:
    """A copy of the program's folder with ``EDITS`` applied for ``backend``."""
    program = PROGRAMS[name]
    source = Path(SOURCE) / "distributed" / program.folder
    if not SOURCE or not (source / program.script).is_file():
        pytest.skip("set MPIFLOW_PYTORCH_EXAMPLES to a checkout of "
                    "https://github.com/pytorch/examples to run its programs")
    target = into / backend
    shutil.copytree(source, target)
    for path, edits in EDITS.items():
        folder, _, file = path.partition("/")
        if folder != program.folder:
            continue
        text = (target / file).read_text()
        for old, new in edits:
            assert text.count(old) == 1, f"{path}: {old!r} is not in it once (upstream changed?)"
            text = text.replace(old, new.format(backend=backend))
        (target / file).write_text(text)
    return target


def run(name: str, backend: str, ranks: int, tmp: Path) -> list[list[Any]]:
    """Every rank's step records, run after run."""
    program = PROGRAMS[name]
    folder = prepared(name, backend, tmp)
    records = []
    for index in range(program.runs):
        out = tmp / f"{backend}-{index}"
        out.mkdir()
        env = job_env({"OMP_NUM_THREADS": "1", **program.env})
        assert "MASTER_ADDR" not in env and "MASTER_PORT" not in env
        cmd = [MPIEXEC, "-n", str(ranks), sys.executable, str(OBSERVE), str(out),
               program.script, *program.args]
        proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True,
                              timeout=LIMIT)
        assert proc.returncode == 0, f"{name} on {backend}, run {index}:\n{proc.stderr[-3000:]}"
        records.append([json.loads((out / f"steps.{r}.json").read_text())
                        for r in range(ranks)])
    return records


@pytest.mark.parametrize(("name", "ranks"), CASES)
def test_program_gives_gloos_bits(name: str, ranks: int, tmp_path: Path) -> None:
    gloo = run(name, "gloo", ranks, tmp_path)
    ours = run(name, "mpiflow", ranks, tmp_path)
    for index, (expected, got) in enumerate(zip(gloo, ours, strict=True)):
        assert all(rank_steps for rank_steps in expected), f"run {index}: no optimizer step"
        assert all(math.isfinite(total) for steps in expected for step in steps
                   for total, _ in step), f"run {index}: not finite"
        assert got == expected, f"{name}, run {index}: the parameters differ from gloo's"
        if PROGRAMS[name].replicated:
            assert all(steps == got[0] for steps in got), f"run {index}: replicas differ"
    if len(gloo) > 1:  # the later run resumed: its first step is not the first run's
        assert gloo[1][0][0] != gloo[0][0][0], "the second run did not resume"
