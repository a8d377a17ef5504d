"""The legacy optimizers' options (mpiflow.compatible.single_client.optimizer): gradient
clipping by the global norm and the static loss scale, eager and in replays, at 1-4 ranks."""

from __future__ import annotations

from typing import Any

import numpy
import pytest
from numpy.testing import assert_allclose

import mpiflow.compatible.single_client as flow

tp = flow.typing
SIZE = flow.env.get_world_size()
N = 3 * SIZE + 1
LR = 0.1



def fit_job(**options: Any) -> Any:
    @flow.global_function(type="train")
    def fit(x: tp.Numpy.Placeholder((N, 3)), y: tp.Numpy.Placeholder((N, 1))) -> tp.Numpy:
        pred = flow.layers.dense(x, 1, name="fc")
        loss = flow.math.reduce_mean(flow.math.square(pred - y))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [LR]), momentum=0,
                           **options).minimize(loss)
        return loss

    return fit


def data() -> tuple[numpy.ndarray, numpy.ndarray]:
    rng = numpy.random.default_rng(5)
    return (rng.standard_normal((N, 3)).astype(numpy.float32),
            (100 * rng.standard_normal((N, 1))).astype(numpy.float32))  # large gradients


def variables() -> numpy.ndarray:
    values = flow.get_all_variables()
    return numpy.concatenate([values[k].numpy().ravel() for k in sorted(values)])


@pytest.mark.mpi
@pytest.mark.parametrize("eager", [False, True], ids=["replayed", "eager"])
def test_clipping_by_global_norm_bounds_each_step(eager: bool) -> None:
    flow.enable_eager_execution(eager)
    x, y = data()
    fit = fit_job(grad_clipping=flow.optimizer.grad_clipping.by_global_norm(0.5))
    fit(x, y)  # makes the variables
    for _ in range(3):
        before = variables()
        fit(x, y)
        # plain SGD moves by lr * the clipped gradient: norm lr * clip_norm
        assert_allclose(numpy.linalg.norm(variables() - before), LR * 0.5, rtol=1e-5)
    assert fit.replays == (0 if eager else 3)


@pytest.mark.mpi
def test_clipping_leaves_small_gradients_alone() -> None:
    x, y = data()
    runs = []
    for options in ({}, {"grad_clipping": flow.optimizer.grad_clipping.by_global_norm(1e9)}):
        flow.clear_default_session()
        fit = fit_job(**options)
        runs.append([fit(x, y) for _ in range(3)] + [variables()])
    for got, want in zip(*runs):
        assert_allclose(got, want, rtol=1e-6)


@pytest.mark.mpi
def test_a_loss_scale_multiplies_the_backward_and_divides_the_update() -> None:
    x, y = data()
    runs = []
    for scale in (None, 1024.0):
        flow.clear_default_session()
        fit = fit_job(loss_scale_factor=scale)
        runs.append([fit(x, y) for _ in range(3)] + [variables()])
    for got, want in zip(*runs):  # the same update (up to rounding)
        assert_allclose(got, want, rtol=1e-5)
    # float32 overflows where the scaled loss does: the scale is really applied
    flow.clear_default_session()
    fit = fit_job(loss_scale_factor=1e38)
    with numpy.errstate(over="ignore", invalid="ignore"):
        fit(x, y)
    assert not numpy.isfinite(variables()).all()


def test_bad_options_are_refused() -> None:
    sched = flow.optimizer.PiecewiseConstantScheduler([], [LR])
    with pytest.raises(TypeError, match="grad_clipping must be"):
        flow.optimizer.SGD(sched, grad_clipping=1.0)
    with pytest.raises(ValueError, match="clip_norm must be a positive"):
        flow.optimizer.grad_clipping.by_global_norm(0)
    with pytest.raises(ValueError, match="loss_scale_factor must be a positive"):
        flow.optimizer.Adam(sched, loss_scale_factor=-2)
