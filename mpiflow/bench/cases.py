"""The registry of benchmark cases: each pairs an mpiflow call with the same raw mpi4py call.

A case is data: its name, the table it belongs to, how a requested size becomes buffers
(:mod:`.metrics` layouts), its bus factor, and a ``build`` function that allocates the buffers
once and returns the two zero-argument calls to time, mpiflow's and raw mpi4py's, on the *same*
buffers and the same communicator (mpiflow's own, ``world_comm.mpi_comm``). Adding a benchmark
is one ``build`` function and one :func:`register` call::

    register(BenchCase("my_op", "collectives", "dist.my_op(buf)", "comm.My_op(buf)",
                       whole_layout, ONE_FACTOR, _build_my_op))
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

from mpi4py import MPI

from .. import distributed as dist
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

__all__ = ["CASES", "BenchCase", "Context", "Prepared", "register", "select"]


@dataclass(frozen=True)
class Context:
    """Where a case runs: the raw communicator under mpiflow's world, and the buffers' kind.

    Attributes:
        comm: the mpi4py communicator mpiflow's world group talks on (the raw side uses it).
        rank: this process's rank in ``comm`` (the world rank).
        nranks: the number of ranks.
        xp: the array module of the buffers (numpy).
        dtype: the buffers' dtype (a ``numpy.dtype``).
        device: where the buffers live (``"cpu"``).
    """

    comm: Any
    rank: int
    nranks: int
    xp: Any
    dtype: Any
    device: str = "cpu"


class Prepared(NamedTuple):
    """A case built at one size: the two calls to time and the buffers they share.

    Attributes:
        mpiflow: runs the operation once through mpiflow's public API.
        raw: runs the same operation once through raw mpi4py.
        send: the send buffer, or None for an in-place operation.
        recv: the receive (or in-place) buffer.
        raw_other: a second raw form of the same operation (the case's ``raw_forms``), timed
            in the same rounds; the row compares mpiflow with the faster of the two.
    """

    mpiflow: Callable[[], Any]
    raw: Callable[[], Any]
    send: Any | None
    recv: Any
    raw_other: Callable[[], Any] | None = None


@dataclass(frozen=True)
class BenchCase:
    """One benchmark: what to run and how to read its timings.

    Attributes:
        name: the name ``--ops`` selects it by.
        table: the group of tables it belongs to (e.g. ``"collectives"``).
        mpiflow_call: the mpiflow call, as printed in its table's heading.
        raw_call: the raw mpi4py call, as printed in its table's heading.
        layout: ``(nbytes, itemsize, nranks) -> Layout``: the buffers at a requested size.
        bus_factor: nccl-tests' bus bandwidth factor.
        build: ``(Context, Layout) -> Prepared``: allocates the buffers, returns the calls.
        min_ranks: the fewest ranks it can run on (it is skipped below).
        ops_per_call: operations one call performs; each timing is divided by it (a ping-pong
            round trip is 2 one-way messages, as osu_latency reports half the round trip).
        devices: the devices it can run on.
        raw_forms: the names of ``raw`` and ``raw_other`` when the case times two raw forms
            (the row is then mpiflow against the faster); empty for one.
    """

    name: str
    table: str
    mpiflow_call: str
    raw_call: str
    layout: Callable[[int, int, int], Layout]
    bus_factor: BusFactor
    build: Callable[[Context, Layout], Prepared]
    min_ranks: int = 1
    ops_per_call: int = 1
    devices: tuple[str, ...] = ("cpu",)
    raw_forms: tuple[str, ...] = ()


CASES: dict[str, BenchCase] = {}


def register(case: BenchCase) -> BenchCase:
    """Add a case to the registry (its name must be new) and return it."""
    if case.name in CASES:
        raise ValueError(f"a benchmark case named {case.name!r} is already registered")
    CASES[case.name] = case
    return case


def select(names: Iterable[str] | None = None, device: str = "cpu") -> list[BenchCase]:
    """The cases to run, in the order given (None: every case for ``device``, registry order).

    Raises:
        ValueError: an unknown name, or a case that cannot run on ``device``.
    """
    if names is None:
        return [c for c in CASES.values() if device in c.devices]
    chosen = []
    for name in names:
        case = CASES.get(name)
        if case is None:
            raise ValueError(f"unknown benchmark {name!r}; choose from {', '.join(CASES)}")
        if device not in case.devices:
            raise ValueError(f"benchmark {name!r} does not run on {device!r}")
        chosen.append(case)
    return chosen


def _buffers(ctx: Context, layout: Layout) -> tuple[Any | None, Any]:
    send = ctx.xp.zeros(layout.send, dtype=ctx.dtype) if layout.send else None
    return send, ctx.xp.zeros(layout.recv, dtype=ctx.dtype)


# Zeros stay zeros under repeated in-place sums, so no value ever overflows or turns denormal.
# functools.partial is the cheapest callable wrapper, and both sides get the same one.

def _build_all_reduce(ctx: Context, layout: Layout) -> Prepared:
    _, buf = _buffers(ctx, layout)
    return Prepared(partial(dist.all_reduce, buf),
                    partial(ctx.comm.Allreduce, MPI.IN_PLACE, buf, MPI.SUM), None, buf)


def _build_all_reduce_out_of_place(ctx: Context, layout: Layout) -> Prepared:
    """mpiflow's in-place all-reduce against MPI's out-of-place form of the same sum.

    Libraries differ in which form is faster (Intel MPI's out-of-place call beats its in-place
    one at large sizes, MPICH's the reverse); the raw side reads ``send`` and writes ``buf``.
    """
    _, buf = _buffers(ctx, layout)
    send = ctx.xp.zeros_like(buf)
    return Prepared(partial(dist.all_reduce, buf),
                    partial(ctx.comm.Allreduce, send, buf, MPI.SUM), send, buf)


def _build_all_reduce_best(ctx: Context, layout: Layout) -> Prepared:
    """mpiflow's all-reduce against the faster of MPI's two forms at each size: in place on
    ``buf``, and out of place from ``send`` into ``buf`` (no copy on the raw side)."""
    _, buf = _buffers(ctx, layout)
    send = ctx.xp.zeros_like(buf)
    return Prepared(partial(dist.all_reduce, buf),
                    partial(ctx.comm.Allreduce, MPI.IN_PLACE, buf, MPI.SUM), send, buf,
                    partial(ctx.comm.Allreduce, send, buf, MPI.SUM))


def _build_all_gather(ctx: Context, layout: Layout) -> Prepared:
    send, recv = _buffers(ctx, layout)
    return Prepared(partial(dist.all_gather_into_tensor, recv, send),
                    partial(ctx.comm.Allgather, send, recv), send, recv)


def _build_reduce_scatter(ctx: Context, layout: Layout) -> Prepared:
    send, recv = _buffers(ctx, layout)
    return Prepared(partial(dist.reduce_scatter_tensor, recv, send),
                    partial(ctx.comm.Reduce_scatter_block, send, recv, MPI.SUM), send, recv)


def _build_broadcast(ctx: Context, layout: Layout) -> Prepared:
    _, buf = _buffers(ctx, layout)
    return Prepared(partial(dist.broadcast, buf, 0), partial(ctx.comm.Bcast, buf, 0), None, buf)


def _build_all_to_all(ctx: Context, layout: Layout) -> Prepared:
    send, recv = _buffers(ctx, layout)
    return Prepared(partial(dist.all_to_all_single, recv, send),
                    partial(ctx.comm.Alltoall, send, recv), send, recv)


def _idle() -> None:
    """What a rank outside the ping-pong pair runs."""


def _build_send_recv(ctx: Context, layout: Layout) -> Prepared:
    """osu_latency's ping-pong between ranks 0 and 1; other ranks stay idle."""
    _, buf = _buffers(ctx, layout)
    comm, send, recv = ctx.comm, dist.send, dist.recv
    if ctx.rank == 0:
        def flow_ping() -> None:
            send(buf, 1)
            recv(buf, 1)

        def raw_ping() -> None:
            comm.Send(buf, 1, 0)
            comm.Recv(buf, 1, 0)

        return Prepared(flow_ping, raw_ping, None, buf)
    if ctx.rank == 1:
        def flow_pong() -> None:
            recv(buf, 0)
            send(buf, 0)

        def raw_pong() -> None:
            comm.Recv(buf, 0, 0)
            comm.Send(buf, 0, 0)

        return Prepared(flow_pong, raw_pong, None, buf)
    return Prepared(_idle, _idle, None, buf)


register(BenchCase("all_reduce", "collectives", "dist.all_reduce(buf)",
                   "comm.Allreduce(MPI.IN_PLACE, buf, MPI.SUM)",
                   whole_layout, ALL_REDUCE_FACTOR, _build_all_reduce))
register(BenchCase("all_reduce_out_of_place", "collectives", "dist.all_reduce(buf)",
                   "comm.Allreduce(send, buf, MPI.SUM)",
                   whole_layout, ALL_REDUCE_FACTOR, _build_all_reduce_out_of_place))
register(BenchCase("all_reduce_best", "collectives", "dist.all_reduce(buf)",
                   "the faster of comm.Allreduce(MPI.IN_PLACE, buf, MPI.SUM) and "
                   "comm.Allreduce(send, buf, MPI.SUM)",
                   whole_layout, ALL_REDUCE_FACTOR, _build_all_reduce_best,
                   raw_forms=("in-place", "out-of-place")))
register(BenchCase("all_gather", "collectives", "dist.all_gather_into_tensor(out, inp)",
                   "comm.Allgather(inp, out)",
                   gather_layout, SPREAD_FACTOR, _build_all_gather))
register(BenchCase("reduce_scatter", "collectives", "dist.reduce_scatter_tensor(out, inp)",
                   "comm.Reduce_scatter_block(inp, out, MPI.SUM)",
                   scatter_layout, SPREAD_FACTOR, _build_reduce_scatter))
register(BenchCase("broadcast", "collectives", "dist.broadcast(buf, src=0)",
                   "comm.Bcast(buf, 0)",
                   whole_layout, ONE_FACTOR, _build_broadcast))
register(BenchCase("all_to_all", "collectives", "dist.all_to_all_single(out, inp)",
                   "comm.Alltoall(inp, out)",
                   chunked_layout, SPREAD_FACTOR, _build_all_to_all))
register(BenchCase("send_recv", "point-to-point",
                   "dist.send(buf, peer); dist.recv(buf, peer)",
                   "comm.Send(buf, peer, 0); comm.Recv(buf, peer, 0)",
                   whole_layout, ONE_FACTOR, _build_send_recv, min_ranks=2, ops_per_call=2))
