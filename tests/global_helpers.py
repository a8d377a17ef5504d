"""Shared by the tests of global-tensor ops: the world placement, sbp names, values and
:func:`make`, which lays out a value as a global tensor (partial ones as random summing parts).
"""

from __future__ import annotations

from typing import Any

import numpy

import mpiflow as flow

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
ALL = flow.placement("cpu", list(range(SIZE)))
S0, S1, S2, B, P = (flow.sbp.split(0), flow.sbp.split(1), flow.sbp.split(2),
                    flow.sbp.broadcast, flow.sbp.partial_sum)
N = 3 * SIZE + 1  # uneven everywhere


def full(shape: tuple[int, ...], seed: int = 0) -> numpy.ndarray:
    """Small integers as float64, the same on every rank."""
    return numpy.random.default_rng(seed).integers(-9, 9, size=shape).astype(numpy.float64)


def make(value: numpy.ndarray, sbp: Any, placement: flow.placement = ALL) -> flow.Tensor:
    """A global tensor of ``value``; a partial one gets different (summing) parts per rank."""
    if sbp != P:
        return flow.tensor(value, placement=placement, sbp=sbp)
    rng = numpy.random.default_rng(7)
    parts = [rng.integers(-5, 5, size=value.shape).astype(value.dtype) for _ in range(SIZE)]
    parts[0] = value - sum(parts[1:], numpy.zeros_like(value))
    return flow.tensor(parts[RANK]).to_global(placement, P)
