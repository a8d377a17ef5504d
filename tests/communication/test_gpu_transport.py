"""The device communicators without a GPU: every collective on each, staging, CUDA-aware MPI.

The device communicators (staged MPI, CUDA-aware MPI, NCCL) are written against
``DeviceOps``; with ``HostOps`` numpy arrays play the device arrays, so the code that moves
CuPy arrays on a GPU machine runs here at every rank count. NCCL itself is played by
:class:`FakeNccl`, which carries out NCCL's calls (pointers, counts, groups) with MPI on host
memory, so the NCCL communicator's mapping of each collective is checked too. What stays
untested without a GPU is CuPy itself: ``CupyOps`` and ``CupyNccl`` (test_gpu.py). The NCCL
communicator's own behaviour is in test_gpu_nccl.py, the choice of transport in
test_gpu_selection.py.
"""

from __future__ import annotations

from typing import Any

import numpy
import pytest
from collective_helpers import (
    ODD,
    RANK,
    WORLD,
    all_data,
    assert_same,
    needs_two,
    reduce_expected,
    ring,
)
from gpu_helpers import FakeNccl, check_result
from helpers import rank_data
from mpi4py import MPI

from mpiflow.communication import ReduceOp, Work
from mpiflow.communication.gpu.array_ops import HostOps
from mpiflow.communication.gpu.cuda_aware import CudaAwareCommunicator, DirectMPICommunicator
from mpiflow.communication.gpu.nccl import NCCLCommunicator
from mpiflow.communication.gpu.staging import PinnedPool, StagedCommunicator
from mpiflow.communication.mpi.datatypes import ReducePlan
from mpiflow.communication.mpi.group import world_comm

# -- the communicators under test ----------------------------------------------------------------
KINDS = ["staged", "cuda-aware", "nccl", "nccl-no-avg"]


@pytest.fixture(scope="module")
def communicators() -> dict[str, Any]:
    """One device communicator of each kind over the world, made once (NCCL connects lazily)."""
    return {
        "staged": StagedCommunicator(world_comm, HostOps()),
        "cuda-aware": CudaAwareCommunicator(world_comm, HostOps()),
        "nccl": NCCLCommunicator(world_comm, HostOps(), FakeNccl(has_avg=True)),
        "nccl-no-avg": NCCLCommunicator(world_comm, HostOps(), FakeNccl(has_avg=False),
                                        cuda_aware=True),
    }


@pytest.fixture(params=KINDS)
def dev(request: pytest.FixtureRequest, communicators: dict[str, Any]) -> Any:
    """Each kind of device communicator in turn."""
    return communicators[request.param]


def _strided(data: numpy.ndarray) -> numpy.ndarray:
    """A non-contiguous view holding ``data`` (every other element of a bigger array)."""
    base = numpy.full((*data.shape, 2), 9, dtype=data.dtype)
    view = base[..., 0]
    view[...] = data
    return view


DTYPES = [numpy.dtype(d) for d in ("bool", "int16", "int32", "int64", "float32", "float64",
                                   "complex64")]
OPS_BY_KIND = {
    "b": list(ReduceOp),
    "i": [ReduceOp.SUM, ReduceOp.AVG, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX,
          ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR],
    "f": [ReduceOp.SUM, ReduceOp.AVG, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX],
    "c": [ReduceOp.SUM, ReduceOp.AVG, ReduceOp.PRODUCT],
}
PAIRS = [(d, op) for d in DTYPES for op in OPS_BY_KIND[d.kind]
         if not (d.kind == "b" and op is ReduceOp.AVG)]


# -- collectives on every kind -------------------------------------------------------------------
pytestmark = pytest.mark.filterwarnings("ignore:mpiflow.*noted once:RuntimeWarning")


@pytest.mark.mpi
@pytest.mark.parametrize(("dtype", "op"), PAIRS, ids=[f"{d}-{o.name}" for d, o in PAIRS])
def test_all_reduce_matches_numpy(dev: Any, dtype: numpy.dtype, op: ReduceOp) -> None:
    buf = rank_data((ODD,), dtype, RANK)
    assert dev.all_reduce(buf, op) is None
    check_result(buf, reduce_expected(op, all_data((ODD,), dtype)))


