"""The sorting-and-statistics bench: every case runs at any rank count and formats."""

from __future__ import annotations

import pytest

from mpiflow.bench import science_stats
from mpiflow.bench.plan import Settings


@pytest.mark.mpi
def test_every_case_runs_and_the_table_names_them() -> None:
    rows = science_stats.run(Settings(ops=(), sizes=(), rounds=3), n=20_000)
    assert [r["case"].split()[0] for r in rows] == ["sort", "unique", "median", "quantile",
                                                   "histogram"]
    assert all(r["mpiflow_ms"] > 0 and r["numpy_ms"] > 0 and r["ratio"] > 0 for r in rows)
    plain, markdown = science_stats.format(rows), science_stats.format(rows, True)
    assert plain.splitlines()[0].startswith("case") and len(plain.splitlines()) == 6
    assert markdown.splitlines()[1].startswith("| :---")
