"""The graph suite's OneFlow 0.x case: the guide's LeNet train job, traced against eager.

``flow.global_function(type="train")`` of :mod:`mpiflow.compatible.single_client` with the
LeNet of OneFlow's distributed-training guide (conv 5x5 32 "SAME", ReLU, max pool 2, conv 5x5
64, ReLU, max pool 2, dense 512, ReLU, dropout 0.5, dense 10), sparse cross-entropy and SGD
at a constant rate, in the consistent view: a logical batch of 32 images per rank, split over
the ranks (``S(0)``), broadcast variables. One job, called alternately with
``flow.enable_eager_execution(True)`` (the body runs on every call) and ``False`` (the plan
traced on its first call replays): the two steps do the same arithmetic, and the job's
``tp.Numpy`` result (the per-image losses, gathered) is fetched on both.

The job's placeholders depend on the rank count, so its annotations are set when it is made.

Examples:
    >>> eager, traced = build_job_steps(batch=2)
    >>> eager(); traced(); traced()
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy

__all__ = ["JOB_MODEL", "build_job_steps"]

JOB_MODEL = "lenet-job"
"""The graph suite's name for this case."""


def _lenet(flow: Any, data: Any) -> Any:
    init = flow.truncated_normal(0.1)
    conv1 = flow.layers.conv2d(data, 32, 5, padding="SAME", activation=flow.nn.relu,
                               name="conv1", kernel_initializer=init)
    pool1 = flow.nn.max_pool2d(conv1, ksize=2, strides=2, padding="SAME")
    conv2 = flow.layers.conv2d(pool1, 64, 5, padding="SAME", activation=flow.nn.relu,
                               name="conv2", kernel_initializer=init)
    pool2 = flow.nn.max_pool2d(conv2, ksize=2, strides=2, padding="SAME")
    flat = flow.reshape(pool2, [pool2.shape[0], -1])
    hidden = flow.layers.dense(flat, 512, activation=flow.nn.relu, kernel_initializer=init,
                               name="dense1")
    hidden = flow.nn.dropout(hidden, rate=0.5)
    return flow.layers.dense(hidden, 10, kernel_initializer=init, name="dense2")


def build_job_steps(batch: int = 32) -> tuple[Callable[[], None], Callable[[], None]]:
    """The eager and the traced step of the LeNet train job (a fresh session; collective).

    Args:
        batch: images per rank (the logical batch is ``batch * ranks``).
    """
    from ..compatible import single_client as flow
    from ..runtime import topology

    tp = flow.typing
    n = batch * topology.size
    rng = numpy.random.default_rng(0)
    images = rng.standard_normal((n, 1, 28, 28)).astype(numpy.float32)
    labels = rng.integers(0, 10, n).astype(numpy.int32)
    flow.clear_default_session()

    def body(images: Any, labels: Any) -> Any:
        logits = _lenet(flow, images)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.01]),
                           momentum=0).minimize(loss)
        return loss

    body.__annotations__ = {"images": tp.Numpy.Placeholder((n, 1, 28, 28), dtype=flow.float),
                            "labels": tp.Numpy.Placeholder((n,), dtype=flow.int32),
                            "return": tp.Numpy}
    train_job = flow.global_function(type="train")(body)

    def eager() -> None:
        flow.enable_eager_execution(True)
        train_job(images, labels)

    def traced() -> None:
        flow.enable_eager_execution(False)
        train_job(images, labels)

    return eager, traced
