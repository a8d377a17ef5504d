"""python -m mpiflow.bench --suite collective_check: its table and goals, and the short job.

The pure tests need neither torch nor more than one rank; the short job runs as an MPI test
(skipped, with the reason, without torch).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from mpiflow.bench.collective_check import (
    LONG_CALLS,
    OVER_RAW_GOAL_US,
    RATIO_GOAL,
    format_collective_check,
)
from mpiflow.bench.suites import OPTIONAL_SUITES, expand_suites

HAVE_TORCH = importlib.util.find_spec("torch") is not None


def result(long_ratio: float, short_ratio: float | None, over_raw: float) -> dict[str, Any]:
    long = {"iters": LONG_CALLS, "bytes": 8, "raw_us": 1.0, "off_us": 1.4,
            "sampled_us": 1.4 * long_ratio, "overhead": long_ratio - 1,
            "over_raw_us": over_raw, "off_over_raw_us": 0.4}
    short: dict[str, Any] = {"missing": "no torch"} if short_ratio is None else {
        "steps": 300, "off_ms": 1.0, "sampled_ms": short_ratio, "ratio": short_ratio}
    return {"ranks": 2, "rounds": 5, "long": long, "short": short}


def test_the_suite_is_named_not_part_of_all() -> None:
    assert "collective_check" in OPTIONAL_SUITES
    assert "collective_check" not in expand_suites(["all"])
    assert expand_suites(["collective_check"]) == ("collective_check",)


@pytest.mark.parametrize("markdown", [False, True])
def test_the_table_judges_both_jobs_and_the_cost_over_raw(markdown: bool) -> None:
    assert RATIO_GOAL == 1.03 and OVER_RAW_GOAL_US == 0.5
    text = format_collective_check(result(1.01, 1.02, 0.45), markdown)
    lines = text.splitlines()
    long = next(line for line in lines if "long: 100000 all_reduce of 8 B" in line)
    short = next(line for line in lines if "short: tiny DDP job, 300 steps" in line)
    raw = next(line for line in lines if "minus raw mpi4py" in line)
    assert "1.010" in long and "<= 1.03: met" in long
    assert "1.020" in short and "<= 1.03: met" in short
    assert "+0.450" in raw and "<= 0.5: met" in raw
    text = format_collective_check(result(1.05, 1.04, 0.6), markdown)
    assert text.count("NOT met") == 3


def test_without_torch_the_short_job_says_why() -> None:
    text = format_collective_check(result(1.0, None, 0.3))
    assert "short: tiny DDP job (skipped: no torch)" in text


@pytest.mark.mpi
@pytest.mark.skipif(not HAVE_TORCH, reason="PyTorch is not installed (pip install torch)")
def test_the_short_job_runs_both_sides() -> None:
    from mpiflow.bench.check_job import short_job

    out = short_job(rounds=1, steps=3)  # raises if a side's group had the other's checks
    assert out["steps"] == 3 and len(out["ratios"]) == 1
    assert out["sampled_ms"] > 0 and out["off_ms"] > 0
