"""Train a small PyTorch CNN on scikit-learn's digits with torch's own DDP, on MPI.

A plain PyTorch script: ``torch.nn``, ``torch.utils.data.DistributedSampler`` and
``torch.nn.parallel.DistributedDataParallel``. The only mpiflow parts are ``import
mpiflow.torch`` and ``backend="mpiflow"``: every collective DDP runs goes over MPI, and rank
and world size come from the MPI launcher (no ``MASTER_ADDR``/``MASTER_PORT``, no ``torchrun``).

It follows the ``main.py`` pattern of PyTorch's ImageNet example that seed 003 runs with
``--dist-url tcp://IP:PORT --dist-backend nccl --world-size 2 --rank 0``: a model, a
``DistributedSampler`` with ``set_epoch`` every epoch, ``DistributedDataParallel``, then
``validate``. The same options exist here; under ``mpiexec`` leave out ``--dist-url``,
``--world-size`` and ``--rank`` (MPI knows them), and the launcher replaces
``--multiprocessing-distributed``: it starts one process per rank.

The batch size is global: each rank takes ``batch_size / world_size`` samples per step and
DDP averages the gradients, so every rank count trains on the same batches and reaches the
same accuracy. The last line is ``test accuracy 0.xxxx``.

Run: ``mpiexec -n 4 python examples/torch_ddp.py`` (needs the ``torch`` and ``examples``
extras: PyTorch and scikit-learn). ``--dist-backend gloo`` runs the same script on gloo, its
store still served over MPI.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import mpiflow.torch  # noqa: F401  registers backend="mpiflow" (automatic with torch >= 2.5)


class Net(nn.Module):
    """Two 3x3 convolutions and a linear layer, for 8x8 images."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 2 * 2, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)   # 16 x 4 x 4
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)   # 32 x 2 x 2
        return self.fc(x.flatten(1))


def load_data(seed: int) -> tuple[TensorDataset, TensorDataset]:
    """The 1797 digits as 1x8x8 images in [0, 1], split 80/20 (stratified, fixed seed)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = torch.tensor(digits.images / 16.0, dtype=torch.float32).unsqueeze(1)
    y = torch.tensor(digits.target, dtype=torch.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.2, random_state=seed, stratify=y)
    return TensorDataset(x_train, y_train), TensorDataset(x_test, y_test)


def train(loader: DataLoader, model: nn.Module, criterion: nn.Module,
          optimizer: torch.optim.Optimizer) -> float:
    """One epoch; the mean training loss over all ranks."""
    model.train()
    total = torch.zeros(2, dtype=torch.float64)
    for images, target in loader:
        loss = criterion(model(images), target)
        optimizer.zero_grad()
        loss.backward()                      # DDP all-reduces the gradients during backward
        optimizer.step()
        total += torch.tensor([loss.item() * len(target), len(target)], dtype=torch.float64)
    dist.all_reduce(total)
    return float(total[0] / total[1])


def validate(dataset: TensorDataset, model: nn.Module) -> float:
    """Test accuracy: every rank scores its share of the test set; the counts are summed."""
    rank, size = dist.get_rank(), dist.get_world_size()
    x, y = dataset.tensors
    mine = slice(rank * len(x) // size, (rank + 1) * len(x) // size)
    model.eval()
    with torch.no_grad():
        correct = (model(x[mine]).argmax(dim=1) == y[mine]).sum()
    counts = torch.tensor([int(correct), len(y[mine])], dtype=torch.int64)
    dist.all_reduce(counts)
    return int(counts[0]) / int(counts[1])


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=64,
                        help="global batch size, split evenly over the ranks")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dist-backend", default="mpiflow",
                        help="torch.distributed backend (mpiflow, or gloo for comparison)")
    parser.add_argument("--dist-url", default="env://",
                        help="init_method; env:// without MASTER_ADDR and mpi:// take rank, "
                             "size and store from MPI")
    parser.add_argument("--world-size", type=int, default=-1, help="leave unset under MPI")
    parser.add_argument("--rank", type=int, default=-1, help="leave unset under MPI")
    args = parser.parse_args(argv)

    torch.set_num_threads(1)  # one thread per rank: ranks share the cores
    dist.init_process_group(backend=args.dist_backend, init_method=args.dist_url,
                            world_size=args.world_size, rank=args.rank)
    rank, size = dist.get_rank(), dist.get_world_size()
    if args.batch_size % size:
        parser.error(f"--batch-size {args.batch_size} is not a multiple of {size} ranks")

    train_set, test_set = load_data(args.seed)
    torch.manual_seed(args.seed)
    model = DDP(Net())                       # DDP broadcasts rank 0's initial weights
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size // size, sampler=sampler)

    if rank == 0:
        print(f"{len(train_set)} training and {len(test_set)} test digits; {size} rank(s) on "
              f"{dist.get_backend()}, {args.batch_size // size} per rank per step", flush=True)
    start = time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)             # a different shuffle every epoch, same on all ranks
        loss = train(loader, model, criterion, optimizer)
        scheduler.step()
        if rank == 0:
            print(f"epoch {epoch + 1:2d}  loss {loss:.4f}", flush=True)
    acc = validate(test_set, model)
    if rank == 0:
        print(f"trained in {time.perf_counter() - start:.1f} s")
        print(f"test accuracy {acc:.4f}", flush=True)
    dist.destroy_process_group()
    return acc


if __name__ == "__main__":
    main()
