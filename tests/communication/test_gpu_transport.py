"""The GPU transports, without a GPU: selection, environment, and every device communicator.

The device communicators (staged MPI, CUDA-aware MPI, NCCL) are written against
``DeviceOps``; with ``HostOps`` numpy arrays play the device arrays, so the code that moves
CuPy arrays on a GPU machine runs here at every rank count. NCCL itself is played by
:class:`FakeNccl`, which carries out NCCL's calls (pointers, counts, groups) with MPI on host
memory, so the NCCL communicator's mapping of each collective is checked too. What stays
untested without a GPU is CuPy itself: ``CupyOps`` and ``CupyNccl`` (test_gpu.py).
"""

from __future__ import annotations

import ctypes
import sys
import types
import warnings
from collections.abc import Callable
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
from helpers import rank_data, run_job
from mpi4py import MPI

import mpiflow as flow
from mpiflow import cuda
from mpiflow.communication import ReduceOp, Work
from mpiflow.communication.gpu import maker as device_module
from mpiflow.communication.gpu import nccl as nccl_module
from mpiflow.communication.gpu import transport as transport_module
from mpiflow.communication.gpu.array_ops import HostOps
from mpiflow.communication.gpu.cuda_aware import CudaAwareCommunicator, DirectMPICommunicator
from mpiflow.communication.gpu.nccl import NcclBackend, NCCLCommunicator
from mpiflow.communication.gpu.staging import PinnedPool, StagedCommunicator
from mpiflow.communication.gpu.transport import (
    NcclReduction,
    Transport,
    TransportChoice,
    cuda_aware_mpi,
    cuda_aware_source,
    current_transport,
    describe_transport,
    library_cuda_support,
    nccl_reduction,
    parse_backend,
    parse_cuda_aware,
    select_transport,
)
from mpiflow.communication.mpi.datatypes import ReducePlan
from mpiflow.communication.mpi.group import world_comm

# -- a stand-in for NCCL ------------------------------------------------------------------------
_NAMES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32",
          "float64"]
_REDUCTIONS = ["sum", "prod", "min", "max", "avg"]
_MPI_OPS = {"sum": MPI.SUM, "prod": MPI.PROD, "min": MPI.MIN, "max": MPI.MAX, "avg": MPI.SUM}


def _view(pointer: int, count: int, code: int) -> numpy.ndarray:
    """The numpy array of ``count`` elements of NCCL type ``code`` at ``pointer``."""
    dtype = numpy.dtype(_NAMES[code])
    if count == 0:
        return numpy.empty(0, dtype)
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(pointer)
    return numpy.frombuffer(raw, dtype=dtype, count=count)