@pytest.mark.mpi
@pytest.mark.parametrize("async_op", [False, True])
def test_all_reduce_of_a_strided_view_writes_only_the_view(dev: Any, async_op: bool) -> None:
    buf = _strided(rank_data((3, ODD), numpy.float32, RANK))
    work = dev.all_reduce(buf, ReduceOp.SUM, async_op=async_op)
    if async_op:
        assert isinstance(work, Work) and work.wait()
    check_result(buf, reduce_expected(ReduceOp.SUM, all_data((3, ODD), numpy.float32)))
    assert (buf.base[..., 1] == 9).all()


@pytest.mark.mpi
@pytest.mark.parametrize("op", [ReduceOp.SUM, ReduceOp.MAX, ReduceOp.AVG])
def test_reduce_reaches_only_the_root(dev: Any, op: ReduceOp) -> None:
    root = WORLD - 1
    buf = rank_data((ODD,), numpy.float64, RANK)
    dev.reduce(buf, op, root)
    expected = (reduce_expected(op, all_data((ODD,), numpy.float64)) if RANK == root
                else rank_data((ODD,), numpy.float64, RANK))
    check_result(buf, expected)


@pytest.mark.mpi
@pytest.mark.parametrize("dtype", ["bool", "int16", "float32", "complex64"])
def test_broadcast_from_the_last_rank(dev: Any, dtype: str) -> None:
    root = WORLD - 1
    buf = _strided(rank_data((2, ODD), dtype, RANK))
    dev.broadcast(buf, root)
    assert_same(buf, rank_data((2, ODD), dtype, root))


@pytest.mark.mpi
def test_all_gather_and_gather(dev: Any) -> None:
    send = rank_data((ODD,), numpy.int64, RANK)
    everyone = numpy.concatenate(all_data((ODD,), numpy.int64))
    recv = _strided(numpy.zeros(WORLD * ODD, numpy.int64))
    dev.all_gather(send, recv)
    assert_same(recv, everyone)
    root = WORLD // 2
    out = numpy.zeros(WORLD * ODD, numpy.int64) if RANK == root else None
    dev.gather(send, out, root)
    if out is not None:
        assert_same(out, everyone)


@pytest.mark.mpi
def test_all_gather_v_with_empty_chunks(dev: Any) -> None:
    counts = [r % 3 for r in range(WORLD)]
    send = rank_data((counts[RANK],), numpy.float32, RANK)
    recv = numpy.zeros(sum(counts), numpy.float32)
    dev.all_gather_v(send, recv, counts)
    assert_same(recv, numpy.concatenate([rank_data((c,), numpy.float32, r)
                                         for r, c in enumerate(counts)]))


@pytest.mark.mpi
def test_scatter_from_the_last_rank(dev: Any) -> None:
    root = WORLD - 1
    source = numpy.arange(WORLD * ODD, dtype=numpy.float32).reshape(WORLD, ODD)
    recv = _strided(numpy.zeros(ODD, numpy.float32))
    dev.scatter(source if RANK == root else None, recv, root)
    assert_same(recv, source[RANK])


@pytest.mark.mpi
@pytest.mark.parametrize("op", [ReduceOp.SUM, ReduceOp.AVG, ReduceOp.BXOR])
def test_reduce_scatter(dev: Any, op: ReduceOp) -> None:
    dtype = numpy.int32 if op is ReduceOp.BXOR else numpy.float64
    send = rank_data((WORLD, ODD), dtype, RANK)
    recv = numpy.zeros(ODD, dtype)
    dev.reduce_scatter(send, recv, op)
    check_result(recv, reduce_expected(op, all_data((WORLD, ODD), dtype))[RANK])


@pytest.mark.mpi
def test_reduce_scatter_v_with_empty_chunks(dev: Any) -> None:
    counts = [(r + 1) % 3 for r in range(WORLD)]
    send = rank_data((sum(counts),), numpy.complex64, RANK)
    recv = numpy.zeros(counts[RANK], numpy.complex64)
    dev.reduce_scatter_v(send, recv, counts, ReduceOp.SUM)
    total = reduce_expected(ReduceOp.SUM, all_data((sum(counts),), numpy.complex64))
    start = sum(counts[:RANK])
    check_result(recv, total[start:start + counts[RANK]])


