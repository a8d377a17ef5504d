"""numpy's values on every MPI library (issue #23): integer sums wrap, floating sums keep NaN,
infinities and signed zeros, whatever the library's own kernels do.

Open MPI's vector kernels saturate int8/uint8/int16/uint16 sums from about 16 elements (4 ranks
of uint8 200 gave 255, numpy 32), so every test here sums buffers long enough to reach them,
with values that overflow, through each face: the communicator, ``mpiflow.distributed``,
the P->B and P->S conversions of global tensors, and DDP-style gradient sums. The probe that
finds such quirks (``quirks.probe``) is checked on an op made to saturate.
"""

from __future__ import annotations

import functools

import numpy
import pytest
from mpi4py import MPI
from numpy.testing import assert_array_equal

import mpiflow as flow
import mpiflow.distributed as dist
from mpiflow.communication import ReduceOp, new_communicator, reduce_plan
from mpiflow.communication.mpi.group import world_comm
from mpiflow.communication.mpi.quirks import describe_quirks, library_quirks, probe

pytestmark = pytest.mark.mpi

RANK, SIZE = world_comm.rank, world_comm.size
INTEGERS = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
FLOATS = ["float16", "float32", "float64"]
N = 100  # past every library's vector width


def big_integers(dtype: str, rank: int, n: int = N) -> numpy.ndarray:
    """Values near the dtype's limits, different on every rank: their sum overflows."""
    info = numpy.iinfo(dtype)
    high = numpy.full(n, info.max - rank, dtype=dtype)
    high[1::3] = info.min + rank  # negative (signed) or zero (unsigned) too
    high[2::3] = info.max // 2 + 7 * rank
    return high


def wrapped_sum(make, dtype: str, n: int = N) -> numpy.ndarray:
    """numpy's sum over the ranks' inputs, in the dtype (wrapping, as numpy and torch do)."""
    return numpy.add.reduce(numpy.stack([make(dtype, r, n) for r in range(SIZE)]), axis=0,
                            dtype=dtype)


@pytest.mark.parametrize("dtype", INTEGERS)
def test_integer_sums_of_every_width_wrap_as_numpy(dtype: str) -> None:
    x = big_integers(dtype, RANK)
    world_comm.all_reduce(x, ReduceOp.SUM)          # the fast path
    assert_array_equal(x, wrapped_sum(big_integers, dtype))
    fresh = new_communicator(world_comm.mpi_comm)   # the general path, a reduce to a root
    y = big_integers(dtype, RANK).reshape(4, N // 4)
    fresh.reduce(y, ReduceOp.SUM, SIZE - 1)
    if RANK == SIZE - 1:
        assert_array_equal(y.reshape(-1), wrapped_sum(big_integers, dtype))
    send = numpy.concatenate([big_integers(dtype, RANK, N) + r for r in range(SIZE)])
    out = numpy.empty(N, dtype=dtype)
    world_comm.reduce_scatter(send, out, ReduceOp.SUM)
    want = numpy.add.reduce(numpy.stack([big_integers(dtype, r) + numpy.array(RANK).astype(dtype)
                                         for r in range(SIZE)]), axis=0, dtype=dtype)
    assert_array_equal(out, want)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16"])
def test_distributed_all_reduce_of_small_integers(dtype: str) -> None:
    """The issue's case: 200 summed over the ranks in uint8 (and friends) wraps."""
    x = numpy.full(64, 200, dtype=numpy.int64).astype(dtype)
    dist.all_reduce(x)
    want = (numpy.int64(200) * SIZE).astype(dtype)  # 4 ranks of uint8: 32
    assert_array_equal(x, numpy.full(64, want, dtype=dtype))


def float_inputs(dtype: str, rank: int, n: int = N) -> numpy.ndarray:
    """Exactly representable values whose sum is the same in any order: signed zeros, the
    infinities (on some ranks, so that inf + -inf gives NaN), a NaN and small integers."""
    x = numpy.tile(numpy.array([-0.0, 1.0, -2.0, 3.0], dtype=dtype), n // 4)
    x[5] = numpy.inf if rank % 2 == 0 else -numpy.inf
    x[6] = numpy.nan if rank == SIZE - 1 else 1.0
    x[7] = 0.0 if rank == 0 else -0.0
    return x


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_sums_keep_signed_zeros_infinities_and_nan(dtype: str) -> None:
    x = float_inputs(dtype, RANK)
    dist.all_reduce(x)
    with numpy.errstate(invalid="ignore"):  # inf + -inf
        want = functools.reduce(numpy.add, [float_inputs(dtype, r) for r in range(SIZE)])
    assert_array_equal(x, want)   # NaN for NaN
    assert_array_equal(numpy.signbit(x), numpy.signbit(want))  # -0.0 + -0.0 is -0.0


@pytest.mark.parametrize("op", [ReduceOp.MAX, ReduceOp.MIN])
def test_nan_max_min_propagate_as_numpy(op: ReduceOp) -> None:
    x = numpy.arange(N, dtype=numpy.float32)
    x[RANK::SIZE + 1] = numpy.nan
    x[-1] = numpy.inf
    dist.all_reduce(x, op)
    ufunc = numpy.maximum if op is ReduceOp.MAX else numpy.minimum
    stack = []
    for r in range(SIZE):
        y = numpy.arange(N, dtype=numpy.float32)
        y[r::SIZE + 1] = numpy.nan
        y[-1] = numpy.inf
        stack.append(y)
    assert_array_equal(x, ufunc.reduce(numpy.stack(stack), axis=0))


def partial_part(dtype: str, rank: int) -> numpy.ndarray:
    """Rank ``rank``'s part of a partial-sum tensor: 200 (+ 33 * rank on even rows)."""
    part = numpy.full((8, 4), 200, dtype=numpy.int64)
    part[::2] += 33 * rank
    return part.astype(dtype)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "uint16"])