class FakeNccl(NcclBackend):
    """NCCL's calls carried out by MPI on host memory; counts what it was asked to do."""

    def __init__(self, has_avg: bool) -> None:
        self.has_avg = has_avg
        self.connects: list[int] = []
        self.calls: dict[str, int] = {}
        self._depth = 0
        self._queued: list[tuple[bool, Callable[[], Any]]] = []

    def unique_id(self) -> tuple[int, ...]:
        return tuple(range(-64, 64))

    def connect(self, nranks: int, uid: tuple[int, ...], rank: int, bootstrap: Any,
                members: tuple[int, ...] | None) -> FakeNcclComm:
        assert uid == self.unique_id(), "the unique id did not arrive intact"
        if members is None:
            comm = bootstrap.Dup()
        else:
            group = bootstrap.Get_group().Incl(list(members))
            comm = bootstrap.Create_group(group, 7)
            group.Free()
        assert (comm.Get_size(), comm.Get_rank()) == (nranks, rank)
        self.connects.append(nranks)
        return FakeNcclComm(comm, self)

    def group_start(self) -> None:
        self._depth += 1

    def group_end(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            queued, self._queued = self._queued, []
            requests = [run() for p2p, run in queued if p2p]   # start every send and receive
            for p2p, run in queued:
                if not p2p:
                    run()
            MPI.Request.Waitall(requests)

    def dtype(self, name: str) -> int:
        return _NAMES.index(name)

    def op(self, name: str) -> int:
        return _REDUCTIONS.index(name)

    def submit(self, name: str, p2p: bool, run: Callable[[], Any]) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        if self._depth:
            self._queued.append((p2p, run))
        elif p2p:
            run().Wait()
        else:
            run()


class FakeNcclComm:
    """One fake NCCL communicator: cupy.cuda.nccl.NcclCommunicator's methods over MPI."""

    def __init__(self, comm: Any, lib: FakeNccl) -> None:
        self.comm, self.lib = comm, lib

    def _finish(self, out: numpy.ndarray, op: int) -> None:
        if _REDUCTIONS[op] == "avg":
            out /= self.comm.Get_size()

    def allReduce(self, send: int, recv: int, count: int, dt: int, op: int,
                  stream: int) -> None:
        def run() -> None:
            out = _view(recv, count, dt)
            src = MPI.IN_PLACE if send == recv else _view(send, count, dt)
            self.comm.Allreduce(src, out, _MPI_OPS[_REDUCTIONS[op]])
            self._finish(out, op)

        self.lib.submit("allReduce", False, run)

    def reduce(self, send: int, recv: int, count: int, dt: int, op: int, root: int,
               stream: int) -> None:
        def run() -> None:
            mine = self.comm.Get_rank() == root
            src = MPI.IN_PLACE if mine and send == recv else _view(send, count, dt)
            out = _view(recv, count, dt) if mine else None
            self.comm.Reduce(src, out, _MPI_OPS[_REDUCTIONS[op]], root)
            if out is not None:
                self._finish(out, op)

        self.lib.submit("reduce", False, run)

    def bcast(self, buf: int, count: int, dt: int, root: int, stream: int) -> None:
        self.lib.submit("bcast", False, lambda: self.comm.Bcast(_view(buf, count, dt), root))

    def broadcast(self, send: int, recv: int, count: int, dt: int, root: int,
                  stream: int) -> None:
        def run() -> None:
            out = _view(recv, count, dt)
            if self.comm.Get_rank() == root and send != recv:
                out[...] = _view(send, count, dt)
            self.comm.Bcast(out, root)

        self.lib.submit("broadcast", False, run)

    def reduceScatter(self, send: int, recv: int, count: int, dt: int,
                      op: int, stream: int) -> None:
        def run() -> None:
            out = _view(recv, count, dt)
            self.comm.Reduce_scatter_block(_view(send, count * self.comm.Get_size(), dt), out,
                                           _MPI_OPS[_REDUCTIONS[op]])
            self._finish(out, op)

        self.lib.submit("reduceScatter", False, run)

    def allGather(self, send: int, recv: int, count: int, dt: int,
                  stream: int) -> None:
        self.lib.submit("allGather", False, lambda: self.comm.Allgather(
            _view(send, count, dt), _view(recv, count * self.comm.Get_size(), dt)))

    def send(self, buf: int, count: int, dt: int, peer: int, stream: int) -> None:
        self.lib.submit("send", True, lambda: self.comm.Isend(_view(buf, count, dt), peer))

    def recv(self, buf: int, count: int, dt: int, peer: int, stream: int) -> None:
        self.lib.submit("recv", True, lambda: self.comm.Irecv(_view(buf, count, dt), peer))


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
    "i": [ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX, ReduceOp.BAND,
          ReduceOp.BOR, ReduceOp.BXOR],
    "f": [ReduceOp.SUM, ReduceOp.AVG, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX],
    "c": [ReduceOp.SUM, ReduceOp.AVG, ReduceOp.PRODUCT],
}
PAIRS = [(d, op) for d in DTYPES for op in OPS_BY_KIND[d.kind]
         if not (d.kind == "b" and op is ReduceOp.AVG)]


def _check(actual: numpy.ndarray, expected: numpy.ndarray) -> None:
    if actual.dtype.kind in "fc":
        assert actual.dtype == expected.dtype
        numpy.testing.assert_allclose(actual, expected, rtol=1e-6)
    else:
        assert_same(actual, expected)


# -- collectives on every kind -------------------------------------------------------------------
pytestmark = pytest.mark.filterwarnings("ignore:mpiflow.*noted once:RuntimeWarning")


