"""The communication layer itself: ReduceOp, reduction plans, MPICommunicator, Work."""

from __future__ import annotations

import functools

import numpy
import pytest
from helpers import rank_data
from numpy.testing import assert_array_equal

from mpiflow.communication import ReduceOp, Work, check_reduce_dtype, new_communicator, reduce_plan
from mpiflow.communication.mpi import datatypes
from mpiflow.communication.mpi.group import world_comm
from mpiflow.communication.mpi.quirks import Probe

pytestmark = pytest.mark.mpi

RANK, SIZE = world_comm.rank, world_comm.size
ALL_DTYPES = ["?", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "g",
              "c8", "c16"]
_NUMPY_REDUCE = {
    ReduceOp.SUM: numpy.add,
    ReduceOp.PRODUCT: numpy.multiply,
    ReduceOp.MIN: numpy.minimum,
    ReduceOp.MAX: numpy.maximum,
    ReduceOp.BAND: numpy.bitwise_and,
    ReduceOp.BOR: numpy.bitwise_or,
    ReduceOp.BXOR: numpy.bitwise_xor,
}
_BOOL_REDUCE = {
    ReduceOp.SUM: numpy.logical_or,
    ReduceOp.MAX: numpy.logical_or,
    ReduceOp.BOR: numpy.logical_or,
    ReduceOp.PRODUCT: numpy.logical_and,
    ReduceOp.MIN: numpy.logical_and,
    ReduceOp.BAND: numpy.logical_and,
    ReduceOp.BXOR: numpy.logical_xor,
}


def expected_reduction(op: ReduceOp, shape: tuple[int, ...], dtype: str, salt: int = 0
                       ) -> numpy.ndarray:
    """The reduction of every rank's ``rank_data``, computed in the dtype as MPI does."""
    parts = [rank_data(shape, dtype, r, salt) for r in range(SIZE)]
    if op is ReduceOp.AVG:
        total = functools.reduce(lambda a, b: (a + b).astype(a.dtype), parts)
        return (total / SIZE).astype(numpy.dtype(dtype))
    table = _BOOL_REDUCE if numpy.dtype(dtype).kind == "b" else _NUMPY_REDUCE
    return functools.reduce(lambda a, b: table[op](a, b).astype(a.dtype), parts)


def valid_pairs() -> list[tuple[ReduceOp, str]]:
    pairs = []
    for op in ReduceOp:
        for dt in ALL_DTYPES:
            try:
                check_reduce_dtype(op, numpy.dtype(dt))
            except TypeError:
                continue
            pairs.append((op, dt))
    return pairs


# -- ReduceOp ------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", list(ReduceOp))
@pytest.mark.parametrize("dtype", ["?", "i4", "u2", "f2", "f8", "c8"])
def test_identity_is_neutral(op: ReduceOp, dtype: str) -> None:
    try:
        check_reduce_dtype(op, dtype)
    except TypeError:
        pytest.skip("op undefined for dtype")
    x = rank_data((5,), dtype, 1)
    ident = numpy.full(5, op.identity(dtype), dtype=dtype)
    if op is ReduceOp.AVG:
        op = ReduceOp.SUM
    table = _BOOL_REDUCE if numpy.dtype(dtype).kind == "b" else _NUMPY_REDUCE
    assert_array_equal(table[op](x, ident).astype(dtype), x)


