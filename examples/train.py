"""Train an MLP on scikit-learn's handwritten digits, data parallel with DDP.

Every rank trains on its own part of each batch (DistributedSampler); DistributedDataParallel
averages the gradients, so the run matches one process on the whole batch. Rank 0 shows a
progress bar and, per epoch, the mean training loss and the held-out accuracy.

Run: ``mpiexec -n 4 python examples/train.py`` (needs the ``examples`` extra: scikit-learn).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy

import mpiflow as flow
import mpiflow.distributed as dist
from mpiflow import nn
from mpiflow.nn.parallel import DistributedDataParallel
from mpiflow.utils.data import DataLoader, DistributedSampler, TensorDataset


def load_data(seed: int) -> tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    """The 1797 8x8 digits, scaled to [0, 1], split 80/20 by a fixed permutation."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.data / 16.0).astype(numpy.float32)
    y = digits.target.astype(numpy.int64)
    order = numpy.random.default_rng(seed).permutation(len(x))
    cut = int(0.8 * len(x))
    train, test = order[:cut], order[cut:]
    return x[train], y[train], x[test], y[test]


def accuracy(model: nn.Module, x: numpy.ndarray, y: numpy.ndarray) -> float:
    """Held-out accuracy, each rank scoring its share of the test set."""
    rank, size = flow.env.get_rank(), flow.env.get_world_size()
    mine = slice(rank * len(x) // size, (rank + 1) * len(x) // size)
    with flow.no_grad():
        predicted = model(flow.tensor(x[mine])).argmax(dim=1).numpy()
    counts = numpy.array([(predicted == y[mine]).sum(), len(predicted)], dtype=numpy.int64)
    dist.all_reduce(counts)
    return float(counts[0] / counts[1])


def progress(iterable: DataLoader, enabled: bool, epoch: int) -> object:
    if not enabled:
        return iterable
    try:
        from tqdm import tqdm
    except ImportError:
        return iterable
    return tqdm(iterable, desc=f"epoch {epoch:2d}", leave=False, file=sys.stdout, ncols=72)


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=64, help="global batch size")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)

    rank, size = flow.env.get_rank(), flow.env.get_world_size()
    x_train, y_train, x_test, y_test = load_data(args.seed)

    flow.manual_seed(args.seed)
    model = DistributedDataParallel(nn.Sequential(
        nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10)))
    optimizer = flow.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    scheduler = flow.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    loss_fn = nn.CrossEntropyLoss()

    dataset = TensorDataset(flow.tensor(x_train), flow.tensor(y_train))
    sampler = DistributedSampler(dataset, shuffle=True, seed=args.seed)
    loader = DataLoader(dataset, batch_size=max(1, args.batch_size // size), sampler=sampler)

    if rank == 0:
        print(f"{len(x_train)} training and {len(x_test)} test digits; {size} rank(s), "
              f"{max(1, args.batch_size // size)} per rank per step")
    start = time.perf_counter()
    acc = 0.0
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        model.train()
        total = numpy.zeros(2)
        for xb, yb in progress(loader, rank == 0 and not args.no_progress, epoch):
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            total += (loss.item() * len(yb), len(yb))
        scheduler.step()
        dist.all_reduce(total)
        model.eval()
        acc = accuracy(model, x_test, y_test)
        if rank == 0:
            print(f"epoch {epoch:2d}  loss {total[0] / total[1]:.4f}  test accuracy {acc:.4f}",
                  flush=True)
    if rank == 0:
        print(f"trained in {time.perf_counter() - start:.1f} s")
        print(f"final test accuracy {acc:.4f}")
    return acc


if __name__ == "__main__":
    main()
