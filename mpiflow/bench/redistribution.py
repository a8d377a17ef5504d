"""Redistribution of global tensors: ``x.to_global(sbp=...)`` beside the one raw collective.

The ``redistribution`` suite of ``python -m mpiflow.bench``. A float32 global tensor of shape
``(rows, cols)`` on a 1-D placement of every rank is converted from one layout to another
through the public API, ``x.to_global(sbp=dst)`` (which plans the conversion and runs
:func:`mpiflow.boxing.redistribute` on the local shard, and returns a new tensor each call).
Beside it, raw mpi4py does the same job with the one MPI collective that does it, on buffers
allocated once:

============  ==================================  =====================================
conversion    raw, rows and cols divisible by n   raw, uneven shape
============  ==================================  =====================================
S(0) -> B     ``Allgather(shard, out)``           ``Allgatherv(shard, [out, counts])``
P -> B        ``Allreduce(local, out, SUM)``      the same
P -> S(0)     ``Reduce_scatter_block(local, out)``  ``Reduce_scatter(local, out, counts)``
S(0) -> S(1)  pack column blocks, ``Alltoall``    pack, ``Alltoallv``
============  ==================================  =====================================

For ``S(0) -> S(1)`` the raw side copies its shard's column blocks into a send buffer (as any
program must) and the received rows form the new shard directly; mpiflow does the same copy.
So every ratio is what mpiflow's planning, checks and fresh output arrays cost on top of the
collective. The collectives mpiflow issued in one conversion are counted with
:func:`mpiflow.communication.count_collectives`: one each.

The pure parts (:data:`CONVERSIONS`, :func:`tensor_shape`, :class:`RedistRow`) need no MPI.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy
from mpi4py import MPI

from ..communication import count_collectives
from ..communication.mpi.group import world_comm
from ..layouts.placement import Placement
from ..layouts.sbp import Broadcast, Partial, SbpParallel, Split, balanced_sizes
from ..layouts.shards import local_shape
from ..tensors.tensor import Tensor
from .metrics import Timings, bandwidth
from .plan import Settings

__all__ = [
    "CONVERSIONS",
    "Conversion",
    "RedistPrepared",
    "RedistRow",
    "build_conversion",
    "run_redistribution",
    "tensor_shape",
]

_COLS = 1024


@dataclass(frozen=True)
class Conversion:
    """One layout change of a 2-D global tensor on a 1-D placement.

    Attributes:
        name: as printed, e.g. ``"S(0)->B"``.
        src: the layout before.
        dst: the layout after.
        raw_even: the raw mpi4py collective when rows and cols are divisible by the ranks.
        raw_uneven: the raw collective otherwise.
    """

    name: str
    src: SbpParallel
    dst: SbpParallel
    raw_even: str
    raw_uneven: str

    def raw_call(self, even: bool) -> str:
        """The raw collective's name for an even or an uneven shape."""
        return self.raw_even if even else self.raw_uneven


CONVERSIONS: tuple[Conversion, ...] = (
    Conversion("S(0)->B", Split(0), Broadcast(), "Allgather", "Allgatherv"),
    Conversion("P->B", Partial(), Broadcast(), "Allreduce", "Allreduce"),
    Conversion("P->S(0)", Partial(), Split(0), "Reduce_scatter_block", "Reduce_scatter"),
    Conversion("S(0)->S(1)", Split(0), Split(1), "Alltoall (after packing)",
               "Alltoallv (after packing)"),
)


