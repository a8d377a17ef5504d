"""The distributed LeNet of OneFlow 0.x's "Distributed Training" guide, on mpiflow.

The guide's program as written, with ``import mpiflow.compatible.single_client as flow`` in
place of ``import oneflow as flow`` and generated MNIST-shaped data (28x28 images of ten
classes, each class a fixed pattern plus noise) in place of ``flow.data.load_mnist``'s files.
``config_distributed()`` is the guide's: under MPI the launcher decides the nodes and ranks,
so mpiflow checks the two machines and one device per node against the job and says once
what differs; ``ctrl_port`` is not needed. The job runs in the consistent view: every rank
feeds the same logical batch, split over the ranks, so the losses are those of one process.

Run: ``mpiexec -n 4 python examples/seed_lenet_legacy.py`` (or ``-n 1``, ``-n 2``: the same
losses). ``--steps`` and ``--batch-size`` make it shorter.
"""

import argparse
import warnings

import numpy as np

import mpiflow.compatible.single_client as flow
import mpiflow.compatible.single_client.typing as tp

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--steps", type=int, default=60, help="training steps (batches)")
parser.add_argument("--batch-size", type=int, default=100, help="the logical batch")
parser.add_argument("--quiet-config", action="store_true",
                    help="hide the note on the configuration the MPI job differs from")
args = parser.parse_args()
if args.quiet_config:
    warnings.simplefilter("ignore", UserWarning)

BATCH_SIZE = args.batch_size


def lenet(data, train=False):
    initializer = flow.truncated_normal(0.1)
    conv1 = flow.layers.conv2d(data, 32, 5, padding="SAME", activation=flow.nn.relu,
                               name="conv1", kernel_initializer=initializer)
    pool1 = flow.nn.max_pool2d(conv1, ksize=2, strides=2, padding="SAME", name="pool1",
                               data_format="NCHW")
    conv2 = flow.layers.conv2d(pool1, 64, 5, padding="SAME", activation=flow.nn.relu,
                               name="conv2", kernel_initializer=initializer)
    pool2 = flow.nn.max_pool2d(conv2, ksize=2, strides=2, padding="SAME", name="pool2",
                               data_format="NCHW")
    reshape = flow.reshape(pool2, [pool2.shape[0], -1])
    hidden = flow.layers.dense(reshape, 512, activation=flow.nn.relu,
                               kernel_initializer=initializer, name="dense1")
    if train:
        hidden = flow.nn.dropout(hidden, rate=0.5, name="dropout")
    return flow.layers.dense(hidden, 10, kernel_initializer=initializer, name="dense2")


@flow.global_function(type="train")
def train_job(
    images: tp.Numpy.Placeholder((BATCH_SIZE, 1, 28, 28), dtype=flow.float),
    labels: tp.Numpy.Placeholder((BATCH_SIZE,), dtype=flow.int32),
) -> tp.Numpy:
    with flow.scope.placement("gpu", "0:0"):
        logits = lenet(images, train=True)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits,
                                                                name="softmax_loss")
    lr_scheduler = flow.optimizer.PiecewiseConstantScheduler([], [0.1])
    flow.optimizer.SGD(lr_scheduler, momentum=0).minimize(loss)
    return loss


def config_distributed():
    print("distributed config")
    # number of devices used in each node
    flow.config.gpu_device_num(1)
    # communication channel
    flow.env.ctrl_port(9988)
    # node configuration
    nodes = [{"addr": "192.168.1.12"}, {"addr": "192.168.1.11"}]
    flow.env.machine(nodes)


def mnist_like(batches, batch_size, seed=0):
    """``batches`` batches of MNIST-shaped images and labels: each class a bright block at a
    place of its own, plus noise (the same data on every rank)."""
    rng = np.random.default_rng(seed)
    patterns = np.zeros((10, 1, 28, 28), np.float32)
    for c in range(10):
        row, col = 3 + 13 * (c // 5), 1 + 5 * (c % 5)
        patterns[c, 0, row:row + 10, col:col + 5] = 1.0
    labels = rng.integers(0, 10, size=(batches, batch_size)).astype(np.int32)
    noise = rng.normal(0.0, 0.1, size=(batches, batch_size, 1, 28, 28)).astype(np.float32)
    return patterns[labels] + noise, labels


def main():
    config_distributed()
    check_point = flow.train.CheckPoint()
    check_point.init()
    train_images, train_labels = mnist_like(args.steps, BATCH_SIZE)
    for i, (images, labels) in enumerate(zip(train_images, train_labels)):
        loss = train_job(images, labels)
        if flow.env.get_rank() == 0:
            print(f"step {i} loss {loss.mean():.6f}")


if __name__ == "__main__":
    main()