@pytest.mark.parametrize(
    ("op", "dtype", "match"),
    [
        (ReduceOp.AVG, "?", "AVG is undefined for bool"),
        (ReduceOp.BAND, "f4", "needs an integer or bool"),
        (ReduceOp.BXOR, "c8", "needs an integer or bool"),
        (ReduceOp.MAX, "c16", "undefined for complex"),
        (ReduceOp.SUM, "U3", "numeric or bool"),
        ("sum", "f4", "must be a mpiflow ReduceOp"),
    ],
)
def test_undefined_pairs_raise_type_error(op: ReduceOp, dtype: str, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        check_reduce_dtype(op, dtype)


def test_reduce_op_is_hashable_by_identity_and_has_a_repr() -> None:
    assert {ReduceOp.SUM: 1}[ReduceOp.SUM] == 1
    assert repr(ReduceOp.BXOR) == "ReduceOp.BXOR"
    assert ReduceOp.AVG.identity("f4") == 0


# -- all_reduce on every (op, dtype) ---------------------------------------------------------
@pytest.mark.parametrize(("op", "dtype"), valid_pairs())
def test_all_reduce_every_op_and_dtype(op: ReduceOp, dtype: str) -> None:
    shape = (3 * SIZE + 1,)
    x = rank_data(shape, dtype, RANK)
    world_comm.all_reduce(x, op)
    assert x.dtype == numpy.dtype(dtype)
    assert_array_equal(x, expected_reduction(op, shape, dtype))


@pytest.mark.parametrize("dtype", ["f2", "i4", "?", "c8"])
@pytest.mark.parametrize("op", [ReduceOp.SUM, ReduceOp.MAX, ReduceOp.PRODUCT, ReduceOp.AVG])
def test_fallback_user_op_matches_native(monkeypatch: pytest.MonkeyPatch, op: ReduceOp,
                                         dtype: str) -> None:
    """Where the MPI library lacks a reduction, the numpy-ufunc MPI op gives the same result."""
    try:
        check_reduce_dtype(op, dtype)
    except TypeError:
        pytest.skip("op undefined for dtype")
    monkeypatch.setattr(datatypes, "_plans", {})
    monkeypatch.setattr(datatypes, "probe", lambda dt, mpi_op, ufunc: Probe("refused"))
    plan = reduce_plan(dtype, op)
    assert plan.datatype is not None
    fresh = new_communicator(world_comm.mpi_comm)  # no cached fast path
    shape = (2, 2 * SIZE + 1)
    x = rank_data(shape, dtype, RANK)
    fresh.all_reduce(x, op)
    assert_array_equal(x, expected_reduction(op, shape, dtype))
    send = numpy.concatenate([rank_data((3,), dtype, RANK, salt=r) for r in range(SIZE)])
    out = numpy.empty(3, dtype=dtype)
    fresh.reduce_scatter(send, out, op)
    assert_array_equal(out, expected_reduction(op, (3,), dtype, salt=RANK))
    counts = [r % 2 + 1 for r in range(SIZE)]
    sendv = numpy.concatenate([rank_data((c,), dtype, RANK, salt=r)
                               for r, c in enumerate(counts)])
    outv = numpy.empty(counts[RANK], dtype=dtype)
    fresh.reduce_scatter_v(sendv, outv, counts, op)
    assert_array_equal(outv, expected_reduction(op, (counts[RANK],), dtype, salt=RANK))
    root = numpy.asfortranarray(rank_data((2, 3), dtype, RANK))
    fresh.reduce(root, op, SIZE - 1)
    if RANK == SIZE - 1:
        assert_array_equal(root, expected_reduction(op, (2, 3), dtype))


def test_float16_sum_is_exact_in_float16() -> None:
    x = numpy.full(7, 0.5 + RANK, dtype=numpy.float16)
    world_comm.all_reduce(x, ReduceOp.SUM)
    assert x.dtype == numpy.float16
    assert_array_equal(x, numpy.float16(sum(0.5 + r for r in range(SIZE))))


@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (1,), (3 * SIZE + 1, 2)])
def test_all_reduce_edge_shapes(shape: tuple[int, ...]) -> None:
    x = rank_data(shape, "f8", RANK)
    world_comm.all_reduce(x, ReduceOp.SUM)
    assert x.shape == shape
    assert_array_equal(x, expected_reduction(ReduceOp.SUM, shape, "f8"))


