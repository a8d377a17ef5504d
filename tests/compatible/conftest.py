"""Every OneFlow 0.x test starts and ends with a new default session, in lazy mode (jobs and
variables of one test never reach the next)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import mpiflow.compatible.single_client as flow


@pytest.fixture(autouse=True)
def fresh_session() -> Iterator[None]:
    flow.clear_default_session()
    yield
    flow.enable_eager_execution(False)
    flow.clear_default_session()