def tensor_shape(nbytes: int, itemsize: int, nranks: int, even: bool = True) -> tuple[int, int]:
    """The ``(rows, cols)`` of the tensor of about ``nbytes`` the suite converts.

    ``cols`` is 1024 rounded down to a multiple of ``nranks``; ``rows`` fills ``nbytes`` and is
    rounded down to a multiple of ``nranks`` (at least ``nranks``). The uneven shape adds one
    row and one column, so that neither divides by ``nranks`` (when ``nranks > 1``) and every
    collective takes its ``v`` form.

    Examples:
        >>> tensor_shape(1 << 20, 4, 2), tensor_shape(1 << 20, 4, 2, even=False)
        ((256, 1024), (257, 1025))
    """
    cols = max(nranks, _COLS - _COLS % nranks)
    rows = max(nranks, nbytes // (itemsize * cols) // nranks * nranks)
    return (rows, cols) if even else (rows + 1, cols + 1)


@dataclass(frozen=True)
class RedistRow:
    """One conversion at one shape: both sides' round times and mpiflow's collectives.

    Attributes:
        conversion: the conversion's name.
        shape: the global tensor's shape.
        nbytes: its size in bytes.
        even: whether rows and cols divide by the ranks.
        raw_call: the raw collective.
        iters: timed calls per batch.
        nranks: the number of ranks.
        collectives: the communicator operations one mpiflow conversion issued, by name.
        timings: sides ``"mpiflow"`` and ``"raw"``.
    """

    conversion: str
    shape: tuple[int, int]
    nbytes: int
    even: bool
    raw_call: str
    iters: int
    nranks: int
    collectives: tuple[tuple[str, int], ...]
    timings: Timings

    @property
    def ratio(self) -> float:
        """mpiflow's time over raw mpi4py's, paired by round."""
        return self.timings.ratio("mpiflow", "raw")

    def gbps(self, side: str) -> float:
        """The tensor's size over ``side``'s time, in GB/s."""
        return bandwidth(self.nbytes, self.timings.time(side))

    @property
    def collective_count(self) -> int:
        """How many operations mpiflow issued in one conversion."""
        return sum(n for _, n in self.collectives)

    def to_json(self) -> dict[str, Any]:
        """The row as JSON-ready data (times in microseconds)."""
        return {"conversion": self.conversion, "shape": list(self.shape), "bytes": self.nbytes,
                "even": self.even, "raw_call": self.raw_call, "iters": self.iters,
                "ranks": self.nranks, "collectives": dict(self.collectives),
                "ratio": self.ratio, "GBps": {s: self.gbps(s) for s in self.timings.sides},
                "sides": self.timings.to_json()}


class RedistPrepared(NamedTuple):
    """A conversion built at one shape.

    Attributes:
        mpiflow: runs ``x.to_global(sbp=dst)`` once and returns the new global tensor.
        raw: runs the raw collective once (into ``raw_out``).
        raw_out: the raw side's output: this rank's shard under the target layout.
    """

    mpiflow: Callable[[], Tensor]
    raw: Callable[[], Any]
    raw_out: numpy.ndarray


def _values(shape: tuple[int, ...], rank: int) -> numpy.ndarray:
    """Small integers as float32 (sums in any order are exact), different on every rank."""
    count = int(numpy.prod(shape))
    values = (numpy.arange(count, dtype=numpy.int64) + 3 * rank) % 7
    return values.astype(numpy.float32).reshape(shape)


def build_conversion(conversion: Conversion, shape: tuple[int, int],
                     placement: Placement | None = None, comm: Any = None) -> RedistPrepared:
    """Make this rank's shard of the source tensor and the two sides' calls (no communication).

    Args:
        conversion: the layout change.
        shape: the global shape (rows, cols).
        placement: a 1-D placement of every rank (default: the world's).
        comm: the mpi4py communicator the raw side uses (default: mpiflow's own).

    Returns:
        The calls and the raw side's output buffer.
    """
    rank, nranks = world_comm.rank, world_comm.size
    comm = world_comm.mpi_comm if comm is None else comm
    placement = Placement("cpu", list(range(nranks))) if placement is None else placement
    src, dst = (conversion.src,), (conversion.dst,)
    local = _values(local_shape(shape, placement, src, rank), rank)
    x = Tensor(local, placement, src, shape)
    out = numpy.empty(local_shape(shape, placement, dst, rank), numpy.float32)
    rows, cols = shape
    row_sizes, col_sizes = balanced_sizes(rows, nranks), balanced_sizes(cols, nranks)
    even = len(set(row_sizes)) == 1 and len(set(col_sizes)) == 1
    raw: Callable[[], Any]
    if isinstance(conversion.src, Split) and isinstance(conversion.dst, Broadcast):
        if len(set(row_sizes)) == 1:
            def raw() -> None:
                comm.Allgather(local, out)
        else:
            spec = [out, [r * cols for r in row_sizes]]

            def raw() -> None:
                comm.Allgatherv(local, spec)
    elif isinstance(conversion.dst, Broadcast):  # P -> B
        def raw() -> None:
            comm.Allreduce(local, out, MPI.SUM)
    elif isinstance(conversion.dst, Split) and isinstance(conversion.src, Partial):  # P -> S(0)
        if len(set(row_sizes)) == 1:
            def raw() -> None:
                comm.Reduce_scatter_block(local, out, MPI.SUM)
        else:
            counts = [r * cols for r in row_sizes]

            def raw() -> None:
                comm.Reduce_scatter(local, out, counts, MPI.SUM)
    else:  # S(0) -> S(1): pack my rows' column blocks peer by peer, then one all-to-all
        mine = local.shape[0]
        send = numpy.empty(local.size, numpy.float32)
        blocks, start, offset = [], 0, 0
        for width in col_sizes:
            blocks.append((send[offset:offset + mine * width].reshape(mine, width),
                           local[:, start:start + width]))
            start, offset = start + width, offset + mine * width
        send_counts = [mine * w for w in col_sizes]
        recv_counts = [r * col_sizes[rank] for r in row_sizes]
        flat = out.reshape(-1)

        def pack() -> None:
            for block, part in blocks:
                block[...] = part

        if even:
            def raw() -> None:
                pack()
                comm.Alltoall(send, flat)
        else:
            def raw() -> None:
                pack()
                comm.Alltoallv([send, send_counts], [flat, recv_counts])

    def flow() -> Tensor:
        return x.to_global(sbp=dst)

    return RedistPrepared(flow, raw, out)


def run_redistribution(settings: Settings, sizes: Sequence[int] | None = None,
                       conversions: Sequence[Conversion] = CONVERSIONS) -> list[RedistRow]:
    """Measure every conversion at every size, even and uneven (collective).

    For each conversion, its shapes (every size, even then uneven) are built, mpiflow's
    collectives are counted in one conversion of each, and the sides are timed in
    ``settings.rounds`` interleaved rounds (:func:`.runner.measure_interleaved`), with
    ``settings.timed_iterations(nbytes)`` calls per batch.

    Args:
        settings: iteration counts, rounds and the statistic.
        sizes: tensor sizes in bytes (default ``settings.redist_sizes``).
        conversions: the conversions to run.

    Returns:
        One row per conversion and shape, identical on every rank.
    """
    from .runner import measure_interleaved

    sizes = settings.redist_sizes if sizes is None else sizes
    nranks = world_comm.size
    placement = Placement("cpu", list(range(nranks)))
    rows: list[RedistRow] = []
    timer = MPI.COMM_WORLD.Dup()
    try:
        for conversion in conversions:
            shapes = [tensor_shape(size, 4, nranks, even) for size in sizes
                      for even in (True, False)]
            built = [build_conversion(conversion, shape, placement) for shape in shapes]
            counted = []
            for prepared in built:
                with count_collectives() as calls:
                    prepared.mpiflow()
                counted.append(tuple(sorted(calls.items())))
            nbytes = [4 * r * c for r, c in shapes]
            iters = [settings.timed_iterations(n) for n in nbytes]
            warmup = [settings.warmup_iterations(n) for n in nbytes]
            times = measure_interleaved([(p.mpiflow, p.raw) for p in built], iters, warmup,
                                        settings.rounds, timer)
            for i, shape in enumerate(shapes):
                even = nranks == 1 or (shape[0] % nranks == 0 and shape[1] % nranks == 0)
                timings = Timings(("mpiflow", "raw"), (tuple(times[i, :, 0].tolist()),
                                                       tuple(times[i, :, 1].tolist())),
                                  settings.stat)
                rows.append(RedistRow(conversion.name, shape, nbytes[i], even,
                                      conversion.raw_call(even), iters[i], nranks, counted[i],
                                      timings))
            del built
    finally:
        timer.Free()
    return rows
