"""Benchmark cases on CUDA devices, for ``python -m mpiflow.bench --device cuda``.

Every collective is measured against two baselines on the *same* CuPy buffers:

* ``cuda_<op>``: mpiflow (through whatever transport it chose) against raw mpi4py. On a
  CUDA-aware MPI the raw side synchronizes the stream and hands the CuPy arrays to mpi4py; on
  any other MPI it stages them by hand through pinned host buffers (``get``, MPI, ``set``),
  the best a program can do without mpiflow.
* ``nccl_<op>``: mpiflow against NCCL called directly through ``cupy.cuda.nccl``, on an NCCL
  communicator of its own, synchronizing the stream after each call as mpiflow's blocking
  calls do.

Importing this module registers the cases (``devices=("cuda",)``, so a CPU run never selects
them) and imports nothing from CuPy; building a case does. To hook it into the command line:

* ``bench/__init__.py``, after ``from .cases import ...``: ``from . import cuda_cases``;
* ``cli.py``: ``--device`` with ``choices=("cpu", "cuda")``;
* ``runner.make_context``: for ``device == "cuda"`` return
  ``cuda_cases.make_context(dtype)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy
from mpi4py import MPI

from .. import distributed as dist
from ..communication.gpu.transport import cuda_aware_mpi
from ..communication.mpi.group import world_comm
from .cases import BenchCase, Context, Prepared, register
from .metrics import (
    ALL_REDUCE_FACTOR,
    ONE_FACTOR,
    SPREAD_FACTOR,
    BusFactor,
    Layout,
    chunked_layout,
    gather_layout,
    scatter_layout,
    whole_layout,
)

__all__ = ["CUDA_CASES", "make_context"]


def make_context(dtype: str = "float32") -> Context:
    """The context of CUDA cases: mpiflow's world, CuPy on this rank's device, ``dtype``.

    Raises:
        CudaUnavailableError: no CuPy or no CUDA device (the message says which).
    """
    from .. import cuda

    return Context(world_comm.mpi_comm, world_comm.rank, world_comm.size, cuda.require(),
                   numpy.dtype(dtype), "cuda")


def _buffers(ctx: Context, layout: Layout) -> tuple[Any, Any]:
    """The send buffer (None for in-place operations) and the receive buffer, zeros."""
    send = ctx.xp.zeros(layout.send, dtype=ctx.dtype) if layout.send else None
    return send, ctx.xp.zeros(layout.recv, dtype=ctx.dtype)


def _stream(ctx: Context) -> Any:
    return ctx.xp.cuda.get_current_stream()


def _pinned_like(ctx: Context, buf: Any) -> numpy.ndarray:
    memory = ctx.xp.cuda.alloc_pinned_memory(max(buf.nbytes, 1))
    return numpy.ndarray(buf.shape, dtype=buf.dtype, buffer=memory)


def _raw_mpi(ctx: Context, bufs: Sequence[Any], ins: Sequence[int], outs: Sequence[int],
             call: Callable[..., Any]) -> Callable[[], None]:
    """Raw mpi4py on CuPy buffers: direct on a CUDA-aware MPI, else staged by hand."""
    stream = _stream(ctx)
    if cuda_aware_mpi() == "yes":
        def direct() -> None:
            stream.synchronize()
            call(*bufs)

        return direct
    hosts = [_pinned_like(ctx, b) for b in bufs]

    def staged() -> None:
        for i in ins:
            bufs[i].get(out=hosts[i], blocking=True)
        call(*hosts)
        for i in outs:
            bufs[i].set(hosts[i])
        stream.synchronize()

    return staged


_raw_nccl: dict[str, Any] = {}


def _nccl(ctx: Context) -> tuple[Any, Any]:
    """NCCL's module and a communicator of the world, made once (collective the first time)."""
    if "comm" not in _raw_nccl:
        from cupy.cuda import nccl

        uid = ctx.comm.bcast(nccl.get_unique_id() if ctx.rank == 0 else None, root=0)
        _raw_nccl.update(module=nccl, comm=nccl.NcclCommunicator(ctx.nranks, uid, ctx.rank))
    return _raw_nccl["module"], _raw_nccl["comm"]


def _raw_nccl_call(ctx: Context, launch: Callable[[Any, Any, int, int], None]
                   ) -> Callable[[], None]:
    """``launch(nccl, comm, datatype, stream)`` then a stream synchronization."""
    nccl, comm = _nccl(ctx)
    datatype = getattr(nccl, "NCCL_" + ctx.dtype.name.upper())
    stream = _stream(ctx)

    def run() -> None:
        launch(nccl, comm, datatype, stream.ptr)
        stream.synchronize()

    return run


# -- the builds ------------------------------------------------------------------------------
def _all_reduce(ctx: Context, layout: Layout, vs: str) -> Prepared:
    _, buf = _buffers(ctx, layout)
    flow = partial(dist.all_reduce, buf)
    if vs == "mpi":
        raw = _raw_mpi(ctx, [buf], [0], [0],
                       lambda b: ctx.comm.Allreduce(MPI.IN_PLACE, b, MPI.SUM))
    else:
        raw = _raw_nccl_call(ctx, lambda nccl, comm, dt, s: comm.allReduce(
            buf.data.ptr, buf.data.ptr, buf.size, dt, nccl.NCCL_SUM, s))
    return Prepared(flow, raw, None, buf)


