"""``mpiflow.comm``, OneFlow's signatures: world collectives and send/recv with metadata."""

from __future__ import annotations

import numpy
import pytest
from collective_helpers import (
    DTYPES,
    ODD,
    RANK,
    SHAPES,
    WORLD,
    Out,
    all_data,
    as_layout,
    assert_same,
    ids,
    needs_two,
    reduce_expected,
    ring,
)
from helpers import rank_data

import mpiflow
import mpiflow.comm as comm
from mpiflow.distributed import ReduceOp

pytestmark = pytest.mark.mpi

NEXT, PREV = (RANK + 1) % WORLD, (RANK - 1) % WORLD
SUM = ReduceOp.SUM


def test_exported():
    assert mpiflow.comm is comm
    assert set(comm.__all__) == {
        "all_gather", "all_gather_into_tensor", "all_reduce", "all_to_all", "barrier",
        "broadcast", "from_mpi4py", "gather", "recv", "reduce", "reduce_scatter",
        "reduce_scatter_tensor", "scatter", "send"}


# -- collectives ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_reduce_sums(dtype):
    x = rank_data((ODD,), dtype, RANK)
    assert comm.all_reduce(x) is None
    assert_same(x, reduce_expected(SUM, all_data((ODD,), dtype)))


@pytest.mark.parametrize("shape", SHAPES, ids=ids(SHAPES))
@pytest.mark.parametrize("layout", ["C", "strided", "F"])
def test_all_reduce_shapes_and_layouts(shape, layout):
    out = Out(shape, numpy.float64, layout)
    out.view[...] = rank_data(shape, numpy.float64, RANK)
    comm.all_reduce(out.view)
    assert_same(out.view, reduce_expected(SUM, all_data(shape, numpy.float64)))
    out.check_untouched()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_gather(dtype):
    out = [numpy.zeros(ODD, dtype=dtype) for _ in range(WORLD)]
    assert comm.all_gather(out, rank_data((ODD,), dtype, RANK)) is None
    for r, o in enumerate(out):
        assert_same(o, rank_data((ODD,), dtype, r))


@pytest.mark.parametrize("form", ["concat", "stacked"])
@pytest.mark.parametrize("layout", ["C", "strided"])
def test_all_gather_into_tensor(form, layout):
    shape = (2, ODD)
    out_shape = (WORLD * 2, ODD) if form == "concat" else (WORLD, 2, ODD)
    out = Out(out_shape, numpy.int32, layout)
    comm.all_gather_into_tensor(out.view, as_layout(rank_data(shape, numpy.int32, RANK), layout))
    assert_same(out.view, numpy.stack(all_data(shape, numpy.int32)).reshape(out_shape))
    out.check_untouched()


def test_all_gather_into_tensor_0d():
    out = numpy.zeros(WORLD)
    comm.all_gather_into_tensor(out, numpy.array(float(RANK)))
    assert_same(out, numpy.arange(WORLD, dtype=numpy.float64))


def test_all_to_all():
    inputs = [rank_data((1 + RANK * j, 2), numpy.float32, RANK, salt=j) for j in range(WORLD)]
    out = [numpy.zeros((1 + j * RANK, 2), dtype=numpy.float32) for j in range(WORLD)]
    assert comm.all_to_all(out, inputs) is None
    for j, o in enumerate(out):
        assert_same(o, rank_data((1 + j * RANK, 2), numpy.float32, j, salt=RANK))


@pytest.mark.parametrize("dtype", [numpy.dtype("bool"), numpy.dtype("float16"),
                                   numpy.dtype("complex64")], ids=str)
def test_broadcast_every_src(dtype):
    results = []
    for src in range(WORLD):
        x = rank_data((ODD,), dtype, RANK)
        assert comm.broadcast(x, src) is None
        results.append(x)
    for src, x in enumerate(results):
        assert_same(x, rank_data((ODD,), dtype, src))


def test_broadcast_0d_and_empty():
    a, b = numpy.array(float(RANK)), numpy.zeros((0, 2))
    comm.broadcast(a, WORLD - 1)
    comm.broadcast(b, 0)
    assert_same(a, numpy.array(float(WORLD - 1)))
    assert b.shape == (0, 2)


def test_barrier():
    assert comm.barrier() is None


def test_gather_every_dst():
    lists = []
    for dst in range(WORLD):
        out = [numpy.zeros(ODD, dtype=numpy.int16) for _ in range(WORLD)] if RANK == dst else None
        assert comm.gather(rank_data((ODD,), numpy.int16, RANK, salt=dst), out, dst=dst) is None
        lists.append(out)
    for dst, out in enumerate(lists):
        if RANK == dst:
            for r, o in enumerate(out):
                assert_same(o, rank_data((ODD,), numpy.int16, r, salt=dst))


def test_gather_default_dst_is_zero():
    out = [numpy.zeros(2) for _ in range(WORLD)]
    comm.gather(numpy.full(2, float(RANK)), out)
    for r, o in enumerate(out):
        assert_same(o, numpy.full(2, float(r)) if RANK == 0 else numpy.zeros(2))


