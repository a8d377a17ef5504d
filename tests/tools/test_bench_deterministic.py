"""python -m mpiflow.bench.deterministic: a small collective run and its table."""

from __future__ import annotations

import pytest

from mpiflow.bench.deterministic import format_results, main, run_reproducible

pytestmark = pytest.mark.mpi


def test_small_run_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_reproducible(elements=5000, rounds=1, vector=16)
    assert [r["dtype"] for r in res["kernel"]] == ["float32", "float64"]
    for row in res["global"]:
        assert row["exact_ops"] == {"all_reduce": 1}     # one integer all-reduce of the state
        assert row["ratio"] > 0
    text = format_results(res)
    assert "numpy.sum vs exact kernel" in text and "dist.all_reduce 16" in text
    assert main(["--elements", "3000", "--rounds", "1", "--vector", "8"]) == 0
