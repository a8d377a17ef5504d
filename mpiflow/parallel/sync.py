"""The MPI seed's two data-parallel helpers, done properly: packed into a few large collectives.

``sync_initial_weights`` broadcasts the model from one rank; ``sync_gradients`` all-reduces the
gradients (averaged by default). Both take an mpiflow ``Module``, a ``torch.nn.Module`` (CPU
or CUDA tensors of any dtype and strides, updated in place; torch is imported only if the object
is torch's), or a dict/list of numpy arrays, mpiflow or torch tensors, and move the data in
buckets of one dtype instead of one collective per parameter. bfloat16 gradients are averaged
in float32 and rounded once. A model whose gradients already live in flat buffers
(``DistributedDataParallel``'s ``gradient_as_bucket_view``) is all-reduced in those buffers.

Examples:
    >>> model = nn.Linear(3, 1)
    >>> dist.sync_initial_weights(model)
    >>> loss = model(flow.randn(4, 3)).sum()
    >>> loss.backward()
    >>> dist.sync_gradients(model)      # every rank now holds the averaged gradient
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..communication import ReduceOp
from ..communication.collectives.arguments import list_args
from ..communication.collectives.torch_api import resolve_group
from ..communication.mpi.group import ProcessGroup
from ..core.array_module import array_module
from ..core.torch_arrays import Post
from ..runtime import topology
from .bucket_view import FlatGradients, all_reduce_pieces
from .packing import Bucket, make_buckets

__all__ = ["sync_gradients", "sync_initial_weights"]

_BUCKET_BYTES = 64 << 20
_DIRECT_BYTES = 256 << 10  # gradients this big are all-reduced in place, not packed
_bucket_cache: dict[tuple[Any, ...], list[Bucket]] = {}


def _buckets_for(arrays: list[Any]) -> list[Bucket]:
    """Buckets for arrays of these shapes and dtypes, reused across calls (no reallocation)."""
    key = tuple((tuple(a.shape), a.dtype.str) for a in arrays)
    buckets = _bucket_cache.get(key)
    if buckets is None:
        if len(_bucket_cache) >= 8:
            _bucket_cache.pop(next(iter(_bucket_cache)))
        buckets = make_buckets([(a.shape, a.dtype) for a in arrays], _BUCKET_BYTES)
        _bucket_cache[key] = buckets
    return buckets


def _is_torch_module(model: Any) -> bool:
    return any(cls.__module__.startswith("torch.") for cls in type(model).__mro__)


def _check_claims(rank: int | None, world_size: int | None, group: ProcessGroup) -> None:
    if rank is not None and rank != group.rank():
        raise ValueError(f"rank={rank} but this process is rank {group.rank()}")
    if world_size is not None and world_size != group.size():
        raise ValueError(f"world_size={world_size} but the group has {group.size()} ranks")


def _staged(items: list[Any], reduce: bool) -> tuple[list[Any], Post | None]:
    """The writable arrays behind arrays and tensors, and the step that writes staged copies
    back once the collectives are done (bfloat16 is summed through float32 when ``reduce``)."""
    return list_args(items, "model entry", write=True, reduce=ReduceOp.SUM if reduce else None)


def _weights(model: Any) -> tuple[list[Any], Post | None]:
    """Writable arrays sharing memory with the model's parameters and buffers, and the step
    that finishes them (writes staged copies back) once they are received."""
    if _is_torch_module(model):
        return _staged([*model.parameters(), *model.buffers()], reduce=False)
    if hasattr(model, "parameters") and hasattr(model, "buffers"):
        return [t._data for t in [*model.parameters(), *model.buffers()] if t.is_local], None
    return _arrays_of(model, reduce=False)


def _gradients(model: Any) -> tuple[list[Any], Post | None]:
    """Writable arrays of the gradients, and the step that finishes them; a parameter without
    one gets zeros, so that every rank packs the same set."""
    if _is_torch_module(model):
        import torch

        grads = []
        for p in model.parameters():
            if not p.requires_grad:
                continue
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            grads.append(p.grad)
        return _staged(grads, reduce=True)
    if hasattr(model, "parameters"):
        from ..tensors.creation import zeros_like

        out = []
        for p in model.parameters():
            if not p.requires_grad or p.is_global:
                continue  # a global parameter's gradient is already the full-batch one
            if p.grad is None:
                p.grad = zeros_like(p)
            out.append(p.grad._data)
        return out, None
    return _arrays_of(model, reduce=True)


def _arrays_of(obj: Any, reduce: bool) -> tuple[list[Any], Post | None]:
    if isinstance(obj, Mapping):
        items = [obj[k] for k in obj]
    elif isinstance(obj, Sequence) and not isinstance(obj, (str, bytes)):
        items = list(obj)
    else:
        raise TypeError(f"expected an mpiflow Module, a torch.nn.Module, or a dict/list of arrays, "
                        f"got {type(obj).__name__}")
    return _staged(items, reduce)


def _by_module(arrays: list[Any]) -> list[list[Any]]:
    """``arrays`` split by array module (host, then device): a packed buffer holds one kind.

    Every rank must split alike, which it does when the ranks' models live on alike devices.
    """
    parts: dict[Any, list[Any]] = {}
    for a in arrays:
        parts.setdefault(array_module(a), []).append(a)
    return list(parts.values())


def _check_layout(arrays: list[Any], group: ProcessGroup, what: str) -> None:
    """Every rank must pack the same arrays: compare shapes and dtypes once (small)."""
    from ..communication.collectives.objects import all_gather_object

    signature = [(tuple(a.shape), a.dtype.str) for a in arrays]
    everyone: list[Any] = [None] * group.size()
    all_gather_object(everyone, signature, group=group)
    for r, theirs in enumerate(everyone):
        if theirs != signature:
            raise ValueError(f"{what}: rank {group.ranks[r]} has different tensors than rank "
                             f"{topology.rank} (shapes/dtypes {theirs} vs {signature})")


def sync_initial_weights(model: Any, rank: int | None = None, world_size: int | None = None,
                         src: int = 0, group: ProcessGroup | None = None,
                         check: bool = True) -> None:
    """Make every rank's parameters and buffers equal to those of world rank ``src``.

    Args:
        model: an mpiflow Module, a torch.nn.Module, or a dict/list of arrays.
        rank: what the caller believes (the seed's signature); checked if given.
        world_size: what the caller believes (the seed's signature); checked if given.
        src: the rank whose weights win.
        group: the group (default: the world).
        check: first compare shapes and dtypes across ranks (one small collective).
    """
    g = resolve_group(group)
    _check_claims(rank, world_size, g)
    if g.comm is None:
        return
    root = g.group_rank(src, "src")
    every, post = _weights(model)
    if check:
        _check_layout(every, g, "sync_initial_weights")
    for arrays in _by_module(every):
        for bucket in _buckets_for(arrays):
            flat = (bucket.pack(arrays) if g.comm.rank == root
                    else bucket.allocate(array_module(arrays[bucket.members[0]])))
            g.comm.broadcast(flat, root)
            if g.comm.rank != root:
                bucket.unpack(arrays)
    if post is not None:
        post()


def sync_gradients(model: Any, rank: int | None = None, world_size: int | None = None,
                   average: bool = True, group: ProcessGroup | None = None) -> None:
    """All-reduce the gradients of ``model`` in place, in a few packed collectives.

    A model whose gradients are views of flat bucket buffers (wrapped by
    ``DistributedDataParallel`` with ``gradient_as_bucket_view``, the default) is all-reduced
    in those buffers, where the gradients lie: no packing copies. Its parameters whose
    ``.grad`` is None get their (zeroed) view back first; parameters the buckets do not hold
    are packed as usual.

    Args:
        model: an mpiflow Module, a torch.nn.Module, or a dict/list of gradient arrays.
        rank: what the caller believes (the seed's signature); checked if given.
        world_size: what the caller believes (the seed's signature); checked if given.
        average: divide by the group size (the mean gradient), else sum.
        group: the group (default: the world).
    """
    g = resolve_group(group)
    _check_claims(rank, world_size, g)
    if g.comm is None:
        return
    flat = getattr(model, "_flat_gradients", None)
    if isinstance(flat, FlatGradients):
        _all_reduce_flat(model, flat, g, average)
        return
    every, post = _gradients(model)
    for arrays in _by_module(every):
        _all_reduce_arrays(arrays, g, average)
    if post is not None:
        post()


def _all_reduce_flat(model: Any, flat: FlatGradients, g: ProcessGroup, average: bool) -> None:
    """All-reduce the gradients of a model whose ``.grad`` are views of flat bucket buffers
    (DDP's ``gradient_as_bucket_view``): each bucket where it lies, no packing."""
    assert g.comm is not None
    flat.attach_all()
    inv = 1.0 / g.size()
    average = average and g.size() > 1  # on one rank the average is the sum: no pass
    for storage in flat.storage:  # every bucket of a dtype at once, in pieces
        floating = storage.dtype.kind in "fc"
        op = ReduceOp.AVG if average and floating else ReduceOp.SUM
        all_reduce_pieces(storage, g.comm, op, scale=inv if average and not floating else None)
    # Parameters the buckets do not hold (made trainable or added after DDP wrapped the
    # model) go the packed way, after the buckets, in the same order on every rank.
    known = flat.known
    rest = [p for p in model.parameters() if id(p) not in known]
    arrays = [p.grad._data if p.grad is not None else _zero_grad(p)
              for p in rest if p.requires_grad and p.is_local]
    for part in _by_module(arrays):
        _all_reduce_arrays(part, g, average)


def _zero_grad(p: Any) -> Any:
    from ..tensors.creation import zeros_like

    p.grad = zeros_like(p)
    return p.grad._data


def _all_reduce_arrays(arrays: list[Any], g: ProcessGroup, average: bool) -> None:
    """All-reduce ``arrays`` (of one array module) in place over ``g``, averaged or summed."""
    assert g.comm is not None
    # Large contiguous gradients are reduced where they are: packing would only add two passes
    # over their bytes. The many small ones share a few packed buffers, saving latency.
    direct = [a for a in arrays if a.nbytes >= _DIRECT_BYTES and a.flags.c_contiguous]
    taken = {id(a) for a in direct}
    packed = [a for a in arrays if id(a) not in taken]
    works: list[tuple[Bucket, Any]] = []
    for bucket in _buckets_for(packed):
        op = ReduceOp.AVG if average and bucket.dtype.kind in "fc" else ReduceOp.SUM
        works.append((bucket, g.comm.all_reduce(bucket.pack(packed), op, async_op=True)))
    for array in direct:
        # Blocking: MPI's blocking all-reduce of large messages is much faster than its
        # non-blocking one that nothing progresses in the meantime.
        op = ReduceOp.AVG if average and array.dtype.kind in "fc" else ReduceOp.SUM
        g.comm.all_reduce(array, op)
        if average and array.dtype.kind not in "fc":
            array[...] = array * (1.0 / g.size())
    for bucket, work in works:
        assert work is not None
        work.wait()
        integer_average = average and bucket.dtype.kind not in "fc"
        bucket.unpack(packed, scale=1.0 / g.size() if integer_average else None)

