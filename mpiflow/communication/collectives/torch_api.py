"""Collectives and point-to-point with PyTorch's ``torch.distributed`` signatures and semantics.

Every function takes numpy arrays, mpiflow tensors, CuPy arrays or ``torch.Tensor``s, works in
place where PyTorch does, and checks its arguments on the calling rank before anything is sent:
a wrong rank, a list of the wrong length or a mismatched shape raises ``ValueError``, a wrong
type or an op the dtype lacks raises ``TypeError``. ``src``/``dst`` are world ranks;
``group=None`` is the whole world, and on a rank outside ``group`` every call does nothing (as
in PyTorch).

torch tensors travel zero-copy through their own memory (strided ones are staged and written
back by the MPI layer); bfloat16 and the other dtypes numpy lacks are reduced through a float32
copy rounded back once, and CUDA tensors go through CuPy or pinned host memory
(:mod:`..core.torch_arrays`). Such copies are written back once the operation completes: at return,
or for ``async_op=True`` when the :class:`Work` completes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mpi4py import MPI

from ...core.array_module import array_module
from ...core.deterministic import SWITCH as _deterministic
from ...core.reduce_op import ReduceOp
from ...core.torch_arrays import Post, chain
from ..fast import FastPaths
from ..mpi.communicator import MessageSizeError, check_tag, p2p_error
from ..mpi.group import ProcessGroup, world_comm, world_group
from ..mpi.interface import Communicator, Work
from ..watchdog.skew import skipped
from . import deterministic
from .arguments import (
    buffer_arg,
    check_concat_shape,
    check_like,
    check_torch_dtypes,
    copy_out,
    list_args,
    reduce_arg,
    single_args,
    stack,
)

__all__ = [
    "all_gather",
    "all_gather_into_tensor",
    "all_reduce",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "broadcast",
    "gather",
    "irecv",
    "isend",
    "recv",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
    "send",
]

# The world's blocking calls on plain numpy arrays: each function below tries these first
# (they return False, doing nothing, for anything but the common valid case).
_fast = world_comm.fast


def resolve_group(group: ProcessGroup | None) -> ProcessGroup:
    """Return ``group``, or the world group for None, checking its type.

    Raises:
        RuntimeError: ``group`` was destroyed (``destroy_process_group``), on every rank.
    """
    if group is None:
        return world_group
    if not isinstance(group, ProcessGroup):
        raise TypeError(f"group must be a group from new_group() or None, got {group!r}")
    if group.destroyed:
        raise RuntimeError(f"{group.describe()} was destroyed by destroy_process_group(); "
                           "make a new one with new_group()")
    return group


def _group_comm(group: ProcessGroup | None) -> Communicator | None:
    """The communicator of ``group`` (the world's for None); None on a non-member."""
    return world_comm if group is None else resolve_group(group).comm


def failed_before(comm: Communicator, operation: str, error: BaseException) -> None:
    """This rank's checks of ``operation`` raised ``error`` before it took part (every face
    calls it: this module's functions and the ``"mpiflow"`` torch backend's methods).

    In debug mode the other ranks learn of it (they are about to compare the call's
    arguments) and every rank raises, instead of running the collective without this one.
    Without it, the group is marked and the error announced (:mod:`.skew`): the next call on
    it runs only once every rank has raised too.
    """
    failed = getattr(comm, "failed", None)
    if failed is not None:
        failed(operation, error)
    else:
        skipped(comm, operation, error)


def _skipped(async_op: bool) -> Work | None:
    return Work() if async_op else None


def _finish(work: Work | None, async_op: bool, post: Post | None) -> Work | None:
    """Run ``post`` once the operation has completed: now, or when ``work`` completes."""
    if async_op:
        assert work is not None
        return work if post is None else work.then(post)
    if post is not None:
        post()
    return None


def _all_reduce(tensor: Any, op: ReduceOp = ReduceOp.SUM, group: ProcessGroup | None = None,
                async_op: bool = False) -> Work | None:
    """Reduce ``tensor`` over the group, in place on every rank.

    Args:
        tensor: array or tensor; holds the result afterwards.
        op: a :class:`ReduceOp` (AVG is undefined for bool; bitwise ops need an integer one).
        group: the group, None for the world.
        async_op: return a :class:`Work` instead of blocking.

    Returns:
        None, or the :class:`Work` of an ``async_op`` call.

    Examples:
        >>> x = numpy.ones(3)
        >>> dist.all_reduce(x)        # x == world_size everywhere
    """
    comm = world_comm if group is None else resolve_group(group).comm
    if comm is None:
        return _skipped(async_op)
    if group is not None and not async_op and not _deterministic.on and \
            getattr(comm, "fast", _NO_FAST).all_reduce(tensor, op):
        return None  # a group's plain numpy call: its fast path (the world's is the caller)
    try:
        buf, post = reduce_arg(tensor, "tensor", op, write=True)
    except (ValueError, TypeError) as exc:
        failed_before(comm, "all_reduce", exc)
        raise
    if deterministic.wanted(buf, op):
        deterministic.all_reduce(comm, buf, op)
        return _finish(Work() if async_op else None, async_op, post)
    return _finish(comm.all_reduce(buf, op, async_op), async_op, post)


_NO_FAST = FastPaths.disabled()  # of a communicator that has none

# The world's plain numpy calls run in the fast path itself, every other call in
# _all_reduce: one Python frame for the common call (FastPaths.public_all_reduce).
all_reduce: Callable[..., Work | None] = _fast.public_all_reduce(_all_reduce, _deterministic,
                                                                 ReduceOp.SUM)
all_reduce.__name__ = all_reduce.__qualname__ = "all_reduce"
all_reduce.__module__, all_reduce.__doc__ = __name__, _all_reduce.__doc__


def broadcast(tensor: Any, src: int, group: ProcessGroup | None = None,
              async_op: bool = False) -> Work | None:
    """Copy world rank ``src``'s ``tensor`` into ``tensor`` on every rank of the group."""
    if group is None and not async_op and _fast.broadcast(tensor, src):
        return None  # the world's ranks are the world ranks: src needs no translation
    g = resolve_group(group)
    if g.comm is None:
        return _skipped(async_op)
    try:
        root = g.group_rank(src, "src")
        buf, post = buffer_arg(tensor, "tensor", write=g.comm.rank != root)
    except (ValueError, TypeError) as exc:
        failed_before(g.comm, "broadcast", exc)
        raise
    return _finish(g.comm.broadcast(buf, root, async_op), async_op, post)


def reduce(tensor: Any, dst: int, op: ReduceOp = ReduceOp.SUM,
           group: ProcessGroup | None = None, async_op: bool = False) -> Work | None:
    """Reduce ``tensor`` over the group into ``tensor`` on ``dst`` (others keep theirs)."""
    g = resolve_group(group)
    if g.comm is None:
        return _skipped(async_op)
    try:
        root = g.group_rank(dst, "dst")
        buf, post = reduce_arg(tensor, "tensor", op, write=g.comm.rank == root)
    except (ValueError, TypeError) as exc:
        failed_before(g.comm, "reduce", exc)
        raise
    if deterministic.wanted(buf, op):
        deterministic.reduce(g.comm, buf, op, root)
        return _finish(Work() if async_op else None, async_op, post)
    return _finish(g.comm.reduce(buf, op, root, async_op), async_op, post)


def all_gather(tensor_list: list[Any], tensor: Any, group: ProcessGroup | None = None,
               async_op: bool = False) -> Work | None:
    """Fill ``tensor_list[i]`` with rank ``i``'s ``tensor`` on every rank of the group.

    Examples:
        >>> out = [numpy.empty(2) for _ in range(dist.get_world_size())]
        >>> dist.all_gather(out, numpy.full(2, float(dist.get_rank())))
    """
    g = resolve_group(group)
    if g.comm is None:
        return _skipped(async_op)
    comm = g.comm
    try:
        buf, in_post = buffer_arg(tensor, "tensor")
        outs, out_post = list_args(tensor_list, "tensor_list", write=True)
        check_like(outs, comm.size, buf, "tensor_list")
        check_torch_dtypes([tensor, *tensor_list], "tensor and tensor_list")
    except (ValueError, TypeError) as exc:
        failed_before(comm, "all_gather", exc)
        raise
    stacked = array_module(buf).empty((comm.size, *buf.shape), dtype=buf.dtype)
    work = comm.all_gather(buf, stacked, async_op)
    return _finish(work, async_op, chain(in_post, copy_out(outs, stacked), out_post))


def all_gather_into_tensor(output_tensor: Any, input_tensor: Any,
                           group: ProcessGroup | None = None,
                           async_op: bool = False) -> Work | None:
    """Gather every rank's ``input_tensor`` into ``output_tensor``, concatenated or stacked.

    ``output_tensor`` has shape ``(world * n, ...)`` or ``(world, n, ...)`` for an input of
    shape ``(n, ...)``.
    """
    if group is None and not async_op and _fast.all_gather(input_tensor, output_tensor):
        return None
    comm = _group_comm(group)
    if comm is None:
        return _skipped(async_op)
    try:
        out, out_post = buffer_arg(output_tensor, "output_tensor", write=True)
        inp, in_post = buffer_arg(input_tensor, "input_tensor")
        check_concat_shape(out, inp, comm.size, "output_tensor")
        check_torch_dtypes([output_tensor, input_tensor], "output_tensor and input_tensor")
    except (ValueError, TypeError) as exc:
        failed_before(comm, "all_gather", exc)
        raise
    return _finish(comm.all_gather(inp, out, async_op), async_op, chain(in_post, out_post))


def gather(tensor: Any, gather_list: list[Any] | None = None, dst: int = 0,
           group: ProcessGroup | None = None, async_op: bool = False) -> Work | None:
    """Collect every rank's ``tensor`` into ``gather_list`` on ``dst`` (ignored elsewhere)."""
    g = resolve_group(group)
    if g.comm is None:
        return _skipped(async_op)
    comm = g.comm
    try:
        root = g.group_rank(dst, "dst")
        buf, post = buffer_arg(tensor, "tensor")
        stacked = None
        if comm.rank == root:
            if gather_list is None:
                raise ValueError("gather_list is required on the destination rank")
            outs, out_post = list_args(gather_list, "gather_list", write=True)
            check_like(outs, comm.size, buf, "gather_list")
            check_torch_dtypes([tensor, *gather_list], "tensor and gather_list")
            stacked = array_module(buf).empty((comm.size, *buf.shape), dtype=buf.dtype)
            post = chain(post, copy_out(outs, stacked), out_post)
    except (ValueError, TypeError) as exc:
        failed_before(comm, "gather", exc)
        raise
    work = comm.gather(buf, stacked, root, async_op)
    return _finish(work, async_op, post)


def scatter(tensor: Any, scatter_list: list[Any] | None = None, src: int = 0,
            group: ProcessGroup | None = None, async_op: bool = False) -> Work | None:
    """Give rank ``i`` the array ``scatter_list[i]`` of ``src``, into ``tensor``."""
    g = resolve_group(group)
    if g.comm is None:
        return _skipped(async_op)
    comm = g.comm
    try:
        root = g.group_rank(src, "src")
        buf, post = buffer_arg(tensor, "tensor", write=True)
        send = None
        if comm.rank == root:
            if scatter_list is None:
                raise ValueError("scatter_list is required on the source rank")
            ins, in_post = list_args(scatter_list, "scatter_list")
            check_like(ins, comm.size, buf, "scatter_list")
            check_torch_dtypes([tensor, *scatter_list], "tensor and scatter_list")
            send = stack(ins, buf)
            post = chain(in_post, post)
    except (ValueError, TypeError) as exc:
        failed_before(comm, "scatter", exc)
        raise
    return _finish(comm.scatter(send, buf, root, async_op), async_op, post)


def reduce_scatter(output: Any, input_list: list[Any], op: ReduceOp = ReduceOp.SUM,
                   group: ProcessGroup | None = None, async_op: bool = False
                   ) -> Work | None:
    """Reduce ``input_list[i]`` over the group into ``output`` on rank ``i``."""
    g = resolve_group(group)
    if g.comm is None:
        return _skipped(async_op)
    try:
        out, out_post = reduce_arg(output, "output", op, write=True)
        ins, in_post = list_args(input_list, "input_list", reduce=op)
        check_like(ins, g.comm.size, out, "input_list")
        check_torch_dtypes([output, *input_list], "output and input_list")
    except (ValueError, TypeError) as exc:
        failed_before(g.comm, "reduce_scatter", exc)
        raise
    if deterministic.wanted(out, op):
        deterministic.reduce_scatter(g.comm, stack(ins, out), out, op)
        return _finish(Work() if async_op else None, async_op, chain(in_post, out_post))
    work = g.comm.reduce_scatter(stack(ins, out), out, op, async_op)
    return _finish(work, async_op, chain(in_post, out_post))


def reduce_scatter_tensor(output: Any, input: Any, op: ReduceOp = ReduceOp.SUM,
                          group: ProcessGroup | None = None, async_op: bool = False
                          ) -> Work | None:
    """Reduce ``input`` (``world`` chunks along dim 0, or stacked) and keep chunk ``rank``.

    Example (2 ranks, ``input`` = 1..12 as 4x3 on both): rank 0 gets ``[[2,4,6],[8,10,12]]``.
    """
    if group is None and not async_op and not _deterministic.on and \
            _fast.reduce_scatter(input, output, op):
        return None
    comm = _group_comm(group)
    if comm is None:
        return _skipped(async_op)
    try:
        out, out_post = reduce_arg(output, "output", op, write=True)
        inp, in_post = reduce_arg(input, "input", op, write=False)
        check_concat_shape(inp, out, comm.size, "input")
        check_torch_dtypes([output, input], "output and input")
    except (ValueError, TypeError) as exc:
        failed_before(comm, "reduce_scatter", exc)
        raise
    if deterministic.wanted(out, op):
        deterministic.reduce_scatter(comm, inp, out, op)
        return _finish(Work() if async_op else None, async_op, chain(in_post, out_post))
    work = comm.reduce_scatter(inp, out, op, async_op)
    return _finish(work, async_op, chain(in_post, out_post))


def all_to_all(output_tensor_list: list[Any], input_tensor_list: list[Any],
               group: ProcessGroup | None = None, async_op: bool = False) -> Work | None:
    """Send ``input_tensor_list[i]`` to rank ``i``; receive rank ``i``'s into
    ``output_tensor_list[i]``. Entries may differ in size."""
    g = resolve_group(group)
    if g.comm is None:
        return _skipped(async_op)
    comm = g.comm
    try:
        outs, out_post = list_args(output_tensor_list, "output_tensor_list", write=True)
        ins, in_post = list_args(input_tensor_list, "input_tensor_list")
        for what, bufs in (("output_tensor_list", outs), ("input_tensor_list", ins)):
            if len(bufs) != comm.size:
                raise ValueError(f"{what} must have one entry per rank of the group "
                                 f"({comm.size}), got {len(bufs)}")
        dtypes = {b.dtype for b in outs + ins}
        if len(dtypes) > 1:
            names = sorted(map(str, dtypes))
            raise TypeError(f"all_to_all needs one dtype for every entry, got {names}")
        check_torch_dtypes([*output_tensor_list, *input_tensor_list], "all_to_all's entries")
    except (ValueError, TypeError) as exc:
        failed_before(comm, "all_to_all_v", exc)
        raise
    xp, dtype = array_module(ins[0]), ins[0].dtype
    send_counts = [b.size for b in ins]
    recv_counts = [b.size for b in outs]
    send = xp.concatenate([b.reshape(-1) for b in ins]) if ins else xp.empty(0, dtype)
    landing = xp.empty(sum(recv_counts), dtype=dtype)
    # Always the "v" form: a rank whose own counts happen to be equal cannot know that the
    # others' are, and mixing Alltoall on one rank with Alltoallv on another hangs.
    work = comm.all_to_all_v(send, send_counts, landing, recv_counts, async_op)

    def post() -> None:
        offset = 0
        for out in outs:
            out[...] = landing[offset:offset + out.size].reshape(out.shape)
            offset += out.size

    return _finish(work, async_op, chain(in_post, post, out_post))


def all_to_all_single(output: Any, input: Any,
                      output_split_sizes: Sequence[int] | None = None,
                      input_split_sizes: Sequence[int] | None = None,
                      group: ProcessGroup | None = None,
                      async_op: bool = False) -> Work | None:
    """Split ``input`` along dim 0 and send piece ``i`` to rank ``i``; receive into ``output``.

    Without split sizes, dim 0 is split evenly; otherwise piece ``i`` has
    ``input_split_sizes[i]`` rows and rank ``i``'s piece lands as ``output_split_sizes[i]`` rows.
    """
    if (group is None and not async_op and output_split_sizes is None
            and input_split_sizes is None and _fast.all_to_all(input, output)):
        return None
    comm = _group_comm(group)
    if comm is None:
        return _skipped(async_op)
    try:
        out, inp, counts, post = single_args(comm, output, input, output_split_sizes,
                                              input_split_sizes)
    except (ValueError, TypeError) as exc:
        failed_before(comm, "all_to_all" if output_split_sizes is None and input_split_sizes is None
                else "all_to_all_v", exc)
        raise
    if counts is None:
        return _finish(comm.all_to_all(inp, out, async_op), async_op, post)
    scounts, rcounts = counts
    return _finish(comm.all_to_all_v(inp, scounts, out, rcounts, async_op), async_op, post)


def barrier(group: ProcessGroup | None = None, async_op: bool = False,
            device_ids: list[int] | None = None) -> Work | None:
    """Block until every rank of the group has entered.

    ``device_ids`` is torch's choice of the GPU on which NCCL runs its barrier (an all-reduce
    of one element): checked as torch documents it (a list of device numbers, the first one
    used), and otherwise without effect, since this barrier is MPI's, which moves no data on
    any device.

    Raises:
        TypeError: ``device_ids`` is not a list of ints.
        ValueError: ``device_ids`` is empty or holds a negative number.
    """
    if device_ids is not None:
        if not isinstance(device_ids, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) for d in device_ids):
            raise TypeError(f"barrier: device_ids must be a list of ints (torch's: the GPU of "
                            f"NCCL's barrier), got {device_ids!r}")
        if not device_ids or min(device_ids) < 0:
            raise ValueError(f"barrier: device_ids must name a device (a non-negative number), "
                             f"got {device_ids!r}")
    g = resolve_group(group)
    if g.comm is None:
        return _skipped(async_op)
    return g.comm.barrier(async_op)


