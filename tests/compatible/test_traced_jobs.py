"""Job functions as traced graphs: the first call of an input signature is traced into a plan,
later calls replay it, with the bits of the eager jobs (``flow.enable_eager_execution``).

Each test runs the same program twice from a fresh session, eagerly and traced, and compares
every loss and every variable exactly, at 1 to 4 ranks (``mpi``): consistent and mirrored
views, SGD with momentum and Adam with bias correction under a schedule whose rate changes
during the run, dropout, predict jobs, and a body with data-dependent control flow.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy
import pytest
from numpy.testing import assert_array_equal

import mpiflow
import mpiflow.compatible.single_client as flow
from mpiflow.compatible.single_client.function import EAGER_ENV

tp = flow.typing
SIZE = flow.env.get_world_size()
N = 3 * SIZE + 1
ROWS = 2  # per rank, in the mirrored view
STEPS = 5



def data(rows: int, seed: int = 3) -> tuple[numpy.ndarray, numpy.ndarray]:
    rng = numpy.random.default_rng(seed)
    return (rng.standard_normal((rows, 3)).astype(numpy.float32),
            rng.standard_normal((rows, 1)).astype(numpy.float32))


def both(program: Callable[[], tuple[Any, Any]]) -> tuple[Any, Any]:
    """``program()`` (``(results, job)``) eagerly, then traced, each from a fresh session
    and the same random seed; returns the two results, after checking the traced job
    replayed."""
    runs = []
    for eager in (True, False):
        flow.clear_default_session()
        flow.enable_eager_execution(eager)
        mpiflow.manual_seed(7)
        out, job = program()
        variables = {k: v.numpy() for k, v in flow.get_all_variables().items()}
        runs.append((out, variables))
        if eager:
            assert job.plans == [] and job.replays == 0
    (want, want_vars), (got, got_vars) = runs
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_array_equal(g, w)
    assert set(got_vars) == set(want_vars)
    for name in want_vars:
        assert_array_equal(got_vars[name], want_vars[name], err_msg=name)
    return want, got


def mlp_job(optimizer: Callable[[], Any], dropout: float = 0.0) -> Any:
    @flow.global_function(type="train")
    def fit(x: tp.Numpy.Placeholder((N, 3)), y: tp.Numpy.Placeholder((N, 1))) -> tp.Numpy:
        hidden = flow.layers.dense(x, 8, activation=flow.nn.relu, name="fc1")
        if dropout:
            hidden = flow.nn.dropout(hidden, rate=dropout)
        pred = flow.layers.dense(hidden, 1, name="fc2")
        loss = flow.math.reduce_mean(flow.math.square(pred - y))
        optimizer().minimize(loss)
        return loss

    return fit


def schedule() -> Any:
    return flow.optimizer.PiecewiseConstantScheduler([2, 4], [0.1, 0.05, 0.01])


@pytest.mark.mpi
@pytest.mark.parametrize("rule", ["sgd", "momentum", "adam"])
def test_a_traced_train_job_gives_the_eager_bits(rule: str) -> None:
    x, y = data(N)
    make = {
        "sgd": lambda: flow.optimizer.SGD(schedule(), momentum=0),
        "momentum": lambda: flow.optimizer.SGD(schedule(), momentum=0.9),
        "adam": lambda: flow.optimizer.Adam(schedule(), do_bias_correction=True),
    }[rule]

    def program() -> tuple[Any, Any]:
        fit = mlp_job(make)
        return [fit(x, y) for _ in range(STEPS)], fit

    want, _ = both(program)
    assert want[-1] < want[0]


@pytest.mark.mpi
def test_the_replayed_rate_follows_the_schedule() -> None:
    # The rate drops to zero at step 2: a replay with a rate frozen into the plan would move
    # the variables on.
    x, y = data(N)
    fit = mlp_job(lambda: flow.optimizer.SGD(
        flow.optimizer.PiecewiseConstantScheduler([2], [0.1, 0.0]), momentum=0))
    losses = [fit(x, y).item() for _ in range(5)]
    assert fit.replays == 4 and len(fit.plans) == 1 and fit.plans[0] is not None
    assert losses[0] != losses[1] != losses[2]
    assert losses[2] == losses[3] == losses[4]


@pytest.mark.mpi
def test_dropout_replays_with_the_eager_masks() -> None:
    x, y = data(N)

    def program() -> tuple[Any, Any]:
        fit = mlp_job(lambda: flow.optimizer.SGD(schedule(), momentum=0.9), dropout=0.5)
        return [fit(x, y) for _ in range(STEPS)], fit

    both(program)


@pytest.mark.mpi
def test_a_traced_mirrored_job_gives_the_eager_bits() -> None:
    x, y = data(ROWS * SIZE)
    rank = flow.env.get_rank()
    config = flow.function_config()
    config.default_logical_view(flow.scope.mirrored_view())

    def program() -> tuple[Any, Any]:
        @flow.global_function(type="train", function_config=config)
        def fit(x: tp.ListNumpy.Placeholder((ROWS, 3)), y: tp.ListNumpy.Placeholder((ROWS, 1))
                ) -> tp.ListNumpy:
            pred = flow.layers.dense(x, 1, name="fc")
            loss = flow.math.reduce_mean(flow.math.square(pred - y), axis=1)
            flow.optimizer.Adam(schedule()).minimize(loss)
            return loss

        mine = slice(rank * ROWS, (rank + 1) * ROWS)
        out = [numpy.concatenate(fit([x[mine]], [y[mine]])) for _ in range(STEPS)]
        # A smaller batch is a new signature: traced on its first call.
        out += [numpy.concatenate(fit([x[mine][:1]], [y[mine][:1]])) for _ in range(2)]
        if fit.plans:  # traced: the second signature's second call replays too
            assert len(fit.plans) == 2 and fit.replays == STEPS
        return out, fit

    both(program)


@pytest.mark.mpi
def test_a_traced_predict_job_reads_the_trained_variables() -> None:
    x, y = data(N)

    def program() -> tuple[Any, Any]:
        fit = mlp_job(lambda: flow.optimizer.SGD(schedule(), momentum=0.9))

        @flow.global_function(type="predict")
        def predict(x: tp.Numpy.Placeholder((N, 3))) -> tp.Numpy:
            hidden = flow.layers.dense(x, 8, activation=flow.nn.relu, name="fc1")
            return flow.layers.dense(hidden, 1, name="fc2")

        out = []
        for _ in range(3):
            fit(x, y)
            out.append(predict(x))
        assert not numpy.array_equal(out[0], out[-1])
        return out, predict

    both(program)


@pytest.mark.mpi
def test_a_body_that_reads_values_runs_eagerly_with_a_note() -> None:
    x, y = data(N)

    def program() -> tuple[Any, Any]:
        @flow.global_function(type="train")
        def fit(x: tp.Numpy.Placeholder((N, 3)), y: tp.Numpy.Placeholder((N, 1))
                ) -> tp.Numpy:
            pred = flow.layers.dense(flow.nn.dropout(x, rate=0.2), 1, name="fc")
            loss = flow.math.reduce_mean(flow.math.square(pred - y))
            if float(loss.numpy()) > 100.0:  # control flow on data: cannot be traced
                loss = loss * 0.5
            flow.optimizer.SGD(schedule(), momentum=0).minimize(loss)
            return loss

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = [fit(x, y) for _ in range(3)]
        notes = [str(w.message) for w in caught if "cannot be traced" in str(w.message)]
        if fit.plans:
            assert fit.plans == [None]
            assert len(notes) == (1 if flow.env.get_rank() == 0 else 0)
        return out, fit

    both(program)


@pytest.mark.mpi
def test_a_new_session_traces_again() -> None:
    x, y = data(N)
    fit = mlp_job(lambda: flow.optimizer.SGD(schedule(), momentum=0))
    first = [fit(x, y).item() for _ in range(2)]
    flow.clear_default_session()
    again = [fit(x, y).item() for _ in range(2)]
    assert len(fit.plans) == 2
    assert first[0] == again[0]


def test_eager_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EAGER_ENV, "1")
    x, y = data(N)
    fit = mlp_job(lambda: flow.optimizer.SGD(schedule(), momentum=0))
    fit(x, y)
    fit(x, y)
    assert fit.plans == [] and fit.replays == 0


def classifier_job() -> Any:
    @flow.global_function(type="train")
    def fit(x: tp.Numpy.Placeholder((N, 3)),
            y: tp.Numpy.Placeholder((N,), dtype=flow.int32)) -> tp.Numpy:
        logits = flow.layers.dense(x, 4, name="fc")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        flow.optimizer.SGD(schedule(), momentum=0).minimize(loss)
        return loss

    return fit


@pytest.mark.mpi
@pytest.mark.parametrize("eager", [False, True], ids=["replayed", "eager"])
def test_labels_out_of_range_raise_on_replay_as_eager(eager: bool) -> None:
    # the bad label is the batch's last row: the last rank's shard at any rank count
    flow.enable_eager_execution(eager)
    x, _ = data(N)
    labels = numpy.arange(N, dtype=numpy.int32) % 4
    fit = classifier_job()
    first = fit(x, labels)
    before = {k: v.numpy() for k, v in flow.get_all_variables().items()}
    for label in (4, -1):
        bad = labels.copy()
        bad[-1] = label
        with pytest.raises(IndexError, match=f"Target {label} is out of bounds"):
            fit(x, bad)
    for name, value in flow.get_all_variables().items():  # the failed calls updated nothing
        assert_array_equal(value.numpy(), before[name], err_msg=name)
    assert fit(x, labels).mean() < first.mean()
    assert fit.replays == (0 if eager else 1)
