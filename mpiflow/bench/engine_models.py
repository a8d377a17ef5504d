"""The models of the ``engine`` suite, built the same way in mpiflow and in PyTorch.

An MLP of ``Linear`` layers with ReLU between, or the LeNet of OneFlow's distributed-training
guide (conv 5x5 32 "same", ReLU, max pool 2, conv 5x5 64 "same", ReLU, max pool 2, dense 512,
ReLU, dense 10, on 28x28 images), trained with cross-entropy on a fixed batch:
one step is ``zero_grad``, forward, loss, ``backward``, ``step``. The PyTorch copy gets the
mpiflow model's weights, so both sides do the same arithmetic on the same numbers.

Also the memory probe, run as ``python -m mpiflow.bench.engine_models LIB MODEL OPTIMIZER``
in a process of its own: it prints (JSON) how far the resident set peaked during training
above where it stood before the model was built.

Examples:
    >>> step = build_step("mpiflow", "small", "sgd")
    >>> step()
"""

from __future__ import annotations

import gc
import itertools
import json
import sys
from collections.abc import Callable
from typing import Any

import numpy

__all__ = ["CONV_MODELS", "MODELS", "OPTIMIZERS", "build_step", "measure_step_memory",
           "param_count"]

MODELS: dict[str, tuple[tuple[int, ...], int]] = {
    "small": ((64, 128, 64, 10), 16),
    "1m": ((512, 1024, 512), 32),
    "tiny": ((2, 2), 1),
}
"""Model name -> (layer widths, batch rows). ``tiny`` is the memory baseline: what a library
allocates once for any training (its kernels' and autograd's lazy start-up)."""

CONV_MODELS: dict[str, int] = {"lenet": 32}
"""Convolutional model name -> batch rows (images of 1 x 28 x 28, 10 classes)."""

OPTIMIZERS = ("sgd", "adam")


def param_count(model: str) -> int:
    """The parameters of ``model`` (weights and biases).

    Examples:
        >>> param_count("1m")
        1050112
    """
    if model in CONV_MODELS:
        return (32 * 25 + 32) + (64 * 32 * 25 + 64) + (64 * 7 * 7 * 512 + 512) + (512 * 10 + 10)
    widths, _ = MODELS[model]
    return sum(a * b + b for a, b in itertools.pairwise(widths))


def _lenet(nn: Any) -> Any:
    """The guide's LeNet in ``nn`` (``mpiflow.nn`` or ``torch.nn``)."""
    return nn.Sequential(nn.Conv2d(1, 32, 5, padding="same"), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 5, padding="same"), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 7 * 7, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def _mpiflow_parts(widths: tuple[int, ...] | None) -> Any:
    from .. import nn
    from ..nn import Linear, ReLU, Sequential
    from ..tensors.random import manual_seed

    manual_seed(0)
    if widths is None:
        return _lenet(nn)
    mods: list[Any] = []
    for i, (a, b) in enumerate(itertools.pairwise(widths)):
        mods.append(Linear(a, b))
        if i < len(widths) - 2:
            mods.append(ReLU())
    return Sequential(*mods)


def _torch_copy(model: Any, widths: tuple[int, ...] | None) -> Any:
    import torch

    mods: list[Any] = []
    for i, (a, b) in enumerate(itertools.pairwise(widths or ())):
        mods.append(torch.nn.Linear(a, b))
        if widths is not None and i < len(widths) - 2:
            mods.append(torch.nn.ReLU())
    net = _lenet(torch.nn) if widths is None else torch.nn.Sequential(*mods)
    with torch.no_grad():
        for theirs, ours in zip(net.parameters(), model.parameters(), strict=True):
            theirs.copy_(torch.from_numpy(ours.numpy()))
    return net