@pytest.mark.parametrize("dtype", [numpy.dtype("uint8"), numpy.dtype("float32"),
                                   numpy.dtype("complex128")], ids=str)
def test_reduce_every_dst(dtype):
    results = []
    for dst in range(WORLD):
        x = rank_data((ODD,), dtype, RANK)
        assert comm.reduce(x, dst) is None
        results.append(x)
    expected = reduce_expected(SUM, all_data((ODD,), dtype))
    for dst, x in enumerate(results):
        assert_same(x, expected if RANK == dst else rank_data((ODD,), dtype, RANK))


def test_reduce_scatter():
    inputs = [rank_data((ODD,), numpy.int64, RANK, salt=i) for i in range(WORLD)]
    out = numpy.zeros(ODD, dtype=numpy.int64)
    assert comm.reduce_scatter(out, inputs) is None
    assert_same(out, reduce_expected(SUM, all_data((ODD,), numpy.int64, salt=RANK)))


def test_reduce_scatter_tensor_reference_example():
    # OneFlow (2 ranks): 1..12 as 4x3 on both -> rank 0 [[2,4,6],[8,10,12]],
    # rank 1 [[14,16,18],[20,22,24]]; the same pattern at any rank count
    inp = numpy.arange(1, 2 * WORLD * 3 + 1, dtype=numpy.float32).reshape(2 * WORLD, 3)
    out = numpy.zeros((2, 3), dtype=numpy.float32)
    assert comm.reduce_scatter_tensor(out, inp) is None
    assert_same(out, WORLD * inp[2 * RANK:2 * RANK + 2])
    if WORLD == 2:
        literal = [[[2, 4, 6], [8, 10, 12]], [[14, 16, 18], [20, 22, 24]]][RANK]
        assert_same(out, numpy.array(literal, dtype=numpy.float32))


def test_reduce_scatter_tensor_odd_and_layouts():
    out = Out((ODD,), numpy.float64, "strided")
    inp = as_layout(rank_data((WORLD, ODD), numpy.float64, RANK), "F")
    comm.reduce_scatter_tensor(out.view, inp)
    assert_same(out.view, reduce_expected(SUM, all_data((WORLD, ODD), numpy.float64))[RANK])
    out.check_untouched()


@pytest.mark.parametrize("src", ["every", "default"])
def test_scatter(src):
    srcs = range(WORLD) if src == "every" else [0]
    for s in srcs:
        pieces = [numpy.full(3, 10 * s + i) for i in range(WORLD)] if RANK == s else None
        x = numpy.zeros(3, dtype=numpy.int64)
        if src == "every":
            assert comm.scatter(x, pieces, s) is None
        else:
            assert comm.scatter(x, pieces) is None
        assert_same(x, numpy.full(3, 10 * s + RANK))


def test_collective_errors():
    with pytest.raises(ValueError, match="one entry per rank"):
        comm.all_gather([numpy.zeros(2)] * (WORLD + 1), numpy.zeros(2))
    with pytest.raises(ValueError, match="src=-1 is not a rank of the world"):
        comm.broadcast(numpy.zeros(2), -1)
    with pytest.raises(ValueError, match=f"dst={WORLD} is not a rank of the world"):
        comm.reduce(numpy.zeros(2), WORLD)
    with pytest.raises(TypeError, match="tensor must be a numpy array"):
        comm.all_reduce([1.0, 2.0])
    with pytest.raises(TypeError, match="tensor must be a numpy array"):
        comm.broadcast("abc", 0)
    with pytest.raises(TypeError, match="numeric or bool dtype"):
        comm.all_reduce(numpy.array(["a"]))
    with pytest.raises(ValueError, match="output_tensor has shape"):
        comm.all_gather_into_tensor(numpy.zeros(WORLD + 1), numpy.zeros(1))


# -- send / recv ------------------------------------------------------------------------------


WIRE_DTYPES = [*DTYPES, numpy.dtype("intc"), numpy.dtype("longlong"), numpy.dtype("ulonglong")]


@needs_two
@pytest.mark.parametrize("dtype", WIRE_DTYPES, ids=str)
def test_send_recv_metadata_dtypes(dtype):
    got = []
    ring(lambda dst: comm.send(rank_data((2, ODD), dtype, RANK), dst),
         lambda src: got.append(comm.recv(src)))
    assert_same(got[0], rank_data((2, ODD), dtype, PREV))


@needs_two
@pytest.mark.parametrize("shape", [*SHAPES, (2, 1, 3, 1), (1,) * 10],
                         ids=ids([*SHAPES, (2, 1, 3, 1), (1,) * 10]))
def test_send_recv_metadata_shapes(shape):
    got = []
    ring(lambda dst: comm.send(rank_data(shape, numpy.int32, RANK), dst),
         lambda src: got.append(comm.recv(src)))
    assert isinstance(got[0], mpiflow.Tensor)  # OneFlow's recv returns a tensor
    assert_same(got[0], rank_data(shape, numpy.int32, PREV))


