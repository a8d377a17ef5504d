"""Gradients that live in flat bucket buffers, so that a bucket is all-reduced where it lies.

PyTorch's ``gradient_as_bucket_view``: the parameters are grouped into buckets of one dtype
(:func:`~.packing.make_buckets`), each bucket gets one flat buffer, and every parameter's
``.grad`` becomes a view of its slice. The buffers are allocated once, one array per dtype
holding that dtype's buckets one after the other in bucket order, so that a sync of every
gradient (:func:`~.sync.sync_gradients`) can all-reduce each dtype's array in pieces of its
own choosing, bucket boundaries or not. Backward then accumulates straight into the
bucket (autograd adds into an existing ``.grad`` in place), and the all-reduce runs on the flat
buffer in place: no copy into a packed buffer before it, none back after it.

A ``.grad`` can stop being the view: ``zero_grad(set_to_none=True)`` makes it None, and a user
may assign another tensor. :meth:`FlatGradients.attach` puts the view back (zeros for None, a
copy of the other tensor's values otherwise); a cheap identity check finds the common case, the
view still in place, with nothing to do.

Examples:
    >>> m = nn.Linear(3, 2)
    >>> flat = FlatGradients(list(m.parameters()), 1 << 20)
    >>> flat.attach_all()
    >>> numpy.shares_memory(m.weight.grad.numpy(), flat.buckets[0].flat)
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy

from ..communication import ReduceOp, Work
from ..core.array_module import array_module
from ..tensors.tensor import Tensor
from .packing import Bucket, make_buckets

__all__ = ["PIECE_BYTES", "FlatGradients", "all_reduce_pieces"]

PIECE_BYTES = 16 << 20
"""A bucket is all-reduced (blocking) in pieces of at most this many bytes: one all-reduce of
tens of MiB was twice as slow here as 16 MiB pieces, its buffers no longer fitting the caches
(docs/benchmarks/grad-sync.md). The pieces are independent, as the reduction is
elementwise, so the result does not depend on them."""


class FlatGradients:
    """Flat per-bucket gradient buffers of some parameters, whose ``.grad`` are views of them.

    Args:
        params: local parameters, in bucket order (DDP: the order gradients become ready).
        bucket_bytes: the size a bucket may reach (a larger parameter gets its own bucket).
        first_bucket_bytes: a smaller limit for the first bucket.

    Attributes:
        params: the parameters.
        buckets: their buckets (:class:`~.packing.Bucket`), each with its ``flat`` buffer;
            ``members`` index into ``params``.
        storage: per dtype, in the order of their first bucket, the one array whose
            consecutive slices are the ``flat`` buffers of that dtype's buckets.
        views: per parameter, the tensor viewing its slice (the same object every time, so
            that ``p.grad is views[i]`` tells whether the view is in place).
        bucket_of: per parameter, the index of its bucket.
        known: the ``id`` of every parameter.

    Examples:
        >>> w, b = nn.Parameter(flow.ones(2, 2)), nn.Parameter(flow.ones(2))
        >>> flat = FlatGradients([w, b], 1 << 20)
        >>> w.grad = flow.full((2, 2), 3.0)      # not the view: attach copies it in
        >>> flat.attach(0)
        >>> flat.buckets[0].flat.tolist()
        [3.0, 3.0, 3.0, 3.0, 0.0, 0.0]
    """

    def __init__(self, params: Sequence[Tensor], bucket_bytes: int,
                 first_bucket_bytes: int | None = None,
                 max_members: int | None = None) -> None:
        self.params: list[Tensor] = list(params)
        self.buckets: list[Bucket] = make_buckets(
            [(tuple(p.shape), p._data.dtype) for p in self.params], bucket_bytes,
            first_bucket_bytes, max_members)
        self.views: list[Tensor] = [None] * len(self.params)  # type: ignore[list-item]
        self.bucket_of: list[int] = [0] * len(self.params)
        self.known: frozenset[int] = frozenset(id(p) for p in self.params)
        modules = {array_module(p._data) for p in self.params}
        if len(modules) > 1:
            raise ValueError("flat gradient buckets need every parameter on one device (host "
                             "or GPU); this model mixes them")
        xp: Any = modules.pop() if modules else numpy
        sizes: dict[Any, int] = {}
        for bucket in self.buckets:
            sizes[bucket.dtype] = sizes.get(bucket.dtype, 0) + bucket.numel
        # Zeros, so that a slot nobody wrote adds nothing.
        self.storage: list[Any] = [xp.zeros(n, dtype=dt) for dt, n in sizes.items()]
        by_dtype = {a.dtype: a for a in self.storage}
        used = dict.fromkeys(sizes, 0)
        for b, bucket in enumerate(self.buckets):
            start = used[bucket.dtype]
            bucket.flat = by_dtype[bucket.dtype][start:start + bucket.numel]
            used[bucket.dtype] = start + bucket.numel
            for index, offset, size in zip(bucket.members, bucket.offsets, bucket.sizes):
                shape = tuple(self.params[index].shape)
                self.views[index] = Tensor(bucket.flat[offset:offset + size].reshape(shape))
                self.bucket_of[index] = b

    def attach(self, index: int) -> None:
        """Make ``params[index].grad`` its view: zeros where it was None, a copy of its values
        where it was another tensor, nothing to do where the view is in place.

        Raises:
            RuntimeError: the parameter's ``.grad`` has another shape, or the parameter another
                dtype or device than its bucket (changed since the buckets were made).
        """
        p, view = self.params[index], self.views[index]
        grad = p.grad
        if grad is view:
            return
        data = p._data
        if data.dtype != view._data.dtype or array_module(data) is not array_module(view._data):
            raise RuntimeError(
                f"a parameter of shape {tuple(p.shape)} is now {data.dtype} on {p.device}, its "
                f"gradient bucket {view._data.dtype} on {view.device}: parameters changed dtype "
                "or device after their buckets were made (wrap the model with "
                "DistributedDataParallel after .to())")
        if grad is None:
            view._data[...] = 0
        else:
            if tuple(grad.shape) != tuple(view.shape):
                raise RuntimeError(f"a gradient of shape {tuple(grad.shape)} was assigned to a "
                                   f"parameter of shape {tuple(view.shape)}")
            view._data[...] = grad._data
        p.grad = view

    def attach_all(self) -> None:
        """:meth:`attach` every parameter."""
        views = self.views
        for index, p in enumerate(self.params):
            if p.grad is not views[index]:
                if p.grad is None and not p.requires_grad:  # frozen since: adds zeros
                    views[index]._data[...] = 0
                    continue
                self.attach(index)

    def start(self, b: int, comm: Any, op: ReduceOp) -> Work | None:
        """Start the non-blocking all-reduce of bucket ``b``'s flat buffer, in place."""
        return comm.all_reduce(self.buckets[b].flat, op, async_op=True)

    def all_reduce(self, b: int, comm: Any, op: ReduceOp) -> None:
        """All-reduce bucket ``b``'s flat buffer in place (blocking, in pieces of at most
        :data:`PIECE_BYTES`)."""
        all_reduce_pieces(self.buckets[b].flat, comm, op)


def all_reduce_pieces(flat: Any, comm: Any, op: ReduceOp, scale: float | None = None) -> None:
    """All-reduce the 1-D array ``flat`` in place over ``comm`` (blocking), in pieces of at most
    :data:`PIECE_BYTES`, each multiplied by ``scale`` afterwards if given (integer averages)."""
    step = max(1, PIECE_BYTES // flat.itemsize)
    for start in range(0, flat.size, step):
        piece = flat[start:start + step]
        comm.all_reduce(piece, op)
        if scale is not None:
            piece[...] = piece * scale