@pytest.mark.mpi
def test_all_to_all_and_all_to_all_v(dev: Any) -> None:
    send = numpy.array([100 * RANK + r for r in range(WORLD)], dtype=numpy.int32)
    recv = numpy.zeros(WORLD, numpy.int32)
    dev.all_to_all(send, recv)
    assert_same(recv, numpy.array([100 * r + RANK for r in range(WORLD)], dtype=numpy.int32))
    # rank i sends (i + j) % 3 elements to rank j, all of value 10 * i + j
    scounts = [(RANK + j) % 3 for j in range(WORLD)]
    rcounts = [(i + RANK) % 3 for i in range(WORLD)]
    vsend = numpy.concatenate([numpy.full(c, 10 * RANK + j, numpy.float32)
                               for j, c in enumerate(scounts)])
    vrecv = numpy.zeros(sum(rcounts), numpy.float32)
    dev.all_to_all_v(vsend, scounts, vrecv, rcounts)
    assert_same(vrecv, numpy.concatenate([numpy.full(c, 10 * i + RANK, numpy.float32)
                                          for i, c in enumerate(rcounts)]))


@needs_two
def test_send_and_recv_around_a_ring(dev: Any) -> None:
    got = numpy.zeros(ODD, numpy.float32)

    def send(peer: int) -> None:
        dev.send(rank_data((ODD,), numpy.float32, RANK), peer)

    def recv(peer: int) -> None:
        assert dev.recv(got, peer) == peer

    ring(send, recv)
    assert_same(got, rank_data((ODD,), numpy.float32, (RANK - 1) % WORLD))


@needs_two
def test_isend_and_irecv_with_a_partner(dev: Any) -> None:
    partner = RANK ^ 1
    if partner >= WORLD:
        return
    got = _strided(numpy.zeros(ODD, numpy.int64))
    mine = rank_data((ODD,), numpy.int64, RANK)
    if RANK < partner:
        sent = dev.send(mine, partner, async_op=True)
        received = dev.irecv(got, partner)
    else:
        received = dev.irecv(got, partner)
        sent = dev.send(mine, partner, async_op=True)
    assert sent.wait() and received.wait()
    assert_same(got, rank_data((ODD,), numpy.int64, partner))


@pytest.mark.mpi
def test_several_outstanding_operations(dev: Any) -> None:
    a = rank_data((ODD,), numpy.float32, RANK)
    b = rank_data((2 * ODD,), numpy.float64, RANK, salt=1)
    works = [dev.all_reduce(a, ReduceOp.SUM, async_op=True),
             dev.all_reduce(b, ReduceOp.MAX, async_op=True),
             dev.barrier(async_op=True)]
    for w in works:
        assert isinstance(w, Work) and w.wait()
    check_result(a, reduce_expected(ReduceOp.SUM, all_data((ODD,), numpy.float32)))
    check_result(b, reduce_expected(ReduceOp.MAX, all_data((2 * ODD,), numpy.float64, salt=1)))


@pytest.mark.mpi
def test_empty_and_zero_dimensional_buffers(dev: Any) -> None:
    empty = numpy.zeros((0, 3), numpy.float32)
    dev.all_reduce(empty)
    dev.broadcast(empty, 0)
    dev.all_gather(empty, numpy.zeros((0, 3), numpy.float32))
    scalar = numpy.array(RANK + 1.0)
    dev.all_reduce(scalar)
    assert scalar == WORLD * (WORLD + 1) / 2


@pytest.mark.mpi
def test_errors_are_the_mpi_communicators(dev: Any) -> None:
    with pytest.raises(TypeError, match="AVG is undefined for bool"):
        dev.all_reduce(numpy.ones(3, bool), ReduceOp.AVG)
    with pytest.raises(ValueError, match="all_gather needs"):
        dev.all_gather(numpy.ones(3), numpy.ones(3 * WORLD + 1))
    with pytest.raises(ValueError, match="not a rank of this group"):
        dev.broadcast(numpy.ones(3), WORLD)


@pytest.mark.mpi
def test_split_gives_the_same_kind(dev: Any) -> None:
    sub = dev.split([0])
    if RANK != 0:
        assert sub is None
        return
    assert type(sub) is type(dev) and sub.size == 1
    x = numpy.full(3, 2.0)
    sub.all_reduce(x)
    assert_same(x, numpy.full(3, 2.0))
    assert dev.array_module is numpy