def build_step(lib: str, model: str, optimizer: str, foreach: bool = False
               ) -> Callable[[], None]:
    """One training step of ``model`` in ``lib`` (``"mpiflow"`` or ``"torch"``).

    Args:
        lib: ``"mpiflow"`` or ``"torch"`` (one thread: ``torch.set_num_threads(1)``).
        model: a key of :data:`MODELS` or :data:`CONV_MODELS`.
        optimizer: ``"sgd"`` (lr 1e-3) or ``"adam"`` (lr 1e-3).
        foreach: mpiflow's flat-buffer optimizer path (PyTorch keeps its CPU default,
            ``foreach=False``).

    Returns:
        A call that runs one step.
    """
    rng = numpy.random.default_rng(0)
    widths: tuple[int, ...] | None
    if model in CONV_MODELS:
        widths, batch = None, CONV_MODELS[model]
        x = rng.standard_normal((batch, 1, 28, 28), dtype=numpy.float32)
        y = rng.integers(0, 10, batch)
    else:
        widths, batch = MODELS[model]
        x = rng.standard_normal((batch, widths[0]), dtype=numpy.float32)
        y = rng.integers(0, widths[-1], batch)
    net = _mpiflow_parts(widths)
    opt: Any
    inputs: Any
    target: Any
    loss_fn: Any
    if lib == "mpiflow":
        from .. import optim
        from ..nn import functional as F
        from ..tensors.creation import tensor

        cls = optim.SGD if optimizer == "sgd" else optim.Adam
        flat: dict[str, Any] = {"foreach": True} if foreach else {}
        opt = cls(net.parameters(), lr=1e-3, **_hyper(optimizer), **flat)
        inputs, target, loss_fn = tensor(x), tensor(y), F.cross_entropy
    elif lib == "torch":
        import torch

        torch.set_num_threads(1)
        net = _torch_copy(net, widths)  # the mpiflow copy is dropped here
        tcls = torch.optim.SGD if optimizer == "sgd" else torch.optim.Adam
        opt = tcls(net.parameters(), lr=1e-3, **_hyper(optimizer))
        inputs, target = torch.from_numpy(x), torch.from_numpy(y)
        loss_fn = torch.nn.functional.cross_entropy
    else:
        raise ValueError(f"unknown library {lib!r}: mpiflow or torch")

    def step() -> None:
        opt.zero_grad()
        loss_fn(net(inputs), target).backward()
        opt.step()

    return step


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def measure_step_memory(lib: str, model: str, optimizer: str, steps: int = 5,
                        warmup: int = 2) -> int:
    """Bytes of memory training takes: the peak resident set over ``steps`` training steps
    (after ``warmup`` steps) above the resident set before the model was built: parameters,
    gradients, optimizer state, activations and temporaries (Linux).

    Run it in a fresh process started with glibc's ``MALLOC_MMAP_THRESHOLD_=65536`` and
    ``MALLOC_TRIM_THRESHOLD_=0``, as :func:`.engine.run_engine` does: large buffers are then
    mapped and unmapped one by one, so the resident set follows the live buffers of either
    library (otherwise freed memory stays resident and hides the next allocations). The
    high-water mark is reset through ``/proc/self/clear_refs`` once the warm-up is done.
    """
    from .. import optim  # noqa: F401  (imports are not part of the figure)
    from ..nn import functional  # noqa: F401

    if lib == "torch":
        import torch  # noqa: F401
    gc.collect()
    start = _status_kb("VmRSS")
    step = build_step(lib, model, optimizer)
    for _ in range(warmup):
        step()
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current resident set
    for _ in range(steps):
        step()
    return (_status_kb("VmHWM") - start) * 1024


def main(argv: list[str]) -> None:
    """``LIB MODEL OPTIMIZER``: print ``{"bytes": ...}`` of :func:`measure_step_memory`."""
    lib, model, optimizer = argv
    print(json.dumps({"bytes": measure_step_memory(lib, model, optimizer)}))


if __name__ == "__main__":
    main(sys.argv[1:])


def _hyper(optimizer: str) -> dict[str, Any]:
    """The optimizer's settings beyond the learning rate, the same on both sides: SGD with
    momentum (issue #13 measures "SGD with momentum"), Adam with PyTorch's defaults."""
    return {"momentum": 0.9} if optimizer == "sgd" else {}
