"""Values of every collective of ``mpiflow.distributed``: every dtype, every ReduceOp, every
src/dst, and the awkward shapes (0-d, empty, odd sizes). Expected values come from numpy.

Layouts and async handles: test_distributed_async.py. Groups: test_distributed_groups.py.
Point-to-point: test_distributed_p2p.py. Errors: test_distributed_errors.py.
"""

from __future__ import annotations

from fractions import Fraction

import numpy
import pytest
from collective_helpers import (
    DTYPES,
    ODD,
    RANK,
    SHAPES,
    VALID_PAIRS,
    WORLD,
    all_data,
    assert_same,
    ids,
    pair_id,
    reduce_expected,
)
from helpers import rank_data

import mpiflow.distributed as dist
from mpiflow.distributed import ReduceOp

pytestmark = pytest.mark.mpi

# -- reductions: every (dtype, op) pair PyTorch defines --------------------------------------


@pytest.mark.parametrize("pair", VALID_PAIRS, ids=pair_id)
def test_all_reduce(pair):
    dtype, op = pair
    x = rank_data((ODD,), dtype, RANK)
    ret = dist.all_reduce(x, op=op)
    assert ret is None
    assert_same(x, reduce_expected(op, all_data((ODD,), dtype)))


@pytest.mark.parametrize("pair", VALID_PAIRS, ids=pair_id)
def test_reduce_every_dst(pair):
    dtype, op = pair
    expected = reduce_expected(op, all_data((ODD,), dtype))
    results = []
    for dst in range(WORLD):
        x = rank_data((ODD,), dtype, RANK)
        dist.reduce(x, dst=dst, op=op)
        results.append(x)
    for dst, x in enumerate(results):
        # the destination holds the result; every other rank keeps its own data
        assert_same(x, expected if dst == RANK else rank_data((ODD,), dtype, RANK))


@pytest.mark.parametrize("pair", VALID_PAIRS, ids=pair_id)
def test_reduce_scatter_tensor(pair):
    dtype, op = pair
    n = 3
    inp = rank_data((WORLD * n, 2), dtype, RANK)
    out = numpy.zeros((n, 2), dtype=dtype)
    dist.reduce_scatter_tensor(out, inp, op=op)
    full = reduce_expected(op, all_data((WORLD * n, 2), dtype))
    assert_same(out, full[RANK * n:(RANK + 1) * n])


@pytest.mark.parametrize("pair", VALID_PAIRS, ids=pair_id)
def test_reduce_scatter_list(pair):
    dtype, op = pair
    inputs = [rank_data((ODD,), dtype, RANK, salt=i) for i in range(WORLD)]
    out = numpy.zeros(ODD, dtype=dtype)
    dist.reduce_scatter(out, inputs, op=op)
    assert_same(out, reduce_expected(op, all_data((ODD,), dtype, salt=RANK)))


def _avg_row(rank: int, dtype: str) -> list[int]:
    """Rank ``rank``'s input: sums -1, -n*n, +1, the type's minimum and n*n+1 over n ranks
    (negative, exact and inexact quotients, and a value whose negation does not fit)."""
    row = [0, -(2 * rank + 1), 0, 0, 0]  # 1 + 3 + ... + (2n-1) = n*n
    if rank == 0:
        row = [-1, -1, 1, int(numpy.iinfo(dtype).min), WORLD * WORLD + 1]
    return [abs(v) for v in row] if numpy.dtype(dtype).kind == "u" else row


@pytest.mark.parametrize("dtype", ["int8", "int64", "uint8"])
def test_integer_avg_truncates_toward_zero_as_nccl(dtype):
    sums = [sum(col) for col in zip(*[_avg_row(r, dtype) for r in range(WORLD)])]
    expected = numpy.array([int(Fraction(s, WORLD)) for s in sums], dtype=dtype)
    x = numpy.array(_avg_row(RANK, dtype), dtype=dtype)
    dist.all_reduce(x, op=ReduceOp.AVG)
    assert_same(x, expected)
    y = numpy.array(_avg_row(RANK, dtype), dtype=dtype)
    dist.reduce(y, dst=WORLD - 1, op=ReduceOp.AVG)
    assert_same(y, expected if RANK == WORLD - 1 else numpy.array(_avg_row(RANK, dtype), dtype))


