"""Data-parallel training: gradients averaged over ranks in buckets that overlap backward.

``DistributedDataParallel`` follows OneFlow: it broadcasts the parameters from rank 0 when it
wraps a module and returns *the module itself* (so ``m.w`` and custom attributes keep working).
During backward, each parameter's gradient is copied into its bucket as soon as autograd has
finished it; a full bucket starts its non-blocking all-reduce at once, overlapping the rest of
backward. Buckets are launched strictly in bucket order on every rank (MPI requires collectives
in the same order everywhere), and at the end of backward the buckets of parameters that got no
gradient on this rank (unused here) are completed with zeros, so nothing hangs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..._tensor import Tensor
from ...autograd.graph import is_grad_enabled, queue_callback
from ...communication import ReduceOp, Work
from ...communication.collectives import resolve_group
from ...communication.group import ProcessGroup
from ...core.array_module import array_module
from ...parallel.packing import Bucket, make_buckets
from ...parallel.sync import sync_initial_weights

__all__ = ["DistributedDataParallel"]

_FIRST_BUCKET_BYTES = 1 << 20


class _Reducer:
    """The bucketed gradient all-reduce of one module."""

    def __init__(self, module: Any, group: ProcessGroup, bucket_bytes: int,
                 broadcast_buffers: bool, bucket_params: int | None = None) -> None:
        self.module = module
        self.group = group
        self.broadcast_buffers = broadcast_buffers
        # Reverse registration order: the last layers' gradients are ready first in backward.
        # (parameters() yields each shared parameter once.)
        self.params: list[Tensor] = [p for p in module.parameters()
                                     if p.requires_grad and p.is_local][::-1]
        self.buckets: list[Bucket] = make_buckets(
            [(tuple(p.shape), p._data.dtype) for p in self.params], bucket_bytes,
            _FIRST_BUCKET_BYTES if bucket_params is None else None, bucket_params)
        self.where: dict[int, tuple[int, int]] = {}
        for b, bucket in enumerate(self.buckets):
            bucket.allocate(array_module(self.params[bucket.members[0]]._data))
            for slot, index in enumerate(bucket.members):
                self.where[id(self.params[index])] = (b, slot)
        self.enabled = True
        self.armed = False
        self._reset()
        for p in self.params:
            p.register_post_accumulate_grad_hook(self._on_gradient)

    def _reset(self) -> None:
        self.ready = [[False] * len(b.members) for b in self.buckets]
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

    def _on_gradient(self, param: Tensor) -> None:
        if not (self.enabled and self.armed):
            return
        b, slot = self.where[id(param)]
        bucket = self.buckets[b]
        offset, size = bucket.offsets[slot], bucket.sizes[slot]
        assert param.grad is not None
        bucket.flat[offset:offset + size] = param.grad._data.reshape(-1)
        self.ready[b][slot] = True
        self._launch(complete_missing=False)
        for work in self.works[:self.launched]:  # drive MPI's progress while backward runs
            if work is not None:
                work.is_completed()

    def _launch(self, complete_missing: bool) -> None:
        comm = self.group.comm
        assert comm is not None
        while self.launched < len(self.buckets):
            b = self.launched
            bucket = self.buckets[b]
            if not all(self.ready[b]):
                if not complete_missing:
                    return
                for slot, ok in enumerate(self.ready[b]):
                    if not ok:  # unused on this rank: contributes zeros
                        offset, size = bucket.offsets[slot], bucket.sizes[slot]
                        bucket.flat[offset:offset + size] = 0
            op = ReduceOp.AVG if bucket.dtype.kind in "fc" else ReduceOp.SUM
            self.works[b] = comm.all_reduce(bucket.flat, op, async_op=True)
            self.launched += 1

    def _finish(self) -> None:
        if not self.armed:
            return
        self.armed = False
        self._launch(complete_missing=True)
        from ...creation import zeros_like

        for bucket, work in zip(self.buckets, self.works):
            assert work is not None
            work.wait()
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
                            broadcast_parameters: bool = True, bucket_size: int | None = None,
                            use_bucket: bool = True) -> Any:
    """Make ``module`` data parallel over the ranks of ``process_group`` and return it.

    Args:
        module: an mpiflow ``nn.Module`` with local parameters.
        broadcast_buffers: copy rank 0's buffers to every rank before each forward (and now,
            with ``broadcast_parameters``); False leaves each rank its own buffers.
        bucket_size_mb: gradient bucket size; each full bucket starts its all-reduce during
            backward.
        process_group: the group (default: the world).
        broadcast_parameters: copy rank 0's parameters to every rank now.
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
    reducer = _Reducer(module, group, bucket_bytes, broadcast_buffers, per_bucket)
    object.__setattr__(module, "_ddp_reducer", reducer)
    object.__setattr__(module, "no_sync", reducer.no_sync)
    module.register_forward_pre_hook(lambda mod, inputs: reducer.before_forward())
    return module