@pytest.mark.mpi
@pytest.mark.parametrize(("dtype", "op"), PAIRS, ids=[f"{d}-{o.name}" for d, o in PAIRS])
def test_all_reduce_matches_numpy(dev: Any, dtype: numpy.dtype, op: ReduceOp) -> None:
    buf = rank_data((ODD,), dtype, RANK)
    assert dev.all_reduce(buf, op) is None
    _check(buf, reduce_expected(op, all_data((ODD,), dtype)))


@pytest.mark.mpi
@pytest.mark.parametrize("async_op", [False, True])
def test_all_reduce_of_a_strided_view_writes_only_the_view(dev: Any, async_op: bool) -> None:
    buf = _strided(rank_data((3, ODD), numpy.float32, RANK))
    work = dev.all_reduce(buf, ReduceOp.SUM, async_op=async_op)
    if async_op:
        assert isinstance(work, Work) and work.wait()
    _check(buf, reduce_expected(ReduceOp.SUM, all_data((3, ODD), numpy.float32)))
    assert (buf.base[..., 1] == 9).all()


@pytest.mark.mpi
@pytest.mark.parametrize("op", [ReduceOp.SUM, ReduceOp.MAX, ReduceOp.AVG])
def test_reduce_reaches_only_the_root(dev: Any, op: ReduceOp) -> None:
    root = WORLD - 1
    buf = rank_data((ODD,), numpy.float64, RANK)
    dev.reduce(buf, op, root)
    expected = (reduce_expected(op, all_data((ODD,), numpy.float64)) if RANK == root
                else rank_data((ODD,), numpy.float64, RANK))
    _check(buf, expected)


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
    _check(recv, reduce_expected(op, all_data((WORLD, ODD), dtype))[RANK])


@pytest.mark.mpi
def test_reduce_scatter_v_with_empty_chunks(dev: Any) -> None:
    counts = [(r + 1) % 3 for r in range(WORLD)]
    send = rank_data((sum(counts),), numpy.complex64, RANK)
    recv = numpy.zeros(counts[RANK], numpy.complex64)
    dev.reduce_scatter_v(send, recv, counts, ReduceOp.SUM)
    total = reduce_expected(ReduceOp.SUM, all_data((sum(counts),), numpy.complex64))
    start = sum(counts[:RANK])
    _check(recv, total[start:start + counts[RANK]])


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
    _check(a, reduce_expected(ReduceOp.SUM, all_data((ODD,), numpy.float32)))
    _check(b, reduce_expected(ReduceOp.MAX, all_data((2 * ODD,), numpy.float64, salt=1)))


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
    with pytest.raises(TypeError, match="AVG needs a floating"):
        dev.all_reduce(numpy.ones(3, numpy.int32), ReduceOp.AVG)
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
    _check(buf, reduce_expected(ReduceOp.SUM, all_data((ODD,), numpy.float32)))


# -- NCCL ------------------------------------------------------------------------------------------
def _nccl(has_avg: bool = True) -> tuple[NCCLCommunicator, FakeNccl]:
    backend = FakeNccl(has_avg)
    return NCCLCommunicator(world_comm, HostOps(), backend), backend


@pytest.mark.mpi
def test_nccl_connects_once_per_group_and_maps_collectives() -> None:
    comm, backend = _nccl()
    assert not comm.connected
    x = numpy.ones(5, numpy.float32)
    for _ in range(3):
        comm.all_reduce(x, ReduceOp.AVG)
    comm.broadcast(x, 0)
    comm.reduce_scatter(numpy.ones(WORLD, numpy.float32), numpy.ones(1, numpy.float32))
    comm.all_gather(x, numpy.ones(5 * WORLD, numpy.float32))
    assert comm.connected and backend.connects == [WORLD]
    assert backend.calls == {"allReduce": 3, "bcast": 1, "reduceScatter": 1, "allGather": 1}
    comm.barrier()


