"""The consistent view's placeholder agreement (mpiflow.compatible.single_client.agreement):
ranks feeding a job different values raise on every rank, on MPIFLOW_CHECK's schedule."""

from __future__ import annotations

import numpy
import pytest

import mpiflow.compatible.single_client as flow
from mpiflow.communication.debug.sampled import next_checked
from mpiflow.compatible.single_client.agreement import CheckSchedule, PlaceholderMismatchError

tp = flow.typing
RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
N = 3 * SIZE + 1



def predict_job() -> flow.function.Job:
    @flow.global_function(type="predict")
    def scaled(x: tp.Numpy.Placeholder((N, 2)), y: tp.Numpy.Placeholder((N,))) -> tp.Numpy:
        return (x * 2).sum(1) + y

    return scaled


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("eager", [False, True], ids=["replayed", "eager"])
def test_ranks_feeding_different_values_raise_on_every_rank(eager: bool) -> None:
    flow.enable_eager_execution(eager)
    job = predict_job()
    x, y = numpy.ones((N, 2), numpy.float32), numpy.arange(N, dtype=numpy.float32)
    numpy.testing.assert_array_equal(job(x, y), 4 + y)  # traced (or run) on agreeing inputs
    odd = y + (RANK == SIZE - 1)  # the last rank's labels differ (and are its own rows)
    ranks = list(range(SIZE - 1))
    with pytest.raises(PlaceholderMismatchError,
                       match=rf"job 'scaled': placeholder 'y' differs across ranks: ranks "
                             rf"\{ranks}\ fed one value, \[{SIZE - 1}\] another"):
        job(x, odd)
    numpy.testing.assert_array_equal(job(x, y), 4 + y)


@pytest.mark.mpi(min_size=2)
def test_no_comparison_with_the_checks_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPIFLOW_CHECK", "off")
    job = predict_job()
    x, y = numpy.ones((N, 2), numpy.float32), numpy.arange(N, dtype=numpy.float32)
    out = job(x, y + RANK)  # unchecked: each rank's shard comes from its own array
    assert out.shape == (N,)


def test_the_schedule_is_the_collectives(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPIFLOW_CHECK", "sampled")
    schedule = CheckSchedule()
    got = [n for n in range(1, 9000) if schedule.due()]
    want, n = [], 1
    while n < 9000:
        want.append(n)
        n = next_checked(n)
    assert got == want and len(got) < 9000 / 10
    monkeypatch.setenv("MPIFLOW_CHECK", "all")
    assert all(schedule.due() for _ in range(5))
    monkeypatch.setenv("MPIFLOW_CHECK", "off")
    assert not any(schedule.due() for _ in range(5))
