"""FFT ops: complex (``fft_c2c``), real-to-half-complex (``fft_r2c``) and back (``fft_c2r``).

Three ops, as torch's ``_fft_c2c``/``_fft_r2c``/``_fft_c2r``, each along several dims with
the signal sizes ``sizes`` (each dim cut or padded with zeros to its size first), a ``norm``
and a direction (``forward``: the exponent's sign; ``fft_r2c`` backward is ``ihfft``'s
conjugate, ``fft_c2r`` forward is ``hfft``'s transform of the conjugate). ``fft_c2c`` with
``real=True`` keeps the real part (the gradient of a transform of a real input).

Layout rules, per mesh axis: a split of a dim not transformed stays a split (each rank
transforms its columns: no communication); a partial sum stays one (the transforms are
linear). And the collective signatures ``S(d) -> S(e)`` for the pairs of the attribute
``moves``, which the public functions compute from the input's layout
(:func:`moves_for`): the kernel runs a :func:`mpiflow.algorithms.pencil.plan` of the
transform, the fewest all-to-alls between local transforms, on the communicators of the mesh
axes that split transformed dims (one *group* per split dim; several mesh axes splitting one
dim act as one group). A split dim moves to one already transformed (``fft2`` of ``S(0)``:
transform dim 1, one all-to-all to ``S(1)``, transform dim 0; the result stays ``S(1)``), or
to a dim not transformed; where none can take it (a 1-D array), the dim is transformed where
it lies by :mod:`mpiflow.algorithms.spectral`'s six-step algorithm (three all-to-alls).

Gradients (torch's, for the conjugate-Wirtinger convention): ``fft_c2c``'s is the transform
the other way with the swapped norm; ``fft_r2c``'s that of the zero-padded half spectrum, real
part; ``fft_c2r``'s the ``fft_r2c`` of the gradient with the entries that stand for two
doubled. Each is cut or padded back to its input's sizes.

Examples:
    >>> x = flow.tensor([1.0, 2.0, 3.0, 4.0])
    >>> c2c(x, (0,), (4,), "backward", True).tolist()
    [(10+0j), (-2+2j), (-2+0j), (-2-2j)]
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy

from ..algorithms.fftlocal import c2c as local_c2c
from ..algorithms.fftlocal import c2r as local_c2r
from ..algorithms.fftlocal import r2c as local_r2c
from ..algorithms.pencil import Pencil, plan
from ..algorithms.spectral import fft_along, irfft_along, rfft_along
from ..communication import Communicator
from ..layouts.sbp import Split, partial_sum
from ..runtime import topology
from ..tensors.creation import tensor
from ..tensors.tensor import Tensor
from . import pointwise as pw
from .engine import B, Context, OpDef, Signature, apply, comm_extents
from .shifts import pad

__all__ = ["C2C", "C2R", "R2C", "c2c", "c2r", "complex_of", "moves_for", "plan_moves", "r2c",
           "real_of", "swap"]

Shape = tuple[int, ...]
Moves = tuple[tuple[int, int], ...]


def swap(norm: str) -> str:
    """The norm of the adjoint transform: "backward" and "forward" trade places."""
    return {"backward": "forward", "forward": "backward"}.get(norm, norm)


def complex_of(dtype: numpy.dtype) -> numpy.dtype:
    """complex64 from float32 (and complex64), complex128 from float64 (and complex128)."""
    return numpy.dtype(numpy.complex64 if dtype.itemsize <= 4 or dtype == numpy.complex64
                       else numpy.complex128)


def real_of(dtype: numpy.dtype) -> numpy.dtype:
    """float32 from complex64 (and float32), float64 from complex128 (and float64)."""
    return numpy.dtype(numpy.float32 if dtype in (numpy.complex64, numpy.float32)
                       else numpy.float64)


def _extents(shape: Shape, kind: str, dims: Sequence[int], sizes: Sequence[int]) -> Shape:
    """The shape after a transform of ``kind``."""
    out = list(shape)
    for d, n in zip(dims, sizes):
        out[d] = n
    if kind == "r2c":
        out[dims[-1]] = sizes[-1] // 2 + 1
    return tuple(out)


# -- layout rules --------------------------------------------------------------------------------
def _local_layouts(shape: Shape, *, dims: Sequence[int], **_: Any) -> list[Signature]:
    return ([((Split(d),), Split(d)) for d in range(len(shape)) if d not in dims]
            + [((partial_sum,), partial_sum)])


def _collective(shape: Shape, *, moves: Moves = (), **_: Any) -> list[Signature]:
    return [((Split(d),), Split(e)) for d, e in moves]


def moves_for(x: Tensor, kind: str, dims: Sequence[int], sizes: Sequence[int]) -> Moves:
    """Per dim that a mesh axis of ``x`` splits among ``dims``, the dim it splits after the
    transform: the cheapest :func:`~mpiflow.algorithms.pencil.plan`'s (none for a local
    tensor)."""
    placement = x._placement
    if placement is None:
        return ()
    return plan_moves(tuple(x.shape), tuple(x.sbp), tuple(placement.mesh_shape), kind,
                      tuple(dims), tuple(sizes))


@functools.lru_cache(maxsize=1024)
def plan_moves(shape: Shape, sbp: tuple[Any, ...], mesh: Shape, kind: str, dims: Shape,
               sizes: Shape) -> Moves:
    """:func:`moves_for` of a tensor of ``shape`` laid out as ``sbp`` on a mesh of ``mesh``.

    Examples:
        >>> plan_moves((4, 6), (Split(0),), (2,), "c2c", (0, 1), (4, 6))
        ((0, 1),)
    """
    groups, busy = _groups(sbp, mesh, dims)
    if not groups:  # one rank (or mesh axes of one): plan as the same split on more ranks
        groups, busy = _groups(sbp, mesh, dims, singles=True)
        if not groups:
            return ()
    split = tuple(groups)
    sizes_g = tuple(math.prod(mesh[a] for a in axes) for axes in groups.values())
    chosen = _plan(shape, dims, kind, split, sizes_g, tuple(busy), None, sizes)
    pairs = list(zip(split, chosen.splits))
    for s in sbp:  # a mesh axis of one rank beside others keeps its split
        if isinstance(s, Split) and s.dim in dims and all(s.dim not in p for p in pairs):
            pairs.append((s.dim, s.dim))
    return tuple(pairs)


_plan = functools.lru_cache(maxsize=1024)(plan)


def _groups(sbp: Sequence[Any], mesh: Sequence[int], dims: Sequence[int],
            singles: bool = False) -> tuple[dict[int, list[int]], list[int]]:
    """The mesh axes (of more than one rank, unless ``singles``) splitting each transformed
    dim, and the other split dims."""
    groups: dict[int, list[int]] = {}
    busy = []
    for axis, s in enumerate(sbp):
        if isinstance(s, Split) and (mesh[axis] > 1 or singles):
            if s.dim in dims:
                groups.setdefault(s.dim, []).append(axis)
            else:
                busy.append(s.dim)
    return groups, busy


# -- kernels -------------------------------------------------------------------------------------
def _local(xp: Any, a: Any, kind: str, dims: Sequence[int], sizes: Sequence[int], norm: str,
           forward: bool) -> Any:
    """The transform of a whole array (or along dims this rank holds whole)."""
    if kind == "c2c":
        if a.dtype.kind != "c":
            a = a.astype(complex_of(a.dtype))
        return local_c2c(xp, a, dims, sizes, norm, forward)
    if kind == "r2c":
        out = local_r2c(xp, a, dims, sizes, norm if forward else swap(norm))
        return out if forward else xp.conj(out)
    a = a if a.dtype.kind == "c" else a.astype(complex_of(a.dtype))
    if forward:  # hfft: the inverse transform of the conjugate, the other norm
        return local_c2r(xp, xp.conj(a), dims, sizes, swap(norm))
    return local_c2r(xp, a, dims, sizes, norm)


_COMMS: dict[tuple[int, tuple[int, ...]], tuple[Communicator, Communicator | None]] = {}


def _group_comm(ctx: Context, axes: Sequence[int]) -> Communicator:
    """The communicator of this rank's ranks along ``axes`` (some of the kernel's collective
    axes): ``ctx.comm`` itself, or a split of it (collective over ``ctx.comm``, on first use;
    every member runs the same kernel, so all of them split together)."""
    assert ctx.comm is not None and ctx.placement is not None
    if tuple(axes) == tuple(ctx.comm_axes):
        return ctx.comm
    key = (id(ctx.comm), tuple(axes))
    held = _COMMS.get(key)
    if held is None or held[0] is not ctx.comm:
        coords = ctx.placement.coordinates(topology.rank)
        assert coords is not None
        mesh = ctx.placement.mesh_shape
        rest = [a for a in ctx.comm_axes if a not in axes]
        color = int(numpy.ravel_multi_index([coords[a] for a in rest], [mesh[a] for a in rest]))
        order = int(numpy.ravel_multi_index([coords[a] for a in axes], [mesh[a] for a in axes]))
        held = (ctx.comm, ctx.comm.split_by_color(color, order))
        _COMMS[key] = held
    assert held[1] is not None
    return held[1]


def _kernel(ctx: Context, a: Any, *, kind: str, dims: tuple[int, ...],
            sizes: tuple[int, ...], norm: str, source: Shape, forward: bool = True,
            real: bool = False, moves: Moves = ()) -> Any:
    xp = ctx.xp
    if ctx.comm is None:
        out = _local(xp, a, kind, dims, sizes, norm, forward)
    else:
        out = _pencils(ctx, a, kind, dims, sizes, norm, forward, source, moves)
    if real:
        out = out.real
    return xp.ascontiguousarray(out)


def _pencils(ctx: Context, a: Any, kind: str, dims: tuple[int, ...], sizes: tuple[int, ...],
             norm: str, forward: bool, source: Shape, moves: Moves) -> Any:
    """The transform on the kernel's communicator: the plan's local transforms, transposes
    and distributed 1-D transforms, in order."""
    xp, placement, out_sbp = ctx.xp, ctx.placement, ctx.out_sbp
    assert placement is not None and out_sbp is not None
    came_from = {e: d for d, e in moves}
    sbp = list(out_sbp)
    for axis in ctx.comm_axes:
        sbp[axis] = Split(came_from[out_sbp[axis].dim])
    groups, busy = _groups(sbp, placement.mesh_shape, dims)
    split = list(groups)
    axes = [tuple(ax) for ax in groups.values()]
    comms = [_group_comm(ctx, ax) for ax in axes]
    final = tuple(out_sbp[ax[0]].dim for ax in axes)
    schedule = _plan(tuple(source), dims, kind, tuple(split), tuple(c.size for c in comms),
                     tuple(busy), final, sizes)
    done = _extents(source, kind, dims, sizes)  # each dim's extent once transformed
    logical = list(source)
    rank = topology.rank

    def counts(g: int, dim: int) -> tuple[int, ...]:
        return comm_extents(tuple(logical), placement, tuple(sbp), axes[g], rank, dim)

    def pencil_now() -> Pencil:
        block = tuple(a.shape[d] if d in busy else n for d, n in enumerate(logical))
        return Pencil(block, tuple(split), tuple(counts(g, d) for g, d in enumerate(split)),
                      tuple(c.rank for c in comms))

    if kind in ("c2c", "c2r") and a.dtype.kind != "c":
        a = a.astype(complex_of(a.dtype))
    pencil = pencil_now()
    for step in schedule.steps:
        if step[0] == "transform":
            a = _local_step(xp, a, kind, dims, sizes, step[1], norm, forward)
            for d in step[1]:
                logical[d] = done[d]
            pencil = pencil_now()
        elif step[0] == "move":
            _, g, f = step
            for axis in axes[g]:
                sbp[axis] = Split(f)
            new = pencil.pencil(g, f, counts(g, f))
            a = pencil.transfer(new).forward(a, comms[g])
            pencil, split[g] = new, f
        else:
            _, g, d = step
            have = counts(g, d)
            logical[d] = done[d]
            a = _along(a, comms[g], kind if d == dims[-1] else "c2c", d, have,
                       sizes[dims.index(d)], counts(g, d), norm, forward)
            pencil = pencil_now()
    return a


def _local_step(xp: Any, a: Any, kind: str, dims: Sequence[int], sizes: Sequence[int],
                todo: Sequence[int], norm: str, forward: bool) -> Any:
    """One local call along the dims ``todo`` (held whole here): complex transforms in the
    transform's direction, and the real one where ``todo`` has the last of ``dims``."""
    last = dims[-1]
    if kind == "c2c" or last not in todo:
        return local_c2c(xp, a, todo, [sizes[dims.index(d)] for d in todo], norm, forward)
    order = [d for d in todo if d != last] + [last]
    return _local(xp, a, kind, order, [sizes[dims.index(d)] for d in order], norm, forward)