def peer_rank(g: ProcessGroup, rank: int, what: str) -> int:
    peer = g.group_rank(rank, what)
    assert g.comm is not None
    if peer == g.comm.rank:
        raise ValueError(f"{what}={rank} is this process's own rank; send/recv need another rank")
    return peer


def _recv_error(g: ProcessGroup, exc: MessageSizeError) -> MessageSizeError:
    """``exc`` naming the sender by its world rank and ``g``."""
    if g is world_group or exc.source is None:
        return exc
    return exc.with_sender(f"rank {g.ranks[exc.source]} of {g.describe()}")


def send(tensor: Any, dst: int, group: ProcessGroup | None = None, tag: int = 0) -> None:
    """Send ``tensor`` to world rank ``dst`` (blocking).

    Raises:
        ValueError: ``tag`` is outside 0..``TAG_UB``, or ``dst`` is not another rank of the
            group; nothing is sent.
    """
    if group is None:
        try:
            if _fast.send(tensor, dst, tag):
                return
        # A bad tag: MPI refused before sending anything (mpi4py's OverflowError for one past
        # a C int, where TAG_UB is the largest int: Open MPI).
        except (MPI.Exception, OverflowError) as exc:
            raise p2p_error(exc, "send", dst, tag) from None
    check_tag(tag)
    g = resolve_group(group)
    if g.comm is not None:
        buf, post = buffer_arg(tensor, "tensor")
        g.comm.send(buf, peer_rank(g, dst, "dst"), tag)
        if post is not None:
            post()


