"""The FFT ops' rules, without MPI: shapes, dtypes, layout signatures and the moves chosen."""

from __future__ import annotations

import numpy

from mpiflow.layouts.sbp import Split, broadcast, partial_sum
from mpiflow.ops.spectral import C2C, C2R, R2C, complex_of, plan_moves, real_of, swap


def test_shapes_and_dtypes_follow_numpy_and_torch() -> None:
    attrs = {"dims": (0, 1), "sizes": (4, 10), "norm": "backward", "source": (5, 7)}
    assert C2C.shape((5, 7), **attrs) == (4, 10)
    assert R2C.shape((5, 7), **attrs) == (4, 6)
    assert C2R.shape((5, 7), **attrs) == (4, 10)
    assert complex_of(numpy.dtype("float32")) == numpy.complex64
    assert complex_of(numpy.dtype("complex128")) == numpy.complex128
    assert real_of(numpy.dtype("complex64")) == numpy.float32
    assert C2C.dtype is not None and C2C.dtype(numpy.dtype("float64"), real=True) == numpy.float64
    assert [swap(n) for n in ("backward", "ortho", "forward")] == ["forward", "ortho",
                                                                   "backward"]


def test_layouts_keep_other_splits_and_partial_sums() -> None:
    sigs = C2C.layouts((5, 7, 3), dims=(1,))
    assert ((Split(0),), Split(0)) in sigs and ((Split(2),), Split(2)) in sigs
    assert ((partial_sum,), partial_sum) in sigs
    assert all(s[0] != (Split(1),) for s in sigs)
    assert C2C.collective is not None
    assert C2C.collective((5, 7), moves=((0, 1),)) == [((Split(0),), Split(1))]


def test_moves_end_on_a_transformed_dim_or_a_batch_dim() -> None:
    assert plan_moves((8, 6), (Split(0),), (2,), "c2c", (0, 1), (8, 6)) == ((0, 1),)
    assert plan_moves((8, 6), (Split(1),), (2,), "c2c", (1,), (6,)) == ((1, 0),)
    assert plan_moves((16,), (Split(0),), (4,), "c2c", (0,), (16,)) == ((0, 0),)
    assert plan_moves((8, 6), (broadcast,), (2,), "c2c", (0, 1), (8, 6)) == ()
    # a pencil: each mesh axis moves once
    assert plan_moves((8, 6, 5), (Split(0), Split(1)), (2, 2), "c2c", (0, 1, 2),
                      (8, 6, 5)) == ((0, 1), (1, 2))
    # one rank: planned as on more, so that the layout does not depend on the rank count
    assert plan_moves((8, 6), (Split(0),), (1,), "r2c", (0, 1), (8, 6)) == ((0, 1),)