def _along(a: Any, comm: Communicator, kind: str, dim: int, counts: Sequence[int], n: int,
           out_counts: Sequence[int], norm: str, forward: bool) -> Any:
    """A distributed 1-D transform along ``dim``, which ``comm`` splits."""
    if kind == "c2c":
        return fft_along(a, comm, dim, counts, n, out_counts, forward=forward, norm=norm)
    if kind == "r2c":
        out = rfft_along(a, comm, dim, counts, n, out_counts,
                         norm=norm if forward else swap(norm))
        return out if forward else out.conj()
    if forward:
        return irfft_along(a.conj(), comm, dim, counts, n, out_counts, norm=swap(norm))
    return irfft_along(a, comm, dim, counts, n, out_counts, norm=norm)


# -- gradients -------------------------------------------------------------------------------------
def _resize(t: Tensor, dims: Sequence[int], lengths: Sequence[int]) -> Tensor:
    """``t`` cut or padded with zeros at the end of ``dims`` to ``lengths``."""
    widths = [0] * (2 * t.ndim)
    for d, n in zip(dims, lengths):
        widths[2 * (t.ndim - 1 - d) + 1] = n - t.shape[d]
    if not any(widths):
        return t
    return pad(t, widths)


def _c2c_grad(g: Tensor, operands: Any, out: Tensor, *, dims: tuple[int, ...],
              sizes: tuple[int, ...], norm: str, source: Shape, forward: bool = True,
              real: bool = False, moves: Moves = ()) -> tuple[Tensor]:
    x = operands[0]
    back = c2c(g, dims, sizes, swap(norm), not forward, real=x.dtype.numpy.kind != "c")
    return (_resize(back, dims, [source[d] for d in dims]),)


