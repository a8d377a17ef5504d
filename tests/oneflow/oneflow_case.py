"""What the OneFlow ports share: the rank and world size, rank-count marks, OneFlow's per-rank
test data, and ``on_every_rank``, which turns one rank's failure into a failure of all.

OneFlow's distributed tests run under ``skip_unless_1nNd`` (exactly N devices); here that is
``exactly(N)``: pytest-mpi's ``mpi(min_size=N)`` plus a skip at other world sizes, so CI's runs at
1, 2, 3 and 4 ranks each run the tests written for their size. ``cuda`` becomes ``cpu``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy
import pytest

import mpiflow as flow
from mpiflow.communication.collectives.objects import all_gather_object

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()

# OneFlow's 4x4 float32 inputs of ranks 0..3 (test_eager_boxing.py, test_reduce.py).
FOUR_RANK_DATA = numpy.array([
    [[4, 6, 5, 20], [6, 8, 9, 0], [3, 7, 5, 0], [6, 8, 9, 0]],
    [[2, 10, 10, 7], [3, 9, 10, 5], [4, 6, 6, 9], [6, 8, 6, 4]],
    [[9, 6, 5, 8], [4, 9, 7, 0], [2, 5, 7, 9], [6, 8, 10, 0]],
    [[9, 4, 5, 8], [7, 2, 9, 5], [6, 3, 9, 2], [3, 7, 5, 8]],
], dtype=numpy.float32)


def exactly(n: int) -> Callable[[Any], Any]:
    """Mark a test written for exactly ``n`` ranks (OneFlow's ``skip_unless_1n{n}d``)."""
    def mark(test: Any) -> Any:
        test = pytest.mark.skipif(SIZE != n, reason=f"OneFlow's test is for exactly {n} ranks")(
            test)
        return pytest.mark.mpi(min_size=n)(test)

    return mark


def on_every_rank(body: Callable[[], Any]) -> Any:
    """Run this rank's part of a test, then fail on every rank if it failed on any.

    A rank whose assertion fails after a point-to-point exchange would otherwise go on to the
    next test alone, and the others would wait for it in their next collective (a hang).
    """
    error: BaseException | None = None
    result = None
    try:
        result = body()
    except Exception as e:  # reported on every rank below
        error = e
    failures: list[Any] = [None] * SIZE
    all_gather_object(failures, None if error is None else f"{type(error).__name__}: {error}")
    failed = {r: f for r, f in enumerate(failures) if f is not None}
    if failed:
        if error is not None:
            raise error
        raise AssertionError(f"failed on other ranks: {failed}")
    return result