@pytest.mark.parametrize("op", [ReduceOp.SUM, ReduceOp.AVG, ReduceOp.MAX])
def test_all_reduce_non_contiguous_views_in_place(op: ReduceOp) -> None:
    base = numpy.full((4, 2 * SIZE + 2), -7.0)
    view = base[:, ::2]
    view[...] = rank_data(view.shape, "f8", RANK)
    fortran = numpy.asfortranarray(rank_data((3, 4), "f8", RANK))
    world_comm.all_reduce(view, op)
    world_comm.all_reduce(fortran, op)
    assert_array_equal(view, expected_reduction(op, view.shape, "f8"))
    assert_array_equal(base[:, 1::2], -7.0)
    assert_array_equal(fortran, expected_reduction(op, (3, 4), "f8"))


# -- the other collectives --------------------------------------------------------------------
@pytest.mark.parametrize("root", range(SIZE))
def test_reduce_and_broadcast_every_root(root: int) -> None:
    x = rank_data((5,), "i8", RANK)
    mine = x.copy()
    world_comm.reduce(x, ReduceOp.SUM, root)
    y = rank_data((2, 3), "f4", RANK).T  # non-contiguous on every rank
    world_comm.broadcast(y, root)
    if RANK == root:
        assert_array_equal(x, expected_reduction(ReduceOp.SUM, (5,), "i8"))
    else:
        assert_array_equal(x, mine)
    assert_array_equal(y, rank_data((2, 3), "f4", root).T)


def test_gather_scatter_all_gather_all_to_all() -> None:
    n = 3
    send = rank_data((n,), "i4", RANK)
    every = numpy.stack([rank_data((n,), "i4", r) for r in range(SIZE)])
    gathered = numpy.empty((SIZE, n), "i4")
    world_comm.all_gather(send, gathered)
    root_buf = numpy.empty((SIZE, n), "i4") if RANK == 0 else None
    world_comm.gather(send, root_buf, 0)
    back = numpy.empty(n, "i4")
    world_comm.scatter(every if RANK == 0 else None, back, 0)
    blocks = numpy.arange(SIZE * 2, dtype="i4") + 100 * RANK
    swapped = numpy.empty_like(blocks)
    world_comm.all_to_all(blocks, swapped)
    assert_array_equal(gathered, every)
    if RANK == 0:
        assert_array_equal(root_buf, every)
    assert_array_equal(back, every[RANK])
    expected = numpy.concatenate([numpy.arange(2 * RANK, 2 * RANK + 2) + 100 * r
                                  for r in range(SIZE)])
    assert_array_equal(swapped, expected)


def test_variable_count_collectives_with_empty_parts() -> None:
    counts = [(r * 2) % 3 for r in range(SIZE)]  # includes zero-length contributions
    send = numpy.full(counts[RANK], RANK, dtype="f8")
    recv = numpy.empty(sum(counts), dtype="f8")
    world_comm.all_gather_v(send, recv, counts)
    assert_array_equal(recv, numpy.concatenate([numpy.full(c, r, "f8")
                                                for r, c in enumerate(counts)]))

    total = numpy.arange(sum(counts), dtype="f8")
    part = numpy.empty(counts[RANK], dtype="f8")
    world_comm.reduce_scatter_v(total, part, counts, ReduceOp.SUM)
    start = sum(counts[:RANK])
    assert_array_equal(part, total[start:start + counts[RANK]] * SIZE)

    # rank r sends (r + d) % 2 + 1 elements to rank d
    scounts = [(RANK + d) % 2 + 1 for d in range(SIZE)]
    rcounts = [(s + RANK) % 2 + 1 for s in range(SIZE)]
    out = numpy.empty(sum(rcounts), dtype="i8")
    sendv = numpy.concatenate([numpy.full(c, 10 * RANK + d) for d, c in enumerate(scounts)])
    world_comm.all_to_all_v(sendv.astype("i8"), scounts, out, rcounts)
    assert_array_equal(out, numpy.concatenate([numpy.full(c, 10 * s + RANK)
                                               for s, c in enumerate(rcounts)]))


