"""The examples that run on stock PyTorch with mpiflow.distributed in place of torch.distributed."""

from __future__ import annotations

import pathlib

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def test_seed_ptdist_runs_on_torch_tensors() -> None:
    pytest.importorskip("torch", reason="the torch extra (PyTorch) is not installed")
    from helpers import run_job

    job = run_job(2, (EXAMPLES / "seed_ptdist.py").read_text(), timeout=240)
    assert job.returncode == 0, job.stderr
    out = job.stdout
    # the seed's send/recv, printed as the seed's README shows it (the two ranks' lines may
    # interleave: each rank prints its sentence and then the tensor)
    assert "Rank-1 has recieved the following tensor from Rank-0" in out, out
    assert "Rank-0 has sent the following tensor to Rank-1" in out, out
    assert out.count("tensor([ 1., -1.])") == 2, out
    # the training loop with the seed's per-parameter sync helpers
    assert "all 2 ranks hold the same weights" in out, out
    assert "matches training on one process" in out, out
