"""The NCCL communicator without a GPU: its mapping of each call, fallbacks, and what NCCL reduces.

NCCL itself is played by :class:`gpu_helpers.FakeNccl` (NCCL's calls carried out with MPI on host
memory); CuPy's NCCL module by a small stand-in that records how the unique id is passed.
"""

from __future__ import annotations

import warnings
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
)
from gpu_helpers import FakeNccl, check_result
from helpers import rank_data

import mpiflow as flow
from mpiflow import cuda
from mpiflow.communication import ReduceOp, Work
from mpiflow.communication.gpu import maker as device_module
from mpiflow.communication.gpu import nccl as nccl_module
from mpiflow.communication.gpu import transport as transport_module
from mpiflow.communication.gpu.array_ops import HostOps
from mpiflow.communication.gpu.nccl import NCCLCommunicator
from mpiflow.communication.gpu.transport import (
    NcclReduction,
    nccl_reduction,
)
from mpiflow.communication.mpi.group import world_comm


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
    check_result(x, reduce_expected(ReduceOp.AVG, all_data((ODD,), numpy.float32)))
    assert backend.calls == {"allReduce": 1}


@pytest.mark.mpi
def test_nccl_falls_back_to_mpi_once_noted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nccl_module, "_noted", set())
    comm, backend = _nccl()
    x = rank_data((ODD,), numpy.int32, RANK)
    with pytest.warns(RuntimeWarning, match="NCCL has no bitwise reductions.*noted once"):
        comm.all_reduce(x, ReduceOp.BXOR)
    check_result(x, reduce_expected(ReduceOp.BXOR, all_data((ODD,), numpy.int32)))
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
        ("int64", ReduceOp.AVG, True, NcclReduction("int64", "avg")),
        ("uint8", ReduceOp.AVG, False, "NCCL before 2.10 cannot average uint8"),
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


