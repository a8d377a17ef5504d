"""How an op runs: pick a layout signature, redistribute the inputs, run the kernel on shards.

An :class:`OpDef` is data: its kernel (on arrays of any array module), its output shape and
dtype rules, and its layout rule — the list of per-mesh-axis signatures
``((input layouts...), output layout)`` it can compute without communication, in order of
preference. :func:`apply` chooses, for every mesh axis, the signature whose input conversions
move the fewest bytes (ties: the earlier one), redistributes the inputs, and runs the kernel
on this rank's shards. Local tensors skip all of that.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy

from .._graph import record
from .._runtime import topology
from .._tensor import Tensor
from ..boxing.plan import Layout, conversion_cost
from ..boxing.shards import local_shape
from ..core.array_module import array_module
from ..placement import Placement
from ..sbp import Broadcast, SbpParallel

__all__ = ["B", "Context", "OpDef", "Signature", "apply", "result_dtype"]

B = Broadcast()
Signature = tuple[tuple[SbpParallel, ...], SbpParallel]
Shape = tuple[int, ...]


@dataclass(frozen=True)
class Context:
    """What a kernel may need beyond its input arrays.

    ``out_shape`` is the shape of the output *shard* this rank computes (the logical shape for
    local tensors); ``global_shape`` the output's logical shape.
    """

    xp: ModuleType
    out_shape: Shape
    global_shape: Shape
    out_dtype: numpy.dtype
    placement: Placement | None = None
    out_sbp: tuple[SbpParallel, ...] | None = None


@dataclass(frozen=True)
class OpDef:
    """One op: kernel, shape rule, dtype rule and layout rule, side by side.

    Args:
        name: the op's name.
        kernel: ``kernel(ctx, *arrays, **attrs) -> array`` on shards or local arrays.
        shape: ``shape(*input_shapes, **attrs) -> output shape`` (logical).
        layouts: ``layouts(*input_shapes, **attrs) -> [Signature, ...]`` for one mesh axis;
            B -> B is always allowed and need not be listed.
        dtype: ``dtype(*input_numpy_dtypes, **attrs) -> numpy dtype``; default: promotion.
        grad: the gradient rule (used by autograd).
    """

    name: str
    kernel: Callable[..., Any]
    shape: Callable[..., Shape]
    layouts: Callable[..., list[Signature]]
    dtype: Callable[..., numpy.dtype] | None = None
    grad: Callable[..., Any] | None = field(default=None, compare=False)


_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def _promote(dtypes: Sequence[numpy.dtype]) -> numpy.dtype:
    top = max(_CATEGORY[d.kind] for d in dtypes)
    dt = numpy.result_type(*[d for d in dtypes if _CATEGORY[d.kind] == top])
    if top == 3 and any(d == numpy.float64 for d in dtypes):
        dt = numpy.result_type(dt, numpy.complex128)
    return dt


def result_dtype(tensor_dtypes: Sequence[numpy.dtype], scalars: Sequence[Any] = ()) -> numpy.dtype:
    """PyTorch's promotion: the highest category (bool < int < float < complex) among the
    tensors decides, within it the widest dtype (int64 + float32 -> float32, unlike numpy); a
    Python float over integer tensors gives float32."""
    dt = _promote(tensor_dtypes) if tensor_dtypes else numpy.dtype(numpy.float32)
    for s in scalars:
        if isinstance(s, bool):
            continue
        if isinstance(s, complex) and dt.kind != "c":
            dt = numpy.result_type(dt, numpy.complex64)
        elif isinstance(s, float) and dt.kind in "biu":
            dt = numpy.dtype(numpy.float32)
        elif isinstance(s, int) and dt.kind == "b":
            dt = numpy.dtype(numpy.int64)
    return dt


def _as_operand(value: Any) -> Any:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (bool, int, float, complex, numpy.generic)):
        return value
    raise TypeError(f"expected a tensor or a number, got {type(value).__name__}")


def _check_same_placement(tensors: Sequence[Tensor], name: str) -> Placement | None:
    placements = {t._placement for t in tensors}
    if len(placements) == 1:
        return placements.pop()
    if None in placements:
        raise RuntimeError(f"{name}: Expected all tensors to be global (or all local); mix "
                           "them with to_global() first")
    raise RuntimeError(f"{name}: Expected all tensors to be on the same placement, got "
                       + ", ".join(repr(p) for p in placements))


def _choose(op: OpDef, shapes: Sequence[Shape], sbps: Sequence[tuple[SbpParallel, ...]],
            itemsizes: Sequence[int], placement: Placement, attrs: dict[str, Any]
            ) -> tuple[list[tuple[SbpParallel, ...]], tuple[SbpParallel, ...]]:
    candidates: list[Signature] = list(op.layouts(*shapes, **attrs))
    candidates.append(((B,) * len(shapes), B))
    chosen_in: list[list[SbpParallel]] = [[] for _ in shapes]
    chosen_out: list[SbpParallel] = []
    for axis, k in enumerate(placement.mesh_shape):
        # Fewest bytes moved first, then fewest inputs converted (a signature the inputs
        # already match wins ties, as in OneFlow), then declaration order.
        best, best_key = candidates[-1], (math.inf, math.inf)
        for sig in candidates:
            cost, converted = 0.0, 0
            for shape, sbp, itemsize, want in zip(shapes, sbps, itemsizes, sig[0]):
                if itemsize == 0 and want != B:
                    cost = math.inf  # a Python number is the same everywhere: only B fits it
                    break
                if sbp[axis] != want:
                    converted += 1
                    cost += conversion_cost(shape, itemsize, sbp[axis], want, k)
            if (cost, converted) < best_key:
                best, best_key = sig, (cost, converted)
        for i, want in enumerate(best[0]):
            chosen_in[i].append(want)
        chosen_out.append(best[1])
    return [tuple(c) for c in chosen_in], tuple(chosen_out)


def _root(array: Any) -> Any:
    while getattr(array, "base", None) is not None:
        array = array.base
    return array


def _link_views(out: Tensor, tensors: Sequence[Tensor]) -> Tensor:
    """If the kernel returned a view of an input's memory, share that input's version."""
    base = getattr(out._data, "base", None)
    if base is None:
        return out
    root = _root(out._data)
    for t in tensors:
        if _root(t._data) is root:
            return out._alias_of(t)
    return out


def _cast(array: Any, dtype: numpy.dtype) -> Any:
    return array if array.dtype == dtype else array.astype(dtype)


def apply(op: OpDef, *operands: Any, **attrs: Any) -> Tensor:
    """Run ``op`` on tensors (and Python numbers, which act as broadcast constants).

    Examples:
        >>> from mpiflow.ops.elementwise import BINARY
        >>> apply(BINARY["add"], flow.ones(2), 1.0)
        tensor([2., 2.])
    """
    values = [_as_operand(v) for v in operands]
    tensors = [v for v in values if isinstance(v, Tensor)]
    scalars = [v for v in values if not isinstance(v, Tensor)]
    if op.dtype is not None:
        out_dtype = numpy.dtype(op.dtype(*[t._data.dtype for t in tensors], **attrs))
    else:
        out_dtype = result_dtype([t._data.dtype for t in tensors], scalars)
    placement = _check_same_placement(tensors, op.name) if tensors else None
    xp = array_module(tensors[0]._data) if tensors else numpy
    shapes = [tuple(t.shape) if isinstance(t, Tensor) else () for t in values]
    out_shape = tuple(op.shape(*shapes, **attrs))
    if placement is None:
        # Python numbers go to kernels as they are: array modules treat them as weakly typed.
        arrays = [v._data if isinstance(v, Tensor) else v for v in values]
        ctx = Context(xp, out_shape, out_shape, out_dtype)
        out = Tensor(_cast(xp.asarray(op.kernel(ctx, *arrays, **attrs)), out_dtype))
        return record(op.name, op.grad, values, attrs, _link_views(out, tensors))

    from ..boxing.execute import redistribute

    sbps = [v.sbp if isinstance(v, Tensor) else (B,) * placement.ndim for v in values]
    itemsizes = [v._data.dtype.itemsize if isinstance(v, Tensor) else 0 for v in values]
    want_in, out_sbp = _choose(op, shapes, sbps, itemsizes, placement, attrs)
    arrays = []
    for v, shape, have, want in zip(values, shapes, sbps, want_in):
        if not isinstance(v, Tensor):
            arrays.append(v)
        elif have == want:
            arrays.append(v._data)
        else:
            arrays.append(redistribute(v._data, shape, Layout(placement, have),
                                       Layout(placement, want)))
    rank = topology.rank
    if rank not in placement:
        empty = Tensor(xp.empty((0,), dtype=out_dtype), placement, out_sbp, out_shape)
        return record(op.name, op.grad, values, attrs, empty)
    shard_shape = local_shape(out_shape, placement, out_sbp, rank)
    ctx = Context(xp, shard_shape, out_shape, out_dtype, placement, out_sbp)
    out = _cast(xp.asarray(op.kernel(ctx, *arrays, **attrs)), out_dtype)
    if tuple(out.shape) != shard_shape:  # an op's layout rule and kernel disagree: a bug here
        raise AssertionError(f"{op.name}: shard of shape {tuple(out.shape)} for layout "
                             f"{out_sbp}, expected {shard_shape}")
    result = _link_views(Tensor(out, placement, out_sbp, out_shape), tensors)
    return record(op.name, op.grad, values, attrs, result)
