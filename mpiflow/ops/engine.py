"""How an op runs: pick a layout signature, redistribute the inputs, run the kernel on shards.

An :class:`OpDef` is data: its kernel (on arrays of any array module), its output shape and
dtype rules, and its layout rule — the list of per-mesh-axis signatures
``((input layouts...), output layout)`` it can compute without communication, in order of
preference. :func:`apply` chooses, for every mesh axis, the signature whose input conversions
move the fewest bytes (ties: the earlier one), redistributes the inputs, and runs the kernel
on this rank's shards. Local tensors skip all of that.

An op whose kernel can run a distributed algorithm (:mod:`mpiflow.algorithms`: a sort, a scan)
also lists the signatures it computes *with* communication (``OpDef.collective``), such as
``S(0) -> S(0)`` for a sort along dim 0. They compete with the others on the bytes their input
conversions move; where one is chosen, the kernel gets the communicator of those mesh axes'
ranks (``ctx.comm``, ordered as the split orders the shards) and runs the algorithm on it.

An op's output shape and dtype, and on global tensors its chosen layouts, depend only on the
op, the operands' shapes, dtypes and layouts, the types of the numbers among them and the
attributes: :func:`apply` computes them once per such key and caches them (bounded; never for
attributes that hold tensors or arrays), so that a repeated call costs little beyond its
kernel (about 2 us over numpy's own call for a small elementwise op).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, cast

import numpy

from ..core import settings
from ..core.array_module import array_module
from ..core.errors import GlobalTensorError
from ..layouts.placement import Placement
from ..layouts.plan import Layout, conversion_cost
from ..layouts.sbp import Broadcast, SbpParallel
from ..layouts.shards import local_shape, shard_bounds
from ..runtime import topology
from ..tensors import trace
from ..tensors.tape import record
from ..tensors.tensor import Size, Tensor
from .registry import register

__all__ = ["MOVE_ENV", "B", "Context", "OpDef", "Signature", "apply", "apply_multi",
           "result_dtype"]

B = Broadcast()
# (input layouts, output layout); an op of several outputs may give one layout per output
Signature = tuple[tuple[SbpParallel, ...], Any]
Shape = tuple[int, ...]


class Context:
    """What a kernel may need beyond its input arrays.

    ``out_shape`` is the shape of the output *shard* this rank computes (the logical shape for
    local tensors); ``global_shape`` the output's logical shape. A plain class with slots, not
    a dataclass: one is built per op call, and a frozen dataclass's ``__init__`` costs several
    microseconds.

    For an op of several outputs of different shapes (:attr:`OpDef.outputs`), ``out_shape``,
    ``global_shape`` and ``out_sbp`` are tuples of one entry per output.

    ``comm`` is, where the op's chosen signature on some mesh axes is one of its collective
    ones, the communicator of this rank's ranks along those axes (``comm_axes``), in the order
    in which splits along them order the shards; None where the kernel runs on its shards
    alone (always for local tensors).
    """

    __slots__ = ("comm", "comm_axes", "global_shape", "out_dtype", "out_sbp", "out_shape",
                 "placement", "xp")

    def __init__(self, xp: ModuleType, out_shape: Shape, global_shape: Shape,
                 out_dtype: numpy.dtype, placement: Placement | None = None,
                 out_sbp: Any = None, comm: Any = None,
                 comm_axes: tuple[int, ...] = ()) -> None:
        self.xp = xp
        self.out_shape = out_shape
        self.global_shape = global_shape
        self.out_dtype = out_dtype
        self.placement = placement
        self.out_sbp = out_sbp
        self.comm = comm
        self.comm_axes = comm_axes

    def extents(self, shape: Sequence[int], sbp: Sequence[SbpParallel], dim: int) -> list[int]:
        """The extent along ``dim`` of the shard each rank of :attr:`comm` holds of a tensor of
        logical ``shape`` laid out as ``sbp`` on this placement (``[shape[dim]]`` without a
        communicator): the row counts a distributed algorithm along ``dim`` takes."""
        if self.comm is None or self.placement is None:
            return [int(shape[dim])]
        return list(comm_extents(tuple(shape), self.placement, tuple(sbp), self.comm_axes,
                                 topology.rank, dim))


@dataclass(frozen=True, eq=False)
class OpDef:
    """One op: kernel, shape rule, dtype rule and layout rule, side by side.

    Args:
        name: the op's name.
        kernel: ``kernel(ctx, *arrays, **attrs) -> array`` on shards or local arrays.
        shape: ``shape(*input_shapes, **attrs) -> output shape`` (logical; a tuple of one
            shape per output for an op of several outputs of different shapes).
        layouts: ``layouts(*input_shapes, **attrs) -> [Signature, ...]`` for one mesh axis;
            B -> B is always allowed and need not be listed.
        dtype: ``dtype(*input_numpy_dtypes, **attrs) -> numpy dtype``; default: promotion.
        grad: the gradient rule (used by autograd).
        local_only: the op serves local tensors only (its kernel or gradient rule works on
            whole arrays); :func:`apply` refuses global operands with a ``TypeError``, and its
            public function sends them down a composite instead.
        collective: ``collective(*input_shapes, **attrs) -> [Signature, ...]``: signatures the
            kernel computes with a distributed algorithm along the mesh axes where one is
            chosen (there it gets ``ctx.comm``); an input conversion costs them what it costs
            the others, the algorithm's own traffic nothing (offer one only where it moves
            less than converting to a local signature would).
        outputs: how many arrays the kernel returns (a tuple); ``dtype`` then returns a tuple
            of dtypes, :func:`apply` a tuple of tensors, and the gradient rule (of the first
            output) gets them all as ``outputs``. They share the output shape and layout, or,
            where ``shape`` returns a tuple of shapes (one per output: a QR's ``Q`` and
            ``R``), each has its own: a signature's output is then one layout for all of them
            or a tuple of one layout per output (``S(0) -> (S(0), B)``).

    OpDefs compare and hash by identity (``eq=False``): :func:`apply` keys its caches of shape,
    dtype and layout results by the op, and a generated ``__hash__`` over the fields would cost
    more than the lookup saves. Each OpDef registers itself by name when it is made
    (:mod:`mpiflow.ops.registry`), so that every op can be listed and swept.
    """

    name: str
    kernel: Callable[..., Any]
    shape: Callable[..., Any]
    layouts: Callable[..., list[Signature]]
    dtype: Callable[..., Any] | None = None
    grad: Callable[..., Any] | None = field(default=None, compare=False)
    local_only: bool = False
    collective: Callable[..., list[Signature]] | None = None
    outputs: int = 1

    def __post_init__(self) -> None:
        register(self)


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


MOVE_ENV = "ONEFLOW_ENABLE_GLOBAL_INPUTS_WITH_INCONSISTENT_PLACEMENT"


def _move_enabled() -> bool:
    """Whether :data:`MOVE_ENV` is set to a true value (read at each call, as OneFlow does)."""
    return bool(settings.read(MOVE_ENV))


def _same_placement(operands: Sequence[Any], tensors: Sequence[Tensor], name: str
                    ) -> list[Any]:
    """The operands of a call whose global tensors are on different placements, all moved to
    one, as OneFlow does when :data:`MOVE_ENV` is set: to the placement holding the highest
    rank (of those, the last operand's), each tensor keeping its sbp. Otherwise an error."""
    placements = [t._placement for t in tensors]
    if None in placements:
        raise GlobalTensorError(f"{name}: Expected all tensors to be global (or all local); mix "
                                "them with to_global() first")
    if not _move_enabled():
        distinct = list(dict.fromkeys(placements))
        raise GlobalTensorError(
            f"{name}: Expected all tensors to be on the same placement, got "
            + ", ".join(repr(p) for p in distinct)
            + f" (move them with to_global(), or set {MOVE_ENV}=1 to move them to one)")
    target = placements[0]
    for p in placements:
        assert p is not None
        if int(p.ranks.max()) >= int(target.ranks.max()):  # type: ignore[union-attr]
            target = p
    return [v.to_global(placement=target) if isinstance(v, Tensor) and v._placement != target
            else v for v in operands]


def _choose(op: OpDef, shapes: Sequence[Shape], sbps: Sequence[tuple[SbpParallel, ...]],
            itemsizes: Sequence[int], placement: Placement, attrs: dict[str, Any]
            ) -> tuple[list[tuple[SbpParallel, ...]], tuple[SbpParallel, ...], tuple[int, ...]]:
    """Per mesh axis the cheapest signature: the input layouts, the output layout and the mesh
    axes where the chosen one is collective."""
    candidates: list[Signature] = list(op.layouts(*shapes, **attrs))
    local = len(candidates)
    if op.collective is not None:
        candidates += op.collective(*shapes, **attrs)
    candidates.append(((B,) * len(shapes), B))
    chosen_in: list[list[SbpParallel]] = [[] for _ in shapes]
    chosen_out: list[SbpParallel] = []
    collective_axes: list[int] = []
    for axis, k in enumerate(placement.mesh_shape):
        # Fewest bytes moved first, then fewest inputs converted (a signature the inputs
        # already match wins ties, as in OneFlow), then declaration order.
        best, best_at, best_key = candidates[-1], len(candidates) - 1, (math.inf, math.inf)
        for at, sig in enumerate(candidates):
            cost, converted = 0.0, 0
            for shape, sbp, itemsize, want in zip(shapes, sbps, itemsizes, sig[0]):
                if itemsize == 0 and want != B:
                    cost = math.inf  # a Python number is the same everywhere: only B fits it
                    break
                if sbp[axis] != want:
                    converted += 1
                    cost += conversion_cost(shape, itemsize, sbp[axis], want, k)
            if (cost, converted) < best_key:
                best, best_at, best_key = sig, at, (cost, converted)
        for i, want in enumerate(best[0]):
            chosen_in[i].append(want)
        chosen_out.append(best[1])
        if local <= best_at < len(candidates) - 1 and k > 1:
            collective_axes.append(axis)
    return [tuple(c) for c in chosen_in], tuple(chosen_out), tuple(collective_axes)


@functools.lru_cache(maxsize=4096)
def comm_extents(shape: Shape, placement: Placement, sbp: tuple[SbpParallel, ...],
                 axes: tuple[int, ...], rank: int, dim: int) -> tuple[int, ...]:
    """:meth:`Context.extents`: per rank of the communicator of ``axes`` through ``rank``'s
    coordinates (in the order of :func:`~mpiflow.boxing.execute.axes_communicator`), the
    extent along ``dim`` of its shard of a ``shape`` laid out as ``sbp``."""
    coords = placement.coordinates(rank)
    assert coords is not None
    mesh = placement.mesh_shape
    out = []
    for flat in range(math.prod(mesh[a] for a in axes)):
        at = list(coords)
        for a, c in zip(axes, numpy.unravel_index(flat, [mesh[a] for a in axes])):
            at[a] = int(c)
        lo, hi = shard_bounds(shape, mesh, sbp, at)[dim]
        out.append(hi - lo)
    return tuple(out)


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


_NUMBERS = (bool, int, float, complex, numpy.generic)
_PLAIN = frozenset({bool, int, float, complex, str, type(None)})
_CACHE_LIMIT = 1 << 14
# (op, per operand (shape, dtype) or scalar type, attrs) -> (out_shape, out_dtype)
_META: dict[tuple[Any, ...], tuple[Size, Any]] = {}
# (meta key, placement, per tensor sbp) -> (input layouts, output layout, shard shape,
# collective mesh axes)
_LAYOUT: dict[tuple[Any, ...], tuple[list[tuple[SbpParallel, ...]], tuple[SbpParallel, ...],
                                      tuple[int, ...], tuple[int, ...]]] = {}


def _value_key(value: Any) -> Any:
    """A cache key for one attribute value, or None where it cannot be one.

    Types are part of the key (``1``, ``1.0`` and ``True`` hash alike but may mean different
    things to a shape rule); only numbers, strings, None, dtypes, layouts and tuples of those
    qualify, so a cache never holds a tensor or an array alive.
    """
    kind = type(value)
    if kind in _PLAIN:
        return (kind, value)
    if kind is tuple:
        parts = tuple(_value_key(v) for v in value)
        return None if None in parts else parts
    if isinstance(value, (numpy.dtype, SbpParallel, Placement)):
        return value
    return None


def _attrs_key(attrs: dict[str, Any]) -> tuple[Any, ...] | None:
    parts = []
    for name, value in attrs.items():
        key = _value_key(value)
        if key is None:
            return None
        parts.append((name, key))
    return tuple(parts)


def _remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
    if len(cache) >= _CACHE_LIMIT:  # ops called with ever new shapes: start over, stay small
        cache.clear()
    cache[key] = value


def _meta(op: OpDef, operands: Sequence[Any], tensors: Sequence[Tensor],
          attrs: dict[str, Any]) -> tuple[Size, numpy.dtype]:
    """The output's logical shape and dtype (a tuple of dtypes for an op of several outputs,
    which a multi-output op's Context also carries), by the op's rules (uncached)."""
    out_dtype: Any
    if op.outputs > 1:
        assert op.dtype is not None, f"{op.name}: an op of several outputs gives their dtypes"
        out_dtype = tuple(numpy.dtype(d) for d in op.dtype(*[t._data.dtype for t in tensors],
                                                            **attrs))
    elif op.dtype is not None:
        out_dtype = numpy.dtype(op.dtype(*[t._data.dtype for t in tensors], **attrs))
    else:
        out_dtype = result_dtype([t._data.dtype for t in tensors],
                                 [v for v in operands if not isinstance(v, Tensor)])
    shapes = [tuple(v._shape) if isinstance(v, Tensor) else () for v in operands]
    out_shape: Any = op.shape(*shapes, **attrs)
    if op.outputs > 1 and _several_shapes(out_shape):
        return cast(Size, tuple(Size(s) for s in out_shape)), out_dtype
    return Size(out_shape), out_dtype


def _several_shapes(shape: Any) -> bool:
    """Whether an op's output shape is a tuple of one shape per output (not one shape)."""
    return bool(shape) and isinstance(shape[0], tuple)


def _per_output(out_sbp: tuple[Any, ...], outputs: int) -> tuple[tuple[SbpParallel, ...], ...]:
    """Per output, its layout: a signature's output is one layout for every output or a tuple
    of one per output, chosen per mesh axis (``out_sbp``)."""
    return tuple(tuple(o[i] if isinstance(o, tuple) else o for o in out_sbp)
                 for i in range(outputs))


def apply(op: OpDef, *operands: Any, **attrs: Any) -> Tensor:
    """Run ``op`` on tensors (and Python numbers, which act as broadcast constants).

    The output's shape and dtype (and, for global tensors, the chosen layouts) depend only on
    the op, the operands' shapes, dtypes, placement and sbp, the numbers' types and the
    attributes, so they are computed once per such key and cached; a call that hits the cache
    costs little beyond the kernel.

    Examples:
        >>> from mpiflow.ops.pointwise_defs import BINARY
        >>> apply(BINARY["add"], flow.ones(2), 1.0)
        tensor([2., 2.])
    """
    tensors: list[Tensor] = []
    parts: list[Any] = [op]
    for v in operands:
        if isinstance(v, Tensor):
            tensors.append(v)
            parts.append(v._shape)
            parts.append(v._data.dtype)
        elif isinstance(v, _NUMBERS):
            parts.append(type(v))
        else:
            raise TypeError(f"expected a tensor or a number, got {type(v).__name__}")
    akey = _attrs_key(attrs) if attrs else ()
    key: tuple[Any, ...] | None = None
    meta = None
    if akey is not None:
        parts.append(akey)
        key = tuple(parts)
        meta = _META.get(key)
    if meta is None:
        meta = _meta(op, operands, tensors, attrs)
        if key is not None:
            _remember(_META, key, meta)
    out_shape, out_dtype = meta
    if tensors:
        first = tensors[0]
        placement = first._placement
        for t in tensors:
            if t._placement is not placement and t._placement != placement:
                return apply(op, *_same_placement(operands, tensors, op.name), **attrs)
        data = first._data
        xp = numpy if type(data) is numpy.ndarray else array_module(data)
    else:
        placement, xp = None, numpy
    if op.outputs > 1:  # apply_multi is the typed entry for these
        return cast(Tensor, _apply_multi(op, operands, tensors, attrs, key, out_shape,
                                         out_dtype, placement, xp))
    if placement is None:
        # Python numbers go to kernels as they are: array modules treat them as weakly typed.
        arrays = [v._data if isinstance(v, Tensor) else v for v in operands]
        result = op.kernel(Context(xp, out_shape, out_shape, out_dtype), *arrays, **attrs)
        if type(result) is not numpy.ndarray:
            result = xp.asarray(result)
        if result.dtype != out_dtype:
            result = result.astype(out_dtype)
        out = Tensor(result)
        if result.base is not None:
            out = _link_views(out, tensors)
        if trace.state.recorder is not None:
            trace.state.recorder.kernel(_local_step(op, xp, out_shape, out_dtype, attrs),
                                        operands, out, attrs)
        return record(op.name, op.grad, operands, attrs, out)
    return _apply_global(op, operands, attrs, key, out_shape, out_dtype, placement, xp)


def apply_multi(op: OpDef, *operands: Any, **attrs: Any) -> tuple[Tensor, ...]:
    """:func:`apply` for an op of several outputs (``op.outputs > 1``): a tuple of tensors.

    Examples:
        >>> from mpiflow.ops.sorting import SORT
        >>> [t.tolist() for t in apply_multi(SORT, flow.tensor([2, 1]), dim=0, descending=False)]
        [[1, 2], [1, 0]]
    """
    if op.outputs < 2:
        raise TypeError(f"{op.name} has one output: call apply()")
    return cast(tuple[Tensor, ...], apply(op, *operands, **attrs))


def _lay_out(op: OpDef, operands: Sequence[Any], tensors: Sequence[Tensor],
             attrs: dict[str, Any], key: tuple[Any, ...] | None, out_shape: Size,
             placement: Placement) -> tuple[list[Any], list[tuple[SbpParallel, ...]],
                                            tuple[SbpParallel, ...], tuple[int, ...], Any,
                                            tuple[int, ...]]:
    """Choose the layouts of a global call (cached) and redistribute its inputs: ``(arrays,
    input layouts, output layout, shard shape, communicator, collective mesh axes)``."""
    if op.local_only:
        raise TypeError(f"{op.name} is a local-only op: it takes no global tensors")
    lkey = None if key is None else (key, placement, *[t._sbp for t in tensors])
    chosen = None if lkey is None else _LAYOUT.get(lkey)
    rank = topology.rank
    if chosen is None:
        shapes = [tuple(v._shape) if isinstance(v, Tensor) else () for v in operands]
        sbps: list[tuple[SbpParallel, ...]] = [
            v.sbp if isinstance(v, Tensor) else (B,) * placement.ndim for v in operands]
        itemsizes = [v._data.dtype.itemsize if isinstance(v, Tensor) else 0 for v in operands]
        want_in, out_sbp, axes = _choose(op, shapes, sbps, itemsizes, placement, attrs)
        shard_shape: Any
        out_layout: Any = out_sbp
        if _several_shapes(out_shape):
            out_layout = _per_output(out_sbp, op.outputs)
            shapes_of: Any = out_shape
            shard_shape = tuple(
                tuple(local_shape(s, placement, o, rank)) if rank in placement else (0,)
                for s, o in zip(shapes_of, out_layout))
        else:
            shard_shape = (tuple(local_shape(out_shape, placement, out_sbp, rank))
                           if rank in placement else (0,))
        chosen = (want_in, out_layout, shard_shape, axes)
        if lkey is not None:
            _remember(_LAYOUT, lkey, chosen)
    want_in, out_sbp, shard_shape, axes = chosen
    comm = None
    if axes:  # every world rank makes the communicator together (on first use)
        from ..boxing.execute import axes_communicator

        comm = axes_communicator(placement, axes)
    arrays = []
    for v, want in zip(operands, want_in):
        if not isinstance(v, Tensor):
            arrays.append(v)
        elif v._sbp == want:
            arrays.append(v._data)
        else:
            from ..boxing.execute import redistribute

            arrays.append(redistribute(v._data, tuple(v._shape), Layout(placement, v._sbp),
                                       Layout(placement, want)))
    return arrays, want_in, out_sbp, shard_shape, comm, axes


def _apply_multi(op: OpDef, operands: Sequence[Any], tensors: Sequence[Tensor],
                 attrs: dict[str, Any], key: tuple[Any, ...] | None, out_shape: Size,
                 out_dtypes: Any, placement: Placement | None, xp: ModuleType
                 ) -> tuple[Tensor, ...]:
    """:func:`apply` of an op with several outputs, of one shape and layout (a sort's values
    and indices) or each of its own (a QR's ``Q`` and ``R``): a tuple of tensors. The first
    output carries the gradient; the rule gets all of them as ``outputs``. A graph that
    traces one is not replayed (run eagerly)."""
    if trace.state.recorder is not None:
        trace.state.recorder.mark_unreplayable(f"{op.name} has several outputs")
    if placement is None:
        arrays = [v._data if isinstance(v, Tensor) else v for v in operands]
        results = op.kernel(Context(xp, out_shape, out_shape, out_dtypes), *arrays, **attrs)
        outs = tuple(Tensor(_cast(xp.asarray(r), d)) for r, d in zip(results, out_dtypes))
    else:
        arrays, _, out_sbp, shard_shape, comm, axes = _lay_out(op, operands, tensors, attrs,
                                                                key, out_shape, placement)
        n = len(out_dtypes)
        # one (logical shape, layout, shard shape) per output, shared or each its own
        per: list[Any] = (list(zip(out_shape, out_sbp, shard_shape))
                          if _several_shapes(out_shape)
                          else [(out_shape, out_sbp, shard_shape)] * n)
        if topology.rank not in placement:
            results = tuple(xp.empty((0,), dtype=d) for d in out_dtypes)
        else:
            ctx = Context(xp, shard_shape, out_shape, out_dtypes, placement, out_sbp, comm,
                          axes)
            results = tuple(_cast(xp.asarray(r), d)
                            for r, d in zip(op.kernel(ctx, *arrays, **attrs), out_dtypes))
            for r, (_, sbp, want) in zip(results, per):
                if tuple(r.shape) != tuple(want):
                    raise AssertionError(f"{op.name}: shard of shape {tuple(r.shape)} for "
                                         f"layout {sbp}, expected {want}")
        outs = tuple(Tensor(r, placement, sbp, Size(shape))
                     for r, (shape, sbp, _) in zip(results, per))
    record(op.name, op.grad, operands, {**attrs, "outputs": outs}, outs[0])
    return outs


def _apply_global(op: OpDef, operands: Sequence[Any], attrs: dict[str, Any],
                  key: tuple[Any, ...] | None, out_shape: Size, out_dtype: numpy.dtype,
                  placement: Placement, xp: ModuleType) -> Tensor:
    """:func:`apply` on global tensors: choose the layouts, redistribute, run on shards."""
    tensors = [v for v in operands if isinstance(v, Tensor)]
    arrays, want_in, out_sbp, shard_shape, comm, axes = _lay_out(op, operands, tensors, attrs,
                                                                  key, out_shape, placement)
    rank = topology.rank
    if rank not in placement:
        empty = Tensor(xp.empty((0,), dtype=out_dtype), placement, out_sbp, out_shape)
        if trace.state.recorder is not None:
            trace.state.recorder.kernel(
                _global_step(op, operands, want_in, None, attrs, out_dtype), operands, empty,
                attrs)
        return record(op.name, op.grad, operands, attrs, empty)
    ctx = Context(xp, shard_shape, out_shape, out_dtype, placement, out_sbp, comm, axes)
    out = xp.asarray(op.kernel(ctx, *arrays, **attrs))
    if out.dtype != out_dtype:
        out = out.astype(out_dtype)
    if tuple(out.shape) != shard_shape:  # an op's layout rule and kernel disagree: a bug here
        raise AssertionError(f"{op.name}: shard of shape {tuple(out.shape)} for layout "
                             f"{out_sbp}, expected {shard_shape}")
    result = _link_views(Tensor(out, placement, out_sbp, out_shape), tensors)
    if trace.state.recorder is not None:
        trace.state.recorder.kernel(_global_step(op, operands, want_in, ctx, attrs, out_dtype),
                                    operands, result, attrs)
    return record(op.name, op.grad, operands, attrs, result)


# -- replay: the kernel of one call, with its layouts and redistributions fixed ---------------
def _local_step(op: OpDef, xp: ModuleType, out_shape: Size, out_dtype: numpy.dtype,
                attrs: dict[str, Any]) -> Callable[..., Any]:
    """What :func:`apply` did on local tensors, on new arrays (for a traced graph's replay)."""
    kernel, ctx = op.kernel, Context(xp, out_shape, out_shape, out_dtype)

    def run(*arrays: Any) -> Any:
        result = kernel(ctx, *arrays, **attrs)
        if type(result) is not numpy.ndarray:
            result = xp.asarray(result)
        return result if result.dtype == out_dtype else result.astype(out_dtype)

    return run


def _global_step(op: OpDef, operands: Sequence[Any], want_in: Sequence[Any],
                 ctx: Context | None, attrs: dict[str, Any], out_dtype: numpy.dtype
                 ) -> Callable[..., Any]:
    """What :func:`_apply_global` did on this rank, on new shards: the same redistributions
    (planned once, at trace time) and the same kernel; ``ctx`` None on a rank outside the
    placement."""
    moves: list[tuple[int, tuple[int, ...], Layout, Layout]] = []
    for i, (v, want) in enumerate(zip(operands, want_in)):
        if isinstance(v, Tensor) and v._sbp != want and v._placement is not None:
            moves.append((i, tuple(v._shape), Layout(v._placement, v._sbp),
                          Layout(v._placement, want)))
    from ..boxing.execute import redistribute

    kernel = op.kernel
    if ctx is None:
        def outside(*arrays: Any) -> Any:
            for i, shape, src, dst in moves:  # a rank outside still takes part in the moves
                redistribute(arrays[i], shape, src, dst)
            return numpy.empty((0,), dtype=out_dtype)

        return outside
    xp = ctx.xp

    def run(*arrays: Any) -> Any:
        if moves:
            arrays_l = list(arrays)
            for i, shape, src, dst in moves:
                arrays_l[i] = redistribute(arrays_l[i], shape, src, dst)
            arrays = tuple(arrays_l)
        result = xp.asarray(kernel(ctx, *arrays, **attrs))
        return result if result.dtype == out_dtype else result.astype(out_dtype)

    return run
