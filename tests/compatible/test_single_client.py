"""OneFlow 0.x's single-client API on mpiflow: jobs, views, layers, updates, checkpoints.

The jobs run at 1 to 4 ranks (``mpi``): in the consistent view a batch of ``3 * size + 1``
rows is split unevenly over the ranks and every result must equal the one-process numbers
(computed here with numpy); in the mirrored view each rank's gradients are averaged.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy
import pytest
from numpy.testing import assert_allclose

import mpiflow.compatible.single_client as flow
from mpiflow.compatible.single_client.data import NotSupportedError
from mpiflow.sbp import broadcast

tp = flow.typing
RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
N = 3 * SIZE + 1
ROWS = 2  # per rank, in the mirrored view



def regression_data(rows: int) -> tuple[numpy.ndarray, numpy.ndarray]:
    rng = numpy.random.default_rng(3)
    return (rng.standard_normal((rows, 3)).astype(numpy.float32),
            rng.standard_normal((rows, 1)).astype(numpy.float32))


def numpy_sgd(x: numpy.ndarray, y: numpy.ndarray, steps: int, lr: float, momentum: float = 0.0
              ) -> list[float]:
    """Mean-squared-error regression from zero weights, OneFlow's momentum update."""
    w, b = numpy.zeros((1, 3)), numpy.zeros(1)
    vw, vb = numpy.zeros_like(w), numpy.zeros_like(b)
    losses = []
    for _ in range(steps):
        err = x @ w.T + b - y
        losses.append(float((err ** 2).mean()))
        gw, gb = 2 * err.T @ x / len(x), 2 * err.sum(0) / len(x)
        vw, vb = momentum * vw - lr * gw, momentum * vb - lr * gb
        w, b = w + vw, b + vb
    return losses


def regression_job(config: Any = None, update: str = "minimize") -> Any:
    @flow.global_function(type="train", function_config=config)
    def fit(x: tp.Numpy.Placeholder((N, 3)), y: tp.Numpy.Placeholder((N, 1))) -> tp.Numpy:
        pred = flow.layers.dense(x, 1, kernel_initializer=flow.zeros_initializer(), name="fc")
        loss = flow.math.reduce_mean(flow.math.square(pred - y))
        if update == "minimize":
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([2], [0.1, 0.1]),
                               momentum=0.5).minimize(loss)
        else:
            flow.losses.add_loss(loss)
        return loss

    return fit


@pytest.mark.mpi
def test_a_consistent_train_job_gives_one_process_s_losses() -> None:
    x, y = regression_data(N)
    fit = regression_job()
    got = [fit(x, y).item() for _ in range(4)]
    assert_allclose(got, numpy_sgd(x, y, 4, 0.1, momentum=0.5), rtol=1e-5)
    w = flow.get_all_variables()["fc-weight"]
    assert w.sbp == (broadcast,)


@pytest.mark.mpi
def test_the_older_api_updates_by_the_function_config() -> None:
    x, y = regression_data(N)
    config = flow.function_config()
    config.default_data_type(flow.float)
    config.train.primary_lr(0.1)
    config.train.model_update_conf({"momentum_conf": {"beta": 0.5}})
    fit = regression_job(config, update="add_loss")
    got = [fit(x, y).item() for _ in range(3)]
    assert_allclose(got, numpy_sgd(x, y, 3, 0.1, momentum=0.5), rtol=1e-5)


@pytest.mark.mpi
def test_a_mirrored_job_averages_the_ranks_gradients() -> None:
    rows = ROWS
    x, y = regression_data(rows * SIZE)
    config = flow.function_config()
    config.default_logical_view(flow.scope.mirrored_view())

    @flow.global_function(type="train", function_config=config)
    def fit(x: tp.ListNumpy.Placeholder((ROWS, 3)), y: tp.ListNumpy.Placeholder((ROWS, 1))
            ) -> tp.ListNumpy:
        pred = flow.layers.dense(x, 1, kernel_initializer=flow.zeros_initializer())
        loss = flow.math.reduce_mean(flow.math.square(pred - y), axis=1)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]),
                           momentum=0).minimize(loss)
        return loss

    xs = [x[k * rows:(k + 1) * rows] for k in range(SIZE)]
    ys = [y[k * rows:(k + 1) * rows] for k in range(SIZE)]
    got = []
    for _ in range(3):
        parts = fit(xs, ys)
        assert len(parts) == SIZE
        got.append(float(numpy.concatenate(parts).mean()))
    assert_allclose(got, numpy_sgd(x, y, 3, 0.1), rtol=1e-5)


