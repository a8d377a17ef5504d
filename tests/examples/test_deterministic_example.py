"""examples/cg.py --deterministic: the full residual history has the same bits at 1-4 ranks.

Unmarked (the 1-rank session runs it): each rank count is its own job.
"""

from __future__ import annotations

import pathlib

import pytest
from helpers import run_job

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "cg.py"


def run_cg(ranks: int, *args: str) -> list[str]:
    code = ("import runpy, sys; "
            f"sys.argv = [{str(EXAMPLE)!r}, *{list(args)!r}]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")
    job = run_job(ranks, code, timeout=180)
    assert job.returncode == 0, f"cg at {ranks} rank(s) failed:\n{job.stdout}\n{job.stderr}"
    lines = job.stdout.strip().splitlines()
    return lines[1:]  # the first line names the rank count and the split


@pytest.mark.timeout(900)
def test_cg_residuals_are_identical_at_1_to_4_ranks() -> None:
    args = ("--nx", "23", "--ny", "17", "--deterministic", "--print-residuals")
    runs = {n: run_cg(n, *args) for n in (1, 2, 3, 4)}
    assert sum(line.startswith("iteration") for line in runs[1]) > 20
    for n in (2, 3, 4):
        assert runs[n] == runs[1], f"{n} ranks differ from 1 rank"
