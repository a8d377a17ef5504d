"""Execute a redistribution plan on this rank: :func:`redistribute`.

Every world rank calls :func:`redistribute` for every global operation (SPMD), members of the
placements or not, so collective set-up happens at the same point everywhere: the
communicators of the mesh lines along an axis are made with ``MPI_Comm_split`` semantics the
first time a plan needs them, by all world ranks together, and cached per (placement, axis).
The data is handled with the array module of the local array (numpy, later CuPy); numpy is
used only for index bookkeeping.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy

from ..communication import Communicator
from ..communication.collectives import deterministic
from ..communication.mpi.group import world_comm
from ..core.array_module import array_module
from ..core.errors import GlobalTensorError
from ..layouts.layout import Layout
from ..layouts.placement import Placement
from ..layouts.plan import plan_redistribution
from ..layouts.sbp import Broadcast, Partial, Split, balanced_sizes
from ..layouts.shards import Box, fill_op, local_shape, relative_slices, shard_bounds
from ..layouts.steps import (
    AllGather,
    AllReduce,
    AllToAll,
    AxisStep,
    LocalSlice,
    ReduceScatter,
    Step,
    ToPartial,
    Transfer,
)
from .transfer import run_split_to_partial, run_transfer

__all__ = ["array_module", "axes_communicator", "line_communicator", "redistribute"]

_lines: dict[tuple[Placement, int], Communicator | None] = {}
_meshes: dict[tuple[Placement, tuple[int, ...]], Communicator | None] = {}


def line_communicator(placement: Placement, axis: int) -> Communicator | None:
    """The communicator of this rank's mesh line along ``axis`` (collective on first use).

    A line is the ranks of ``placement`` that differ only in their ``axis`` coordinate; line
    rank ``i`` is coordinate ``i``. The first call for a (placement, axis) must be made by
    every world rank at the same point (``MPI_Comm_split``); later calls are cached lookups.

    Args:
        placement: the mesh.
        axis: a mesh axis.

    Returns:
        The line's communicator, or None on ranks outside ``placement``.
    """
    key = (placement, axis)
    if key not in _lines:
        if placement.mesh_shape[axis] == world_comm.size:  # one line: the whole world
            _lines[key] = world_comm
        else:
            coords = placement.coordinates(world_comm.rank)
            color, order = None, 0
            if coords is not None:
                rest = coords[:axis] + coords[axis + 1:]
                shape = placement.mesh_shape[:axis] + placement.mesh_shape[axis + 1:]
                color = int(numpy.ravel_multi_index(rest, shape)) if rest else 0
                order = coords[axis]
            _lines[key] = world_comm.split_by_color(color, order)
    return _lines[key]


def axes_communicator(placement: Placement, axes: tuple[int, ...]) -> Communicator | None:
    """The communicator of this rank's ranks along the mesh ``axes`` (collective on first use).

    Its ranks are those of ``placement`` whose coordinates differ from this rank's only along
    ``axes``, ordered by those coordinates, the first axis slowest: the order in which splits
    of one dim along those axes (nested, first axis outermost) order the shards. One axis is
    :func:`line_communicator`'s line.

    Args:
        placement: the mesh.
        axes: mesh axes, increasing.

    Returns:
        The communicator, or None on ranks outside ``placement``.
    """
    if len(axes) == 1:
        return line_communicator(placement, axes[0])
    key = (placement, axes)
    if key not in _meshes:
        mesh = placement.mesh_shape
        if math.prod(mesh[a] for a in axes) == world_comm.size:
            _meshes[key] = world_comm
        else:
            coords = placement.coordinates(world_comm.rank)
            color, order = None, 0
            if coords is not None:
                rest = [n for n in range(len(mesh)) if n not in axes]
                color = int(numpy.ravel_multi_index([coords[n] for n in rest],
                                                    [mesh[n] for n in rest])) if rest else 0
                order = int(numpy.ravel_multi_index([coords[a] for a in axes],
                                                    [mesh[a] for a in axes]))
            _meshes[key] = world_comm.split_by_color(color, order)
    return _meshes[key]


def _fresh(xp: Any, array: Any) -> Any:
    """A new C-contiguous copy of ``array``."""
    out = xp.empty(array.shape, dtype=array.dtype)
    out[...] = array
    return out


def _front(xp: Any, array: Any, dim: int) -> Any:
    """``array`` with ``dim`` moved first, C-contiguous (chunks along it are contiguous)."""
    if dim == 0 and array.flags.c_contiguous:
        return array  # already so: skip moveaxis' axis normalization (microseconds a call)
    return xp.ascontiguousarray(xp.moveaxis(array, dim, 0))


def _back(xp: Any, array: Any, dim: int) -> Any:
    """Undo :func:`_front`: move the first axis back to ``dim``, C-contiguous."""
    if dim == 0 and array.flags.c_contiguous:
        return array
    return xp.ascontiguousarray(xp.moveaxis(array, 0, dim))


class _Context:
    """One step's view of this rank: coordinates, shard regions before and after.

    Pure in its arguments (and this process's rank), so :func:`_context` caches it: a tensor
    redistributed again and again reuses its bookkeeping.
    """

    def __init__(self, step: AxisStep, shape: tuple[int, ...], before: Layout) -> None:
        self.after = step.apply(before)
        self.coords = before.placement.coordinates(world_comm.rank)
        mesh = before.placement.mesh_shape
        self.old: Box = ()
        self.new: Box = ()
        if self.coords is not None:
            self.old = shard_bounds(shape, mesh, before.sbp, self.coords)
            self.new = shard_bounds(shape, mesh, self.after.sbp, self.coords)

        self.new_shape = tuple(b - a for a, b in self.new)


_context = functools.lru_cache(maxsize=4096)(_Context)
_expected_shape = functools.lru_cache(maxsize=4096)(local_shape)


def _counts(sizes: list[int], inner: int) -> tuple[list[int], bool]:
    """Element counts of chunks of ``sizes`` rows of ``inner`` elements, and if all equal.

    Every rank of a line computes the same answer (``sizes`` and ``inner`` are the same on
    all of them), so they all call the same collective, plain or ``_v``.
    """
    counts = [s * inner for s in sizes]
    return counts, len(set(counts)) <= 1


def _all_gather(step: AllGather, x: Any, ctx: _Context, comm: Communicator, xp: Any) -> Any:
    d, shape = step.dim, ctx.new_shape
    send = _front(xp, x, d)
    recv = xp.empty((shape[d], *send.shape[1:]), dtype=x.dtype)
    if recv.size == 0:  # nothing to gather (the global shape says so on every rank)
        return _back(xp, recv, d)
    counts, even = _counts(balanced_sizes(shape[d], comm.size), math.prod(send.shape[1:]))
    if even:
        comm.all_gather(send, recv)
    else:
        comm.all_gather_v(send, recv, counts)
    return _back(xp, recv, d)


def _all_reduce(step: AllReduce, x: Any, ctx: _Context, comm: Communicator, xp: Any) -> Any:
    out = _fresh(xp, x)
    if out.size == 0:  # nothing to reduce (x's shape is the same on the line's ranks)
        return out
    if deterministic.wanted(out, step.op):  # the reproducibility switch: exact partial sums
        deterministic.all_reduce(comm, out, step.op)
    else:
        comm.all_reduce(out, step.op)
    return out


def _reduce_scatter(step: ReduceScatter, x: Any, ctx: _Context, comm: Communicator,
                    xp: Any) -> Any:
    d = step.dim
    send = _front(xp, x, d)
    recv = xp.empty((ctx.new_shape[d], *send.shape[1:]), dtype=x.dtype)
    if send.size == 0:  # nothing to reduce (x's shape is the global one on every rank)
        return _back(xp, recv, d)
    counts, even = _counts(balanced_sizes(x.shape[d], comm.size), math.prod(send.shape[1:]))
    if deterministic.wanted(send, step.op):
        deterministic.reduce_scatter(comm, send, recv, step.op, None if even else counts)
    elif even:
        comm.reduce_scatter(send, recv, step.op)
    else:
        comm.reduce_scatter_v(send, recv, counts, step.op)
    return _back(xp, recv, d)


def _all_to_all(step: AllToAll, x: Any, ctx: _Context, comm: Communicator, xp: Any) -> Any:
    # x holds my chunk of src_dim i and all of dst_dim j; view it as (i, j, rest). Rank m gets
    # (my i-chunk, its j-chunk), laid out i-major, so what a rank receives, in rank order, is
    # directly (all of i, my j-chunk, rest).
    i, j, k, me = step.src_dim, step.dst_dim, comm.size, comm.rank
    rest = [n for n in range(x.ndim) if n not in (i, j)]
    view = xp.transpose(x, (i, j, *rest))
    inner = math.prod(view.shape[2:])
    j_sizes = balanced_sizes(x.shape[j], k)
    i_sizes = balanced_sizes(ctx.new_shape[i], k)
    send_counts = [view.shape[0] * s * inner for s in j_sizes]
    recv_counts = [s * j_sizes[me] * inner for s in i_sizes]
    send = xp.empty(sum(send_counts), dtype=x.dtype)
    offset = start = 0
    for size, count in zip(j_sizes, send_counts, strict=True):
        block = view[:, start:start + size]
        send[offset:offset + count].reshape(block.shape)[...] = block
        offset, start = offset + count, start + size
    recv = xp.empty((ctx.new_shape[i], j_sizes[me], *view.shape[2:]), dtype=x.dtype)
    if inner == 0 or x.shape[j] == 0 or ctx.new_shape[i] == 0:
        pass  # an empty tensor: nothing moves (all three are the same on the line's ranks)
    elif len(set(i_sizes)) == 1 and len(set(j_sizes)) == 1:  # the same choice on every rank
        comm.all_to_all(send, recv)
    else:
        comm.all_to_all_v(send, send_counts, recv, recv_counts)
    order = [i, j, *rest]
    inverse = [order.index(n) for n in range(x.ndim)]
    return xp.ascontiguousarray(xp.transpose(recv, inverse))


def _local_slice(step: LocalSlice, x: Any, ctx: _Context, xp: Any) -> Any:
    return _fresh(xp, x[relative_slices(ctx.new, ctx.old)])


def _to_partial(step: ToPartial, x: Any, ctx: _Context, xp: Any, before: Layout) -> Any:
    assert ctx.coords is not None
    fill = fill_op(ctx.after.sbp, ctx.coords, step.axis).identity(x.dtype)
    if isinstance(before.sbp[step.axis], Broadcast) and ctx.coords[step.axis] == 0:
        return _fresh(xp, x)
    out = xp.full(ctx.new_shape, fill, dtype=x.dtype)
    if not isinstance(before.sbp[step.axis], Broadcast):
        out[relative_slices(ctx.old, ctx.new)] = x
    return out


_COLLECTIVES: dict[type, Callable[..., Any]] = {
    AllGather: _all_gather,
    AllReduce: _all_reduce,
    ReduceScatter: _reduce_scatter,
    AllToAll: _all_to_all,
}


def _run_step(step: Step, x: Any, shape: tuple[int, ...], before: Layout, xp: Any) -> Any:
    if isinstance(step, Transfer):
        return run_transfer(x, shape, step.src, step.dst, xp, world_comm)
    assert isinstance(step, AxisStep)
    comm = line_communicator(before.placement, step.axis) if step.communicates else None
    ctx = _context(step, shape, before)
    if ctx.coords is None:
        return x
    if isinstance(step, LocalSlice):
        return _local_slice(step, x, ctx, xp)
    if isinstance(step, ToPartial):
        return _to_partial(step, x, ctx, xp, before)
    assert comm is not None
    return _COLLECTIVES[type(step)](step, x, ctx, comm, xp)


def _split_to_partial_across(src: Layout, dst: Layout) -> bool:
    """Whether ``src -> dst`` is S(d) -> P between two different 1-D placements."""
    return (src.placement != dst.placement and src.placement.ndim == 1
            and dst.placement.ndim == 1 and isinstance(src.sbp[0], Split)
            and isinstance(dst.sbp[0], Partial))


def redistribute(local: Any, shape: Any, src: Layout, dst: Layout) -> Any:
    """Turn this rank's shard of a global tensor of layout ``src`` into its shard under ``dst``.

    Every world rank must call it with the same ``shape``, layouts and dtype (SPMD), including
    ranks outside both placements, which pass and get an empty ``(0,)`` array.

    Args:
        local: this rank's shard (numpy or CuPy), shaped as
            :func:`~.shards.local_shape` says.
        shape: the logical shape of the global tensor.
        src: its layout now.
        dst: the layout wanted (any placement).

    Returns:
        This rank's shard under ``dst``: ``local`` itself when the layouts are equal, else a
        new array.

    Raises:
        ValueError: ``local`` does not have the shape its layout gives this rank.

    Examples:
        >>> from mpiflow.layouts.sbp import broadcast, split
        >>> rank = world_comm.rank             # 0 or 1
        >>> p = Placement("cpu", [0, 1])
        >>> redistribute(numpy.arange(2) + 2 * rank, (4,), Layout(p, split(0)),
        ...              Layout(p, broadcast))
        array([0, 1, 2, 3])
    """
    shape = tuple(int(n) for n in shape)
    expected = _expected_shape(shape, src.placement, src.sbp, world_comm.rank)
    if tuple(local.shape) != expected:
        raise GlobalTensorError(
            f"rank {world_comm.rank}'s shard of a tensor of shape {shape} laid out "
            f"as {src} must have shape {expected}, got {tuple(local.shape)}")
    if src == dst:
        return local
    xp = array_module(local)
    if _split_to_partial_across(src, dst):
        fill = dst.sbp[0].op.identity(local.dtype)  # type: ignore[attr-defined]
        return run_split_to_partial(local, shape, src, dst, fill, xp, world_comm)
    current = src
    for step in plan_redistribution(shape, local.dtype.itemsize, src, dst):
        local = _run_step(step, local, shape, current, xp)
        current = step.apply(current)
    return local