@pytest.mark.mpi
def test_nccl_average_without_ncclavg_divides_after_a_sum() -> None:
    comm, backend = _nccl(has_avg=False)
    x = rank_data((ODD,), numpy.float32, RANK)
    comm.all_reduce(x, ReduceOp.AVG)
    _check(x, reduce_expected(ReduceOp.AVG, all_data((ODD,), numpy.float32)))
    assert backend.calls == {"allReduce": 1}


@pytest.mark.mpi
def test_nccl_falls_back_to_mpi_once_noted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nccl_module, "_noted", set())
    comm, backend = _nccl()
    x = rank_data((ODD,), numpy.int32, RANK)
    with pytest.warns(RuntimeWarning, match="NCCL has no bitwise reductions.*noted once"):
        comm.all_reduce(x, ReduceOp.BXOR)
    _check(x, reduce_expected(ReduceOp.BXOR, all_data((ODD,), numpy.int32)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        comm.all_reduce(x, ReduceOp.BXOR)   # no second note
    assert backend.calls == {}  # NCCL never ran
    assert isinstance(comm.all_reduce(x, ReduceOp.BXOR, async_op=True), Work)


@pytest.mark.mpi
def test_nccl_waits_for_its_queued_work_before_mpi() -> None:
    comm, _ = _nccl()
    waited: list[bool] = []

    class Pending:
        def wait(self) -> None:
            waited.append(True)

        def done(self) -> bool:
            return False

    comm._last = Pending()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        comm.all_reduce(numpy.ones(2, numpy.int16), ReduceOp.SUM)  # NCCL has no int16
    assert waited == [True] and comm._last is None
    comm._last = Pending()
    comm.barrier()
    assert waited == [True, True]


@needs_two
def test_nccl_point_to_point_uses_one_communicator_per_pair() -> None:
    comm, backend = _nccl()
    partner = RANK ^ 1
    if partner < WORLD:
        mine, got = numpy.full(4, float(RANK)), numpy.zeros(4)
        for _ in range(2):
            if RANK < partner:
                comm.send(mine, partner)
                comm.recv(got, partner)
            else:
                comm.recv(got, partner)
                comm.send(mine, partner)
        assert_same(got, numpy.full(4, float(partner)))
        assert backend.connects == [2]
    with pytest.raises(ValueError, match="any source"):
        comm.recv(numpy.zeros(1), None)
    with pytest.raises(ValueError, match="itself"):
        comm.send(numpy.zeros(1), RANK)


@needs_two
def test_nccl_after_connect_sends_on_the_group_communicator_even_ring_first() -> None:
    comm, backend = _nccl()
    comm.connect()
    assert comm.connected and backend.connects == [WORLD]
    after, before = (RANK + 1) % WORLD, (RANK - 1) % WORLD
    mine, got = numpy.full(4, float(RANK)), numpy.zeros(4)
    # Every rank sends first: with pair communicators made at first contact, their set-ups
    # would wait on each other around the ring.
    work = comm.send(mine, after, async_op=True)
    assert work is not None
    comm.recv(got, before)
    work.wait()
    assert_same(got, numpy.full(4, float(before)))
    assert backend.connects == [WORLD]  # no pair communicator was made
    assert backend.calls == {"send": 1, "recv": 1}


@pytest.mark.mpi
def test_init_process_group_nccl_connects_the_world_and_later_groups(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from mpiflow.distributed import world as pg_module

    made: dict[Any, NCCLCommunicator] = {}

    def device_communicator(mpi: Any) -> NCCLCommunicator:
        if mpi not in made:
            made[mpi] = NCCLCommunicator(mpi, HostOps(), FakeNccl(has_avg=True))
        return made[mpi]

    monkeypatch.setattr(pg_module, "_backend", pg_module._backend)
    monkeypatch.setattr(pg_module, "_connect_new_groups", False)
    monkeypatch.setattr(cuda, "is_available", lambda: True)
    monkeypatch.setattr(device_module, "device_communicator", device_communicator)
    flow.distributed.init_process_group(backend="nccl")
    assert made[world_comm].connected and made[world_comm].comms.p2p_on_group
    group = flow.distributed.new_group(list(range(WORLD)))
    assert made[group.comm].connected and made[group.comm].comms.p2p_on_group


@pytest.mark.mpi
def test_init_process_group_nccl_without_a_gpu_connects_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from mpiflow.distributed import world as pg_module

    monkeypatch.setattr(pg_module, "_backend", pg_module._backend)
    monkeypatch.setattr(pg_module, "_connect_new_groups", False)
    monkeypatch.setattr(cuda, "is_available", lambda: False)
    flow.distributed.init_process_group(backend="nccl")
    assert not pg_module._connect_new_groups
    assert world_comm.device_comm is None or not isinstance(world_comm.device_comm,
                                                             NCCLCommunicator)


@pytest.mark.mpi
def test_nccl_takes_host_arrays_too() -> None:
    comm, _ = _nccl()
    x = numpy.ones(3)
    comm.all_reduce(x)
    assert_same(x, numpy.full(3, float(WORLD)))


# -- what NCCL can reduce --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("dtype", "op", "has_avg", "expected"),
    [
        ("float32", ReduceOp.SUM, True, NcclReduction("float32", "sum")),
        ("float16", ReduceOp.AVG, True, NcclReduction("float16", "avg")),
        ("float64", ReduceOp.AVG, False, NcclReduction("float64", "sum", divide=True)),
        ("complex128", ReduceOp.AVG, True, NcclReduction("float64", "avg", 2)),
        ("complex64", ReduceOp.PRODUCT, True, "NCCL has no complex product"),
        ("bool", ReduceOp.SUM, True, NcclReduction("uint8", "max")),
        ("bool", ReduceOp.BAND, True, NcclReduction("uint8", "min")),
        ("bool", ReduceOp.BXOR, True, "NCCL has no logical xor"),
        ("int64", ReduceOp.MIN, True, NcclReduction("int64", "min")),
        ("uint8", ReduceOp.PRODUCT, True, NcclReduction("uint8", "prod")),
        ("int32", ReduceOp.BOR, True, "NCCL has no bitwise reductions"),
        ("int16", ReduceOp.SUM, True, "NCCL has no int16 type"),
        ("uint16", ReduceOp.MAX, True, "NCCL has no uint16 type"),
        ("longdouble", ReduceOp.SUM, True, f"NCCL has no {numpy.dtype('longdouble').name} type"),
    ],
)
def test_nccl_reduction_table(dtype: str, op: ReduceOp, has_avg: bool, expected: Any) -> None:
    assert nccl_reduction(numpy.dtype(dtype), op, has_avg) == expected


class _CupyNcclModule:
    """``cupy.cuda.nccl`` as each CuPy has it: the unique id and what NcclCommunicator takes.

    ``form``: "bytes" (CuPy 14 and later), "signed" (earlier CuPy on x86-64: a tuple of
    signed chars) or "unsigned" (earlier CuPy where char is unsigned).
    """

    def __init__(self, form: str) -> None:
        self.form = form
        self.made: list[tuple[int, bytes, int]] = []
        self._id = bytes(range(0, 256, 2))

    def get_unique_id(self) -> Any:
        if self.form == "bytes":
            return self._id
        return tuple(b - 256 if self.form == "signed" and b > 127 else b for b in self._id)

    def NcclCommunicator(self, ndev: int, comm_id: Any, rank: int) -> str:
        if self.form == "bytes":
            if not isinstance(comm_id, bytes):
                raise TypeError("Argument 'commId' has incorrect type (expected bytes)")
            raw = comm_id
        else:
            if not isinstance(comm_id, tuple):
                raise TypeError("Argument 'commId' has incorrect type (expected tuple)")
            low, high = (-128, 127) if self.form == "signed" else (0, 255)
            if any(not low <= v <= high for v in comm_id):
                raise OverflowError("value too large to convert to char")
            raw = bytes(v & 0xFF for v in comm_id)
        self.made.append((ndev, raw, rank))
        return "comm"


@pytest.mark.mpi
@pytest.mark.parametrize("form", ["bytes", "signed", "unsigned"])
def test_cupy_nccl_passes_the_unique_id_as_each_cupy_takes_it(form: str) -> None:
    lib = _CupyNcclModule(form)
    backend = object.__new__(nccl_module.CupyNccl)
    backend._nccl = lib
    uid = backend.unique_id()
    assert len(uid) == 128
    # the id crosses MPI as int16 (NCCLCommunicator._group); any rank may join with it
    carried = tuple(int(v) for v in numpy.array(uid, dtype=numpy.int16))
    assert backend.connect(3, carried, 1, None, None) == "comm"
    assert lib.made == [(3, bytes(range(0, 256, 2)), 1)]


def test_nccl_version_text() -> None:
    assert transport_module.nccl_version_text(23203) == "2.32.3"
    assert transport_module.nccl_version_text(21003) == "2.10.3"
    assert transport_module.nccl_version_text(2804) == "2.8.4"


# -- choosing the transport ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("backend", "nccl", "aware", "per_gpu", "transport", "fallback"),
    [
        ("auto", True, "yes", 1, Transport.NCCL, Transport.CUDA_AWARE_MPI),
        ("auto", True, "unknown", 1, Transport.NCCL, Transport.STAGED_MPI),
        ("nccl", True, "no", 1, Transport.NCCL, Transport.STAGED_MPI),
        ("nccl", True, "no", 2, Transport.NCCL, Transport.STAGED_MPI),
        ("auto", True, "yes", 2, Transport.CUDA_AWARE_MPI, Transport.CUDA_AWARE_MPI),
        ("auto", False, "yes", 1, Transport.CUDA_AWARE_MPI, Transport.CUDA_AWARE_MPI),
        ("auto", False, "no", 1, Transport.STAGED_MPI, Transport.STAGED_MPI),
        ("auto", False, "unknown", 1, Transport.STAGED_MPI, Transport.STAGED_MPI),
        ("mpi", True, "yes", 1, Transport.CUDA_AWARE_MPI, Transport.CUDA_AWARE_MPI),
        ("mpi", True, "unknown", 1, Transport.STAGED_MPI, Transport.STAGED_MPI),
    ],
)
def test_selection_table(backend: str, nccl: bool, aware: str, per_gpu: int,
                         transport: Transport, fallback: Transport) -> None:
    choice = select_transport(backend, nccl, aware, "NCCL 2.21.5", per_gpu)
    assert (choice.transport, choice.fallback) == (transport, fallback)
    assert choice.reason


def test_selection_reasons_and_errors() -> None:
    assert "share a GPU" in select_transport("auto", True, "no", ranks_per_gpu=2).reason
    assert "MPIFLOW_BACKEND=mpi" in select_transport("mpi", True, "yes").reason
    assert "unknown" in select_transport("auto", False, "unknown").reason
    with pytest.raises(RuntimeError, match=r"MPIFLOW_BACKEND=nccl.*not available.*not installed"):
        select_transport("nccl", False, "yes", "CuPy is not installed")
    with pytest.raises(ValueError, match="backend"):
        select_transport("gloo", True, "yes")
    with pytest.raises(ValueError, match="cuda_aware"):
        select_transport("auto", True, "maybe")


@pytest.mark.parametrize(("value", "expected"),
                         [(None, "auto"), ("", "auto"), ("mpi", "mpi"), ("NCCL", "nccl"),
                          (" auto ", "auto")])
def test_parse_backend(value: str | None, expected: str) -> None:
    env = {} if value is None else {"MPIFLOW_BACKEND": value}
    assert parse_backend(env) == expected


def test_parse_backend_refuses_other_values() -> None:
    with pytest.raises(ValueError, match=r"MPIFLOW_BACKEND must be 'mpi' or 'nccl'.*'gloo'"):
        parse_backend({"MPIFLOW_BACKEND": "gloo"})


@pytest.mark.parametrize(("value", "expected"),
                         [(None, None), ("", None), ("1", True), ("yes", True), ("0", False),
                          ("off", False)])
def test_parse_cuda_aware(value: str | None, expected: bool | None) -> None:
    env = {} if value is None else {"MPIFLOW_CUDA_AWARE": value}
    assert parse_cuda_aware(env) is expected


def test_parse_cuda_aware_refuses_other_values() -> None:
    with pytest.raises(ValueError, match="MPIFLOW_CUDA_AWARE must be 0 or 1"):
        parse_cuda_aware({"MPIFLOW_CUDA_AWARE": "maybe"})


@pytest.mark.parametrize(
    ("environ", "library", "answer"),
    [
        ({}, None, "unknown"),
        ({}, True, "yes"),
        ({"MPIR_CVAR_ENABLE_GPU": "1"}, False, "no"),     # the library knows better
        ({"MPIFLOW_CUDA_AWARE": "1"}, False, "yes"),      # the user overrides everything
        ({"MPIFLOW_CUDA_AWARE": "0"}, True, "no"),
        ({"MPICH_GPU_SUPPORT_ENABLED": "1"}, None, "yes"),
        ({"MV2_USE_CUDA": "0"}, None, "no"),
    ],
)
def test_cuda_awareness(environ: dict[str, str], library: bool | None, answer: str) -> None:
    assert cuda_aware_mpi(environ, lambda: library) == answer
    assert cuda_aware_source(environ, lambda: library)[1]


def test_the_library_query_never_raises() -> None:
    assert library_cuda_support() in (True, False, None)
    answer, source = cuda_aware_source()
    assert answer in ("yes", "no", "unknown") and source


def test_current_transport_from_the_environment() -> None:
    env = {"MPIFLOW_BACKEND": "mpi", "MPIFLOW_CUDA_AWARE": "1"}
    assert current_transport(env).transport is Transport.CUDA_AWARE_MPI
    env["MPIFLOW_CUDA_AWARE"] = "0"
    assert current_transport(env).transport is Transport.STAGED_MPI
    assert describe_transport({"MPIFLOW_BACKEND": "tcp"}).startswith("error: MPIFLOW_BACKEND")
    if not transport_module.nccl_status()[0]:
        with pytest.raises(RuntimeError, match="MPIFLOW_BACKEND=nccl"):
            current_transport({"MPIFLOW_BACKEND": "nccl"})
        assert current_transport({}).transport is not Transport.NCCL
    text = flow.env.get_gpu_transport()
    assert text.split()[0] in ("nccl", "cuda-aware-mpi", "staged-mpi", "error:")


def test_info_reports_the_gpu_transport() -> None:
    from mpiflow.info import collect

    info = collect()
    assert info["GPU transport"] and info["CUDA devices"] and info["CUDA-aware MPI"]


@pytest.mark.mpi
@pytest.mark.parametrize(
    ("choice", "kind"),
    [
        (TransportChoice(Transport.NCCL, Transport.STAGED_MPI, ""), NCCLCommunicator),
        (TransportChoice(Transport.CUDA_AWARE_MPI, Transport.CUDA_AWARE_MPI, ""),
         CudaAwareCommunicator),
        (TransportChoice(Transport.STAGED_MPI, Transport.STAGED_MPI, ""), StagedCommunicator),
    ],
)
def test_build_device_communicator(choice: TransportChoice, kind: type) -> None:
    built = device_module.build_device_communicator(world_comm, HostOps(), choice,
                                                    nccl_backend=FakeNccl(True))
    assert type(built) is kind
    assert device_module.transport_of(built) is choice.transport
    if isinstance(built, NCCLCommunicator):
        assert isinstance(built.fallback, StagedCommunicator)


# -- device arrays reach the device communicator -----------------------------------------------
class _FakeDeviceArray(numpy.ndarray):
    """What the routing sees as a CuPy array (a numpy subclass, so HostOps can move it)."""


@pytest.mark.mpi
def test_mpi_communicator_routes_device_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    import mpiflow.distributed as dist

    ops = HostOps()
    staged = StagedCommunicator(world_comm, ops)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(ndarray=_FakeDeviceArray))
    monkeypatch.setattr(world_comm, "device_comm", staged)
    x = numpy.ones(3).view(_FakeDeviceArray)
    dist.all_reduce(x)
    assert ops.to_host_copies == 1 and numpy.asarray(x).tolist() == [WORLD] * 3
    world_comm.all_gather(numpy.ones(2), numpy.zeros(2 * WORLD).view(_FakeDeviceArray))
    assert ops.to_device_copies == 2
    plain = numpy.ones(3)
    world_comm.all_reduce(plain)        # host arrays never reach it
    assert ops.to_host_copies == 2 and plain.tolist() == [WORLD] * 3