def _r2c_grad(g: Tensor, operands: Any, out: Tensor, *, dims: tuple[int, ...],
              sizes: tuple[int, ...], norm: str, source: Shape, forward: bool = True,
              moves: Moves = ()) -> tuple[Tensor]:
    # the other half of the spectrum was dropped: its gradient is zero
    whole = _resize(g, dims[-1:], sizes[-1:])
    back = c2c(whole, dims, sizes, swap(norm), not forward, real=True)
    return (_resize(back, dims, [source[d] for d in dims]),)


def _c2r_grad(g: Tensor, operands: Any, out: Tensor, *, dims: tuple[int, ...],
              sizes: tuple[int, ...], norm: str, source: Shape, forward: bool = True,
              moves: Moves = ()) -> tuple[Tensor]:
    n = sizes[-1]
    half = n // 2 + 1
    if operands[0].dtype.numpy.kind != "c":  # a real input: the real part of the same
        back = _resize(c2c(g, dims, sizes, swap(norm), not forward, real=True), dims[-1:],
                       [half])
    else:
        back = r2c(g, dims, sizes, swap(norm), not forward)
    if n - half > 0:  # entries standing for two of the whole spectrum (k and n - k)
        weights = numpy.ones(half, dtype=real_of(back.dtype.numpy))
        weights[1:n - half + 1] = 2
        shape = [1] * back.ndim
        shape[dims[-1]] = half
        w = weights.reshape(shape)
        placement = back._placement
        wt = tensor(w) if placement is None else tensor(
            w, placement=placement, sbp=[B] * placement.ndim)
        back = pw.mul(back, wt)
    lengths = [source[d] for d in dims]
    return (_resize(back, dims, lengths),)


