"""scikit-learn's array API dispatch on mpiflow's arrays: its array-API-aware estimators and
metrics run unchanged on arrays split over 1, 2 and 3 ranks, give numpy's results, return
one-row-per-sample results split as the input, and gather no split array beyond the labels
scikit-learn itself copies into numpy (``sklearn_estimators.py``, one job per rank count: SciPy
reads ``SCIPY_ARRAY_API=1`` when it is first imported, so the checks need fresh processes)."""

from __future__ import annotations

import os
import pathlib

import pytest

import mpiflow

pytest.importorskip("sklearn")

PROGRAM = pathlib.Path(__file__).resolve().with_name("sklearn_estimators.py")
ROOT = pathlib.Path(mpiflow.__file__).resolve().parents[1]  # the mpiflow under test


@pytest.mark.timeout(180)
@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_estimators_run_on_split_arrays(ranks: int) -> None:
    from helpers import run_job

    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    code = f"import runpy; runpy.run_path({str(PROGRAM)!r}, run_name='__main__')"
    # numpy's factorizations: torch's (the default for svd/qr) would cost its import (seconds
    # per rank) for matrices of a few rows; tests/algorithms/test_kernels.py compares the two.
    env = {"PYTHONPATH": path, "SCIPY_ARRAY_API": "1", "OMP_NUM_THREADS": "1",
           "MPIFLOW_KERNELS": "numpy"}
    job = run_job(ranks, code, timeout=150, env=env)
    assert job.returncode == 0 and job.stdout.strip().startswith("ok"), \
        f"{ranks} rank(s):\n{job.stdout}\n{job.stderr[-3000:]}"
