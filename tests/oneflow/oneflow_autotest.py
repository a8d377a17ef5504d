"""A small stand-in for OneFlow's ``automated_test_util`` global tests: the same placements and
sbp sweeps, and the same comparison of a global computation with PyTorch on the whole value.

OneFlow's ``@autotest`` draws random shapes and values and runs each expression on OneFlow and
on PyTorch side by side; here each test states its shapes, the values come from one seeded
generator (the same on every rank, so the logical value is known), and :func:`compare` runs
one function on mpiflow global tensors and on torch tensors, comparing the outputs and, after
``sum().backward()``, the gradients of every input that requires one.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy
import torch
from oneflow_case import SIZE

import mpiflow as flow

B, P = flow.sbp.broadcast, flow.sbp.partial_sum


def all_placement() -> Iterator[flow.placement]:
    """The 1-D placement of every rank and, at 4 ranks, the 2x2 mesh (OneFlow's sweep)."""
    yield flow.placement("cpu", list(range(SIZE)))
    if SIZE == 4:
        yield flow.placement("cpu", [[0, 1], [2, 3]])


def all_sbp(placement: flow.placement, max_dim: int = 0,
            valid_split_axis: Sequence[int] | None = None, except_partial_sum: bool = False,
            except_split: bool = False) -> Iterator[tuple[Any, ...]]:
    """Every sbp of ``placement``'s mesh: B, P and S(d) for each allowed axis, per mesh axis."""
    axes = list(range(max_dim)) if valid_split_axis is None else list(valid_split_axis)
    choices: list[Any] = [B]
    if not except_partial_sum:
        choices.append(P)
    if not except_split:
        choices += [flow.sbp.split(d) for d in axes]
    yield from itertools.product(choices, repeat=placement.ranks.ndim)


def random_value(shape: Sequence[int], low: float = 0.0, high: float = 1.0,
                 seed: int = 0) -> numpy.ndarray:
    """OneFlow's ``random_tensor`` range [low, high), from a generator every rank shares."""
    rng = numpy.random.default_rng(seed)
    return rng.uniform(low, high, tuple(shape)).astype(numpy.float32)


def compare(fn: Callable[..., Any], inputs: Sequence[tuple[numpy.ndarray, Any, Any, bool]],
            backward: bool = True, rtol: float = 1e-4, atol: float = 1e-5) -> None:
    """Run ``fn(lib, *tensors)`` with lib = mpiflow (global tensors) and torch; compare.

    Args:
        fn: the computation, written once for both libraries.
        inputs: (whole value, placement, sbp, requires_grad) of each input.
        backward: also compare the gradients of ``fn(...).sum()``.
    """
    ours = [flow.tensor(v, placement=p, sbp=s, requires_grad=g) for v, p, s, g in inputs]
    theirs = [torch.tensor(v, requires_grad=g) for v, _, _, g in inputs]
    out, expected = fn(flow, *ours), fn(torch, *theirs)
    where = f"sbp {[str(i[2]) for i in inputs]} on {inputs[0][1]}" if inputs else ""
    numpy.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=rtol, atol=atol,
                                  err_msg=f"output, {where}")
    if not backward:
        return
    out.sum().backward()
    expected.sum().backward()
    for i, (x, t) in enumerate(zip(ours, theirs)):
        if t.grad is not None:
            numpy.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol,
                                          err_msg=f"gradient of input {i}, {where}")
