"""The PyTorch-on-MPI seed's training loop with ``sync_initial_weights``/``sync_gradients``.

The seed's loop is kept as written; its helpers come from ``mpiflow.distributed`` (packed into
a few large collectives instead of one per parameter), and the pieces the seed left undefined
(the model, the data) are a small classifier on scikit-learn's digits, split across ranks.

Run: ``mpiexec -n 4 python examples/seed_mpi_sync.py``.
"""

import numpy
from sklearn.datasets import load_digits

import mpiflow as torch
import mpiflow.distributed as dist
import mpiflow.nn.functional as F
from mpiflow import nn, optim
from mpiflow.distributed import sync_gradients, sync_initial_weights
from mpiflow.utils.data import DataLoader, DistributedSampler, TensorDataset


class LeNet(nn.Module):
    """A small stand-in for the seed's LeNet, for 8x8 digits."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


dist.init_process_group(backend="mpi")
rank, world_size = dist.get_rank(), dist.get_world_size()
digits = load_digits()
dataset = TensorDataset(torch.tensor((digits.data / 16.0).astype(numpy.float32)),
                        torch.tensor(digits.target))
train_loader = DataLoader(dataset, batch_size=32, sampler=DistributedSampler(dataset, seed=0))
epochs = 3

torch.manual_seed(rank)  # a different initialization on every rank: the sync makes them equal
model = LeNet()
# first synchronization of initial weights
sync_initial_weights(model, rank, world_size)

optimizer = optim.SGD(model.parameters(), lr=1e-1, momentum=0.85)

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
        print(f"epoch {epoch}: last loss {loss.item():.4f}")

# every rank holds the same model
weights = [None] * world_size
dist.all_gather_object(weights, float(model.fc1.weight.numpy().sum()))
assert all(abs(w - weights[0]) < 1e-4 for w in weights), weights
if rank == 0:
    print("all ranks hold the same weights")
