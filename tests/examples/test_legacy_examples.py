"""The OneFlow 0.x programs of the seeds (``examples/seed_*_legacy.py``) on
``mpiflow.compatible.single_client``: the same losses at 1, 2 and 4 ranks, and falling; their
jobs traced (the default) print what the eager jobs (``MPIFLOW_JOB_EAGER=1``) print.

Each starts its own jobs (short runs: a small batch, a few steps).
"""

from __future__ import annotations

import pathlib

import pytest
from numpy.testing import assert_allclose

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def losses(name: str, ranks: int, steps: int, batch: int, eager: bool = False) -> list[float]:
    """The losses the example prints on rank 0 (its jobs run eagerly with ``eager``)."""
    from helpers import run_job

    script = str(EXAMPLES / name)
    argv = [name, "--steps", str(steps), "--batch-size", str(batch)]
    code = (f"import sys; sys.argv = {argv!r}; "
            f"exec(compile(open({script!r}).read(), {script!r}, 'exec'))")
    job = run_job(ranks, code, timeout=120, env={"MPIFLOW_JOB_EAGER": "1"} if eager else None)
    assert job.returncode == 0, job.stderr
    out = [float(line.split()[-1]) for line in job.stdout.splitlines()
           if line.startswith("step ")]
    assert len(out) == steps, job.stdout
    return out


@pytest.mark.parametrize(("name", "steps"), [
    ("seed_lenet_legacy.py", 8),
    ("seed_consistent_legacy.py", 6),
    ("seed_mirrored_legacy.py", 6),
])
def test_legacy_program_gives_the_same_falling_losses_at_1_2_and_4_ranks(name: str,
                                                                         steps: int) -> None:
    runs = {ranks: losses(name, ranks, steps, 8) for ranks in (1, 2, 4)}
    for ranks in (2, 4):
        assert_allclose(runs[ranks], runs[1], rtol=1e-4, err_msg=f"{name} at {ranks} ranks")
    first, last = runs[1][0], min(runs[1][-3:])
    assert last < 0.5 * first, runs[1]
    assert losses(name, 2, steps, 8, eager=True) == runs[2]


def test_the_lenet_program_notes_the_configuration_it_does_not_use() -> None:
    from helpers import run_job

    script = str(EXAMPLES / "seed_lenet_legacy.py")
    code = (f"import sys; sys.argv = ['x', '--steps', '1', '--batch-size', '2']; "
            f"exec(compile(open({script!r}).read(), {script!r}, 'exec'))")
    job = run_job(1, code, timeout=60)
    assert job.returncode == 0, job.stderr
    assert "2 node(s) in flow.env.machine, the job has 1" in job.stderr
    assert "needs no control port" in job.stderr
