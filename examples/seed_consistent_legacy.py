"""The consistent view of OneFlow 0.x's guide, on mpiflow: one logical batch over all devices.

The guide's consistent-strategy program with ``import mpiflow.compatible.single_client as
flow``: the job takes the whole batch (``tp.Numpy``), mpiflow splits it over the ranks
(``S(0)``) with broadcast variables, and the losses are those of one process at any rank
count. Data: generated MNIST-shaped images (each class a bright block, plus noise).

Run: ``mpiexec -n 4 python examples/seed_consistent_legacy.py``.
"""

import argparse

import numpy as np

import mpiflow.compatible.single_client as flow
import mpiflow.compatible.single_client.typing as tp

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--steps", type=int, default=60, help="training steps (batches)")
parser.add_argument("--batch-size", type=int, default=100, help="the logical batch")
args = parser.parse_args()

BATCH_SIZE = args.batch_size

func_config = flow.FunctionConfig()
func_config.default_logical_view(flow.scope.consistent_view())


@flow.global_function(type="train", function_config=func_config)
def train_job(
    images: tp.Numpy.Placeholder((BATCH_SIZE, 1, 28, 28), dtype=flow.float),
    labels: tp.Numpy.Placeholder((BATCH_SIZE,), dtype=flow.int32),
) -> tp.Numpy:
    initializer = flow.truncated_normal(0.1)
    reshape = flow.reshape(images, [images.shape[0], -1])
    hidden = flow.layers.dense(reshape, 512, activation=flow.nn.relu,
                               kernel_initializer=initializer, name="hidden")
    logits = flow.layers.dense(hidden, 10, kernel_initializer=initializer, name="output")
    loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits, name="softmax_loss")
    lr_scheduler = flow.optimizer.PiecewiseConstantScheduler([], [0.1])
    flow.optimizer.SGD(lr_scheduler, momentum=0).minimize(loss)
    return loss


def mnist_like(batches, batch_size, seed=0):
    """MNIST-shaped batches: each class a bright block at a place of its own, plus noise."""
    rng = np.random.default_rng(seed)
    patterns = np.zeros((10, 1, 28, 28), np.float32)
    for c in range(10):
        row, col = 3 + 13 * (c // 5), 1 + 5 * (c % 5)
        patterns[c, 0, row:row + 10, col:col + 5] = 1.0
    labels = rng.integers(0, 10, size=(batches, batch_size)).astype(np.int32)
    noise = rng.normal(0.0, 0.1, size=(batches, batch_size, 1, 28, 28)).astype(np.float32)
    return patterns[labels] + noise, labels


if __name__ == "__main__":
    flow.config.gpu_device_num(flow.env.get_world_size())
    check_point = flow.train.CheckPoint()
    check_point.init()
    train_images, train_labels = mnist_like(args.steps, BATCH_SIZE)
    for i, (images, labels) in enumerate(zip(train_images, train_labels)):
        loss = train_job(images, labels)
        if flow.env.get_rank() == 0:
            print(f"step {i} loss {loss.mean():.6f}")
