"""Pencil and slab decompositions of an N-D array, and the all-to-all transposes between them.

As mpi4py-fft's ``Pencil``/``Transfer``: a :class:`Pencil` is a pure description of how an
array is cut over *groups* of ranks (a group is a communicator: one mesh axis, or several
together): group ``g`` splits dim ``dims[g]`` into ``counts[g]`` consecutive parts, one per
member, and every dim no group splits is whole on every rank (*aligned*: a transform along it
needs no communication). With one group it is a slab, with two a pencil.
``pencil.pencil(g, d)`` is the decomposition in which group ``g`` splits ``d`` instead, and
``pencil.transfer(other)`` the :class:`Transfer` between the two: one ``all_to_all_v`` among
``g``'s ranks (``forward``, and ``backward`` for the way back). Only ``Transfer.forward`` and
``backward`` communicate; the rest is bookkeeping, the same on every rank.

:func:`plan` schedules a transform along several dims of a decomposed array (an FFT): when to
transform which aligned dims locally, which transposes to make in between, and (where no
transpose helps, e.g. a 1-D array split along its only dim) which dims to transform *along* a
split with a distributed 1-D algorithm (:mod:`.spectral`). It finds the schedule of fewest
all-to-alls by a uniform-cost search over (splits, dims done); the order rules of real
transforms are kept (numpy's ``rfftn`` halves its last dim first, ``irfftn`` restores it last).

Examples:
    >>> p = Pencil.of((8, 6), dims=(0,), sizes=(2,), coords=(1,))
    >>> p.local_shape, p.aligned
    ((4, 6), (1,))
    >>> q = p.pencil(0, 1)
    >>> q.local_shape, q.aligned
    ((8, 3), (0,))
    >>> [s for s in plan((8, 6), (0, 1), "c2c", splits=(0,), sizes=(2,)).steps]
    [('transform', (1,)), ('move', 0, 1), ('transform', (0,))]
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy

from ..communication import Communicator
from ..core.array_module import array_module
from .ranges import balanced, offsets

__all__ = ["KINDS", "Pencil", "Plan", "Transfer", "all_to_all", "exchange", "plan", "scratch"]

Shape = tuple[int, ...]
KINDS = ("c2c", "r2c", "c2r")
ALONG_COST = 3  # all-to-alls of a distributed 1-D transform (the six-step algorithm)


@dataclass(frozen=True)
class Pencil:
    """How an array of ``shape`` is cut over groups of ranks.

    Attributes:
        shape: the whole array's shape (as the groups see it: a dim split by ranks outside
            them counts with this rank's extent).
        dims: per group, the dim it splits (distinct).
        counts: per group, the extent each of its members holds along its dim, in member
            order (they add up to the dim's extent).
        coords: this rank's position in each group.
    """

    shape: Shape
    dims: tuple[int, ...]
    counts: tuple[tuple[int, ...], ...]
    coords: tuple[int, ...]

    def __post_init__(self) -> None:
        if not len(self.dims) == len(self.counts) == len(self.coords):
            raise ValueError(f"one dim, counts and coordinate per group: {self.dims}, "
                             f"{self.counts}, {self.coords}")
        if len(set(self.dims)) != len(self.dims):
            raise ValueError(f"each group splits its own dim, got {self.dims}")
        for d, c, at in zip(self.dims, self.counts, self.coords):
            if not 0 <= d < len(self.shape):
                raise ValueError(f"dim {d} outside the shape {self.shape}")
            if sum(c) != self.shape[d] or not 0 <= at < len(c):
                raise ValueError(f"counts {c} of dim {d} (extent {self.shape[d]}) at "
                                 f"position {at}")

    @classmethod
    def of(cls, shape: Sequence[int], dims: Sequence[int], sizes: Sequence[int],
           coords: Sequence[int]) -> Pencil:
        """Balanced parts (as ``S(d)`` splits): group ``g`` of ``sizes[g]`` ranks splits
        ``dims[g]``, the first ``extent % size`` members one longer."""
        shape = tuple(int(n) for n in shape)
        return cls(shape, tuple(dims), tuple(tuple(balanced(shape[d], p))
                                             for d, p in zip(dims, sizes)), tuple(coords))

    @property
    def local_shape(self) -> Shape:
        """The block this rank holds."""
        out = list(self.shape)
        for d, c, at in zip(self.dims, self.counts, self.coords):
            out[d] = c[at]
        return tuple(out)

    @property
    def aligned(self) -> tuple[int, ...]:
        """The dims no group splits (whole on every rank)."""
        return tuple(d for d in range(len(self.shape)) if d not in self.dims)

    def pencil(self, group: int, dim: int, counts: Sequence[int] | None = None) -> Pencil:
        """The decomposition in which ``group`` splits ``dim`` (an aligned dim) instead, in
        ``counts`` (default: balanced); ``dim`` is then whole and the group's old dim is."""
        if dim not in self.aligned:
            raise ValueError(f"group {group} can split an aligned dim {self.aligned}, not {dim}")
        size = len(self.counts[group])
        new = tuple(balanced(self.shape[dim], size)) if counts is None else tuple(counts)
        if len(new) != size:
            raise ValueError(f"{len(new)} counts for a group of {size} ranks")
        dims, all_counts = list(self.dims), list(self.counts)
        dims[group], all_counts[group] = dim, new
        return Pencil(self.shape, tuple(dims), tuple(all_counts), self.coords)

    def resized(self, dim: int, n: int) -> Pencil:
        """The same decomposition after an aligned ``dim`` changed extent to ``n`` (a local
        transform that pads, cuts or halves it)."""
        if dim not in self.aligned:
            raise ValueError(f"only an aligned dim changes extent locally, not {dim}")
        shape = list(self.shape)
        shape[dim] = int(n)
        return Pencil(tuple(shape), self.dims, self.counts, self.coords)

    def transfer(self, other: Pencil) -> Transfer:
        """The all-to-all from this decomposition to ``other``, which differs in the dim of
        one group (see :meth:`pencil`)."""
        moved = [g for g in range(len(self.dims))
                 if (self.dims[g], self.counts[g]) != (other.dims[g], other.counts[g])]
        if self.shape != other.shape or self.coords != other.coords or len(moved) != 1:
            raise ValueError("a transfer moves the split of one group of one array")
        g = moved[0]
        if self.dims[g] == other.dims[g] or other.dims[g] not in self.aligned:
            raise ValueError(f"group {g} moves from dim {self.dims[g]} to an aligned dim")
        return Transfer(g, self.dims[g], other.dims[g], self.counts[g], other.counts[g])


@dataclass(frozen=True)
class Transfer:
    """The all-to-all among one group's ranks that moves its split from ``src_dim`` (held
    in ``src_counts``) to ``dst_dim`` (held in ``dst_counts``)."""

    group: int
    src_dim: int
    dst_dim: int
    src_counts: tuple[int, ...]
    dst_counts: tuple[int, ...]

    def forward(self, local: Any, comm: Communicator) -> Any:
        """This rank's block after the move (collective over the group's ``comm``)."""
        return exchange(local, comm, self.src_dim, self.dst_dim, self.src_counts,
                        self.dst_counts)

    def backward(self, local: Any, comm: Communicator) -> Any:
        """The way back: this rank's block before the move (collective)."""
        return exchange(local, comm, self.dst_dim, self.src_dim, self.dst_counts,
                        self.src_counts)


def exchange(local: Any, comm: Communicator, split: int, whole: int,
             split_counts: Sequence[int], whole_counts: Sequence[int]) -> Any:
    """Transpose a slab: from ``split_counts[me]`` of dim ``split`` and all of dim ``whole``
    to all of ``split`` and ``whole_counts[me]`` of ``whole`` (one ``all_to_all_v``).

    Each rank sends member ``q`` its rows of ``split`` crossed with ``q``'s part of ``whole``;
    what a rank receives, in member order, is its part of ``whole`` with ``split`` complete
    (received as ``(split, whole, other dims)``, a view back in the dims' order is returned).

    Examples:
        >>> from mpiflow.communication.mpi.group import world_comm as comm
        >>> k, me = comm.size, comm.rank
        >>> whole = numpy.arange(4 * k * 3).reshape(2 * k, 6)
        >>> mine = whole[2 * me:2 * me + 2]
        >>> cols = offsets(balanced(6, k))
        >>> got = exchange(mine, comm, 0, 1, [2] * k, balanced(6, k))
        >>> bool((got == whole[:, cols[me]:cols[me + 1]]).all())
        True
    """
    xp = array_module(local)
    me, k = comm.rank, comm.size
    if local.shape[split] != split_counts[me] or local.shape[whole] != sum(whole_counts):
        raise ValueError(f"this rank holds {tuple(local.shape)}: not {split_counts[me]} along "
                         f"dim {split} and {sum(whole_counts)} along dim {whole}")
    if k == 1:
        return local
    rest = [n for n in range(local.ndim) if n not in (split, whole)]
    order = (split, whole, *rest)
    view = xp.transpose(local, order)
    inner = math.prod(view.shape[2:])
    starts = offsets(whole_counts)
    send_counts = [split_counts[me] * c * inner for c in whole_counts]
    recv_counts = [s * whole_counts[me] * inner for s in split_counts]
    recv = xp.empty((sum(split_counts), whole_counts[me], *view.shape[2:]), dtype=local.dtype)
    if sum(split_counts) * sum(whole_counts) * inner:  # the same on every member
        send = scratch(xp, sum(send_counts), local.dtype)
        at = 0
        for q in range(k):
            block = view[:, starts[q]:starts[q + 1]]
            send[at:at + send_counts[q]].reshape(block.shape)[...] = block
            at += send_counts[q]
        all_to_all(comm, send, send_counts, recv.reshape(-1), recv_counts,
                   len(set(split_counts)) == 1 and len(set(whole_counts)) == 1)
    inverse = [order.index(n) for n in range(local.ndim)]
    return xp.transpose(recv, inverse)


_SCRATCH: dict[tuple[numpy.dtype, int], Any] = {}
SCRATCH_LIMIT = 1 << 30  # bytes: a larger send buffer is made for the call and dropped


def scratch(xp: Any, n: int, dtype: Any, slot: int = 0) -> Any:
    """A 1-D array of ``n`` elements of ``dtype`` to pack a send buffer into, reused from
    call to call for numpy (fresh memory costs a page fault per 4 KiB, as much as the packing
    itself for large transposes); its contents are garbage. Only for buffers that no caller
    holds after the collective (CuPy's memory pool does the same for its arrays); ``slot``
    tells apart buffers in use at once (a send and a receive buffer)."""
    dtype = numpy.dtype(dtype)
    if xp is not numpy or n * dtype.itemsize > SCRATCH_LIMIT:
        return xp.empty(n, dtype=dtype)
    held = _SCRATCH.get((dtype, slot))
    if held is None or held.size < n:
        held = _SCRATCH[(dtype, slot)] = numpy.empty(n, dtype=dtype)
    return held[:n]


def all_to_all(comm: Communicator, send: Any, send_counts: Sequence[int], recv: Any,
               recv_counts: Sequence[int], even: bool) -> None:
    """``all_to_all_v``, or the plain ``all_to_all`` where ``even`` says that every rank
    sends every other the same count (a fact of the global counts: every rank must pass the
    same ``even``)."""
    if even:
        comm.all_to_all(send, recv)
    else:
        comm.all_to_all_v(send, send_counts, recv, recv_counts)


# -- planning a transform along several dims ----------------------------------------------------
@dataclass(frozen=True)
class Plan:
    """A schedule: ``steps`` in order, each ``("transform", dims)`` (local, along aligned
    dims), ``("move", group, dim)`` (a :class:`Transfer`) or ``("along", group, dim)`` (a
    distributed 1-D transform along the dim the group splits); ``splits``, the dim each group
    splits at the end; ``alltoalls``, the all-to-alls it costs (an ``along`` step counts
    :data:`ALONG_COST`)."""

    steps: tuple[tuple[Any, ...], ...]
    splits: tuple[int, ...]
    alltoalls: int


def _extents(shape: Shape, dims: Sequence[int], kind: str, sizes: Sequence[int]
             ) -> tuple[Shape, Shape]:
    """The array's extents before and after the transform."""
    after = list(shape)
    for d, n in zip(dims, sizes):
        after[d] = n
    if kind == "r2c":
        after[dims[-1]] = sizes[-1] // 2 + 1
    return tuple(shape), tuple(after)


def _may_transform(t: int, done: frozenset[int], dims: Sequence[int], kind: str) -> bool:
    """Whether dim ``t`` may be transformed now: ``r2c`` halves its last dim first, ``c2r``
    restores its last dim after all the others (as numpy's ``rfftn``/``irfftn``)."""
    last = dims[-1]
    if kind == "r2c":
        return t == last or last in done
    if kind == "c2r":
        return t != last or len(done) == len(dims) - 1
    return True


def plan(shape: Sequence[int], dims: Sequence[int], kind: str, splits: Sequence[int],
         sizes: Sequence[int], busy: Sequence[int] = (), final: Sequence[int] | None = None,
         lengths: Sequence[int] | None = None) -> Plan:
    """The schedule of fewest all-to-alls for a transform along ``dims``.

    Args:
        shape: the array's shape (as the groups see it).
        dims: the dims to transform, in the transform's order (distinct).
        kind: ``"c2c"``, ``"r2c"`` (the last of ``dims`` halved, first) or ``"c2r"`` (the
            last of ``dims`` restored, last).
        splits: per group, the dim it splits now (distinct).
        sizes: per group, its number of ranks (a target dim shorter than that leaves ranks
            idle: avoided where another serves).
        busy: dims split by ranks outside the groups: never a target.
        final: per group, the dim it must split at the end (default: the cheapest).
        lengths: the transform's lengths along ``dims`` (default: their extents).

    Returns:
        The :class:`Plan`.

    Raises:
        ValueError: no schedule reaches ``final``.
    """
    shape = tuple(int(n) for n in shape)
    dims = tuple(dims)
    lengths = tuple(shape[d] for d in dims) if lengths is None else tuple(lengths)
    before, after = _extents(shape, dims, kind, lengths)
    want = None if final is None else tuple(final)
    start = (tuple(splits), frozenset[int]())
    # cost: (all-to-alls, targets shorter than their group, preference ranks), then a counter
    queue: list[Any] = [((0, 0, 0), 0, start, ())]
    seen: set[Any] = set()
    tick = 0
    while queue:
        cost, _, (state, done), steps = heapq.heappop(queue)
        # every dim that may be transformed locally now is: doing it early never costs
        ready = [t for t in dims if t not in done and t not in state]
        ready_now: list[int] = []
        for t in ready:
            if _may_transform(t, done | frozenset(ready_now), dims, kind):
                ready_now.append(t)
        if ready_now:
            done = done | frozenset(ready_now)
            if steps and steps[-1][0] == "transform":  # one local call does both
                ready_now += steps[-1][1]
                steps = steps[:-1]
            steps = (*steps, ("transform", tuple(t for t in dims if t in ready_now)))
            # more may now be allowed (r2c after its last dim; c2r's last after the others)
            heapq.heappush(queue, (cost, tick, (state, done), steps))
            tick += 1
            continue
        if (state, done) in seen:
            continue
        seen.add((state, done))
        if len(done) == len(dims) and (want is None or state == want):
            return Plan(steps, state, cost[0])
        for g, d in enumerate(state):
            if d in dims and d not in done and _may_transform(d, done, dims, kind):
                heapq.heappush(queue, ((cost[0] + ALONG_COST, cost[1], cost[2]), tick,
                                       (state, done | {d}), (*steps, ("along", g, d))))
                tick += 1
            for rank, f in enumerate(_targets(d, dims, done, before, after)):
                if f in state or f in busy:
                    continue
                extent = after[f] if f in done else before[f]
                short = 1 if extent < sizes[g] else 0
                moved = tuple(f if h == g else e for h, e in enumerate(state))
                heapq.heappush(queue, ((cost[0] + 1, cost[1] + short, cost[2] + rank), tick,
                                       (moved, done), (*steps, ("move", g, f))))
                tick += 1
    raise ValueError(f"no schedule of a {kind} transform along {dims} of {shape} ends with the "
                     f"splits {want}")


def _targets(d: int, dims: Sequence[int], done: frozenset[int], before: Shape, after: Shape
             ) -> list[int]:
    """The dims a group splitting ``d`` may move to, best first: dims already transformed
    (from the one after ``d`` in ``dims``, cyclically), then the others by extent."""
    n = len(before)
    at = dims.index(d) if d in dims else -1
    cyclic = [dims[(at + 1 + i) % len(dims)] for i in range(len(dims))]
    first = [f for f in cyclic if f in done and f != d]
    rest = sorted((f for f in range(n) if f != d and f not in first),
                  key=lambda f: (-(after[f] if f in done else before[f]), f))
    return first + rest