# -- 'cuda' tensors where CuPy or a device is missing ------------------------------------------
def test_explain_says_what_is_missing() -> None:
    assert cuda.explain(None, 2) is None
    missing = cuda.explain("missing", 0)
    assert missing is not None and "CuPy is not installed (pip install cupy-cuda12x" in missing
    broken = cuda.explain("ImportError: libcudart.so.12", 0)
    assert broken is not None and "does not import (ImportError: libcudart.so.12)" in broken
    none = cuda.explain(None, 0, "cudaErrorNoDevice", {"CUDA_VISIBLE_DEVICES": ""})
    assert none is not None
    assert "CuPy is installed but no CUDA device is visible (CUDA_VISIBLE_DEVICES='')" in none
    assert "cudaErrorNoDevice" in none
    unset = cuda.explain(None, 0, None, {})
    assert unset is not None and "CUDA_VISIBLE_DEVICES=unset" in unset


no_cuda = pytest.mark.skipif(cuda.is_available(), reason="CuPy and a CUDA device are present")


@pytest.mark.mpi
@no_cuda
def test_cuda_tensors_raise_the_reason() -> None:
    reason = cuda.unavailable_reason()
    assert reason is not None
    p = flow.placement("cuda", list(range(WORLD)))  # a placement is only a description
    x = flow.tensor([1.0, 2.0])
    g = x.to_global(flow.placement("cpu", list(range(WORLD))), flow.sbp.broadcast)
    attempts: list[Callable[[], Any]] = [
        lambda: flow.zeros(4, placement=p, sbp=flow.sbp.split(0)),
        lambda: flow.ones(4, device="cuda"),
        lambda: flow.full((2,), 3.0, placement=p, sbp=flow.sbp.broadcast),
        lambda: flow.arange(5, placement=p, sbp=flow.sbp.split(0)),
        lambda: flow.tensor([1.0], placement=p, sbp=flow.sbp.broadcast),
        lambda: flow.randn(3, placement=p, sbp=flow.sbp.broadcast),
        lambda: flow.zeros_like(x).to("cuda:0"),
        x.cuda,
        lambda: x.to("cuda"),
        lambda: g.to("cuda"),
    ]
    for attempt in attempts:
        with pytest.raises(cuda.CudaUnavailableError) as info:
            attempt()
        assert str(info.value) == reason
        assert isinstance(info.value, RuntimeError)
    with pytest.raises(cuda.CudaUnavailableError, match="'cuda' tensors need CuPy"):
        cuda.require()
    assert cuda.device_count() == 0 or cuda.unavailable_reason() is None


def test_gpu_modules_import_without_cupy() -> None:
    code = (
        "import sys\n"
        "import mpiflow, mpiflow.cuda, mpiflow.info\n"
        "import mpiflow.communication.gpu.transport, mpiflow.communication.gpu.staging\n"
        "import mpiflow.communication.gpu.nccl, mpiflow.communication.gpu.maker\n"
        "import mpiflow.communication.gpu.cuda_aware, mpiflow.bench.cuda_cases\n"
        "assert 'cupy' not in sys.modules, 'importing mpiflow imported cupy'\n"
        "sys.modules['cupy'] = None  # as if CuPy were not installed\n"
        "try:\n"
        "    mpiflow.zeros(2, device='cuda')\n"
        "except mpiflow.cuda.CudaUnavailableError as e:\n"
        "    print(e)\n"
        "print(mpiflow.env.get_gpu_transport())\n"
    )
    job = run_job(1, code, launcher=[])
    assert job.returncode == 0, job.stderr
    assert "CuPy is not installed (pip install cupy-cuda12x" in job.stdout
    assert "staged-mpi" in job.stdout or "cuda-aware-mpi" in job.stdout
