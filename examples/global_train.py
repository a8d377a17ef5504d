"""The digits MLP written once with global tensors, trained data parallel or model parallel.

Only the layouts change between the two runs:

- data parallel: the batch is split (``S(0)``), the weights are broadcast (``B``); the gradient
  of every weight is all-reduced for you, because a leaf's gradient takes the leaf's layout;
- model parallel: the first layer's weight is split by output features (``S(0)``) and the second
  by input features (``S(1)``), so the hidden activations stay split and the second matmul
  leaves a partial sum that the loss finishes.

Both runs print the same numbers as one process (``mpiexec -n 1``).

Run: ``mpiexec -n 4 python examples/global_train.py [--mode data|model|both]``.
"""

from __future__ import annotations

import argparse

import numpy

import mpiflow as flow
from mpiflow import nn


def load_data(seed: int) -> tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.data / 16.0).astype(numpy.float32)
    y = digits.target.astype(numpy.int64)
    order = numpy.random.default_rng(seed).permutation(len(x))
    cut = int(0.8 * len(x))
    return x[order[:cut]], y[order[:cut]], x[order[cut:]], y[order[cut:]]


def build(mode: str, placement: flow.placement) -> nn.Module:
    """The model, made global with the layouts of ``mode``."""
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    split0, split1, b = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.broadcast
    if mode == "data":
        return model.to_global(placement, b)
    layouts = {"0.weight": split0, "0.bias": split0, "2.weight": split1, "2.bias": b}
    # every rank built the same model: make it B, then split the whole value
    return model.to_global(placement, b).to_global(sbp=lambda name, tensor: layouts[name])


def train(mode: str, epochs: int, batch: int, seed: int) -> tuple[float, float]:
    """Train and return (final training loss, test accuracy)."""
    placement = flow.placement("cpu", list(range(flow.env.get_world_size())))
    data_sbp = flow.sbp.split(0) if mode == "data" else flow.sbp.broadcast
    x_train, y_train, x_test, y_test = load_data(seed)
    model = build(mode, placement)
    optimizer = flow.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    order = numpy.random.default_rng(seed)
    loss_value = 0.0
    for _ in range(epochs):
        perm = order.permutation(len(x_train))
        for start in range(0, len(perm) - batch + 1, batch):
            idx = perm[start:start + batch]
            xb = flow.tensor(x_train[idx], placement=placement, sbp=data_sbp)
            yb = flow.tensor(y_train[idx], placement=placement, sbp=data_sbp)
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            loss_value = loss.item()
    with flow.no_grad():
        xt = flow.tensor(x_test, placement=placement, sbp=data_sbp)
        predicted = model(xt).argmax(dim=1).numpy()
    return loss_value, float((predicted == y_test).mean())


def main(argv: list[str] | None = None) -> dict[str, tuple[float, float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["data", "model", "both"], default="both")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    modes = ["data", "model"] if args.mode == "both" else [args.mode]
    results = {}
    for mode in modes:
        results[mode] = train(mode, args.epochs, args.batch_size, args.seed)
        if flow.env.get_rank() == 0:
            loss, acc = results[mode]
            print(f"{mode:5s} parallel on {flow.env.get_world_size()} rank(s): "
                  f"last loss {loss:.4g}, test accuracy {acc:.4f}", flush=True)
    return results


if __name__ == "__main__":
    main()