@needs_two
def test_send_non_contiguous():
    data = rank_data((3, ODD), numpy.float32, RANK)
    got = []
    ring(lambda dst: comm.send(as_layout(data, "strided"), dst),
         lambda src: got.append(comm.recv(src)))
    ring(lambda dst: comm.send(as_layout(data, "F"), dst),
         lambda src: got.append(comm.recv(src)))
    for g in got:
        assert_same(g, rank_data((3, ODD), numpy.float32, PREV))
        assert g.numpy().flags.c_contiguous


@needs_two
@pytest.mark.parametrize("shape", [(), (0,), (ODD,), (2, 3)],
                         ids=ids([(), (0,), (ODD,), (2, 3)]))
def test_send_recv_without_metadata(shape):
    got = []
    ring(lambda dst: comm.send(rank_data(shape, numpy.float16, RANK), dst, send_meta=False),
         lambda src: got.append(comm.recv(src, shape, numpy.float16)))
    assert_same(got[0], rank_data(shape, numpy.float16, PREV))


@needs_two
def test_recv_shape_as_int_and_dtype_as_string():
    got = []
    ring(lambda dst: comm.send(rank_data((ODD,), numpy.uint16, RANK), dst, send_meta=False),
         lambda src: got.append(comm.recv(src, ODD, "uint16", device="cpu")))
    assert_same(got[0], rank_data((ODD,), numpy.uint16, PREV))


@needs_two
@pytest.mark.parametrize("layout", ["C", "strided", "F"])
@pytest.mark.parametrize("send_meta", [True, False], ids=["meta", "nometa"])
def test_recv_into_out(layout, send_meta):
    shape = (3, ODD)
    out = Out(shape, numpy.int64, layout)
    returned = []

    def recv(src):
        if send_meta:
            returned.append(comm.recv(src, out=out.view))
        else:
            returned.append(comm.recv(src, shape, numpy.int64, out=out.view))

    ring(lambda dst: comm.send(rank_data(shape, numpy.int64, RANK), dst, send_meta=send_meta),
         recv)
    assert returned == [None]
    assert_same(out.view, rank_data(shape, numpy.int64, PREV))
    out.check_untouched()


@needs_two
@pytest.mark.parametrize("send_meta", [True, False], ids=["meta", "nometa"])
def test_recv_any_source(send_meta):
    got = []

    def recv(src):
        if send_meta:
            got.append(comm.recv())
        else:
            got.append(comm.recv(None, (4,), numpy.int32))

    ring(lambda dst: comm.send(numpy.full(4, RANK, dtype=numpy.int32), dst, send_meta), recv)
    assert_same(got[0], numpy.full(4, PREV, dtype=numpy.int32))


@needs_two
def test_recv_out_of_wrong_shape():
    # the message is still received (nothing is left in flight), then the mismatch is reported
    out = numpy.zeros(5)
    errors = []

    def recv(src):
        with pytest.raises(ValueError, match=r"received a float64 array of shape \(4,\), but "
                                             r"out is a float64 array of shape \(5,\)"):
            comm.recv(src, out=out)
        errors.append(True)

    ring(lambda dst: comm.send(numpy.ones(4), dst), recv)
    assert errors == [True]
    assert_same(out, numpy.zeros(5))


@needs_two
def test_several_messages_in_order():
    got = []

    def send(dst):
        for i in range(3):
            comm.send(numpy.full(i + 1, 10 * RANK + i), dst)

    def recv(src):
        got.extend(comm.recv(src) for _ in range(3))

    ring(send, recv)
    for i, g in enumerate(got):
        assert_same(g, numpy.full(i + 1, 10 * PREV + i))


def test_send_recv_errors():
    with pytest.raises(ValueError, match=f"dst={RANK} is this process's own rank"):
        comm.send(numpy.zeros(2), RANK)
    with pytest.raises(ValueError, match=f"src={RANK} is this process's own rank"):
        comm.recv(RANK)
    with pytest.raises(ValueError, match=f"dst={WORLD} is not a rank of the world"):
        comm.send(numpy.zeros(2), WORLD)
    with pytest.raises(ValueError, match="src=-1 is not a rank of the world"):
        comm.recv(-1)
    with pytest.raises(ValueError, match="give both shape and dtype"):
        comm.recv(None, shape=(2,))
    with pytest.raises(ValueError, match="give both shape and dtype"):
        comm.recv(None, dtype=numpy.float32)
    with pytest.raises(TypeError, match="tensor must be a numpy array"):
        comm.send([1, 2], NEXT)
    with pytest.raises(TypeError, match="out must be a numpy array"):
        comm.recv(None, out=[0.0, 0.0])


@needs_two
def test_send_undescribable_dtype():
    with pytest.raises(TypeError, match="cannot describe a 1-d <U3 array to the receiver"):
        comm.send(numpy.array(["abc"]), NEXT)
    with pytest.raises(TypeError, match="cannot describe"):
        comm.send(numpy.zeros(2, dtype=">f8"), NEXT)
