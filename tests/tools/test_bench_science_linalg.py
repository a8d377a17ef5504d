"""The linear-algebra science bench at tiny sizes: every case runs, checks its answer against
numpy's, and the tables format."""

from __future__ import annotations

import pytest

from mpiflow.bench import science_linalg


@pytest.mark.mpi
def test_every_case_runs_and_agrees_with_numpy() -> None:
    rows = science_linalg.run_cases(science_linalg.cases(scale=64), repeat=1)
    assert [r["case"] for r in rows] == [c.name for c in science_linalg.cases(scale=64)]
    for row in rows:
        assert row["error"] < 1e-5, row   # float32 products: their rounding
        assert row["mpiflow_ms"] > 0 and row["numpy_ms"] > 0
    kernels = science_linalg.kernel_rows(repeat=1, scale=64)
    assert {r["chosen"] for r in kernels} <= {"numpy", "torch"}
    text = science_linalg.format(rows + kernels, markdown=True)
    assert text.startswith("| case (") and "| local kernel (one rank) |" in text
    assert "qr 6250x8 float64" in science_linalg.format(rows)


def test_the_full_sizes_are_the_issues() -> None:
    names = [c.name for c in science_linalg.CASES]
    assert names[:2] == ["qr 400000x64 float64", "svdvals 400000x64 float64"]
    assert "solve 4096x4096 float64" in names
    assert "matmul 8192x1024 @ 1024x256 float32, split x split" in names
    assert [c.goal for c in science_linalg.CASES[:2]] == [0.8, 0.8]
