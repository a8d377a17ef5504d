"""Set-up of the docstring examples, which scripts/test runs as

    mpiexec -n 1 python -m pytest --doctest-modules mpiflow     # every example
    mpiexec -n 2 python -m pytest --doctest-modules mpiflow     # the MULTI_RANK ones again

Every example may use the names the docs use without importing them (``flow``, ``nn``, ``F``,
``optim``, ``dist``, ``numpy``; ``torch`` where it is installed), runs in a fresh directory (the
same on every rank) and starts from ``flow.manual_seed(0)``. Examples of pure layout math may
name up to 16 ranks (FAKE_WORLD: nothing is sent); examples that need more ranks than the job
has are skipped, saying which step runs them (MULTI_RANK); examples that need CuPy and a CUDA
device are skipped, with the reason, where those are missing (GPU). Nothing here is used by the
test suite itself (tests/conftest.py is).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from typing import Any

import numpy
import pytest

import mpiflow
import mpiflow.distributed
import mpiflow.nn
import mpiflow.nn.functional
import mpiflow.optim
from mpiflow.layouts.placement import set_world_size, world_size

# Examples of placements larger than the job, with no communication: placements may name up
# to 16 ranks while they run (as in tests/layouts/test_plan.py).
FAKE_WORLD = {
    "mpiflow.layouts.placement",
    "mpiflow.layouts.layout",
    "mpiflow.layouts.plan",
    "mpiflow.layouts.plan.plan_redistribution",
    "mpiflow.layouts.shards.local_shape",
    "mpiflow.layouts.shards.scatter_value",
    "mpiflow.layouts.shards.split_leaves",
}

# Examples that communicate on a placement of N ranks: run by the 2-rank doctest step.
MULTI_RANK = {
    "mpiflow.tensors.conversion.to_global": 2,
    "mpiflow.boxing.execute.redistribute": 2,
    "mpiflow.comm.recv": 2,
    "mpiflow.io.mpiio": 2,
}

# Examples that need CuPy and a CUDA device.
GPU = {
    "mpiflow.communication.gpu.maker",
    "mpiflow.communication.gpu.nccl.NCCLCommunicator",
    "mpiflow.communication.gpu.nccl.NCCLCommunicator.connect",
    "mpiflow.cuda.device_count",
    "mpiflow.cuda.require",
}

SIZE = mpiflow.env.get_world_size()


@pytest.fixture(autouse=True)
def _doctest_setup(request: pytest.FixtureRequest) -> Iterator[None]:
    if not isinstance(request.node, pytest.DoctestItem):
        yield
        return
    names: dict[str, Any] = request.getfixturevalue("doctest_namespace")
    names.update(flow=mpiflow, mpiflow=mpiflow, nn=mpiflow.nn, F=mpiflow.nn.functional,
                 optim=mpiflow.optim, dist=mpiflow.distributed, numpy=numpy, np=numpy)
    if importlib.util.find_spec("torch") is not None:
        import torch

        names["torch"] = torch
    if request.node.name in FAKE_WORLD:
        before = world_size()
        set_world_size(16)
        request.addfinalizer(lambda: set_world_size(before))
    where = os.getcwd()
    os.chdir(request.getfixturevalue("mpi_tmp_path"))  # pytest-mpi: rank 0's tmp_path
    mpiflow.manual_seed(0)
    try:
        yield
    finally:
        os.chdir(where)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from mpiflow import cuda

    no_gpu = cuda.unavailable_reason()
    for item in items:
        if not isinstance(item, pytest.DoctestItem):
            continue
        ranks = MULTI_RANK.get(item.name, 1)
        if SIZE > 1 and ranks == 1:
            item.add_marker(pytest.mark.skip(reason="a 1-rank example: runs at 1 rank only"))
        elif ranks > SIZE:
            item.add_marker(pytest.mark.skip(
                reason=f"a {ranks}-rank example: runs in the {ranks}-rank doctest step"))
        elif item.name in GPU and no_gpu is not None:
            item.add_marker(pytest.mark.skip(reason=no_gpu))
