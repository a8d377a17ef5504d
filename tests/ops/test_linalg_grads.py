"""The linear-algebra gradient rules against torch's autograd on the same full values, on
split inputs (eigvalsh and cholesky give torch's symmetric gradients, which finite
differences of one triangle cannot check: the op sweep leaves them to this file)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy
import pytest
import torch
from numpy.testing import assert_allclose

import mpiflow as flow

SIZE = flow.env.get_world_size()
ALL = flow.placement("cpu", list(range(SIZE)))
S0, B = flow.sbp.split(0), flow.sbp.broadcast
N = SIZE + 3
pytestmark = pytest.mark.mpi


def _spd(seed: int) -> numpy.ndarray:
    a = numpy.random.default_rng(seed).standard_normal((N, N))
    return a @ a.T + numpy.diag(numpy.arange(1.0, N + 1))


def _weights(shape: tuple[int, ...]) -> numpy.ndarray:
    return numpy.random.default_rng(99).standard_normal(shape)


CASES: list[tuple[str, Callable[[Any, Any], Any], Callable[[Any, Any], Any], numpy.ndarray]] = [
    ("eigvalsh", flow.linalg.eigvalsh, torch.linalg.eigvalsh, _spd(1)),
    ("cholesky", flow.linalg.cholesky, torch.linalg.cholesky, _spd(2)),
    ("cholesky upper", lambda a: flow.linalg.cholesky(a, upper=True),
     lambda a: torch.linalg.cholesky(a, upper=True), _spd(3)),
    ("inv", flow.linalg.inv, torch.linalg.inv, _spd(4)),
    ("det", flow.linalg.det, torch.linalg.det, _spd(5) / N),
    ("slogdet", lambda a: flow.linalg.slogdet(a).logabsdet,
     lambda a: torch.linalg.slogdet(a).logabsdet, _spd(6)),
    ("svdvals", flow.linalg.svdvals, torch.linalg.svdvals,
     numpy.random.default_rng(7).standard_normal((3 * SIZE + 4, 3))),
    ("solve", lambda a: flow.linalg.solve(a, flow.ones(N, 2, placement=ALL, sbp=B,
                                                       dtype=flow.float64)),
     lambda a: torch.linalg.solve(a, torch.ones(N, 2, dtype=torch.float64)), _spd(8)),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_gradient_equals_torchs(case: Any) -> None:
    _, ours, theirs, a = case
    x = flow.tensor(a, placement=ALL, sbp=S0).requires_grad_()
    out = ours(x)
    w = _weights(tuple(out.shape))
    (out * flow.tensor(w, placement=ALL, sbp=out.sbp if out.sbp[0] != B else B)).sum().backward()
    ta = torch.from_numpy(a).requires_grad_()
    (theirs(ta) * torch.from_numpy(w)).sum().backward()
    assert x.grad is not None and x.grad.sbp == (S0,)
    assert_allclose(x.grad.numpy(), ta.grad.numpy(), rtol=1e-8, atol=1e-10)