def test_partial_to_broadcast_and_split_of_small_integers(dtype: str) -> None:
    placement = flow.placement("cpu", list(range(SIZE)))
    x = flow.tensor(partial_part(dtype, RANK)).to_global(placement, flow.sbp.partial_sum)
    want = numpy.add.reduce(numpy.stack([partial_part(dtype, r) for r in range(SIZE)]), axis=0,
                            dtype=dtype)
    assert_array_equal(x.to_global(placement, flow.sbp.broadcast).to_local().numpy(), want)
    assert_array_equal(x.numpy(), want)
    assert_array_equal(x.to_global(placement, flow.sbp.split(0)).numpy(), want)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "float32"])
def test_ddp_style_gradient_sums(dtype: str) -> None:
    grads = {"a": big_integers("int64", RANK, 40).astype(dtype),
             "b": numpy.full((5, 7), 120 + RANK, dtype=dtype)}
    dist.sync_gradients(grads, average=False)
    assert_array_equal(grads["a"], numpy.add.reduce(
        numpy.stack([big_integers("int64", r, 40).astype(dtype) for r in range(SIZE)]),
        axis=0, dtype=dtype))
    assert_array_equal(grads["b"], numpy.full((5, 7), sum(120 + r for r in range(SIZE)),
                                              dtype=numpy.int64).astype(dtype))


def _saturating_add(inmem, inoutmem, datatype) -> None:
    a = numpy.frombuffer(inmem, dtype=numpy.uint8).astype(numpy.int64)
    b = numpy.frombuffer(inoutmem, dtype=numpy.uint8)
    b[...] = numpy.minimum(a + b, 255)


def _dropping_max(inmem, inoutmem, datatype) -> None:
    a = numpy.frombuffer(inmem, dtype=numpy.float32)
    b = numpy.frombuffer(inoutmem, dtype=numpy.float32)
    b[...] = numpy.fmax(a, b)


def test_the_probe_finds_a_saturating_sum_and_a_nan_dropping_max() -> None:
    saturating = MPI.Op.Create(_saturating_add, commute=True)
    dropping = MPI.Op.Create(_dropping_max, commute=True)
    try:
        found = probe(numpy.dtype("uint8"), saturating, numpy.add)
        assert found.verdict == "differs"
        assert "uint8 add(" in found.example and "gives 255" in found.example
        assert probe(numpy.dtype("float32"), dropping, numpy.maximum).verdict == "differs"
    finally:
        saturating.Free()
        dropping.Free()
    assert probe(numpy.dtype("int32"), MPI.SUM, numpy.add).native


def test_quirks_decide_the_plan_and_are_reported() -> None:
    """A pair the library gets wrong never goes to its own op; one it gets right does."""
    quirks = library_quirks()
    for op_name, dtype, _ in quirks:
        op = ReduceOp[op_name]
        assert reduce_plan(dtype, op).datatype is not None, (op_name, dtype)
    assert reduce_plan("int32", ReduceOp.SUM).datatype is None  # native: the fast path
    text = describe_quirks(quirks)
    assert all(dtype in text for _, dtype, _ in quirks)
    if MPI.Get_library_version().startswith("Open MPI"):
        assert {("SUM", "uint8"), ("SUM", "int16")} <= {(o, d) for o, d, _ in quirks}
