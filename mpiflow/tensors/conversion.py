"""Conversions between local and global tensors: ``to_global``, ``to_local``, the whole value.

Every conversion that moves data is a redistribution (:mod:`mpiflow.boxing`) from a source
layout to a target one; a local tensor becomes global by describing what its data already is
(a shard of the target layout, or, for broadcast axes, the data of the first rank). They are
the Tensor methods ``to_global``, ``to_local`` and ``numpy`` (bound at the end).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy

from ..boxing.execute import redistribute
from ..communication.collectives.objects import all_gather_object
from ..communication.debug import mode as debug_mode
from ..core.array_module import array_module
from ..core.errors import GlobalTensorError
from ..layouts.placement import Placement
from ..layouts.plan import Layout
from ..layouts.sbp import Broadcast, Partial, SbpParallel, Split, normalize_sbp
from ..layouts.shards import local_shape
from ..runtime import topology
from . import trace
from .creation import zeros_like
from .meta import agree, describe_sbp, dtype_code
from .tape import record
from .tensor import Tensor, bind, to_host

__all__ = ["check_meta_consistency", "gather_value", "infer_global_shape", "to_global",
           "to_local", "to_numpy"]

_B = Broadcast()
# MPIFLOW_DEBUG=1: every to_global call checks that the ranks agree, whatever check_meta says.
_DEBUG = debug_mode.enabled()
_KNOWN_DTYPES = {dtype_code(d): numpy.dtype(d) for d in "?bhilqBHILQefdgFDG"}


def to_local(t: Tensor) -> Tensor:
    """This rank's shard of a global tensor (empty on a rank outside the placement), sharing
    its memory."""
    if t._placement is None:
        raise RuntimeError("Expected global tensor for to_local but got local tensor!")
    return record("to_local", _to_local_grad, [t], {"layout": (t.placement, t.sbp)},
                  Tensor(t._data))


def _to_local_grad(g: Tensor, operands: Any, out: Tensor, *, layout: Any) -> tuple[Tensor]:
    """Each rank's local gradient is its shard of the global gradient, in the same layout."""
    return (Tensor(g._data, layout[0], layout[1], operands[0].shape),)


def to_numpy(t: Tensor) -> numpy.ndarray:
    """The whole value as a numpy array (the method ``Tensor.numpy``).

    Local: shares memory with the tensor. Global: collective (every rank must call it);
    partial layouts come back reduced, and every rank gets the whole logical value.
    """
    trace.check_data_access("numpy()/item()/bool()")
    if t._placement is None:
        return to_host(t._data)
    return to_host(gather_value(t))


def gather_value(t: Tensor) -> Any:
    """The whole logical value of the global ``t`` on every rank (collective)."""
    everyone = Placement.all(t.placement.type)
    return redistribute(t._data, tuple(t.shape), Layout(t.placement, t.sbp),
                        Layout(everyone, (_B,)))


def _source_ranks(placement: Placement, sbp: tuple[SbpParallel, ...]) -> list[int]:
    """The ranks whose local data a local->global conversion uses: coordinate 0 on B axes."""
    b_axes = [a for a, s in enumerate(sbp) if isinstance(s, Broadcast)]
    out = []
    for r in placement.rank_list:
        coords = placement.coordinates(r)
        assert coords is not None
        if all(coords[a] == 0 for a in b_axes):
            out.append(r)
    return out


