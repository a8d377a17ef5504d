"""Test session set-up shared by every rank count.

A test that communicates (a collective, another rank's data, a global tensor, the world
communicator) is marked ``mpi`` (pytest-mpi), with ``mpi(min_size=N)`` when it needs N ranks
(pytest-mpi skips it, saying so, below that); every other test is a pure single-process test.
scripts/test runs the whole suite once at 1 rank (``mpiexec -n 1 python -m pytest --with-mpi``)
and only the ``mpi`` tests at 2, 3 and 4 ranks (``--only-mpi``; with pytest-mpi 0.6,
``--with-mpi`` runs every test whatever else is given, so the two are never combined). Whatever
the options, at more than one rank a test runs only if it is marked ``mpi`` and not
``single_process`` (which marks the few tests of ``mpi`` modules that start their own mpiexec
jobs). Every rank of a job runs the same tests; only rank 0 reports to the terminal; a failure
on any other rank is written to stderr, tagged with its rank, so nothing is hidden.

Every test starts from ``flow.manual_seed(0)``: unseeded, local random tensors (a module's
initial weights too) differ between ranks, as in OneFlow, and the tests, like OneFlow's
programs, count on ranks that build the same model alike.
"""

from __future__ import annotations

import sys

import pytest

import mpiflow  # initializes MPI and installs the abort handler
from mpiflow.communication.mpi.group import world_comm

RANK, SIZE = world_comm.rank, world_comm.size


@pytest.fixture(autouse=True)
def _seeded() -> None:
    mpiflow.manual_seed(0)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    # scripts/test --mpi mpich --nodes 2 runs these (-m node_layout) in a simulated 2-node job
    config.addinivalue_line("markers", "node_layout: an mpi test whose answer depends on how "
                            "the ranks lie on nodes (local rank, node count, the all-reduce's "
                            "pieces); it asserts the layout's truth at any node count")
    if RANK > 0:
        reporter = config.pluginmanager.getplugin("terminalreporter")
        if reporter is not None:
            config.pluginmanager.unregister(reporter)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if SIZE == 1:
        return
    pure = pytest.mark.skip(reason="a pure single-process test: runs in the 1-rank session only")
    jobs = pytest.mark.skip(reason="starts its own mpiexec jobs: runs in the 1-rank session only")
    for item in items:
        if item.get_closest_marker("mpi") is None:
            item.add_marker(pure)
        elif item.get_closest_marker("single_process") is not None:
            item.add_marker(jobs)


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
