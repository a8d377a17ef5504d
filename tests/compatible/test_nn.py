"""The legacy ``flow.nn.dropout``'s options (mpiflow.compatible.single_client.nn): a mask of
``noise_shape`` broadcast against the input, and a ``seed`` that makes the masks the same on
every run, eager and replayed, at 1-4 ranks (the consistent view splits the batch)."""

from __future__ import annotations

from typing import Any

import numpy
import pytest
from numpy.testing import assert_array_equal

import mpiflow
import mpiflow.compatible.single_client as flow

tp = flow.typing
SIZE = flow.env.get_world_size()
N, C = 3 * SIZE + 1, 6
RATE = 0.5



def dropout_job(**options: Any) -> Any:
    @flow.global_function(type="train")
    def fit(x: tp.Numpy.Placeholder((N, C))) -> tp.Numpy:
        dropped = flow.nn.dropout(x, rate=RATE, **options)
        loss = flow.math.reduce_mean(flow.layers.dense(dropped, 1, name="fc"))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]),
                           momentum=0).minimize(loss)
        return dropped

    return fit


X = numpy.ones((N, C), numpy.float32)


@pytest.mark.mpi
@pytest.mark.parametrize("eager", [False, True], ids=["replayed", "eager"])
@pytest.mark.parametrize("noise_shape", [(N, 1), (1, C), (None, 1)], ids=str)
def test_the_mask_broadcasts_along_the_noise_shape_ones(eager: bool, noise_shape: Any) -> None:
    flow.enable_eager_execution(eager)
    fit = dropout_job(noise_shape=noise_shape)
    masks = [fit(X) for _ in range(3)]
    for out in masks:
        assert set(numpy.unique(out)) <= {0.0, 1 / (1 - RATE)}
        axis = 1 if noise_shape[1] == 1 else 0  # the broadcast dim: one decision along it
        assert_array_equal(out, numpy.repeat(out.take([0], axis), out.shape[axis], axis))
    assert not all((m == masks[0]).all() for m in masks[1:])  # each call draws anew


@pytest.mark.mpi
def test_a_seed_gives_the_same_masks_on_every_run() -> None:
    runs = []
    for seed, default_seed in ((7, 1), (7, 2), (8, 1)):
        flow.clear_default_session()
        mpiflow.manual_seed(default_seed)  # the seeded dropout does not read this generator
        fit = dropout_job(seed=seed)
        runs.append(numpy.stack([fit(X) for _ in range(3)]))
    assert_array_equal(runs[0], runs[1])
    assert not (runs[0] == runs[2]).all()
    assert not (runs[0][0] == runs[0][1]).all()  # a sequence of masks, not one mask


def test_a_noise_shape_that_does_not_broadcast_is_refused() -> None:
    fit = dropout_job(noise_shape=(N, 2))
    with pytest.raises(ValueError, match=r"noise_shape \[.*, 2\] does not broadcast"):
        fit(X)