def infer_global_shape(placement: Placement, sbp: tuple[SbpParallel, ...],
                       shapes: dict[int, tuple[int, ...]]) -> tuple[int, ...]:
    """The logical shape whose shards, laid out by ``sbp``, have the given local ``shapes``.

    Args:
        placement: the placement.
        sbp: the layout.
        shapes: local shapes by world rank: of the source ranks (see ``_source_ranks``), which
            determine the logical shape, and of any other rank of the placement, which must
            then hold its shard of it (a broadcast axis: the same shape as its source).

    Raises:
        ValueError: the shapes do not fit the layout, naming the offending ranks.
    """
    sources = _source_ranks(placement, sbp)
    first = shapes[sources[0]]
    ndim = len(first)
    bad_ndim = [r for r in sources if len(shapes[r]) != ndim]
    if bad_ndim:
        raise GlobalTensorError("to_global: local tensors must have the same number of dimensions; "
                                + ", ".join(f"rank {r} has shape {shapes[r]}" for r in sources))
    for s in sbp:
        if isinstance(s, Split) and s.dim >= ndim:
            raise GlobalTensorError(
                f"to_global: {s} needs tensors with more than {s.dim} dimensions, "
                f"got shape {first}")
    logical = []
    for d in range(ndim):
        axes = [a for a, s in enumerate(sbp) if isinstance(s, Split) and s.dim == d]
        extent = 0
        for r in sources:
            coords = placement.coordinates(r)
            assert coords is not None
            if all(coords[a] == 0 for a in range(placement.ndim) if a not in axes):
                extent += shapes[r][d]
        logical.append(extent if axes else first[d])
    logical_shape = tuple(logical)
    wrong = [r for r in shapes if shapes[r] != local_shape(logical_shape, placement, sbp, r)]
    if wrong:
        detail = ", ".join(f"rank {r}: {shapes[r]} (expected "
                           f"{local_shape(logical_shape, placement, sbp, r)})" for r in wrong)
        raise GlobalTensorError(
            f"to_global: the local shapes do not form a {describe_sbp(sbp)} layout "
            f"of a tensor of shape {logical_shape} by the balanced rule (the first "
            f"n % k ranks hold one more row). {_oneflow_words(shapes, wrong, sbp)}"
            f"; offending {detail}")
    return logical_shape


def _oneflow_words(shapes: dict[int, tuple[int, ...]], wrong: list[int],
                   sbp: Sequence[SbpParallel]) -> str:
    """OneFlow's words for the first offending rank, so that its programs' checks still match:
    a split dimension, or another one."""
    split_dims = sorted({s.dim for s in sbp if isinstance(s, Split)})
    first = min(shapes)
    r = wrong[0]
    for d, (want, got) in enumerate(zip(shapes[first], shapes[r])):
        if want != got and d not in split_dims:
            where = (" except in dimension " + ", ".join(map(str, split_dims))
                     if split_dims else "")
            return (f"Sizes of tensors must match{where}. Expected size {want} but got size "
                    f"{got} for tensor on rank {r}!")
    return ("Sizes of tensors in dimension " + ", ".join(map(str, split_dims)) + " must be same "
            "or match balanced split distribution")


def _agreed_meta(data: Any, placement: Placement, sbp: tuple[SbpParallel, ...]
                 ) -> tuple[tuple[int, ...], numpy.dtype]:
    """The logical shape and dtype that the ranks' local tensors form, checked on every rank:
    one all-gather of a small row (see :mod:`mpiflow.tensors.meta`).

    Raises:
        ValueError: on every rank, when ranks passed different placements or sbp, or the
            local dtypes or shapes of the placement's ranks do not fit the layout.
    """
    shapes, codes = agree("to_global", placement, sbp, data.dtype, tuple(data.shape))
    members = list(placement.rank_list)
    dtype = _KNOWN_DTYPES.get(int(codes[members[0]]))
    if dtype is None or any(s is None for s in shapes) or \
            any(codes[r] != codes[members[0]] for r in members):
        # rare: an exotic dtype, a shape of many dims, or an error to describe
        metas: list[Any] = [None] * topology.size
        all_gather_object(metas, (tuple(data.shape), data.dtype.str))
        dtypes = {metas[r][1] for r in members}
        if len(dtypes) > 1:
            raise GlobalTensorError("to_global: local tensors differ in dtype: "
                                    + ", ".join(f"rank {r}: {numpy.dtype(metas[r][1])}"
                                                for r in members))
        shapes = [m[0] for m in metas]
        dtype = numpy.dtype(dtypes.pop())
    shape = infer_global_shape(placement, sbp, {r: tuple(shapes[r] or ()) for r in members})
    return shape, dtype