# -- the ops ---------------------------------------------------------------------------------------
def _shape(kind: str) -> Any:
    def rule(shape: Shape, *, dims: tuple[int, ...], sizes: tuple[int, ...], **_: Any) -> Shape:
        return _extents(shape, kind, dims, sizes)

    return rule


def _c2c_dtype(dtype: numpy.dtype, *, real: bool = False, **_: Any) -> numpy.dtype:
    out = complex_of(dtype)
    return real_of(out) if real else out


C2C = OpDef("fft_c2c", functools.partial(_kernel, kind="c2c"), _shape("c2c"), _local_layouts,
            _c2c_dtype, _c2c_grad, collective=_collective)
R2C = OpDef("fft_r2c", functools.partial(_kernel, kind="r2c"), _shape("r2c"), _local_layouts,
            lambda dtype, **_: complex_of(dtype), _r2c_grad, collective=_collective)
C2R = OpDef("fft_c2r", functools.partial(_kernel, kind="c2r"), _shape("c2r"), _local_layouts,
            lambda dtype, **_: real_of(dtype), _c2r_grad, collective=_collective)


def c2c(x: Tensor, dims: Sequence[int], sizes: Sequence[int], norm: str, forward: bool,
        real: bool = False) -> Tensor:
    """The complex transform of ``x`` along ``dims`` (checked dims, sizes and norm), in the
    cheapest layout (:func:`moves_for`); ``real``: its real part."""
    dims, sizes = tuple(dims), tuple(sizes)
    return apply(C2C, x, dims=dims, sizes=sizes, norm=norm, source=tuple(x.shape),
                 forward=bool(forward), real=bool(real),
                 moves=moves_for(x, "c2c", dims, sizes))


def r2c(x: Tensor, dims: Sequence[int], sizes: Sequence[int], norm: str, forward: bool
        ) -> Tensor:
    """The real-to-half-complex transform (numpy's ``rfftn``; backward: its conjugate with
    the other norm, ``ihfftn``)."""
    dims, sizes = tuple(dims), tuple(sizes)
    return apply(R2C, x, dims=dims, sizes=sizes, norm=norm, source=tuple(x.shape),
                 forward=bool(forward), moves=moves_for(x, "r2c", dims, sizes))


def c2r(x: Tensor, dims: Sequence[int], sizes: Sequence[int], norm: str, forward: bool
        ) -> Tensor:
    """The half-complex-to-real transform to ``sizes`` (numpy's ``irfftn``; forward: of the
    conjugate with the other norm, ``hfftn``)."""
    dims, sizes = tuple(dims), tuple(sizes)
    return apply(C2R, x, dims=dims, sizes=sizes, norm=norm, source=tuple(x.shape),
                 forward=bool(forward), moves=moves_for(x, "c2r", dims, sizes))
