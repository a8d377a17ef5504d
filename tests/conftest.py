"""Test session set-up shared by every rank count.

The suite runs as ``mpiexec -n N python -m pytest --with-mpi``: every rank runs every test. Only
rank 0 reports to the terminal; a failure on any other rank is written to stderr, tagged with
its rank, so nothing is hidden.
"""

from __future__ import annotations

import sys

import pytest

import mpiflow  # noqa: F401 - initializes MPI and installs the abort handler
from mpiflow.communication.group import world_comm

RANK, SIZE = world_comm.rank, world_comm.size


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if RANK > 0:
        reporter = config.pluginmanager.getplugin("terminalreporter")
        if reporter is not None:
            config.pluginmanager.unregister(reporter)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = pytest.mark.skip(reason="starts its own mpiexec jobs: runs in the 1-rank session only")
    for item in items:
        if SIZE > 1 and "single_process" in item.keywords:
            item.add_marker(skip)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if RANK > 0 and report.failed:
        sys.__stderr__.write(f"[rank {RANK}] FAILED {report.nodeid} ({report.when})\n")
        for line in str(report.longreprtext).splitlines():
            sys.__stderr__.write(f"[rank {RANK}] {line}\n")
        sys.__stderr__.flush()


@pytest.fixture
def comm():
    """The world communicator of mpiflow's communication layer."""
    return world_comm
