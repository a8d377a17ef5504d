"""Matrix products of mpiflow.ops.linalg, local and global, checked against numpy.matmul.

Every rank runs every test: global operands come from the same full values on every rank, and
``numpy()`` (a collective) of each result must equal numpy's answer in value and shape.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import mpiflow as flow
from mpiflow.communication import count_collectives

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
ALL = flow.placement("cpu", list(range(SIZE)))
S0, S1, S2 = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.split(2)
B, P = flow.sbp.broadcast, flow.sbp.partial_sum
ODD = 3 * SIZE + 1  # no rank count divides it evenly


def full(shape: tuple[int, ...], seed: int = 0, dtype: Any = numpy.float64) -> numpy.ndarray:
    """The same random value on every rank (small integers: products are exact)."""
    return numpy.random.default_rng(seed).integers(-4, 5, size=shape).astype(dtype)


def glob(value: numpy.ndarray, sbp: Any, placement: flow.placement = ALL) -> flow.Tensor:
    return flow.tensor(value, placement=placement, sbp=sbp)


def check(got: flow.Tensor, want: numpy.ndarray) -> None:
    value = got.numpy()
    assert value.shape == want.shape and value.dtype == want.dtype, (value.shape, want.shape)
    assert_array_equal(value, want)


# (shape of a, shape of b): 1-D, 2-D, batched and broadcast batches, uneven extents.
SHAPES = [
    ((ODD,), (ODD,)),
    ((ODD,), (ODD, 3)),
    ((ODD, 2), (2,)),
    ((ODD, 4), (4, ODD)),
    ((3, ODD), (ODD, 2)),
    ((ODD, 2, 3), (ODD, 3, 4)),
    ((ODD, 2, 3), (3, 4)),
    ((2, 3), (ODD, 3, 4)),
    ((ODD, 1, 2, 3), (5, 3, 2)),
    ((1, ODD, 3), (ODD, 3, 2)),
    ((4,), (ODD, 4, 2)),
    ((ODD, 2, 4), (4,)),
]


def sbps_for(shape: tuple[int, ...]) -> list[Any]:
    return [B, P, *[flow.sbp.split(d) for d in range(len(shape))]]


def shape_id(pair: tuple[tuple[int, ...], tuple[int, ...]]) -> str:
    return "@".join("x".join(map(str, s)) for s in pair)


@pytest.mark.parametrize("shapes", SHAPES, ids=shape_id)
def test_local_matches_numpy(shapes: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    a, b = full(shapes[0], 1), full(shapes[1], 2)
    want = numpy.matmul(a, b)
    check(flow.matmul(flow.tensor(a), flow.tensor(b)), want)
    check(flow.tensor(a) @ flow.tensor(b), want)
    check(flow.tensor(a).matmul(flow.tensor(b)), want)


@pytest.mark.mpi
@pytest.mark.parametrize("shapes", SHAPES, ids=shape_id)
def test_global_matches_numpy_for_every_pair_of_layouts(
        shapes: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    a, b = full(shapes[0], 3), full(shapes[1], 4)
    want = numpy.matmul(a, b)
    for sa, sb in itertools.product(sbps_for(shapes[0]), sbps_for(shapes[1])):
        check(glob(a, sa) @ glob(b, sb), want)


# -- layouts -------------------------------------------------------------------------------
LAYOUTS_2D = [(S0, B, S0), (B, S1, S1), (S1, S0, P), (P, B, P), (B, P, P), (B, B, B)]


@pytest.mark.mpi
@pytest.mark.parametrize("sa,sb,out", LAYOUTS_2D, ids=lambda s: str(s))
def test_2d_signatures_need_no_communication(sa: Any, sb: Any, out: Any) -> None:
    a, b = full((ODD, 5), 5), full((5, ODD), 6)
    x, y = glob(a, sa), glob(b, sb)
    with count_collectives() as calls:
        z = x @ y
    assert z.sbp == (out,)
    assert sum(calls.values()) == 0
    check(z, a @ b)


@pytest.mark.mpi
def test_batched_signatures() -> None:
    a, b = full((ODD, 2, 3), 7), full((ODD, 3, 4), 8)
    with count_collectives() as calls:
        assert (glob(a, S0) @ glob(b, S0)).sbp == (S0,)
        assert (glob(a, S0) @ glob(b[0], B)).sbp == (S0,)  # b broadcast over the batch
        assert (glob(a, S1) @ glob(b, B)).sbp == (S1,)
        assert (glob(a, B) @ glob(b, S2)).sbp == (S2,)
        assert (glob(a, S2) @ glob(b, S1)).sbp == (P,)
        assert (glob(a[0], B) @ glob(b, S0)).sbp == (S0,)  # 2-D a, batch from b
    assert sum(calls.values()) == 0
    broadcast_batch = full((1, 2, 3), 9)
    z = glob(broadcast_batch, B) @ glob(b, S0)
    assert z.sbp == (S0,)
    check(z, numpy.matmul(broadcast_batch, b))


@pytest.mark.mpi
def test_vector_signatures() -> None:
    v, m = full((ODD,), 10), full((ODD, 3), 11)
    assert flow.dot(glob(v, S0), glob(v, S0)).sbp == (P,)
    assert (glob(v, S0) @ glob(m, S0)).sbp == (P,)
    assert (glob(v, B) @ glob(m, S1)).sbp == (S0,)
    assert flow.mv(glob(m.T.copy(), S0), glob(v, B)).sbp == (S0,)


@pytest.mark.mpi
def test_mismatched_layouts_are_redistributed() -> None:
    a, b = full((ODD, 4), 12), full((4, 3), 13)
    for sa, sb in ((S0, S0), (S0, S1), (B, S0), (S1, B), (P, P), (P, S1)):
        check(glob(a, sa) @ glob(b, sb), a @ b)


@pytest.mark.mpi(min_size=4)
def test_2d_mesh() -> None:
    mesh = flow.placement("cpu", [[0, 1], [2, 3]])
    a, b = full((7, 5), 14), full((5, 6), 15)
    z = glob(a, (B, S0), mesh) @ glob(b, (S1, B), mesh)
    assert z.sbp == (S1, S0)  # per mesh axis: B x S1 -> S1, S0 x B -> S0
    check(z, a @ b)
    for sa, sb in (((S0, S1), (S0, B)), ((S1, S1), (S0, S0)), ((P, B), (B, S1)),
                   ((S0, S0), (B, B))):
        check(glob(a, sa, mesh) @ glob(b, sb, mesh), a @ b)
    batched = full((5, 2, 5), 16)
    check(glob(batched, (S0, S2), mesh) @ glob(b, (B, S0), mesh), numpy.matmul(batched, b))


@pytest.mark.mpi
def test_empty_shards() -> None:
    a, b = full((2, 3), 17), full((3, 2), 18)  # fewer rows than ranks at 3 and 4 ranks
    for sa, sb in ((S0, B), (S1, S0), (B, S1), (S0, S0)):
        check(glob(a, sa) @ glob(b, sb), a @ b)
    check(glob(full((0, 3)), S0) @ glob(b, B), numpy.zeros((0, 2)))


# -- the named products --------------------------------------------------------------------
@pytest.mark.mpi
def test_mm_bmm_dot_mv_outer() -> None:
    m, n = full((3, 4), 19), full((4, 2), 20)
    u, v = full((4,), 21), full((3,), 22)
    bm, bn = full((2, 3, 4), 23), full((2, 4, 5), 24)
    local = flow.tensor
    check(flow.mm(local(m), local(n)), m @ n)
    check(local(m).mm(local(n)), m @ n)
    check(flow.bmm(local(bm), local(bn)), bm @ bn)
    check(local(bm).bmm(local(bn)), bm @ bn)
    check(flow.dot(local(u), local(u)), numpy.dot(u, u))
    check(local(u).dot(local(u)), numpy.dot(u, u))
    check(flow.mv(local(m), local(u)), m @ u)
    check(local(m).mv(local(u)), m @ u)
    check(flow.outer(local(u), local(v)), numpy.outer(u, v))
    check(local(u).outer(local(v)), numpy.outer(u, v))
    for sa, sb in ((S0, B), (B, S0), (P, B), (B, P), (S0, S0)):
        check(flow.outer(glob(u, sa), glob(v, sb)), numpy.outer(u, v))
    assert flow.outer(glob(u, S0), glob(v, B)).sbp == (S0,)
    assert flow.outer(glob(u, B), glob(v, S0)).sbp == (S1,)


def test_errors_name_the_shapes() -> None:
    m = flow.tensor(full((3, 4)))
    with pytest.raises(ValueError, match=r"\(3, 4\) and \(3, 4\)"):
        m @ m
    with pytest.raises(ValueError, match="at least 1 dimension"):
        m @ flow.tensor(2.0)
    with pytest.raises(ValueError, match="batch"):
        flow.tensor(full((2, 3, 4))) @ flow.tensor(full((3, 4, 2)))
    with pytest.raises(ValueError, match="2-D and 2-D"):
        flow.mm(m, flow.tensor(full((4,))))
    with pytest.raises(ValueError, match="batch sizes differ"):
        flow.bmm(flow.tensor(full((2, 3, 4))), flow.tensor(full((1, 4, 2))))
    with pytest.raises(ValueError, match="1-D and 1-D"):
        flow.dot(m, m)
    with pytest.raises(ValueError, match="1-D"):
        flow.outer(m, m)


@pytest.mark.mpi
def test_dtypes_and_numpy_operands() -> None:
    ints = full((3, 4), 25, numpy.int64)
    floats = full((4, 2), 26, numpy.float32)
    z = flow.tensor(ints) @ flow.tensor(ints.T.copy())
    assert z.dtype == flow.int64
    check(z, ints @ ints.T)
    f32 = flow.tensor(floats.T.copy()) @ flow.tensor(floats)
    assert f32.dtype == flow.float32
    assert_allclose(f32.numpy(), floats.T @ floats)
    check(ints @ flow.tensor(ints.T.copy()), ints @ ints.T)  # __rmatmul__ of a numpy array
    check(flow.tensor(ints) @ ints.T.copy(), ints @ ints.T)
    with pytest.raises(TypeError, match="global"):
        glob(ints, B) @ ints.T.copy()


# -- norms (composites of elementwise ops and reductions) ----------------------------------
@pytest.mark.mpi
def test_norms() -> None:
    value = full((ODD, 3), 27) / 2
    for t in (flow.tensor(value), glob(value, S0), glob(value, S1), glob(value, P)):
        assert_allclose(t.norm().numpy(), numpy.linalg.norm(value))
        assert_allclose(flow.norm(t, 2, dim=1).numpy(), numpy.linalg.norm(value, axis=1))
        assert_allclose(t.norm(-math.inf, 0).numpy(), numpy.abs(value).min(0))
        assert_allclose(t.norm(0, (0, 1)).numpy(), numpy.count_nonzero(value))
        assert_allclose(t.norm(0.5, 0, keepdim=True).numpy(),
                        (numpy.abs(value) ** 0.5).sum(0, keepdims=True) ** 2)
    assert glob(value, S0).norm(1, 0).sbp == (P,)  # a sum over the split dim
    assert flow.tensor([3, 4]).norm(dtype=flow.float64).item() == 5.0
    with pytest.raises(TypeError, match="floating point"):
        flow.tensor([3, 4]).norm()
    with pytest.raises(ValueError, match="unsupported"):
        flow.tensor(value).norm("nuc")
