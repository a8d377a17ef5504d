"""``ProcessGroupMPIFlow``: a ``torch.distributed.ProcessGroup`` running on mpiflow's communicators.

torch dispatches every collective of a group whose backend is ``"mpiflow"`` to the methods
here, with its own argument conventions (lists of tensors, option structs with group ranks).
Each method turns the tensors into arrays sharing their memory (:mod:`mpiflow.core.torch_arrays`),
runs the operation on the group's
:class:`~mpiflow.communication.mpi.communicator.MPICommunicator` (so
mpiflow's argument checks, debug-mode fingerprints and watchdog apply), and returns a work:

- By default every collective completes inside the call, the asynchronous ones
  (``async_op=True``, DDP's buckets, FSDP) included: their works and futures are complete
  when returned, so a future's callbacks run at once, in program order, on the calling thread.
  That order is what keeps comm hooks that issue collectives from callbacks (PowerSGD) in step
  across ranks. The blocking call takes the communicator's fast path for plain tensors.
- ``MPIFLOW_TORCH_OVERLAP=1``: asynchronous collectives start non-blocking MPI operations
  and return pending works, whose futures the progress thread completes (:mod:`.work`), so
  communication can overlap backward. Callbacks then run on that thread: do not combine it
  with comm hooks whose callbacks issue collectives.
- Point-to-point operations are always non-blocking (a send completes at ``wait()``).

An argument error that one rank finds (a list of the wrong length, a size or dtype that does
not fit) is raised as the numpy API (:mod:`mpiflow.distributed`) raises it: the other ranks
learn of it (:func:`~mpiflow.communication.collectives.torch_api.failed_before`), and on a
checked call every rank raises the same ``CollectiveMismatchError`` before any data moves. An
output that cannot be written in place (one that overlaps itself) is not an argument error
the others could know of: the call runs into a copy on that rank, then raises there.

Both generations of torch's method names are served (2.13's ``all_gather_single``,
``reduce_scatter_single``, ``all_to_all_single`` and the older ``_allgather_base``,
``_reduce_scatter_base``, ``alltoall_base``...).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import timedelta
from typing import Any, NoReturn

import torch
import torch.distributed as dist
from mpi4py import MPI

from ..communication import ReduceOp, reduce_plan
from ..communication import Work as MPIWork
from ..communication.collectives.torch_api import failed_before
from ..communication.mpi.communicator import MPICommunicator
from ..communication.mpi.group import check_at_exit, keep_until_exit
from ..communication.watchdog.monitor import mark_call
from ..core.torch_arrays import Post, chain, overlaps_itself, stage
from .deadlines import barrier_by, finish_by, timeout_message
from .guards import Unusable, check_list, check_reduce_dtype, overlaps, split_rows
from .plumbing import (
    DECLINED,
    DONE,
    all_of,
    barrier_limit,
    flat,
    flat_view,
    mpi_work,
    overlap_enabled,
    plain,
    plain_pair,
    premul,
    scatter_rows,
    then,
    with_async,
)
from .point_to_point import PointToPoint
from .sparse import sparse_all_reduce
from .work import DoneWork, PendingWork

__all__ = ["BACKEND_NAME", "ProcessGroupMPIFlow"]

BACKEND_NAME = "mpiflow"

_RedOpType: Any = dist.ReduceOp.RedOpType
_OPS = {
    _RedOpType.SUM: ReduceOp.SUM,
    _RedOpType.AVG: ReduceOp.AVG,
    _RedOpType.PRODUCT: ReduceOp.PRODUCT,
    _RedOpType.MIN: ReduceOp.MIN,
    _RedOpType.MAX: ReduceOp.MAX,
    _RedOpType.BAND: ReduceOp.BAND,
    _RedOpType.BOR: ReduceOp.BOR,
    _RedOpType.BXOR: ReduceOp.BXOR,
    _RedOpType.PREMUL_SUM: ReduceOp.SUM,
}


_SUM = _RedOpType.SUM
_MPI_SUM = MPI.SUM
# The dtypes this MPI library sums natively, with numpy's values (datatypes' probe: Open MPI
# saturates 8- and 16-bit sums): the all-reduce fast path hands MPI their memory.
_MPI_SUMMED = {dtype: datatype for dtype, datatype, name in (
    (torch.float32, MPI.FLOAT, "float32"), (torch.float64, MPI.DOUBLE, "float64"),
    (torch.int32, MPI.INT32_T, "int32"), (torch.int64, MPI.INT64_T, "int64"),
    (torch.int16, MPI.INT16_T, "int16"), (torch.int8, MPI.INT8_T, "int8"),
    (torch.uint8, MPI.UINT8_T, "uint8"))
    if reduce_plan(name, ReduceOp.SUM).datatype is None}


def _reduce_op(op: Any, dtype: torch.dtype) -> tuple[ReduceOp, Any]:
    """mpiflow's op for torch's, and the PREMUL_SUM factor (None for other ops)."""
    kind = getattr(op, "op", op)
    mine = _OPS.get(kind)
    if mine is None:
        raise TypeError(f"the mpiflow backend has no reduction {op!r}")
    check_reduce_dtype(mine, dtype)  # before a bfloat16 becomes the float32 it is reduced as
    return mine, (getattr(op, "factor", None) if kind == _RedOpType.PREMUL_SUM else None)


# torch's stubs type ProcessGroup's methods as the overloads its C++ binding exposes, not as
# the Python-facing calls torch makes into a Python subclass; and its option structs are not
# all in them. Both are used through Any.
_ProcessGroup: Any = dist.ProcessGroup
_opts: Any = dist


class ProcessGroupMPIFlow(PointToPoint, _ProcessGroup):
    """A torch process group whose collectives run on one mpiflow MPI communicator.

    Made by torch through the registered backend (``init_process_group(backend="mpiflow")``,
    ``new_group(..., backend="mpiflow")``); not meant to be constructed by hand.

    Args:
        comm: the communicator over the group's ranks, in group-rank order.
        timeout: torch's timeout for the group (the default group's sets the watchdog's limit).
    """

    def __init__(self, comm: MPICommunicator, timeout: timedelta | None = None) -> None:
        super().__init__(comm.rank, comm.size)
        self._comm = comm
        self._mpi = comm.mpi_comm
        check_at_exit(comm)  # an isend nobody receives is reported at exit (numpy API's warning)
        self._timeout = timeout
        # A group given its own timeout (new_group(timeout=...), init_process_group's) runs
        # its collectives non-blocking and gives up at the deadline with a catchable error,
        # as gloo does; without one the fast paths run, and the watchdog ends real hangs.
        self._limit = barrier_limit(None, timeout)
        self._fast = comm.fast if self._limit is None else DECLINED
        self._group_name = ""
        self._overlap = overlap_enabled()
        self._group_desc = "undefined"

    # -- identity ------------------------------------------------------------------------------
    def getBackendName(self) -> str:
        """``"mpiflow"``."""
        return BACKEND_NAME

    def name(self) -> str:
        """``"mpiflow"``."""
        return BACKEND_NAME

    # torch keeps a group's name and description on its C++ backends, which a Python process
    # group has none of: keep them here (functional collectives find the group by name).
    def _set_group_name(self, name: str) -> None:
        self._group_name = name

    @property
    def group_name(self) -> str:
        """The name torch registered the group under."""
        return self._group_name

    def _set_group_desc(self, desc: str) -> None:
        self._group_desc = desc

    @property
    def group_desc(self) -> str:
        """torch's description of the group (``default_pg``, ``undefined``...)."""
        return self._group_desc

    @property
    def communicator(self) -> MPICommunicator:
        """The mpiflow communicator this group runs on."""
        return self._comm

    def __repr__(self) -> str:
        return f"ProcessGroupMPIFlow(rank={self._comm.rank}, size={self._comm.size})"

    # -- helpers -------------------------------------------------------------------------------
    def _refuse(self, operation: str, error: BaseException) -> None:
        """This rank's checks of ``operation`` (the communicator's name of it) raised
        ``error`` before it took part: tell the other ranks, as the numpy API does."""
        failed_before(self._comm, operation, error)

    def _async(self, opts: Any) -> bool:
        """Whether to start the operation non-blocking (overlap mode and an async caller, or
        a group with a timeout)."""
        return (self._overlap and opts.asyncOp) or self._limit is not None

    def _work(self, work: MPIWork | None, result: list[torch.Tensor],
              post: Post | None) -> dist._Work:
        """The torch work of an operation started with ``async_op`` (``work``) or finished;
        on a group with a timeout, finished by the deadline or a ``RuntimeError``."""
        if work is not None and self._limit is not None:
            if not finish_by(work, self._limit):
                self._give_up("a collective", self._limit)
            work = None
        if work is None:
            if post is not None:
                post()
            return DoneWork(result)
        return PendingWork(work, result, post)

    def _reduce_in_place(self, t: torch.Tensor, op: Any, async_op: bool,
                         run: Callable[[Any, ReduceOp, bool], MPIWork | None],
                         operation: str) -> dist._Work:
        try:
            mine, factor = _reduce_op(op, t.dtype)
            if factor is not None:
                scaled = premul(t, factor)
                array, post = stage(scaled, reduce=True, write=True)

                def copy_back() -> None:
                    t.copy_(scaled)

                post = chain(post, copy_back)
            else:
                array, post = stage(t, reduce=True, write=True)
        except (ValueError, TypeError) as exc:
            self._refuse(operation, exc)
            raise
        return self._work(run(array, mine, async_op), [t], post)

    # -- reductions ----------------------------------------------------------------------------
    def allreduce(self, tensors: list[torch.Tensor], opts: Any = None) -> dist._Work:
        """All-reduce ``tensors[0]`` in place (``opts.reduceOp``, ``opts.asyncOp``)."""
        opts = opts if opts is not None else _opts.AllreduceOptions()
        try:
            t = tensors[0] if len(tensors) == 1 else flat(tensors, "allreduce")
        except (ValueError, TypeError) as exc:
            self._refuse("all_reduce", exc)
            raise
        async_op = opts.asyncOp
        if t.is_sparse:
            sparse_all_reduce(t, _reduce_op(opts.reduceOp, t.dtype)[0], self._mpi)
            return DoneWork(tensors)
        # The common case with the least Python: a SUM of a plain CPU tensor, its numpy view
        # straight to the communicator's fast path (which declines anything but the plain
        # case). ``opts.reduceOp == SUM`` is the cheap test; reading ``.op`` costs 2 us.
        if (t.is_cpu and not (async_op and self._overlap) and not t.requires_grad
                and opts.reduceOp == _SUM):
            datatype = _MPI_SUMMED.get(t.dtype)
            contiguous = t.is_contiguous()
            # a tensor overlapping itself goes the general way, which reduces into a copy and
            # then raises (stage): every rank takes part
            if ((datatype is not None and contiguous
                    and self._fast.all_reduce_at(t.data_ptr(), t.nbytes, datatype, _MPI_SUM))
                    or ((contiguous or not overlaps_itself(t))
                        and self._fast.all_reduce(plain(t), ReduceOp.SUM))):
                return DoneWork(tensors) if async_op else DONE
        return self._reduce_in_place(t, opts.reduceOp, self._async(opts),
                                     self._comm.all_reduce, "all_reduce")

    def allreduce_coalesced(self, tensors: list[torch.Tensor], opts: Any = None) -> dist._Work:
        """All-reduce every tensor of ``tensors`` (one flat buffer per dtype when possible)."""
        opts = opts if opts is not None else _opts.AllreduceCoalescedOptions()
        works = [self.allreduce([t], with_async(_opts.AllreduceOptions(), opts))
                 for t in tensors]
        return all_of(works, tensors)

    def reduce(self, tensors: list[torch.Tensor], opts: Any = None) -> dist._Work:
        """Reduce ``tensors[0]`` into ``opts.rootRank``'s (the others keep theirs)."""
        opts = opts if opts is not None else _opts.ReduceOptions()
        root = opts.rootRank
        comm = self._comm

        def run(array: Any, op: ReduceOp, async_op: bool) -> MPIWork | None:
            return comm.reduce(array, op, root, async_op)

        try:
            t = flat(tensors, "reduce")
            if self._comm.rank != root:  # non-roots only send: leave their tensor as it is
                mine, factor = _reduce_op(opts.reduceOp, t.dtype)
                source = premul(t, factor) if factor is not None else t
                array, _ = stage(source, reduce=True, write=False)
        except (ValueError, TypeError) as exc:
            self._refuse("reduce", exc)
            raise
        if self._comm.rank != root:
            return self._work(run(array, mine, self._async(opts)), [t], None)
        return self._reduce_in_place(t, opts.reduceOp, self._async(opts), run, "reduce")

    def reduce_scatter(self, output_tensors: list[torch.Tensor],
                       input_tensors: list[list[torch.Tensor]], opts: Any = None) -> dist._Work:
        """Reduce the ranks' lists of chunks; rank ``i`` gets chunk ``i`` in its output."""
        opts = opts if opts is not None else _opts.ReduceScatterOptions()
        try:
            out = flat(output_tensors, "reduce_scatter")
            chunks = flat(input_tensors, "reduce_scatter")
            check_list(chunks, out, self._comm.size, "input_tensor_list")
            stacked = torch.stack([c.detach() for c in chunks]).to(out.device)
        except (ValueError, TypeError) as exc:
            self._refuse("reduce_scatter", exc)
            raise
        return self._reduce_scatter(out, stacked, opts)

    def reduce_scatter_single(self, output: torch.Tensor, input: torch.Tensor,
                              opts: Any = None) -> dist._Work:
        """Reduce ``input`` (``size`` chunks along dim 0); rank ``i`` gets chunk ``i``."""
        opts = opts if opts is not None else _opts.ReduceScatterOptions()
        async_op = opts.asyncOp
        if (plain_pair(output, input) and not (async_op and self._overlap)
                and opts.reduceOp == _SUM
                and self._fast.reduce_scatter(plain(input), plain(output), ReduceOp.SUM)):
            return DoneWork([output]) if async_op else DONE
        if input.numel() != output.numel() * self._comm.size:
            error = ValueError(f"reduce_scatter input has {input.numel()} elements; with "
                               f"{self._comm.size} ranks it must have {self._comm.size} x "
                               f"{output.numel()} (the output's)")
            self._refuse("reduce_scatter", error)
            raise error
        return self._reduce_scatter(output, input, opts)

    _reduce_scatter_base = reduce_scatter_single

    def _reduce_scatter(self, out: torch.Tensor, inp: torch.Tensor, opts: Any) -> dist._Work:
        try:
            mine, factor = _reduce_op(opts.reduceOp, inp.dtype)
            if out.dtype != inp.dtype:
                raise TypeError(f"reduce_scatter output has dtype {out.dtype}, input "
                                f"{inp.dtype}")
            source = premul(inp, factor) if factor is not None else inp
            if overlaps(source, out):
                source = source.clone()  # MPI rejects aliased buffers
            send, _ = stage(source.reshape(-1) if source.is_contiguous() else source.flatten(),
                            reduce=True)
            recv, post = stage(out, reduce=True, write=True)
        except (ValueError, TypeError) as exc:
            self._refuse("reduce_scatter", exc)
            raise
        work = self._comm.reduce_scatter(send.reshape(-1), flat_view(recv), mine,
                                         self._async(opts))
        return self._work(work, [out], post)

    def reduce_scatter_single_coalesced(self, outputs: list[torch.Tensor],
                                        inputs: list[torch.Tensor],
                                        opts: Any = None) -> dist._Work:
        """:meth:`reduce_scatter_single` of each (output, input) pair."""
        opts = opts if opts is not None else _opts.ReduceScatterOptions()
        works = [self.reduce_scatter_single(o, i, opts) for o, i in zip(outputs, inputs)]
        return all_of(works, outputs)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    # -- data movement -------------------------------------------------------------------------
    def broadcast(self, tensors: list[torch.Tensor], opts: Any = None) -> dist._Work:
        """Copy ``opts.rootRank``'s ``tensors[0]`` into everyone's."""
        opts = opts if opts is not None else _opts.BroadcastOptions()
        try:
            t = flat(tensors, "broadcast")
        except (ValueError, TypeError) as exc:
            self._refuse("broadcast", exc)
            raise
        root = opts.rootRank
        async_op = opts.asyncOp
        if (t.is_cpu and not (async_op and self._overlap) and not t.requires_grad
                and self._fast.broadcast(plain(t), root)):
            return DoneWork(tensors) if async_op else DONE
        try:
            array, post = stage(t, write=self._comm.rank != root)
        except (ValueError, TypeError) as exc:
            self._refuse("broadcast", exc)
            raise
        return self._work(self._comm.broadcast(array, root, self._async(opts)), [t], post)

    def allgather(self, output_tensors: list[list[torch.Tensor]],
                  input_tensors: list[torch.Tensor], opts: Any = None) -> dist._Work:
        """Fill ``output_tensors[0][i]`` with rank ``i``'s ``input_tensors[0]``."""
        opts = opts if opts is not None else _opts.AllgatherOptions()
        try:
            inp = flat(input_tensors, "allgather")
            outs = flat(output_tensors, "allgather")
            check_list(outs, inp, self._comm.size, "output_tensor_list")
        except (ValueError, TypeError) as exc:
            self._refuse("all_gather", exc)
            raise
        big = torch.empty((self._comm.size, *inp.shape), dtype=inp.dtype, device=inp.device)
        work = self._all_gather(big, inp, self._async(opts))
        return then(work, [*outs], scatter_rows(outs, big))

    def all_gather_single(self, output: torch.Tensor, input: torch.Tensor,
                          opts: Any = None) -> dist._Work:
        """Gather every rank's ``input`` into ``output``, concatenated along dim 0."""
        opts = opts if opts is not None else _opts.AllgatherOptions()
        async_op = opts.asyncOp
        if (plain_pair(output, input) and not (async_op and self._overlap)
                and self._fast.all_gather(plain(input), plain(output))):
            return DoneWork([output]) if async_op else DONE
        return self._all_gather(output, input, self._async(opts))

    _allgather_base = all_gather_single

    def _all_gather(self, out: torch.Tensor, inp: torch.Tensor, async_op: bool) -> dist._Work:
        size = self._comm.size
        error: Exception | None = None
        if out.numel() != inp.numel() * size:
            error = ValueError(f"all_gather output has {out.numel()} elements; with {size} "
                               f"ranks it must have {size} x {inp.numel()} (the input's)")
        elif out.dtype != inp.dtype:
            error = TypeError(f"all_gather output has dtype {out.dtype}, input {inp.dtype}")
        if error is not None:
            self._refuse("all_gather", error)
            raise error
        if overlaps(inp, out):
            # FSDP2's layout goes to MPI_IN_PLACE directly, but not on a debug communicator,
            # which must fingerprint every collective (the copy below goes through it)
            if (out.is_contiguous() and inp.is_contiguous() and out.device.type == "cpu"
                    and inp.data_ptr() == out.data_ptr()
                    + self._comm.rank * inp.numel() * inp.element_size()
                    and not self._comm.checks_every_call):
                return self._all_gather_in_place(out, async_op)  # FSDP2's layout
            inp = inp.clone()
        try:
            recv, post = stage(out, write=True)
            send, _ = stage(inp)
        except (ValueError, TypeError) as exc:
            self._refuse("all_gather", exc)
            raise
        work = self._comm.all_gather(flat_view(send), flat_view(recv), async_op)
        return self._work(work, [out], post)

    def _all_gather_in_place(self, out: torch.Tensor, async_op: bool) -> dist._Work:
        """The input is this rank's chunk of the output: ``MPI_IN_PLACE``, no copy."""
        array, _ = stage(out, write=True)
        flat = array.reshape(-1)
        if async_op:
            request = self._mpi.Iallgather(MPI.IN_PLACE, flat)
            return PendingWork(mpi_work([request], flat), [out])
        mark_call()  # the watchdog's mark: a new blocking call
        self._mpi.Allgather(MPI.IN_PLACE, flat)
        return DoneWork([out])

    def allgather_coalesced(self, output_lists: list[list[torch.Tensor]],
                            input_list: list[torch.Tensor], opts: Any = None) -> dist._Work:
        """:meth:`allgather` of each input: ``output_lists[r][i]`` gets rank ``r``'s input ``i``.

        The layout of torch's ``all_gather_coalesced`` (and gloo's): one list per rank, each
        with one output per input.
        """
        opts = opts if opts is not None else _opts.AllgatherOptions()
        size = self._comm.size
        if len(output_lists) != size or any(len(o) != len(input_list) for o in output_lists):
            error = ValueError(
                f"all_gather_coalesced needs one list per rank of the group ({size}), each with "
                f"one output per input ({len(input_list)}); got lists of "
                f"{[len(o) for o in output_lists]}")
            self._refuse("all_gather", error)
            raise error
        works = [self.allgather([[output_lists[r][i] for r in range(size)]], [inp], opts)
                 for i, inp in enumerate(input_list)]
        return all_of(works, [t for outs in output_lists for t in outs])

    def all_gather_single_coalesced(self, outputs: list[torch.Tensor],
                                    inputs: list[torch.Tensor],
                                    opts: Any = None) -> dist._Work:
        """:meth:`all_gather_single` of each (output, input) pair."""
        opts = opts if opts is not None else _opts.AllgatherOptions()
        works = [self.all_gather_single(o, i, opts) for o, i in zip(outputs, inputs)]
        return all_of(works, outputs)

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def gather(self, output_tensors: list[list[torch.Tensor]],
               input_tensors: list[torch.Tensor], opts: Any = None) -> dist._Work:
        """Concatenate every rank's ``input_tensors[0]`` into root's ``output_tensors[0]``."""
        opts = opts if opts is not None else _opts.GatherOptions()
        root = opts.rootRank
        try:
            inp = flat(input_tensors, "gather")
            send, _ = stage(inp)
            if self._comm.rank == root:
                outs = flat(output_tensors, "gather")
                check_list(outs, inp, self._comm.size, "gather_list")
        except (ValueError, TypeError) as exc:
            self._refuse("gather", exc)
            raise
        if self._comm.rank != root:
            return self._work(self._comm.gather(flat_view(send), None, root, self._async(opts)),
                              [], None)
        big = torch.empty((self._comm.size, *inp.shape), dtype=inp.dtype, device=inp.device)
        recv, _ = stage(big, write=True)
        work = self._comm.gather(flat_view(send), flat_view(recv), root, self._async(opts))
        return then(self._work(work, [big], None), [*outs], scatter_rows(outs, big))

    def scatter(self, output_tensors: list[torch.Tensor],
                input_tensors: list[list[torch.Tensor]], opts: Any = None) -> dist._Work:
        """Give rank ``i`` root's ``input_tensors[0][i]`` in ``output_tensors[0]``."""
        opts = opts if opts is not None else _opts.ScatterOptions()
        root = opts.rootRank
        send = None
        try:
            out = flat(output_tensors, "scatter")
            recv, post = stage(out, write=True)
            if self._comm.rank == root:
                chunks = flat(input_tensors, "scatter")
                check_list(chunks, out, self._comm.size, "scatter_list")
                send = flat_view(stage(torch.stack([c.detach() for c in chunks]))[0])
        except (ValueError, TypeError) as exc:
            self._refuse("scatter", exc)
            raise
        work = self._comm.scatter(send, flat_view(recv), root, self._async(opts))
        return self._work(work, [out], post)

    def alltoall(self, output_tensors: list[torch.Tensor], input_tensors: list[torch.Tensor],
                 opts: Any = None) -> dist._Work:
        """Send ``input_tensors[i]`` to rank ``i``; receive rank ``i``'s into
        ``output_tensors[i]`` (sizes may differ per rank)."""
        opts = opts if opts is not None else _opts.AllToAllOptions()
        size = self._comm.size
        try:
            for what, ts in (("output_tensor_list", output_tensors),
                             ("input_tensor_list", input_tensors)):
                if len(ts) != size:
                    raise ValueError(f"{what} must have one tensor per rank of the group "
                                     f"({size}), got {len(ts)}")
            dtype = input_tensors[0].dtype
            for t in (*input_tensors, *output_tensors):
                if t.dtype != dtype:
                    raise TypeError(f"all_to_all tensors must share one dtype, got {dtype} and "
                                    f"{t.dtype}")
            device = input_tensors[0].device
            send_t = torch.cat([t.detach().reshape(-1) for t in input_tensors]).to(device)
            recv_counts = [t.numel() for t in output_tensors]
            recv_t = torch.empty(sum(recv_counts), dtype=dtype, device=device)
            send, _ = stage(send_t)
            recv, _ = stage(recv_t, write=True)
        except (ValueError, TypeError) as exc:
            self._refuse("all_to_all_v", exc)
            raise
        work = self._comm.all_to_all_v(send, [t.numel() for t in input_tensors], recv,
                                       recv_counts, self._async(opts))

        def unpack() -> None:
            for t, part in zip(output_tensors, torch.split(recv_t, recv_counts)):
                t.copy_(part.view(t.shape))

        return then(self._work(work, [recv_t], None), output_tensors, unpack)

    def all_to_all_single(self, output: torch.Tensor, input: torch.Tensor,
                          output_split_sizes: list[int] | None,
                          input_split_sizes: list[int] | None,
                          opts: Any = None) -> dist._Work:
        """All-to-all of dim-0 slices, with per-rank split sizes (empty lists: equal)."""
        opts = opts if opts is not None else _opts.AllToAllOptions()
        async_op = opts.asyncOp
        if (not output_split_sizes and not input_split_sizes and plain_pair(output, input)
                and not (async_op and self._overlap)
                and self._fast.all_to_all(plain(input), plain(output))):
            return DoneWork([output]) if async_op else DONE
        size = self._comm.size
        try:
            out_rows = split_rows(output, output_split_sizes, size, "output_split_sizes")
            in_rows = split_rows(input, input_split_sizes, size, "input_split_sizes")
            if output.dtype != input.dtype:
                raise TypeError(f"all_to_all output has dtype {output.dtype}, input "
                                f"{input.dtype}")
            out_row = output[0].numel() if output.dim() else 1
            in_row = input[0].numel() if input.dim() else 1
            if overlaps(input, output):
                input = input.clone()
            recv, post = stage(output, write=True)
            send, _ = stage(input)
        except (ValueError, TypeError) as exc:
            self._refuse("all_to_all" if not output_split_sizes and not input_split_sizes
                         else "all_to_all_v", exc)
            raise
        if out_rows is None and in_rows is None:
            work = self._comm.all_to_all(flat_view(send), flat_view(recv), self._async(opts))
        else:
            equal_out = output.shape[0] // size if output.dim() else 0
            equal_in = input.shape[0] // size if input.dim() else 0
            recv_counts = [n * out_row for n in (out_rows or [equal_out] * size)]
            send_counts = [n * in_row for n in (in_rows or [equal_in] * size)]
            work = self._comm.all_to_all_v(flat_view(send), send_counts, flat_view(recv),
                                           recv_counts, self._async(opts))
        return self._work(work, [output], post)

    alltoall_base = all_to_all_single

    # -- synchronisation -----------------------------------------------------------------------
    def barrier(self, opts: Any = None) -> dist._Work:
        """Block until every rank of the group has entered."""
        opts = opts if opts is not None else _opts.BarrierOptions()
        limit = barrier_limit(opts, self._timeout)
        if limit is not None:
            if not barrier_by(self._mpi, limit):
                self._give_up("barrier", limit)
            return DONE
        work = self._comm.barrier(async_op=self._overlap and bool(getattr(opts, "asyncOp", 0)))
        return self._work(work, [], None)

    def _give_up(self, what: str, limit: timedelta) -> NoReturn:
        """Retire the group after ``what`` timed out, and raise torch's error."""
        message = timeout_message(self._comm.rank, self._group_name, what, limit)
        self._retire(message)
        raise RuntimeError(message)

    def _retire(self, reason: str) -> None:
        """Make every later use of the group raise ``RuntimeError(reason)``."""
        gone: Any = Unusable(reason)
        self._comm, self._mpi, self._fast = gone, gone, gone

    def shutdown(self) -> None:
        """Called by ``destroy_process_group``: later uses of the group raise."""
        if not isinstance(self._mpi, Unusable):
            comm = self._comm
            self._retire(f"the process group {self._group_name or '(default)'} was destroyed "
                         f"(destroy_process_group)")
            if comm.mpi_comm != MPI.COMM_WORLD:
                with contextlib.suppress(Exception):
                    # freed later (or by MPI_Finalize): the exit check still looks for the
                    # messages sent on it that nobody received
                    keep_until_exit(comm)
