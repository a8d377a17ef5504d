"""OneFlow's test_eager_boxing_exhaustive.py (modules), run on mpiflow at 4 ranks.

Every pair of sbp (S(0), S(1), B, P; and the high split axes of the "special" cases) between
the same placement lists and 2-D meshes as OneFlow's, on its shapes: the logical value after
the conversion equals the one before (``y.numpy() == x.numpy()``). The input of each rank is
its own random local tensor made global with the first sbp, as OneFlow's ``random_tensor(...)
.oneflow.to_global(...)`` is.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy
import pytest
from oneflow_case import RANK, exactly

import mpiflow as flow

pytestmark = pytest.mark.mpi

S0, S1, B, P = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.broadcast, flow.sbp.partial_sum
MESH = [[0, 1], [2, 3]]


def _check_pairs(shape: tuple[int, ...], in_ranks: Any, out_ranks: Any, sbps: list[Any],
                 nd: bool = False) -> None:
    rng = numpy.random.default_rng(RANK)
    in_placement = flow.placement(type="cpu", ranks=in_ranks)
    out_placement = flow.placement(type="cpu", ranks=out_ranks)
    layouts = list(itertools.product(sbps, sbps)) if nd else sbps
    for first, second in itertools.product(layouts, layouts):
        local = flow.tensor(rng.standard_normal(shape), dtype=flow.float32)
        x = local.to_global(placement=in_placement, sbp=first)
        y = x.to_global(placement=out_placement, sbp=second)
        numpy.testing.assert_allclose(y.numpy(), x.numpy(), 1e-5, 1e-5,
                                      err_msg=f"{first} -> {second}")


@exactly(4)
@pytest.mark.parametrize("shape", [(4, 4), (6, 8), (5, 7)])
@pytest.mark.parametrize("in_list", [[0, 1], [1, 2, 3], [0, 1, 2, 3]])
@pytest.mark.parametrize("out_list", [[0, 1, 3], [0, 1, 2, 3]])
def test_eager_boxing_normal_1d_exhaustive_testing(shape: tuple[int, ...], in_list: list[int],
                                                   out_list: list[int]) -> None:
    _check_pairs(shape, in_list, out_list, [S0, S1, B, P])


@exactly(4)
def test_eager_boxing_symmetric_2d_exhaustive_testing() -> None:
    _check_pairs((8, 8, 16), MESH, MESH, [S0, S1, B, P], nd=True)


@exactly(4)
@pytest.mark.parametrize("in_list", [[0, 1], [1, 2, 3], [0, 1, 2, 3]])
@pytest.mark.parametrize("out_list", [[0, 1, 3], [0, 1, 2, 3]])
def test_eager_boxing_1d_special_split_axis(in_list: list[int], out_list: list[int]) -> None:
    _check_pairs((4, 4, 5, 7), in_list, out_list,
                 [flow.sbp.split(2), flow.sbp.split(3), B, P])


@exactly(4)
def test_eager_boxing_2d_special_split_axis() -> None:
    _check_pairs((4, 8, 4, 8, 4), MESH, MESH, [flow.sbp.split(2), flow.sbp.split(4), B, P],
                 nd=True)
