"""OneFlow's global loss tests (test_global_higher_derivative_loss.py, modules), run on mpiflow:
the losses' outputs and first-order gradients on global inputs, compared with PyTorch.

OneFlow draws one random sbp per input and checks up to second-order gradients; here the input
sbp is swept over every sbp of each placement (the target's: the same or broadcast), each
reduction is run, and the first-order gradients are compared. Second-order gradients of losses
and SmoothL1Loss/KLDivLoss, which mpiflow does not have, are not covered (tests/oneflow/README.md).
"""

from __future__ import annotations

from typing import Any

import numpy
import pytest
from oneflow_autotest import B, all_placement, all_sbp, compare, random_value

pytestmark = pytest.mark.mpi

REDUCTIONS = ["none", "sum", "mean"]


def _targets(placement: Any, x_sbp: Any) -> list[Any]:
    return [x_sbp, (B,) * placement.ranks.ndim]


@pytest.mark.parametrize("placement", list(all_placement()), ids=str)
@pytest.mark.parametrize("loss", ["MSELoss", "L1Loss"])
def test_default_losses(placement: Any, loss: str) -> None:
    x, y = random_value((8, 8), seed=10), random_value((8, 8), seed=11)
    for x_sbp in all_sbp(placement, max_dim=2):
        for y_sbp in _targets(placement, x_sbp):
            for reduction in REDUCTIONS:
                compare(lambda lib, a, b, r=reduction: getattr(lib.nn, loss)(reduction=r)(a, b),
                        [(x, placement, x_sbp, True), (y, placement, y_sbp, True)])


@pytest.mark.parametrize("placement", list(all_placement()), ids=str)
@pytest.mark.parametrize("with_logits", [False, True], ids=["BCELoss", "BCEWithLogitsLoss"])
def test_bce_losses(placement: Any, with_logits: bool) -> None:
    x = random_value((8, 2, 3), 0.05, 0.95, seed=12)
    y = numpy.round(random_value((8, 2, 3), seed=13))
    weight = random_value((8, 2, 3), 0.0, 3.0, seed=14)
    name = "BCEWithLogitsLoss" if with_logits else "BCELoss"
    for x_sbp in all_sbp(placement, max_dim=1):
        for reduction in REDUCTIONS:
            def fn(lib: Any, a: Any, b: Any, w: Any, r: str = reduction) -> Any:
                return getattr(lib.nn, name)(weight=w, reduction=r)(a, b)

            compare(fn, [(x, placement, x_sbp, True), (y, placement, x_sbp, False),
                         (weight, placement, (B,) * placement.ranks.ndim, False)])


@pytest.mark.parametrize("placement", list(all_placement()), ids=str)
@pytest.mark.parametrize("ignore_index", [3, -100])
def test_nll_loss(placement: Any, ignore_index: int) -> None:
    x = random_value((8, 8), -1.0, 1.0, seed=15)
    target = numpy.random.default_rng(16).integers(0, 8, 8)
    weight = random_value((8,), 0.0, 3.0, seed=17)
    for x_sbp in all_sbp(placement, max_dim=2):
        y_sbp = tuple(B if s.is_partial() or (s.is_split() and s.dim > 0) else s
                      for s in x_sbp)  # a class index has one dimension and is never a sum
        for use_weight in (False, True):
            for reduction in REDUCTIONS:
                def fn(lib: Any, a: Any, b: Any, w: Any, r: str = reduction,
                       uw: bool = use_weight) -> Any:
                    return lib.nn.NLLLoss(weight=w if uw else None, reduction=r,
                                          ignore_index=ignore_index)(a, b)

                compare(fn, [(x, placement, x_sbp, True), (target, placement, y_sbp, False),
                             (weight, placement, (B,) * placement.ranks.ndim, False)])


@pytest.mark.parametrize("placement", list(all_placement()), ids=str)
def test_cross_entropy_loss(placement: Any) -> None:
    x = random_value((8, 8), -1.0, 1.0, seed=18)
    target = numpy.random.default_rng(19).integers(0, 8, 8)
    for x_sbp in all_sbp(placement, max_dim=2):
        y_sbp = tuple(B if s.is_partial() or (s.is_split() and s.dim > 0) else s
                      for s in x_sbp)
        for reduction in REDUCTIONS:
            compare(lambda lib, a, b, r=reduction: lib.nn.CrossEntropyLoss(reduction=r)(a, b),
                    [(x, placement, x_sbp, True), (target, placement, y_sbp, False)])