def test_reduce_op_alias():
    assert dist.reduce_op is dist.ReduceOp
    assert {op.name for op in ReduceOp} == {"SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND",
                                            "BOR", "BXOR"}
    x = numpy.full(3, RANK + 1.0)
    dist.all_reduce(x, op=dist.reduce_op.MAX)
    assert_same(x, numpy.full(3, float(WORLD)))


def test_all_reduce_default_op_is_sum():
    x = numpy.full(4, RANK + 1, dtype=numpy.int64)
    dist.all_reduce(x)
    assert_same(x, numpy.full(4, WORLD * (WORLD + 1) // 2, dtype=numpy.int64))


@pytest.mark.parametrize("op", [ReduceOp.SUM, ReduceOp.AVG, ReduceOp.PRODUCT, ReduceOp.MIN,
                                ReduceOp.MAX], ids=ids([ReduceOp.SUM, ReduceOp.AVG,
                                                        ReduceOp.PRODUCT, ReduceOp.MIN,
                                                        ReduceOp.MAX]))
def test_float16_matches_numpy(op):
    # small exact values: the float16 result must be numpy's float16 result, bit for bit
    data = [numpy.array([0.5, 1.5, 2.0, -3.0, 0.25, 7.0], dtype=numpy.float16) * (r % 3 + 1)
            for r in range(WORLD)]
    x = data[RANK].copy()
    dist.all_reduce(x, op=op)
    assert_same(x, reduce_expected(op, data))


@pytest.mark.parametrize("op", [ReduceOp.SUM, ReduceOp.MAX, ReduceOp.BOR, ReduceOp.PRODUCT,
                                ReduceOp.MIN, ReduceOp.BAND, ReduceOp.BXOR],
                         ids=["SUM", "MAX", "BOR", "PRODUCT", "MIN", "BAND", "BXOR"])
def test_bool_semantics(op):
    # column k: rank r holds True iff bit r of k is set, so every any/all/xor case appears
    cols = numpy.arange(2 ** min(WORLD, 4))
    data = [((cols >> r) & 1).astype(bool) for r in range(WORLD)]
    x = data[RANK].copy()
    dist.all_reduce(x, op=op)
    stack = numpy.stack(data)
    if op in (ReduceOp.SUM, ReduceOp.MAX, ReduceOp.BOR):
        expected = stack.any(axis=0)
    elif op is ReduceOp.BXOR:
        expected = stack.sum(axis=0) % 2 == 1
    else:
        expected = stack.all(axis=0)
    assert_same(x, expected)


def test_all_reduce_avg_float():
    x = numpy.full(ODD, float(RANK), dtype=numpy.float64)
    dist.all_reduce(x, op=ReduceOp.AVG)
    numpy.testing.assert_allclose(x, numpy.full(ODD, (WORLD - 1) / 2))


@pytest.mark.parametrize("shape", SHAPES, ids=ids(SHAPES))
@pytest.mark.parametrize("op", [ReduceOp.SUM, ReduceOp.AVG, ReduceOp.MAX], ids=["SUM", "AVG",
                                                                                 "MAX"])
def test_all_reduce_shapes(shape, op):
    x = rank_data(shape, numpy.float32, RANK)
    dist.all_reduce(x, op=op)
    assert_same(x, reduce_expected(op, all_data(shape, numpy.float32)))


@pytest.mark.parametrize("shape", SHAPES, ids=ids(SHAPES))
def test_reduce_shapes(shape):
    x = rank_data(shape, numpy.int32, RANK)
    dist.reduce(x, dst=WORLD - 1, op=ReduceOp.PRODUCT)
    expected = (reduce_expected(ReduceOp.PRODUCT, all_data(shape, numpy.int32))
                if RANK == WORLD - 1 else rank_data(shape, numpy.int32, RANK))
    assert_same(x, expected)


# -- broadcast --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_broadcast_every_src(dtype):
    results = []
    for src in range(WORLD):
        x = rank_data((ODD,), dtype, RANK)
        assert dist.broadcast(x, src=src) is None
        results.append(x)
    for src, x in enumerate(results):
        assert_same(x, rank_data((ODD,), dtype, src))


@pytest.mark.parametrize("shape", SHAPES, ids=ids(SHAPES))
def test_broadcast_shapes(shape):
    x = rank_data(shape, numpy.complex64, RANK)
    dist.broadcast(x, src=WORLD - 1)
    assert_same(x, rank_data(shape, numpy.complex64, WORLD - 1))


def test_broadcast_numpy_integer_src():
    x = rank_data((3,), numpy.int16, RANK)
    dist.broadcast(x, src=numpy.int64(WORLD - 1))
    assert_same(x, rank_data((3,), numpy.int16, WORLD - 1))


# -- gathering --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_gather(dtype):
    out = [numpy.zeros(ODD, dtype=dtype) for _ in range(WORLD)]
    assert dist.all_gather(out, rank_data((ODD,), dtype, RANK)) is None
    for r, o in enumerate(out):
        assert_same(o, rank_data((ODD,), dtype, r))


@pytest.mark.parametrize("shape", SHAPES, ids=ids(SHAPES))
def test_all_gather_shapes(shape):
    out = [numpy.zeros(shape, dtype=numpy.int8) for _ in range(WORLD)]
    dist.all_gather(out, rank_data(shape, numpy.int8, RANK))
    for r, o in enumerate(out):
        assert_same(o, rank_data(shape, numpy.int8, r))


def test_all_gather_tuple_of_outputs():
    out = tuple(numpy.zeros(2) for _ in range(WORLD))
    dist.all_gather(out, numpy.full(2, float(RANK)))
    for r, o in enumerate(out):
        assert_same(o, numpy.full(2, float(r)))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("form", ["concat", "stacked"])
def test_all_gather_into_tensor(dtype, form):
    n = 3
    out_shape = (WORLD * n, 2) if form == "concat" else (WORLD, n, 2)
    out = numpy.zeros(out_shape, dtype=dtype)
    dist.all_gather_into_tensor(out, rank_data((n, 2), dtype, RANK))
    expected = numpy.stack(all_data((n, 2), dtype))
    assert_same(out, expected.reshape(out_shape))


@pytest.mark.parametrize("shape", SHAPES, ids=ids(SHAPES))
@pytest.mark.parametrize("form", ["concat", "stacked"])
def test_all_gather_into_tensor_shapes(shape, form):
    out_shape = (WORLD * shape[0], *shape[1:]) if form == "concat" and shape else (WORLD, *shape)
    out = numpy.zeros(out_shape, dtype=numpy.uint16)
    dist.all_gather_into_tensor(out, rank_data(shape, numpy.uint16, RANK))
    assert_same(out, numpy.stack(all_data(shape, numpy.uint16)).reshape(out_shape))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gather_every_dst(dtype):
    lists = []
    for dst in range(WORLD):
        out = [numpy.zeros(ODD, dtype=dtype) for _ in range(WORLD)] if RANK == dst else None
        assert dist.gather(rank_data((ODD,), dtype, RANK, salt=dst), out, dst=dst) is None
        lists.append(out)
    for dst, out in enumerate(lists):
        if RANK == dst:
            for r, o in enumerate(out):
                assert_same(o, rank_data((ODD,), dtype, r, salt=dst))
        else:
            assert out is None


@pytest.mark.parametrize("shape", SHAPES, ids=ids(SHAPES))
def test_gather_shapes(shape):
    # every rank passes a list; only the destination's is filled
    out = [numpy.zeros(shape, dtype=numpy.float64) for _ in range(WORLD)]
    dist.gather(rank_data(shape, numpy.float64, RANK), out, dst=0)
    for r, o in enumerate(out):
        expected = rank_data(shape, numpy.float64, r) if RANK == 0 else numpy.zeros(shape)
        assert_same(o, expected)


# -- scattering -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_scatter_every_src(dtype):
    results = []
    for src in range(WORLD):
        pieces = ([rank_data((ODD,), dtype, src, salt=i) for i in range(WORLD)]
                  if RANK == src else None)
        x = numpy.zeros(ODD, dtype=dtype)
        assert dist.scatter(x, pieces, src=src) is None
        results.append(x)
    for src, x in enumerate(results):
        assert_same(x, rank_data((ODD,), dtype, src, salt=RANK))


@pytest.mark.parametrize("shape", SHAPES, ids=ids(SHAPES))
def test_scatter_shapes(shape):
    # a scatter_list on the non-source ranks is ignored
    pieces = [rank_data(shape, numpy.int64, RANK, salt=i) for i in range(WORLD)]
    x = numpy.zeros(shape, dtype=numpy.int64)
    dist.scatter(x, pieces, src=WORLD - 1)
    assert_same(x, rank_data(shape, numpy.int64, WORLD - 1, salt=RANK))


@pytest.mark.parametrize("shape", SHAPES, ids=ids(SHAPES))
def test_reduce_scatter_shapes(shape):
    inputs = [rank_data(shape, numpy.float64, RANK, salt=i) for i in range(WORLD)]
    out = numpy.zeros(shape)
    dist.reduce_scatter(out, inputs, op=ReduceOp.MIN)
    assert_same(out, reduce_expected(ReduceOp.MIN, all_data(shape, numpy.float64, salt=RANK)))


@pytest.mark.parametrize("shape", SHAPES, ids=ids(SHAPES))
@pytest.mark.parametrize("form", ["concat", "stacked"])
def test_reduce_scatter_tensor_shapes(shape, form):
    in_shape = (WORLD * shape[0], *shape[1:]) if form == "concat" and shape else (WORLD, *shape)
    inp = rank_data(in_shape, numpy.int32, RANK)
    out = numpy.zeros(shape, dtype=numpy.int32)
    dist.reduce_scatter_tensor(out, inp)
    full = reduce_expected(ReduceOp.SUM, all_data(in_shape, numpy.int32))
    assert_same(out, full.reshape(WORLD, *shape)[RANK])


def test_reduce_scatter_tensor_reference_example():
    # REFERENCE.md (2 ranks): 1..12 as 4x3 -> rank 0 [[2,4,6],[8,10,12]], rank 1 [[14,...]]
    inp = numpy.arange(1, 2 * WORLD * 3 + 1, dtype=numpy.float32).reshape(2 * WORLD, 3)
    out = numpy.zeros((2, 3), dtype=numpy.float32)
    dist.reduce_scatter_tensor(out, inp)
    assert_same(out, WORLD * inp[2 * RANK:2 * RANK + 2])
    if WORLD == 2:
        literal = [[[2, 4, 6], [8, 10, 12]], [[14, 16, 18], [20, 22, 24]]][RANK]
        assert_same(out, numpy.array(literal, dtype=numpy.float32))


# -- all_to_all -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_to_all_equal(dtype):
    inputs = [rank_data((ODD,), dtype, RANK, salt=j) for j in range(WORLD)]
    out = [numpy.zeros(ODD, dtype=dtype) for _ in range(WORLD)]
    assert dist.all_to_all(out, inputs) is None
    for j, o in enumerate(out):
        assert_same(o, rank_data((ODD,), dtype, j, salt=RANK))


def _unequal_size(i: int, j: int) -> int:
    # rank 0 sends and receives 1 element everywhere while the others do not: every rank
    # must still make the same MPI call
    return 1 + i * j


@pytest.mark.parametrize("dtype", [numpy.dtype("int32"), numpy.dtype("complex128")], ids=str)
def test_all_to_all_unequal(dtype):
    inputs = [rank_data((_unequal_size(RANK, j),), dtype, RANK, salt=j) for j in range(WORLD)]
    out = [numpy.zeros(_unequal_size(j, RANK), dtype=dtype) for j in range(WORLD)]
    dist.all_to_all(out, inputs)
    for j, o in enumerate(out):
        assert_same(o, rank_data((_unequal_size(j, RANK),), dtype, j, salt=RANK))


def test_all_to_all_unequal_shapes_and_empty():
    # entry i->j is a (i+j) % 3 by (j+1) array: some are empty, shapes differ per entry
    def shape(i, j):
        return ((i + j) % 3, i + 1)

    inputs = [rank_data(shape(RANK, j), numpy.float32, RANK, salt=j) for j in range(WORLD)]
    out = [numpy.zeros(shape(j, RANK), dtype=numpy.float32) for j in range(WORLD)]
    dist.all_to_all(out, inputs)
    for j, o in enumerate(out):
        assert_same(o, rank_data(shape(j, RANK), numpy.float32, j, salt=RANK))


@pytest.mark.parametrize("shape", SHAPES, ids=ids(SHAPES))
def test_all_to_all_shapes(shape):
    inputs = [rank_data(shape, numpy.uint8, RANK, salt=j) for j in range(WORLD)]
    out = [numpy.zeros(shape, dtype=numpy.uint8) for _ in range(WORLD)]
    dist.all_to_all(out, inputs)
    for j, o in enumerate(out):
        assert_same(o, rank_data(shape, numpy.uint8, j, salt=RANK))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_to_all_single_even(dtype):
    inp = rank_data((2 * WORLD, 3), dtype, RANK)
    out = numpy.zeros((2 * WORLD, 3), dtype=dtype)
    assert dist.all_to_all_single(out, inp) is None
    expected = numpy.concatenate([d[2 * RANK:2 * RANK + 2] for d in all_data((2 * WORLD, 3),
                                                                            dtype)])
    assert_same(out, expected)


def _rows(i: int, j: int) -> int:
    """Rows rank i sends rank j in the split-size tests (zero for some pairs)."""
    return (i + 2 * j) % 3


def _split_case(rows, dtype=numpy.float64, cols=2):
    """Input, expected output and split sizes of this rank for a rows(i, j) pattern."""
    def data(i):
        return rank_data((sum(rows(i, j) for j in range(WORLD)), cols), dtype, i)

    expected = []
    for j in range(WORLD):
        start = sum(rows(j, k) for k in range(RANK))
        expected.append(data(j)[start:start + rows(j, RANK)])
    in_splits = [rows(RANK, j) for j in range(WORLD)]
    out_splits = [rows(j, RANK) for j in range(WORLD)]
    return data(RANK), numpy.concatenate(expected), in_splits, out_splits


@pytest.mark.parametrize("dtype", [numpy.dtype("bool"), numpy.dtype("float64"),
                                   numpy.dtype("uint32")], ids=str)
def test_all_to_all_single_split_sizes(dtype):
    inp, expected, in_splits, out_splits = _split_case(_rows, dtype)
    out = numpy.zeros(expected.shape, dtype=dtype)
    dist.all_to_all_single(out, inp, output_split_sizes=out_splits, input_split_sizes=in_splits)
    assert_same(out, expected)


def test_all_to_all_single_input_splits_only():
    # rank i sends j+1 rows to rank j: every rank receives equal pieces, so no output splits
    inp, expected, in_splits, _ = _split_case(lambda i, j: j + 1)
    out = numpy.zeros(expected.shape)
    dist.all_to_all_single(out, inp, input_split_sizes=in_splits)
    assert_same(out, expected)


def test_all_to_all_single_output_splits_only():
    # rank i sends i+1 rows to every rank: the input splits evenly, the output does not
    inp, expected, _, out_splits = _split_case(lambda i, j: i + 1)
    out = numpy.zeros(expected.shape)
    dist.all_to_all_single(out, inp, output_split_sizes=out_splits)
    assert_same(out, expected)


def test_all_to_all_single_empty():
    out = numpy.zeros((0, 4), dtype=numpy.int16)
    dist.all_to_all_single(out, numpy.zeros((0, 4), dtype=numpy.int16))
    assert out.shape == (0, 4)


def test_all_to_all_single_1d():
    inp = rank_data((WORLD,), numpy.int64, RANK)
    out = numpy.zeros(WORLD, dtype=numpy.int64)
    dist.all_to_all_single(out, inp)
    assert_same(out, numpy.array([d[RANK] for d in all_data((WORLD,), numpy.int64)]))


def test_barrier():
    assert dist.barrier() is None
    assert dist.barrier(device_ids=[0]) is None


def test_barrier_checks_device_ids_as_torch_documents_them():
    # torch's device_ids is a list of GPU numbers (NCCL's barrier device); a malformed one is
    # refused on every rank, before any rank enters the barrier
    for bad, error in ((0, TypeError), ([0.5], TypeError), ([], ValueError), ([-1], ValueError)):
        with pytest.raises(error, match="device_ids"):
            dist.barrier(device_ids=bad)
    assert dist.barrier(device_ids=[RANK]) is None
