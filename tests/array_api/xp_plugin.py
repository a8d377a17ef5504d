"""A pytest plugin that runs the array API standard's test suite under mpiexec (``run.py``
loads it with ``-p xp_plugin``).

- Every rank draws the same examples: Hypothesis derandomized (a seed from each test's name),
  no example database, no deadline or health check (they time the run, and ranks run at
  different speeds), and Python's ``random`` seeded before each test (the suite's
  ``strategy.example()`` shuffles with it). Failures are not shrunk (reported as found).
- The ranks agree on every outcome: after each phase of each test they all-gather it, and a
  phase that failed on any rank fails on all of them, naming the ranks; so every rank exits
  with the same status and no rank goes on alone to a test the others have not reached.
- Rank 0 alone reports (the others' terminal output is off) and, with ``--xp-json PATH``,
  writes the outcome of every test as JSON, for the per-file table.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings

_OUTCOMES: dict[str, str] = {}


def pytest_addoption(parser: Any) -> None:
    parser.addoption("--xp-json", default=None,
                     help="write every test's outcome (rank 0) to this JSON file")


def _comm() -> Any:
    from mpi4py import MPI

    return MPI.COMM_WORLD


@pytest.hookimpl(trylast=True)
def pytest_configure(config: Any) -> None:
    # After the suite's conftest, which loads its own profile from the command line: keep its
    # max_examples, make everything that depends on time or on a database the same everywhere.
    settings.register_profile("mpiflow-array-api", settings(
        settings.default, database=None, deadline=None, derandomize=True,
        suppress_health_check=list(HealthCheck), print_blob=False,
        # A failure is reported as found: shrinking it would cost most of a failing run.
        phases=(Phase.explicit, Phase.reuse, Phase.generate)))
    settings.load_profile("mpiflow-array-api")
    if _comm().rank != 0:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            config.pluginmanager.unregister(reporter)


def pytest_runtest_setup(item: Any) -> None:
    random.seed(0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    comm = _comm()
    mine = (report.outcome, report.longreprtext[-2000:] if report.failed else "")
    everyone = comm.allgather(mine) if comm.size > 1 else [mine]
    failed = [r for r, (o, _) in enumerate(everyone) if o == "failed"]
    if failed and not report.failed:
        # Another rank failed: this one reports it too (its text), so that all agree.
        report.outcome = "failed"
        report.longrepr = (f"failed on rank(s) {failed} of {comm.size} "
                           f"(passed here):\n{everyone[failed[0]][1]}")
    elif failed and len(failed) < comm.size:
        report.longrepr = f"{report.longreprtext}\n(failed on rank(s) {failed} of {comm.size})"
    if report.when == "call" or report.outcome != "passed":
        kind = report.outcome
        if hasattr(report, "wasxfail"):
            kind = "xfailed" if report.skipped else "xpassed"
        _OUTCOMES[item.nodeid] = kind


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    path = session.config.getoption("--xp-json")
    if path and _comm().rank == 0:
        with open(path, "w") as f:
            json.dump(_OUTCOMES, f, indent=0, sort_keys=True)