@pytest.mark.mpi
def test_adam_updates_as_oneflow_without_bias_correction() -> None:
    x, y = regression_data(N)

    @flow.global_function(type="train")
    def fit(x: tp.Numpy.Placeholder((N, 3)), y: tp.Numpy.Placeholder((N, 1))) -> tp.Numpy:
        pred = flow.layers.dense(x, 1, kernel_initializer=flow.zeros_initializer(), name="fc")
        loss = flow.math.reduce_mean(flow.math.square(pred - y))
        flow.optimizer.Adam(flow.optimizer.PiecewiseConstantScheduler([], [0.01])).minimize(loss)
        return loss

    fit(x, y)
    err = -y
    gw = 2 * err.T @ x / N
    m, v = 0.1 * gw, 0.001 * gw * gw
    want = -0.01 * m / (numpy.sqrt(v) + 1e-8)
    assert_allclose(flow.get_all_variables()["fc-weight"].numpy(), want, rtol=1e-4)


@pytest.mark.mpi
def test_a_predict_job_returns_futures_and_typed_values() -> None:
    @flow.global_function()
    def double(x: tp.Numpy.Placeholder((N, 2))):
        return x * 2, flow.math.reduce_sum(x)

    x = numpy.arange(2 * N, dtype=numpy.float32).reshape(N, 2)
    twice, total = double(x).get()
    assert_allclose(twice.numpy(), 2 * x)
    assert twice.numpy_list()[0].shape == (N, 2)
    assert total.numpy().item() == x.sum()


@pytest.mark.mpi
def test_conv_layers_and_pooling_run_in_a_job() -> None:
    @flow.global_function()
    def net(x: tp.Numpy.Placeholder((N, 1, 7, 6))) -> tp.Numpy:
        h = flow.layers.conv2d(x, 2, 3, strides=2, padding="SAME", activation=flow.nn.relu,
                               kernel_initializer=flow.ones_initializer())
        return flow.nn.avg_pool2d(flow.nn.max_pool2d(h, 2, 1, "SAME"), 2, 2, "VALID")

    out = net(numpy.ones((N, 1, 7, 6), numpy.float32))
    assert out.shape == (N, 2, 2, 1)  # SAME: ceil(7 / 2) x ceil(6 / 2), then 2x2 pools


@pytest.mark.mpi
def test_checkpoints_round_trip(mpi_tmp_path: Any) -> None:
    x, y = regression_data(N)
    fit = regression_job()
    fit(x, y)
    saved = flow.get_all_variables()["fc-weight"].numpy()
    check_point = flow.train.CheckPoint()
    check_point.save(str(mpi_tmp_path / "ckpt"))
    flow.clear_default_session()
    check_point.load(str(mpi_tmp_path / "ckpt"))  # before the variables exist: pending
    assert_allclose(regression_job()(x, y), numpy_sgd(x, y, 2, 0.1, 0.5)[1], rtol=1e-5)
    assert_allclose(flow.checkpoint.get(str(mpi_tmp_path / "ckpt"))["fc-weight"], saved)


@pytest.mark.mpi
def test_the_configuration_is_checked_against_the_job_and_the_port_needs_none() -> None:
    flow.config.gpu_device_num(SIZE + 1)
    flow.env.machine([{"addr": "10.0.0.1"}, {"addr": "10.0.0.2"}, {"addr": "10.0.0.3"}])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        flow.env.ctrl_port(9988)
        flow.env.ctrl_port(9988)
        regression_job()(*regression_data(N))
        regression_job()(*regression_data(N))
    texts = [str(w.message) for w in caught]
    if RANK == 0:
        assert sum("needs no control port" in t for t in texts) == 1
        [note] = [t for t in texts if "the configuration is checked" in t]
        assert "3 node(s) in flow.env.machine" in note
        assert f"{SIZE + 1} gpu(s) per node" in note
    else:
        assert not texts


def test_ofrecord_readers_say_to_feed_numpy() -> None:
    for reader in (flow.data.decode_ofrecord, flow.data.BlobConf, flow.data.ofrecord_reader,
                   flow.data.load_mnist):
        with pytest.raises(NotSupportedError, match="feed numpy arrays"):
            reader("data", [])


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda job: job(numpy.ones((N, 4), numpy.float32), numpy.ones((N, 1), numpy.float32)),
     ValueError, "expected an array of shape"),
    (lambda job: job(numpy.ones((N, 3), numpy.int64), numpy.ones((N, 1), numpy.float32)),
     TypeError, "expected float32 data"),
])
def test_bad_arguments_are_refused(call: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        call(regression_job())


def test_jobs_are_checked_when_defined_and_run() -> None:
    with pytest.raises(TypeError, match="Placeholder"):
        flow.global_function()(lambda x: x)
    with pytest.raises(ValueError, match="'train' or 'predict'"):
        flow.global_function(type="eval")

    @flow.global_function()
    def predict(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        flow.optimizer.SGD(0.1).minimize(x)
        return x

    with pytest.raises(RuntimeError, match="type='train'"):
        predict(numpy.ones(2, numpy.float32))

    @flow.global_function(type="train")
    def no_update(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return x

    with pytest.raises(RuntimeError, match="needs an update"):
        no_update(numpy.ones(2, numpy.float32))
    with pytest.raises(RuntimeError, match="inside a function decorated"):
        flow.get_variable("w", (2,))
