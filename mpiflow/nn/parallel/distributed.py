"""Data-parallel training: gradients averaged over ranks in buckets that overlap backward.

``DistributedDataParallel`` follows OneFlow: it broadcasts the parameters from rank 0 when it
wraps a module and returns *the module itself* (so ``m.w`` and custom attributes keep working).
The parameters are grouped into buckets (reverse registration order, one dtype each), each with
one flat buffer (:class:`~mpiflow.parallel.bucket_view.FlatGradients`). By default every parameter's
``.grad`` is a view of its slice of that buffer (PyTorch's ``gradient_as_bucket_view``), so
backward accumulates straight into the bucket and the bucket is all-reduced in place; with
``gradient_as_bucket_view=False`` each gradient is copied into its bucket once autograd has
finished it, and the result copied back at the end.

A full bucket starts its non-blocking all-reduce at once, overlapping the rest of backward.
Buckets are launched strictly in bucket order on every rank (MPI requires collectives in the
same order everywhere), one all-reduce each. The last bucket, whose gradients are complete only
when backward ends, is all-reduced then with the blocking all-reduce, in pieces of at most
16 MiB (MPI's non-blocking all-reduce is much slower for large messages when nothing progresses
it, and one all-reduce of tens of MiB slower than its pieces). At the end of backward, a
parameter that got no gradient on this rank contributes its ``.grad`` as it stands (zeros where
it is None), so every rank completes every bucket and nothing hangs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ...autograd.graph import is_grad_enabled, queue_callback
from ...communication import ReduceOp, Work
from ...communication.collectives.torch_api import resolve_group
from ...communication.mpi.group import ProcessGroup
from ...parallel.bucket_view import FlatGradients
from ...parallel.sync import sync_initial_weights
from ...tensors.tensor import Tensor

__all__ = ["DistributedDataParallel"]

_FIRST_BUCKET_BYTES = 1 << 20


class _Reducer:
    """The bucketed gradient all-reduce of one module."""

    def __init__(self, module: Any, group: ProcessGroup, bucket_bytes: int,
                 broadcast_buffers: bool, as_view: bool,
                 bucket_params: int | None = None) -> None:
        self.module = module
        self.group = group
        self.broadcast_buffers = broadcast_buffers
        self.as_view = as_view
        # Reverse registration order: the last layers' gradients are ready first in backward.
        # (parameters() yields each shared parameter once.)
        self.params: list[Tensor] = [p for p in module.parameters()
                                     if p.requires_grad and p.is_local][::-1]
        # PyTorch's small first bucket starts the first all-reduce early; never larger than
        # the buckets asked for. OneFlow's bucket_size counts parameters instead.
        self.flat = FlatGradients(
            self.params, bucket_bytes,
            min(_FIRST_BUCKET_BYTES, bucket_bytes) if bucket_params is None else None,
            bucket_params)
        self.buckets = self.flat.buckets
        self.where: dict[int, tuple[int, int]] = {}
        for b, bucket in enumerate(self.buckets):
            for slot, index in enumerate(bucket.members):
                self.where[id(self.params[index])] = (b, slot)
        # On one rank the average is the sum: no division pass over the buckets.
        average = group.size() > 1
        self.ops = [ReduceOp.AVG if average and bucket.dtype.kind in "fc" else ReduceOp.SUM
                    for bucket in self.buckets]
        self.enabled = True
        self.armed = False
        self._reset()
        for index, p in enumerate(self.params):
            if as_view:
                p.register_hook(self._before_accumulate(index))
            p.register_post_accumulate_grad_hook(self._on_gradient)

    def _reset(self) -> None:
        self.ready = [[False] * len(b.members) for b in self.buckets]
        self.pending = [len(b.members) for b in self.buckets]
        self.works: list[Work | None] = [None] * len(self.buckets)
        self.launched = 0

    # -- during forward and backward ------------------------------------------------------
    def before_forward(self) -> None:
        if self.broadcast_buffers:
            buffers = [b for b in self.module.buffers() if b.is_local]
            if buffers:
                sync_initial_weights(buffers, src=self.group.ranks[0], group=self.group,
                                     check=False)
        if self.enabled and is_grad_enabled() and not self.armed:
            # Armed at forward, so every rank finishes the round even if no parameter of this
            # rank receives a gradient in backward.
            self.armed = True
            self._reset()
            queue_callback(self._finish)

    def _before_accumulate(self, index: int) -> Callable[[Tensor], None]:
        attach = self.flat.attach

        def hook(grad: Tensor) -> None:
            # Runs before autograd accumulates: with the view in place as .grad (zeroed where
            # .grad was None), autograd adds into the bucket instead of cloning a new array.
            attach(index)

        return hook

    def _on_gradient(self, param: Tensor) -> None:
        if not (self.enabled and self.armed):
            return
        b, slot = self.where[id(param)]
        if self.ready[b][slot]:
            return
        if self.as_view:
            self.flat.attach(self.buckets[b].members[slot])  # a no-op unless a hook rebound it
        else:
            bucket = self.buckets[b]
            offset, size = bucket.offsets[slot], bucket.sizes[slot]
            assert param.grad is not None
            bucket.flat[offset:offset + size] = param.grad._data.reshape(-1)
        self.ready[b][slot] = True
        self.pending[b] -= 1
        self._launch()
        for work in self.works[:self.launched]:  # drive MPI's progress while backward runs
            if work is not None:
                work.is_completed()

    def _launch(self) -> None:
        """Start the non-blocking all-reduces of the complete buckets, in bucket order; the
        last bucket is left to :meth:`_finish`, which runs it blocking."""
        comm = self.group.comm
        last = len(self.buckets) - 1
        while self.launched < last and self.pending[self.launched] == 0:
            b = self.launched
            self.works[b] = self.flat.start(b, comm, self.ops[b])
            self.launched += 1

    def _fill_missing(self, b: int) -> None:
        """Put the ``.grad`` of the bucket's parameters that got no gradient in this backward
        into the bucket (zeros where it is None)."""
        bucket = self.buckets[b]
        for slot, ok in enumerate(self.ready[b]):
            if ok:
                continue
            index = bucket.members[slot]
            if self.as_view:
                self.flat.attach(index)
                continue
            offset, size = bucket.offsets[slot], bucket.sizes[slot]
            grad = self.params[index].grad
            if grad is None:
                bucket.flat[offset:offset + size] = 0
            else:
                bucket.flat[offset:offset + size] = grad._data.reshape(-1)

    def _finish(self) -> None:
        if not self.armed:
            return
        self.armed = False
        comm = self.group.comm
        last = len(self.buckets) - 1
        # Whether a bucket's all-reduce is blocking depends on its index only: MPI does not
        # match a blocking collective on one rank with a non-blocking one on another.
        for b in range(self.launched, last + 1):
            if self.pending[b]:
                self._fill_missing(b)
            if b < last:
                self.works[b] = self.flat.start(b, comm, self.ops[b])
                self.launched += 1
        if last >= 0:
            self.flat.all_reduce(last, comm, self.ops[last])
        for work in self.works[:self.launched]:
            assert work is not None
            work.wait()
        if not self.as_view:
            self._copy_back()

    def _copy_back(self) -> None:
        from ...tensors.creation import zeros_like

        for bucket in self.buckets:
            for index, offset, size in zip(bucket.members, bucket.offsets, bucket.sizes):
                p = self.params[index]
                if p.grad is None:
                    p.grad = zeros_like(p)
                p.grad._data[...] = bucket.flat[offset:offset + size].reshape(p.grad.shape)

    @contextmanager
    def no_sync(self) -> Iterator[None]:
        """Accumulate gradients locally; the next synchronized backward reduces the sum."""
        previous = self.enabled
        self.enabled = False
        try:
            yield
        finally:
            self.enabled = previous


def DistributedDataParallel(module: Any, *, broadcast_buffers: bool = True,
                            bucket_size_mb: float = 25, process_group: ProcessGroup | None = None,
                            broadcast_parameters: bool = True,
                            gradient_as_bucket_view: bool = True, bucket_size: int | None = None,
                            use_bucket: bool = True) -> Any:
    """Make ``module`` data parallel over the ranks of ``process_group`` and return it.

    Args:
        module: an mpiflow ``nn.Module`` with local parameters.
        broadcast_buffers: copy rank 0's buffers to every rank before each forward (and now,
            with ``broadcast_parameters``); False leaves each rank its own buffers.
        bucket_size_mb: gradient bucket size; each full bucket starts its all-reduce during
            backward.
        process_group: the group (default: the world).
        broadcast_parameters: copy rank 0's parameters to every rank now (and its buffers,
            with ``broadcast_buffers``).
        gradient_as_bucket_view: make every parameter's ``.grad`` a view of its slice of the
            bucket's flat buffer (PyTorch's flag of that name; here on by default), so that
            backward accumulates into the bucket and the bucket is all-reduced where it lies,
            with no copies in or out. ``dist.sync_gradients(module)`` then all-reduces the same
            buffers. ``zero_grad(set_to_none=True)`` still sets ``.grad`` to None; the next
            backward puts the (zeroed) view back, and a tensor assigned to ``.grad`` is copied
            into the bucket and replaced by the view. So ``.grad`` is the same tensor every
            step, overwritten by each backward: keep a ``clone()`` of a gradient you want to
            keep. False: gradients are separate arrays, copied into the buckets during backward
            and back after the all-reduce.
        bucket_size: OneFlow's bucket size, in parameters: at most this many per bucket
            (instead of ``bucket_size_mb``).
        use_bucket: False all-reduces each parameter's gradient on its own (OneFlow's
            ``use_bucket=False``; the same as ``bucket_size=1``).

    Returns:
        ``module`` itself, with ``module.no_sync()`` added.

    Examples:
        >>> from mpiflow.nn.parallel import DistributedDataParallel as ddp
        >>> m = ddp(nn.Linear(3, 1))
        >>> x, y = flow.randn(4, 3), flow.randn(4, 1)
        >>> nn.MSELoss()(m(x), y).backward()   # m.weight.grad: the gradient averaged over ranks
        >>> bucket = m._flat_gradients.buckets[0].flat   # the one bucket: bias, then weight
        >>> numpy.shares_memory(m.weight.grad.numpy(), bucket)
        True
    """
    group = resolve_group(process_group)
    if group.comm is None:
        raise ValueError("DistributedDataParallel: this rank is not in process_group")
    if getattr(module, "_ddp_reducer", None) is not None:
        raise RuntimeError("this module is already wrapped by DistributedDataParallel")
    if any(p.is_global for p in module.parameters()):
        raise ValueError("DistributedDataParallel needs local parameters; a module of global "
                         "tensors is already distributed (see to_global)")
    if bucket_size is not None and (isinstance(bucket_size, bool) or not
                                    isinstance(bucket_size, int) or bucket_size < 1):
        raise ValueError(f"bucket_size counts parameters: a positive int, got {bucket_size!r}")
    if broadcast_parameters:
        # Buffers only where they are synchronized anyway (OneFlow broadcasts parameters only).
        weights = module if broadcast_buffers else list(module.parameters())
        sync_initial_weights(weights, src=group.ranks[0], group=group)
    per_bucket = 1 if not use_bucket else bucket_size
    bucket_bytes = int(bucket_size_mb * (1 << 20)) if per_bucket is None else 1 << 62
    reducer = _Reducer(module, group, bucket_bytes, broadcast_buffers,
                       bool(gradient_as_bucket_view), per_bucket)
    object.__setattr__(module, "_ddp_reducer", reducer)
    if reducer.as_view:
        object.__setattr__(module, "_flat_gradients", reducer.flat)
    object.__setattr__(module, "no_sync", reducer.no_sync)
    module.register_forward_pre_hook(lambda mod, inputs: reducer.before_forward())
    return module
