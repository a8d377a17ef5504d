"""OneFlow's global-op tests with their PyTorch comparisons, run on mpiflow: test_global_matmul
and test_global_math_ops (modules), swept over OneFlow's placements and sbp.

Each case makes global inputs of a known whole value with the given sbp (``flow.tensor(value,
placement=, sbp=)``; a partial input holds the value on its first rank), runs the op, and
compares the whole output and the gradients with PyTorch on the whole value. OneFlow's random
dimensions (``random(1, 3) * 8``) are fixed to 8 and 16.
"""

from __future__ import annotations

from typing import Any

import numpy
import pytest
from oneflow_autotest import all_placement, all_sbp, compare, random_value
from oneflow_case import RANK, exactly

import mpiflow as flow
from mpiflow.communication import count_collectives

pytestmark = pytest.mark.mpi

B, S0, S1 = flow.sbp.broadcast, flow.sbp.split(0), flow.sbp.split(1)


@pytest.mark.parametrize("placement", list(all_placement()), ids=str)
def test_matmul(placement: Any) -> None:
    x, y = random_value((8, 16), seed=1), random_value((16, 8), seed=2)
    for x_sbp in all_sbp(placement, max_dim=2):
        for y_sbp in all_sbp(placement, max_dim=2):
            compare(lambda lib, a, b: lib.matmul(a, b),
                    [(x, placement, x_sbp, True), (y, placement, y_sbp, True)])


@pytest.mark.parametrize("placement", list(all_placement()), ids=str)
def test_broadcast_matmul(placement: Any) -> None:
    x, y = random_value((8, 8, 16), seed=3), random_value((16, 8), seed=4)
    y_sbps = list(all_sbp(placement, valid_split_axis=[0, 1]))
    if placement.ranks.ndim == 2:
        # OneFlow sweeps all 25 x 16 pairs on the mesh; every x sbp against the y sbp of each
        # kind per mesh axis keeps this suite fast (the 1-D sweep is complete)
        y_sbps = [s for s in y_sbps if s[0] == s[1] or (s[0], s[1]) == (B, S1)]
    for x_sbp in all_sbp(placement, valid_split_axis=[0, 1, 2]):
        for y_sbp in y_sbps:
            compare(lambda lib, a, b: a.matmul(b),
                    [(x, placement, x_sbp, True), (y, placement, y_sbp, True)])


UNARY = {
    "sin": (lambda lib, x: lib.sin(x), 0.0, 1.0),
    "cos": (lambda lib, x: lib.cos(x), 0.0, 1.0),
    "log": (lambda lib, x: lib.log(x), 0.1, 1.0),
    "sqrt": (lambda lib, x: lib.sqrt(x), 0.1, 1.0),
    "exp": (lambda lib, x: lib.exp(x), 0.0, 1.0),
    "rsqrt": (lambda lib, x: lib.rsqrt(x), 0.1, 1.0),
    "square": (lambda lib, x: lib.square(x), 0.0, 1.0),
    "pow_with_scalar": (lambda lib, x: lib.pow(x, 0.7), 0.1, 1.0),
}


@pytest.mark.parametrize("placement", list(all_placement()), ids=str)
@pytest.mark.parametrize("name", list(UNARY))
def test_math_ops(placement: Any, name: str) -> None:
    fn, low, high = UNARY[name]
    x = random_value((8, 16), low, high, seed=5)
    for sbp in all_sbp(placement, max_dim=2):
        compare(fn, [(x, placement, sbp, True)])


@pytest.mark.parametrize("placement", list(all_placement()), ids=str)
def test_floordiv_and_atan2(placement: Any) -> None:
    x = random_value((8, 16), 0.0, 10.0, seed=6)
    y = random_value((8, 16), 1.0, 10.0, seed=7)
    for sbp in all_sbp(placement, max_dim=2):
        compare(lambda lib, a: lib.floor_divide(a, 0.7), [(x, placement, sbp, False)],
                backward=False)
        compare(lambda lib, a, b: lib.floor_divide(a, b),
                [(x, placement, sbp, False), (y, placement, sbp, False)], backward=False)
        compare(lambda lib, a, b: lib.atan2(a, b),
                [(x - 5, placement, sbp, True), (y - 5, placement, sbp, True)])


@exactly(4)
def test_view_of_a_nested_split_moves_no_data() -> None:
    """OneFlow lays a (4, 4) tensor of (S(0), S(0)) viewed as (2, 8) out as (S(0), S(1)):
    every rank keeps its row, no communication; the gradient comes back the same way."""
    mesh = flow.placement("cpu", [[0, 1], [2, 3]])
    value = numpy.arange(16.0, dtype=numpy.float32).reshape(4, 4)
    x = flow.tensor(value, placement=mesh, sbp=[S0, S0], requires_grad=True)
    with count_collectives() as counts:
        y = x.view(2, 8)
    assert sum(counts.values()) == 0, counts
    assert y.sbp == (S0, S1)
    numpy.testing.assert_array_equal(y.to_local().numpy(), value[RANK:RANK + 1])
    numpy.testing.assert_array_equal(y.numpy(), value.reshape(2, 8))
    (y * y).sum().backward()
    numpy.testing.assert_allclose(x.grad.numpy(), 2 * value)


@exactly(4)
@pytest.mark.parametrize("shape, size", [((4, 4), (2, 8)), ((8, 3), (4, 6)), ((4, 6), (24,)),
                                         ((5, 4), (2, 10)), ((4, 2, 3), (8, 3))])
def test_reshape_on_the_mesh_matches_torch(shape: tuple[int, ...], size: tuple[int, ...]
                                            ) -> None:
    mesh = flow.placement("cpu", [[0, 1], [2, 3]])
    value = random_value(shape, seed=8)
    for sbp in all_sbp(mesh, max_dim=len(shape)):
        compare(lambda lib, a: a.reshape(*size) * 2, [(value, mesh, sbp, True)])