def _local_to_global(t: Tensor, placement: Placement, sbp: tuple[SbpParallel, ...],
                     check_meta: bool, known_shape: tuple[int, ...] | None = None) -> Tensor:
    rank = topology.rank
    data = t._data
    check_meta = check_meta or _DEBUG
    if known_shape is not None and not check_meta:
        shape = known_shape
        expected = local_shape(shape, placement, sbp, rank) if rank in placement else None
        if expected is not None and _source_ranks(placement, sbp).count(rank) and \
                tuple(data.shape) != expected:
            raise GlobalTensorError(
                f"to_global: rank {rank} holds shape {tuple(data.shape)} but its "
                f"shard of {shape} under {describe_sbp(sbp)} is {expected}")
        dtype = data.dtype
    elif check_meta:
        shape, dtype = _agreed_meta(data, placement, sbp)
        if known_shape is not None and tuple(known_shape) != shape:
            raise GlobalTensorError(f"to_global: the local shards form shape {shape}, not the "
                                    f"given shape {tuple(known_shape)}")
    else:
        grow = [1] * data.ndim
        for a, s in enumerate(sbp):
            if isinstance(s, Split) and s.dim < data.ndim:
                grow[s.dim] *= placement.mesh_shape[a]
        shape = tuple(n * g for n, g in zip(data.shape, grow))
        dtype = data.dtype
    xp = array_module(data)
    if rank in placement and data.dtype != dtype:
        data = data.astype(dtype)
    b_axes = [a for a, s in enumerate(sbp) if isinstance(s, Broadcast)]
    if not b_axes:
        local = data if rank in placement else xp.empty((0,), dtype=dtype)
        return Tensor(local, placement, sbp, shape)
    # Broadcast axes take the data of the coordinate-0 ranks: a source layout without them.
    kept = [a for a in range(placement.ndim) if a not in b_axes]
    mesh = placement.ranks[tuple(slice(None) if a in kept else 0 for a in range(placement.ndim))]
    if mesh.ndim == 0:
        src = Layout(Placement(placement.type, [int(mesh)]), (_B,))
    else:
        src = Layout(Placement(placement.type, mesh.tolist()), tuple(sbp[a] for a in kept))
    local = data if rank in src.placement else xp.empty((0,), dtype=dtype)
    out = redistribute(local, shape, src, Layout(placement, sbp))
    return Tensor(out, placement, sbp, shape)


def to_global(t: Tensor, placement: Placement | None = None, sbp: Any = None, *,
              grad_sbp: Any = None, check_meta: bool = True, shape: Any = None) -> Tensor:
    """Make a global tensor, or redistribute one (collective: every rank calls it).

    Args:
        t: the tensor, local or global.
        placement: the target placement (default: keep).
        sbp: the target layout, one per mesh axis or one for a 1-D placement (default: keep).
        grad_sbp: layout the gradient is converted to in backward (autograd).
        check_meta: on a local tensor, gather shapes and dtypes and check they fit the
            layout (one small collective); False trusts the caller: with ``shape`` the
            logical shape is that, without it all local shapes are taken as equal.
        shape: on a local tensor, the logical shape, when known (no communication is
            needed with ``check_meta=False``; with True it is checked).

    Returns:
        The global tensor (``t`` when nothing changes).

    Examples:
        >>> x = flow.randn(2, 5).to_global(flow.placement("cpu", [0, 1]), flow.sbp.split(0))
        >>> x.shape    # on 2 ranks
        mpiflow.Size([4, 5])
    """
    if placement is not None and not isinstance(placement, Placement):
        raise TypeError(f"placement must be a mpiflow.placement, got {placement!r}")
    if t._placement is None:
        if placement is None or sbp is None:
            raise GlobalTensorError("to_global on a local tensor needs both a placement and an sbp")
        layout = normalize_sbp(sbp, placement.ndim)
        known = None if shape is None else tuple(int(n) for n in shape)
        result = _local_to_global(t, placement, layout, check_meta, known)
        if trace.state.recorder is not None and result._data is not t._data:
            trace.state.recorder.kernel(_replay_local_to_global(placement, layout,
                                                                tuple(result.shape)),
                                        (t,), result)
        grad_layout = None if grad_sbp is None else normalize_sbp(grad_sbp, placement.ndim)
        return record("to_global", _local_grad, [t], {"placement": placement, "sbp": layout,
                                                      "grad_sbp": grad_layout}, result)
    target_placement = t.placement if placement is None else placement
    if sbp is None:
        if target_placement.ndim != len(t.sbp):
            raise GlobalTensorError(
                f"the new placement has {target_placement.ndim} mesh dimension(s); "
                "give an sbp for each")
        target_sbp = t.sbp
    else:
        target_sbp = normalize_sbp(sbp, target_placement.ndim)
    if _DEBUG:  # the ranks must agree on the source and the target (one small all-gather)
        agree("to_global", target_placement, target_sbp, t.dtype.numpy, tuple(t.shape),
              target=f"placement={t.placement!r}, sbp={describe_sbp(t.sbp)}, "
                     f"shape={tuple(t.shape)}, dtype={t.dtype}")
    if target_placement == t.placement and target_sbp == t.sbp:
        return t
    out = redistribute(t._data, tuple(t.shape), Layout(t.placement, t.sbp),
                       Layout(target_placement, target_sbp))
    result = Tensor(out, target_placement, target_sbp, t.shape)
    if trace.state.recorder is not None:
        trace.state.recorder.kernel(_replay_redistribute(tuple(t.shape), Layout(
            t.placement, t.sbp), Layout(target_placement, target_sbp)), (t,), result)
    grad_layout = None if grad_sbp is None else normalize_sbp(grad_sbp, target_placement.ndim)
    return record("to_global", _global_grad, [t], {"source": (t.placement, t.sbp),
                                                   "grad_sbp": grad_layout}, result)


