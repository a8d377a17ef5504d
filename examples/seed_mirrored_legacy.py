"""The mirrored view of OneFlow 0.x's guide, on mpiflow: each device its own part of the batch.

The guide's mirrored-strategy program with ``import mpiflow.compatible.single_client as flow``:
the job takes ``tp.ListNumpy`` placeholders (one array per device) and returns one loss array
per device. Under MPI each rank is one device: every rank builds the same list, takes its own
entry, and the gradients are averaged over the ranks before each update, so with equal parts
the losses are those of one process on the whole batch. Data: generated MNIST-shaped images
(each class a bright block at a place of its own, plus noise).

Run: ``mpiexec -n 4 python examples/seed_mirrored_legacy.py``.
"""

import argparse

import numpy as np

import mpiflow.compatible.single_client as flow
import mpiflow.compatible.single_client.typing as tp

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--steps", type=int, default=60, help="training steps (batches)")
parser.add_argument("--batch-size", type=int, default=96, help="the batch of all devices")
args = parser.parse_args()

GPU_NUM = flow.env.get_world_size()  # the guide's 2 devices: here, the job's ranks
BATCH_SIZE = args.batch_size
BATCH_SIZE_PER_GPU = BATCH_SIZE // GPU_NUM

func_config = flow.FunctionConfig()
func_config.default_logical_view(flow.scope.mirrored_view())


@flow.global_function(type="train", function_config=func_config)
def train_job(
    images: tp.ListNumpy.Placeholder((BATCH_SIZE_PER_GPU, 1, 28, 28), dtype=flow.float),
    labels: tp.ListNumpy.Placeholder((BATCH_SIZE_PER_GPU,), dtype=flow.int32),
) -> tp.ListNumpy:
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
    flow.config.gpu_device_num(GPU_NUM)
    check_point = flow.train.CheckPoint()
    check_point.init()
    train_images, train_labels = mnist_like(args.steps, BATCH_SIZE)
    for i, (images, labels) in enumerate(zip(train_images, train_labels)):
        imgs_list = [images[k * BATCH_SIZE_PER_GPU:(k + 1) * BATCH_SIZE_PER_GPU]
                     for k in range(GPU_NUM)]
        labels_list = [labels[k * BATCH_SIZE_PER_GPU:(k + 1) * BATCH_SIZE_PER_GPU]
                       for k in range(GPU_NUM)]
        loss = train_job(imgs_list, labels_list)
        total_loss = np.array([x for part in loss for x in part])
        if flow.env.get_rank() == 0:
            print(f"step {i} loss {total_loss.mean():.6f}")
