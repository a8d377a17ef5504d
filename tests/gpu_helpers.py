"""Helpers of the GPU transport tests: a stand-in for NCCL (its calls run with MPI on host memory).

:class:`FakeNccl` takes NCCL's calls (pointers, counts, datatype and reduction codes, groups) and
performs them with mpi4py on numpy views of host memory, so the NCCL communicator's mapping of
each collective is checked at every rank count without a GPU (tests/communication/test_gpu_*.py).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy
from collective_helpers import assert_same
from mpi4py import MPI

from mpiflow.communication.gpu.nccl import NcclBackend

# -- the stand-in ------------------------------------------------------------------------
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
        if _REDUCTIONS[op] == "avg" and out.dtype.kind in "iu":  # ncclAvg: C's division
            out[...] = numpy.sign(out) * (numpy.abs(out) // self.comm.Get_size())
        elif _REDUCTIONS[op] == "avg":
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


def check_result(actual: numpy.ndarray, expected: numpy.ndarray) -> None:
    """Floating results to a relative 1e-6 (the dtype kept), the others exactly."""
    if actual.dtype.kind in "fc":
        assert actual.dtype == expected.dtype
        numpy.testing.assert_allclose(actual, expected, rtol=1e-6)
    else:
        assert_same(actual, expected)
