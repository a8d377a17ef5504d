"""The PyTorch-on-MPI seed on stock PyTorch, with only ``torch.distributed`` replaced.

``import mpiflow.distributed as dist`` stands where the seed has ``import torch.distributed as
dist`` (whose MPI backend exists only in PyTorch built from source); the rest is the seed's code
on real torch tensors, as written: ``ptdist.py``'s send/recv, and the training loop with its
``sync_initial_weights`` (a send/recv of ``param.data`` per parameter) and ``sync_gradients`` (an
all_reduce of ``param.grad.data`` per parameter). What the seed left undefined (LeNet, the data,
the epochs) is a small LeNet-style CNN on scikit-learn's 8x8 digits (random digits when
scikit-learn is missing), split across ranks.

It checks itself: every rank must end with the same weights, and rank 0 replays the training on
one process (the same initial weights; each step's gradient summed over every rank's batch, as
the seed's SUM all-reduce makes it) and must land on the same weights.

Run: ``mpiexec -n 2 python examples/seed_ptdist.py`` (2 ranks or more).
"""

import copy

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

import mpiflow.distributed as dist  # the seed: import torch.distributed as dist

# -- the seed's ptdist.py, unchanged ------------------------------------------------------------


def main(rank, world):
    if rank == 0:
        x = torch.tensor([1., -1.]) # Tensor of interest
        dist.send(x, dst=1)
        print('Rank-0 has sent the following tensor to Rank-1')
        print(x)
    else:
        z = torch.tensor([0., 0.]) # A holder for recieving the tensor
        dist.recv(z, src=0)
        print('Rank-1 has recieved the following tensor from Rank-0')
        print(z)

# -- the seed's helpers, unchanged --------------------------------------------------------------


def sync_initial_weights(model, rank, world_size):
    for param in model.parameters():
        if rank == 0:
            # Rank 0 is sending it's own weight
            # to all it's siblings (1 to world_size)
            for sibling in range(1, world_size):
                dist.send(param.data, dst=sibling)
        else:
            # Siblings must recieve the parameters
            dist.recv(param.data, src=0)


def sync_gradients(model, rank, world_size):
    for param in model.parameters():
        dist.all_reduce(param.grad.data, op=dist.reduce_op.SUM)

# -- what the seed left undefined ---------------------------------------------------------------


class LeNet(nn.Module):
    """LeNet's shape (two conv + pool stages, then two linear layers) for 8x8 digits."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 3, padding=1)    # 8x8 -> pool -> 4x4
        self.conv2 = nn.Conv2d(6, 16, 3, padding=1)   # 4x4 -> pool -> 2x2
        self.fc1 = nn.Linear(16 * 2 * 2, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return F.log_softmax(self.fc2(x), dim=1)


def load_digits_data():
    """(images as N x 1 x 8 x 8 float32 in [0, 1], labels): scikit-learn's digits, or random
    images labelled by a fixed linear rule when scikit-learn is not installed."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        g = torch.Generator().manual_seed(0)
        images = torch.rand(1024, 1, 8, 8, generator=g)
        labels = (images.flatten(1) @ torch.randn(64, 10, generator=g)).argmax(1)
        return images, labels
    digits = load_digits()
    images = torch.tensor(digits.images / 16.0, dtype=torch.float32).unsqueeze(1)
    return images, torch.tensor(digits.target)


def batches_of(rank, world_size, images, labels, batch_size=64):
    """Rank ``rank``'s share (every world_size-th sample), cut to the same length on every rank
    so that all ranks run the same number of steps."""
    n = len(images) // world_size * world_size
    shard = TensorDataset(images[rank:n:world_size], labels[rank:n:world_size])
    return DataLoader(shard, batch_size=batch_size)


def replay_on_one_process(initial, images, labels, world_size, epochs):
    """The same training on one process: each step's gradient is the sum over every rank's
    batch (the seed sums, it does not average)."""
    model = copy.deepcopy(initial)
    optimizer = optim.SGD(model.parameters(), lr=1e-3, momentum=0.85)
    loaders = [batches_of(r, world_size, images, labels) for r in range(world_size)]
    model.train()
    for _ in range(epochs):
        for steps in zip(*loaders):
            optimizer.zero_grad()
            sum(F.nll_loss(model(data), target) for data, target in steps).backward()
            optimizer.step()
    return model


if __name__ == '__main__':
    dist.init_process_group(backend='mpi')
    rank, world_size = dist.get_rank(), dist.get_world_size()
    if rank < 2:  # ptdist.py is written for ranks 0 and 1
        main(rank, world_size)

    images, labels = load_digits_data()
    train_loader = batches_of(rank, world_size, images, labels)
    epochs = 2
    torch.manual_seed(rank)  # a different initialization on every rank: the sync must fix it

    # -- the seed's training loop, unchanged --
    model = LeNet()
    # first synchronization of initial weights
    sync_initial_weights(model, rank, world_size)
    initial = copy.deepcopy(model)

    optimizer = optim.SGD(model.parameters(), lr=1e-3, momentum=0.85)

    model.train()
    for epoch in range(1, epochs + 1):
        for data, target in train_loader:
            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target)
            loss.backward()

            # The all-reduce on gradients
            sync_gradients(model, rank, world_size)

            optimizer.step()
        if rank == 0:
            print(f'epoch {epoch}: loss of the last batch on rank 0 {loss.item():.4f}')

    # -- the checks --
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    highest, lowest = flat.clone(), flat.clone()
    dist.all_reduce(highest, op=dist.ReduceOp.MAX)
    dist.all_reduce(lowest, op=dist.ReduceOp.MIN)
    assert torch.equal(highest, lowest), 'the ranks ended with different weights'
    if rank == 0:
        print(f'all {world_size} ranks hold the same weights')
        alone = replay_on_one_process(initial, images, labels, world_size, epochs)
        alone_flat = torch.cat([p.detach().reshape(-1) for p in alone.parameters()])
        moved = (flat - torch.cat([p.detach().reshape(-1) for p in initial.parameters()])).abs()
        diff = (flat - alone_flat).abs().max().item()
        assert moved.max().item() > 1e-3, 'training did not change the weights'
        assert diff < 1e-5, f'differs from training on one process by {diff}'
        print(f'matches training on one process (largest difference {diff:.1e})')