def isend(tensor: Any, dst: int, group: ProcessGroup | None = None, tag: int = 0) -> Work:
    """Start sending ``tensor`` to world rank ``dst``; returns a :class:`Work`."""
    check_tag(tag)
    g = resolve_group(group)
    if g.comm is None:
        return Work()
    buf, post = buffer_arg(tensor, "tensor")
    work = _finish(g.comm.send(buf, peer_rank(g, dst, "dst"), tag, async_op=True), True, post)
    assert work is not None
    return work


def recv(tensor: Any, src: int | None = None, group: ProcessGroup | None = None,
         tag: int = 0) -> int:
    """Receive into ``tensor`` from world rank ``src`` (None: any); return the sender's rank.

    Returns -1 on a rank outside ``group``.

    Raises:
        ValueError: the message's size differs from ``tensor``'s (the message is consumed;
            the sender is unaffected), or ``tag`` is outside 0..``TAG_UB``. A message larger
            than ``tensor`` is caught on every path; a smaller one on all but the world's
            fast path (a contiguous numpy array from an int ``src``), which has no MPI status.
    """
    if group is None and type(src) is int and tag >= 0:  # MPICH reads tag -1 as MPI_ANY_TAG
        try:
            if _fast.recv(tensor, src, tag):
                return src
        # A message larger than tensor, a tag above TAG_UB (an OverflowError past a C int)
        except (MPI.Exception, OverflowError) as exc:
            raise p2p_error(exc, "recv", src, tag, tensor) from None
    check_tag(tag)
    g = resolve_group(group)
    if g.comm is None:
        return -1
    source = None if src is None else peer_rank(g, src, "src")
    buf, post = buffer_arg(tensor, "tensor", write=True)
    try:
        sender = g.comm.recv(buf, source, tag)
    except MessageSizeError as exc:
        raise _recv_error(g, exc) from None
    if post is not None:
        post()
    return g.ranks[sender]


def irecv(tensor: Any, src: int | None = None, group: ProcessGroup | None = None,
          tag: int = 0) -> Work:
    """Start receiving into ``tensor`` from world rank ``src`` (None: any); returns a Work.

    A message whose size differs from ``tensor``'s raises ``ValueError`` from ``wait()``.
    """
    check_tag(tag)
    g = resolve_group(group)
    if g.comm is None:
        return Work()
    source = None if src is None else peer_rank(g, src, "src")
    buf, post = buffer_arg(tensor, "tensor", write=True)
    work = g.comm.irecv(buf, source, tag)
    if g is not world_group:
        _name_sender(work, g)
    return work if post is None else work.then(post)


def _name_sender(work: Work, g: ProcessGroup) -> None:
    """Make ``work``'s size errors name the sender by its world rank and ``g``."""
    work.translate_errors(MessageSizeError, lambda exc: _recv_error(g, exc))