def _replay_redistribute(shape: tuple[int, ...], src: Layout, dst: Layout) -> Any:
    """The array work of one global-to-global ``to_global``, for a traced graph's replay."""
    return lambda data: redistribute(data, shape, src, dst)


def _replay_local_to_global(placement: Placement, sbp: tuple[SbpParallel, ...],
                            shape: tuple[int, ...]) -> Any:
    """The array work of one local-to-global ``to_global`` (its shape already agreed)."""
    return lambda data: _local_to_global(Tensor(data), placement, sbp, False, shape)._data


def _global_grad(g: Tensor, operands: Any, out: Tensor, *, source: Any, grad_sbp: Any
                 ) -> tuple[Tensor]:
    """The backward of a redistribution is the reverse redistribution."""
    if grad_sbp is not None:
        g = g.to_global(sbp=grad_sbp)
    return (g.to_global(source[0], source[1]),)


def _local_grad(g: Tensor, operands: Any, out: Tensor, *, placement: Placement,
                sbp: tuple[SbpParallel, ...], grad_sbp: Any) -> tuple[Tensor]:
    """Backward of local -> global: S stays S, P takes B, and B takes P from B (the ranks whose
    data was used get the gradient, the others zero); then each rank keeps its shard."""
    local = operands[0]
    if grad_sbp is not None:
        g = g.to_global(placement, grad_sbp)
    else:
        gathered = tuple(s if isinstance(s, Split) else _B for s in sbp)
        g = g.to_global(placement, gathered)
        g = g.to_global(placement, tuple(Partial() if isinstance(s, Broadcast) else t
                                         for s, t in zip(sbp, gathered)))
    if topology.rank not in placement:
        return (zeros_like(local),)
    return (Tensor(g._data),)


def check_meta_consistency(t: Tensor) -> None:
    """Check that every rank sees the same placement, sbp, shape and dtype of the global ``t``
    (collective over the world: one small all-gather), raising on every rank if not.

    Examples:
        >>> x = flow.zeros(4, placement=flow.placement.all("cpu"), sbp=flow.sbp.split(0))
        >>> x.check_meta_consistency()
    """
    if t._placement is None:
        raise RuntimeError("check_meta_consistency needs a global tensor")
    shapes, codes = agree("check_meta_consistency", t.placement, t.sbp, t.dtype.numpy,
                          tuple(t.shape))
    if any(s != shapes[0] for s in shapes) or (codes != codes[0]).any():
        every: list[Any] = [None] * topology.size
        all_gather_object(every, (tuple(t.shape), str(t.dtype)))
        raise GlobalTensorError("check_meta_consistency: the ranks see different shapes or dtypes: "
                                + ", ".join(f"rank {r}: {m}" for r, m in enumerate(every)))


def is_partial(sbp: Sequence[SbpParallel]) -> bool:
    return any(isinstance(s, Partial) for s in sbp)


bind({"numpy": to_numpy, "to_global": to_global, "to_local": to_local,
      "check_meta_consistency": check_meta_consistency})