@pytest.mark.mpi(min_size=2)
def test_point_to_point_ring_blocking_and_async() -> None:
    right, left = (RANK + 1) % SIZE, (RANK - 1) % SIZE
    out = numpy.empty((2, 3))[:, ::2]  # received in place through a view
    recv = world_comm.irecv(out, left, tag=5)
    world_comm.send(numpy.full((2, 2), float(RANK)), right, tag=5)
    recv.wait()
    assert_array_equal(out, float(left))
    buf = numpy.empty(1)
    if RANK == 0:
        source = world_comm.recv(buf, None, tag=6)
        assert source == SIZE - 1
    elif RANK == SIZE - 1:
        world_comm.send(numpy.ones(1), 0, tag=6)


# -- Work -----------------------------------------------------------------------------------
def test_async_collectives_and_work_handles() -> None:
    a = rank_data((3 * SIZE + 1,), "f4", RANK)
    b = numpy.empty((5, 4))[:, 1::2]
    b[...] = rank_data(b.shape, "f8", RANK)
    w1 = world_comm.all_reduce(a, ReduceOp.AVG, async_op=True)
    w2 = world_comm.all_reduce(b, ReduceOp.MIN, async_op=True)
    w3 = world_comm.barrier(async_op=True)
    assert isinstance(w1, Work) and isinstance(w2, Work) and isinstance(w3, Work)
    seen = []
    w2.then(lambda: seen.append("done"))
    assert w1.wait() is True
    assert w2.wait(timeout=60) is True
    while not w3.is_completed():
        pass
    assert seen == ["done"]
    assert w1.is_completed()
    assert_array_equal(a, expected_reduction(ReduceOp.AVG, a.shape, "f4"))
    assert_array_equal(b, expected_reduction(ReduceOp.MIN, b.shape, "f8"))
    assert "completed" in repr(w1)


def test_completed_work_runs_then_at_once() -> None:
    seen = []
    Work().then(lambda: seen.append(1))
    assert seen == [1]


# -- groups ------------------------------------------------------------------------------------
def test_split_into_a_subgroup_in_the_given_order() -> None:
    members = list(range(SIZE - 1, -1, -2))  # e.g. [3, 1] at 4 ranks
    sub = world_comm.split(members)
    if RANK not in members:
        assert sub is None
        return
    assert sub is not None
    assert sub.size == len(members) and sub.rank == members.index(RANK)
    x = numpy.array([RANK], dtype="i8")
    sub.all_reduce(x)
    assert int(x[0]) == sum(members)


# -- bad input raises before sending ---------------------------------------------------------
def test_bad_arguments_raise_before_any_communication() -> None:
    x = numpy.zeros(4)
    with pytest.raises(ValueError, match="not a rank"):
        world_comm.broadcast(x, SIZE)
    with pytest.raises(ValueError, match="not a rank"):
        world_comm.reduce(x, ReduceOp.SUM, -1)
    with pytest.raises(TypeError, match="int rank"):
        world_comm.send(x, "1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="all_gather needs"):
        world_comm.all_gather(x, numpy.zeros(4 * SIZE + 1))
    with pytest.raises(TypeError, match="dtypes differ"):
        world_comm.all_gather(x, numpy.zeros(4 * SIZE, "f4"))
    with pytest.raises(ValueError, match="counts"):
        world_comm.all_gather_v(x, numpy.zeros(4), [4] * (SIZE + 1))
    with pytest.raises(ValueError, match="reduce_scatter needs"):
        world_comm.reduce_scatter(x, numpy.zeros(3))
    with pytest.raises(ValueError, match="all_to_all needs"):
        world_comm.all_to_all(numpy.zeros(4 * SIZE), numpy.zeros(4 * SIZE + 1))
    with pytest.raises(TypeError, match="AVG"):
        world_comm.all_reduce(numpy.zeros(3, "?"), ReduceOp.AVG)
    with pytest.raises(ValueError, match="distinct"):
        world_comm.split([0, 0])