# -- staging -------------------------------------------------------------------------------------
def test_pinned_pool_reuses_by_capacity() -> None:
    ops = HostOps()
    pool = PinnedPool(ops)
    first = pool.take(100)
    assert first.size == 256 and pool.allocations == 1
    second = pool.take(300)
    assert second.size == 512
    pool.give(first)
    assert pool.take(200) is first
    pool.give(first)
    pool.give(second)
    assert pool.allocations == ops.pinned_allocations == 2 and pool.held_bytes == 768
    pool.clear()
    assert pool.held_bytes == 0
    assert pool.take(0).size == 256


@pytest.mark.mpi
def test_staging_reuses_its_pinned_buffers() -> None:
    ops = HostOps()
    staged = StagedCommunicator(world_comm, ops)
    buf = numpy.ones(ODD, numpy.float32)
    staged.all_reduce(buf)
    allocations = staged.pool.allocations
    for _ in range(5):
        buf[...] = 1
        staged.all_reduce(buf)
    assert staged.pool.allocations == allocations == 1
    assert (ops.to_host_copies, ops.to_device_copies) == (6, 6)
    assert_same(buf, numpy.full(ODD, WORLD, numpy.float32))


@pytest.mark.mpi
def test_staging_copies_only_what_mpi_reads_and_writes() -> None:
    ops = HostOps()
    staged = StagedCommunicator(world_comm, ops)
    buf = numpy.zeros(4)
    staged.broadcast(buf, 0)  # the root only sends, the others only receive
    assert (ops.to_host_copies, ops.to_device_copies) == ((1, 0) if RANK == 0 else (0, 1))
    recv = numpy.zeros(4 * WORLD)
    staged.all_gather(numpy.ones(4), recv)
    assert (ops.to_host_copies, ops.to_device_copies) == ((2, 1) if RANK == 0 else (1, 2))


@pytest.mark.mpi
def test_staging_buffers_come_back_after_an_error() -> None:
    staged = StagedCommunicator(world_comm, HostOps())
    with pytest.raises(ValueError):
        staged.all_gather(numpy.ones(3), numpy.ones(3 * WORLD + 1))
    held = staged.pool.allocations
    staged.all_gather(numpy.ones(3), numpy.ones(3 * WORLD))
    assert staged.pool.allocations == held  # the same two buffers again


@pytest.mark.mpi
def test_outstanding_stagings_hold_different_buffers() -> None:
    staged = StagedCommunicator(world_comm, HostOps())
    a, b = numpy.ones(8), numpy.full(8, 2.0)
    wa = staged.all_reduce(a, async_op=True)
    wb = staged.all_reduce(b, async_op=True)
    assert staged.pool.allocations == 2
    assert wa is not None and wb is not None and wa.wait() and wb.wait()
    assert_same(a, numpy.full(8, float(WORLD)))
    assert_same(b, numpy.full(8, 2.0 * WORLD))
    staged.all_reduce(a)
    assert staged.pool.allocations == 2


# -- CUDA-aware MPI --------------------------------------------------------------------------------
@pytest.mark.mpi
def test_cuda_aware_synchronizes_the_stream_before_mpi() -> None:
    ops = HostOps()
    aware = CudaAwareCommunicator(world_comm, ops)
    aware.all_reduce(numpy.ones(3))
    aware.all_gather(numpy.ones(3), numpy.ones(3 * WORLD))
    assert ops.synchronizations == 2
    assert ops.to_host_copies == 0  # nothing staged
    direct = DirectMPICommunicator(world_comm, ops)
    assert direct.on_device() is None and direct.array_module is numpy


@pytest.mark.mpi
def test_cuda_aware_stages_reductions_that_mpi_runs_as_numpy(monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    from mpiflow.communication.gpu import cuda_aware

    real = cuda_aware.reduce_plan

    def numpy_function_op(dtype: Any, op: ReduceOp) -> ReducePlan:
        plan = real(dtype, op)
        return ReducePlan(plan.op, MPI.BYTE, plan.average)  # as if MPI lacked the dtype

    monkeypatch.setattr(cuda_aware, "reduce_plan", numpy_function_op)
    aware = CudaAwareCommunicator(world_comm, HostOps())
    buf = rank_data((ODD,), numpy.float32, RANK)
    aware.all_reduce(buf, ReduceOp.SUM)
    assert aware.staged.pool.allocations == 1
    check_result(buf, reduce_expected(ReduceOp.SUM, all_data((ODD,), numpy.float32)))