def _all_gather(ctx: Context, layout: Layout, vs: str) -> Prepared:
    send, recv = _buffers(ctx, layout)
    flow = partial(dist.all_gather_into_tensor, recv, send)
    if vs == "mpi":
        raw = _raw_mpi(ctx, [send, recv], [0], [1], ctx.comm.Allgather)
    else:
        raw = _raw_nccl_call(ctx, lambda nccl, comm, dt, s: comm.allGather(
            send.data.ptr, recv.data.ptr, send.size, dt, s))
    return Prepared(flow, raw, send, recv)


def _reduce_scatter(ctx: Context, layout: Layout, vs: str) -> Prepared:
    send, recv = _buffers(ctx, layout)
    flow = partial(dist.reduce_scatter_tensor, recv, send)
    if vs == "mpi":
        raw = _raw_mpi(ctx, [send, recv], [0], [1],
                       lambda s, r: ctx.comm.Reduce_scatter_block(s, r, MPI.SUM))
    else:
        raw = _raw_nccl_call(ctx, lambda nccl, comm, dt, s: comm.reduceScatter(
            send.data.ptr, recv.data.ptr, recv.size, dt, nccl.NCCL_SUM, s))
    return Prepared(flow, raw, send, recv)


def _broadcast(ctx: Context, layout: Layout, vs: str) -> Prepared:
    _, buf = _buffers(ctx, layout)
    flow = partial(dist.broadcast, buf, 0)
    if vs == "mpi":
        raw = _raw_mpi(ctx, [buf], [0] if ctx.rank == 0 else [], [] if ctx.rank == 0 else [0],
                       lambda b: ctx.comm.Bcast(b, 0))
    else:
        raw = _raw_nccl_call(ctx, lambda nccl, comm, dt, s: comm.bcast(
            buf.data.ptr, buf.size, dt, 0, s))
    return Prepared(flow, raw, None, buf)


def _all_to_all(ctx: Context, layout: Layout, vs: str) -> Prepared:
    send, recv = _buffers(ctx, layout)
    flow = partial(dist.all_to_all_single, recv, send)
    if vs == "mpi":
        raw = _raw_mpi(ctx, [send, recv], [0], [1], ctx.comm.Alltoall)
    else:
        chunk = send.size // ctx.nranks
        item = send.dtype.itemsize

        def launch(nccl: Any, comm: Any, dt: int, s: int) -> None:
            nccl.groupStart()
            try:  # an error must not leave NCCL's group open for every later call
                for peer in range(ctx.nranks):
                    comm.send(send.data.ptr + peer * chunk * item, chunk, dt, peer, s)
                    comm.recv(recv.data.ptr + peer * chunk * item, chunk, dt, peer, s)
            finally:
                nccl.groupEnd()

        raw = _raw_nccl_call(ctx, launch)
    return Prepared(flow, raw, send, recv)


_OPS: list[tuple[str, str, str, str, Callable[[int, int, int], Layout], BusFactor,
                 Callable[..., Prepared]]] = [
    ("all_reduce", "dist.all_reduce(buf)", "comm.Allreduce(IN_PLACE, buf, SUM)",
     "nccl allReduce(buf, buf, SUM)", whole_layout, ALL_REDUCE_FACTOR, _all_reduce),
    ("all_gather", "dist.all_gather_into_tensor(out, inp)", "comm.Allgather(inp, out)",
     "nccl allGather(inp, out)", gather_layout, SPREAD_FACTOR, _all_gather),
    ("reduce_scatter", "dist.reduce_scatter_tensor(out, inp)",
     "comm.Reduce_scatter_block(inp, out, SUM)", "nccl reduceScatter(inp, out, SUM)",
     scatter_layout, SPREAD_FACTOR, _reduce_scatter),
    ("broadcast", "dist.broadcast(buf, src=0)", "comm.Bcast(buf, 0)", "nccl bcast(buf, 0)",
     whole_layout, ONE_FACTOR, _broadcast),
    ("all_to_all", "dist.all_to_all_single(out, inp)", "comm.Alltoall(inp, out)",
     "nccl grouped send/recv", chunked_layout, SPREAD_FACTOR, _all_to_all),
]

CUDA_CASES: list[BenchCase] = []
for _name, _flow, _mpi, _nccl_call, _layout, _factor, _build in _OPS:
    CUDA_CASES.append(register(BenchCase(
        f"cuda_{_name}", "cuda: mpiflow vs mpi4py on CuPy arrays", _flow,
        f"{_mpi} (CUDA-aware, or staged by hand)", _layout, _factor,
        partial(_build, vs="mpi"), devices=("cuda",))))
    CUDA_CASES.append(register(BenchCase(
        f"nccl_{_name}", "cuda: mpiflow vs NCCL", _flow, _nccl_call, _layout, _factor,
        partial(_build, vs="nccl"), devices=("cuda",))))
