"""Ops that shift rows along a dim: ``diff``, ``roll`` and ``pad`` (``nn.functional.pad``).

Layout rules, per mesh axis: a split of another dim stays a split (each rank works on its
columns); a partial layout stays partial where the op is a linear rearrangement (``roll``,
``pad`` but with a constant other than 0, ``diff`` for partial sums); and a split of the dim
itself stays a split, a collective signature whose kernel runs one
:func:`mpiflow.algorithms.fetch`-based algorithm, so that no rank ever holds the whole dim:

- ``roll``: :func:`mpiflow.algorithms.assemble` of the rotated ranges (the layout is kept);
- ``pad``: :func:`~mpiflow.algorithms.assemble` of the padded axis (constant rows, reflected,
  replicated or wrapped ranges), laid out as a balanced split of the longer dim; its gradient
  ``pad_grad`` is :func:`~mpiflow.algorithms.scatter_sum` (each row gets the rows copied from
  it);
- ``diff``: :func:`mpiflow.algorithms.differences` (each rank fetches its rows of the result
  and the ``n`` after them: the halo and the rebalance to the shorter dim at once), with
  ``prepend``/``append`` whole on every rank.

Gradients: ``roll`` by the opposite shift; ``pad`` by ``pad_grad`` (and back); ``diff`` by
``(-1)**n`` times the ``n``-th differences of the zero-padded gradient, cropped to each operand.

Examples:
    >>> x = flow.tensor([1, 2, 4, 7])
    >>> flow.diff(x).tolist(), flow.roll(x, 1).tolist()
    ([1, 2, 3], [7, 1, 2, 4])
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from ..algorithms import assemble, differences, scatter_sum
from ..algorithms.segments import Segment
from ..layouts.sbp import Split, partial_sum
from ..tensors.tensor import Tensor, bind
from . import pointwise as pw
from .engine import B, Context, OpDef, Signature, apply
from .gathers import split_on_comm
from .layout_rules import keep_partial, wrap_dim

__all__ = ["diff", "roll"]

Shape = tuple[int, ...]
MODES = ("constant", "reflect", "replicate", "circular")


def _others(shape: Shape, dim: int, n_inputs: int = 1) -> list[Signature]:
    return [((Split(k),) * n_inputs, Split(k)) for k in range(len(shape)) if k != dim]


def _own_dim(shape: Shape, *, dim: int, **_: Any) -> list[Signature]:
    return [((Split(dim),), Split(dim))] if shape else []


def _counts(ctx: Context, shape: Shape, dim: int) -> list[int]:
    """Rows along ``dim`` each rank of the communicator holds of an input of ``shape``."""
    return ctx.extents(shape, split_on_comm(ctx, dim), dim)


def _segments_run(ctx: Context, a: Any, dim: int, n: int, segments: Sequence[Segment],
                  fill: Any = 0) -> Any:
    if ctx.comm is None:
        return assemble(a, None, dim, [n], segments, [ctx.out_shape[dim]], fill)
    assert ctx.out_sbp is not None
    shape = (*ctx.global_shape[:dim], n, *ctx.global_shape[dim + 1:])
    return assemble(a, ctx.comm, dim, _counts(ctx, shape, dim), segments,
                    ctx.extents(ctx.global_shape, ctx.out_sbp, dim), fill)


# -- roll --------------------------------------------------------------------------------------
def _roll_kernel(ctx: Context, a: Any, *, shift: int, dim: int) -> Any:
    n = ctx.global_shape[dim]
    if ctx.comm is None:
        return ctx.xp.roll(a, shift, axis=dim)
    s = shift % n if n else 0
    return _segments_run(ctx, a, dim, n, [("rows", n - s, n), ("rows", 0, n - s)])


def _roll_grad(g: Tensor, operands: Any, out: Tensor, *, shift: int, dim: int
               ) -> tuple[Tensor]:
    return (apply(ROLL, g, shift=-shift, dim=dim),)


ROLL = OpDef("roll", _roll_kernel, lambda shape, **_: shape,
             lambda shape, *, dim, **_: _others(shape, dim) + keep_partial(),
             grad=_roll_grad, collective=_own_dim)


def roll(input: Tensor, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None
         ) -> Tensor:
    """``input`` rotated by ``shifts`` along ``dims`` (torch's ``roll``).

    Args:
        input: a tensor.
        shifts: places to shift by (negative: backwards), one per dim of ``dims``.
        dims: the dims; None: the flattened tensor, then the shape restored.

    Returns:
        A tensor of ``input``'s shape and layout (split along a rolled dim: the rotated
        ranges are fetched, one all-to-all).

    Examples:
        >>> flow.roll(flow.tensor([[1, 2], [3, 4]]), 1, 0).tolist()
        [[3, 4], [1, 2]]
    """
    if dims is None:
        from .shape import reshape

        if not isinstance(shifts, int) and len(shifts) != 1:
            raise RuntimeError(f"roll: {len(shifts)} shifts for the flattened tensor")
        shift = shifts if isinstance(shifts, int) else shifts[0]
        flat = reshape(input, -1)
        return reshape(apply(ROLL, flat, shift=operator.index(shift), dim=0),
                       tuple(input.shape))
    shift_list = [shifts] if isinstance(shifts, int) else list(shifts)
    dim_list = [dims] if isinstance(dims, int) else list(dims)
    if len(shift_list) != len(dim_list):
        raise RuntimeError(f"roll: shifts and dimensions must align. shifts: "
                           f"{len(shift_list)}, dims: {len(dim_list)}")
    out = input
    for s, d in zip(shift_list, dim_list):
        out = apply(ROLL, out, shift=operator.index(s), dim=wrap_dim(operator.index(d),
                                                                     input.ndim))
    return out


# -- pad ---------------------------------------------------------------------------------------
def pad_segments(n: int, before: int, after: int, mode: str) -> list[Segment]:
    """The padded axis of ``n`` rows as segments (negative ``before``/``after``: cropped).

    Examples:
        >>> pad_segments(4, 2, 1, "reflect")
        [('reversed', 1, 3), ('rows', 0, 4), ('reversed', 2, 3)]
    """
    if mode == "constant":
        lo, hi = max(0, -before), n - max(0, -after)
        return [("fill", 0, max(before, 0)), ("rows", lo, hi), ("fill", 0, max(after, 0))]
    if mode == "reflect":
        return [("reversed", 1, before + 1), ("rows", 0, n), ("reversed", n - 1 - after, n - 1)]
    if mode == "replicate":
        return [("repeat", 0, before), ("rows", 0, n), ("repeat", n - 1, after)]
    return [("rows", n - before, n), ("rows", 0, n), ("rows", 0, after)]


def _pad_shape(shape: Shape, *, dim: int, before: int, after: int, **_: Any) -> Shape:
    return (*shape[:dim], shape[dim] + before + after, *shape[dim + 1:])


def _pad_layouts(shape: Shape, *, dim: int, mode: str, value: float, **_: Any
                 ) -> list[Signature]:
    if mode != "constant":
        return _others(shape, dim) + keep_partial()
    return _others(shape, dim) + ([((partial_sum,), partial_sum)] if value == 0 else [])


def _pad_kernel(ctx: Context, a: Any, *, dim: int, before: int, after: int, mode: str,
                value: float) -> Any:
    n = ctx.global_shape[dim] - before - after
    return _segments_run(ctx, a, dim, n, pad_segments(n, before, after, mode), value)


def _pad_grad(g: Tensor, operands: Any, out: Tensor, **attrs: Any) -> tuple[Tensor]:
    return (apply(PAD_GRAD, g, **attrs),)


PAD = OpDef("pad", _pad_kernel, _pad_shape, _pad_layouts, grad=_pad_grad, collective=_own_dim)


def _pad_grad_kernel(ctx: Context, g: Any, *, dim: int, before: int, after: int, mode: str,
                     value: float) -> Any:
    n = ctx.global_shape[dim]
    segments = pad_segments(n, before, after, mode)
    length = n + before + after
    if ctx.comm is None:
        return scatter_sum(g, None, dim, [length], segments, [n])
    assert ctx.out_sbp is not None
    shape = (*ctx.global_shape[:dim], length, *ctx.global_shape[dim + 1:])
    return scatter_sum(g, ctx.comm, dim, _counts(ctx, shape, dim), segments,
                       ctx.extents(ctx.global_shape, ctx.out_sbp, dim))


# The adjoint of ``pad``: each input row gets the sum of the padded rows copied from it.
PAD_GRAD = OpDef("pad_grad", _pad_grad_kernel,
                 lambda shape, *, dim, before, after, **_: _pad_shape(
                     shape, dim=dim, before=-before, after=-after),
                 lambda shape, *, dim, **_: [*_others(shape, dim),
                                             ((partial_sum,), partial_sum)],
                 grad=lambda g, operands, out, **attrs: (apply(PAD, g, **{**attrs,
                                                                           "value": 0.0}),),
                 collective=_own_dim)


def _check_pad(input: Tensor, pad: Sequence[int], mode: str) -> None:
    if mode not in MODES:
        raise NotImplementedError(f"pad: mode {mode!r} is not supported; expected one of "
                                  f"{MODES}")
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ValueError(f"Padding length must be divisible by 2 and at most twice the "
                         f"{input.ndim} dims, got {len(pad)}")
    k = len(pad) // 2
    if mode != "constant" and not (k <= 3 and input.ndim in (k + 1, k + 2)):
        raise NotImplementedError(f"Padding size {len(pad)} is not supported for "
                                  f"{input.ndim}D input tensor.")
    for i in range(k):
        d = input.ndim - 1 - i
        n, before, after = input.shape[d], pad[2 * i], pad[2 * i + 1]
        if mode == "constant":
            if n + before + after < 0:
                raise RuntimeError(f"The input size {n}, plus negative padding {before} and "
                                   f"{after} resulted in a negative output size")
            continue
        if before < 0 or after < 0:
            raise RuntimeError(f"pad: negative padding ({before}, {after}) needs mode "
                               "'constant'")
        if mode == "reflect" and (before >= n or after >= n):
            raise RuntimeError(f"Argument #4: Padding size should be less than the "
                               f"corresponding input dimension, but got: padding ({before}, "
                               f"{after}) at dimension {d} of input {list(input.shape)}")
        if mode == "circular" and (before > n or after > n):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if mode == "replicate" and n == 0 and before + after:
            raise RuntimeError(f"pad: cannot replicate the rows of an empty dimension {d}")


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: float | None = None
        ) -> Tensor:
    """``input`` padded (torch's ``nn.functional.pad``): ``pad`` gives ``(before, after)``
    per dim, the last dim first; negative amounts crop (``constant`` mode).

    Args:
        input: a tensor.
        pad: ``(left, right)`` of the last dim, then of the one before, ...
        mode: ``constant`` (``value``, default 0), ``reflect`` (mirrored without the edge),
            ``replicate`` (the edge repeated) or ``circular`` (wrapped around).
        value: the constant.

    Returns:
        The padded tensor. Split along a padded dim, it is split along it, balanced: each rank
        fetches the rows its part needs (one all-to-all per padded split dim).

    Examples:
        >>> pad(flow.tensor([[1, 2, 3]]), (2, 1), mode="reflect").tolist()
        [[3, 2, 1, 2, 3, 2]]
    """
    pad = [operator.index(p) for p in pad]
    _check_pad(input, pad, mode)
    fill = 0.0 if value is None else value
    if mode != "constant" and value is not None and value != 0:
        raise ValueError(f"pad: a value ({value}) is only for mode 'constant'")
    out = input
    for i in range(len(pad) // 2):
        before, after = pad[2 * i], pad[2 * i + 1]
        if before or after:
            out = apply(PAD, out, dim=input.ndim - 1 - i, before=before, after=after,
                        mode=mode, value=fill)
    return out


# -- diff --------------------------------------------------------------------------------------
def _diff_shape(shape: Shape, *edges: Shape, dim: int, start: int, stop: int, **_: Any
                ) -> Shape:
    return (*shape[:dim], stop - start, *shape[dim + 1:])


def _diff_layouts(shape: Shape, *edges: Shape, dim: int, **_: Any) -> list[Signature]:
    k = 1 + len(edges)
    return [*_others(shape, dim, k), ((partial_sum,) * k, partial_sum)]


def _diff_collective(shape: Shape, *edges: Shape, dim: int, **_: Any) -> list[Signature]:
    return [((Split(dim), *[B] * len(edges)), Split(dim))]


def _edges(ctx: Context, a: Any, edges: Sequence[Any], dim: int, pads: tuple[int, int],
           has: tuple[bool, bool]) -> tuple[Any, Any]:
    """The rows before and after the axis: zeros and ``prepend``, ``append`` and zeros."""
    xp = ctx.xp
    given = list(edges)
    out = []
    for side in (0, 1):
        shape = list(a.shape)
        shape[dim] = pads[side]
        zeros = xp.zeros(shape, dtype=ctx.out_dtype)
        edge = given.pop(0).astype(ctx.out_dtype, copy=False) if has[side] else None
        parts = [zeros, edge] if side == 0 else [edge, zeros]
        parts = [p for p in parts if p is not None and p.shape[dim]]
        out.append(None if not parts else parts[0] if len(parts) == 1
                   else xp.concatenate(parts, axis=dim))
    return out[0], out[1]


def _diff_kernel(ctx: Context, a: Any, *edges: Any, n: int, dim: int, size: int,
                 pads: tuple[int, int], start: int, stop: int, has: tuple[bool, bool]) -> Any:
    a = a.astype(ctx.out_dtype, copy=False)
    before, after = _edges(ctx, a, edges, dim, pads, has)
    if ctx.comm is None:
        return differences(a, None, dim, [size], n, before, after, [stop - start], start)
    assert ctx.out_sbp is not None
    shape = (*ctx.global_shape[:dim], size, *ctx.global_shape[dim + 1:])
    return differences(a, ctx.comm, dim, _counts(ctx, shape, dim), n, before, after,
                       ctx.extents(ctx.global_shape, ctx.out_sbp, dim), start)


def _diff_grad(g: Tensor, operands: Any, out: Tensor, *, n: int, dim: int, size: int,
               pads: tuple[int, int], start: int, stop: int, has: tuple[bool, bool]
               ) -> tuple[Tensor, ...]:
    """The result is rows ``[start, stop)`` of ``D**n`` of the extended axis (zeros, prepend,
    input, append, zeros); the adjoint is ``(-D)**n`` of the gradient padded with the crop's
    rows and ``n`` zeros each side, cropped to each operand's rows."""
    edges = list(operands[1:])
    head = edges.pop(0).shape[dim] if has[0] else 0
    tail = edges.pop(0).shape[dim] if has[1] else 0
    total = max(pads[0] + head + size + tail + pads[1] - n, 0)

    def rows(lo: int, hi: int) -> Tensor:
        piece = apply(DIFF, g, n=n, dim=dim, size=stop - start,
                      pads=(start + n, total - stop + n), start=lo, stop=hi,
                      has=(False, False))
        return pw.neg(piece) if n % 2 else piece

    at = pads[0] + head
    grads = [rows(at, at + size)]
    if has[0]:
        grads.append(rows(pads[0], at))
    if has[1]:
        grads.append(rows(at + size, at + size + tail))
    return tuple(grads)


DIFF = OpDef("diff", _diff_kernel, _diff_shape, _diff_layouts, grad=_diff_grad,
             collective=_diff_collective)


def diff(input: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None,
         append: Tensor | None = None) -> Tensor:
    """The ``n``-th forward differences along ``dim`` (torch's ``diff``).

    Args:
        input: a tensor of at least one dim.
        n: how many times to difference.
        dim: the dim.
        prepend: values put before ``input`` along ``dim`` first (``input``'s shape beside
            ``dim``).
        append: values put after it.

    Returns:
        A tensor ``n`` shorter along ``dim`` (than the joined values). Split along ``dim``, it
        is split along it, balanced (each rank fetches the ``n`` rows after its part too).

    Examples:
        >>> flow.diff(flow.tensor([1, 3, 6, 10]), n=2).tolist()
        [1, 1]
    """
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    n = operator.index(n)
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = wrap_dim(operator.index(dim), input.ndim)
    edges = []
    for what, edge in (("prepend", prepend), ("append", append)):
        if edge is None:
            continue
        if not isinstance(edge, Tensor) or edge.ndim != input.ndim:
            raise RuntimeError(f"diff expects {what} or append to be the same dimension as "
                               "input")
        if any(a != b for k, (a, b) in enumerate(zip(edge.shape, input.shape)) if k != d):
            raise RuntimeError(f"diff expects the shape of tensor to {what} or append to be "
                               f"the same as input except along dim {d}")
        if input.is_global and not edge.is_global:
            edge = edge.to_global(input.placement, (B,) * input.placement.ndim)
        edges.append(edge)
    length = (input.shape[d] + sum(e.shape[d] for e in edges))
    total = max(length - n, 0)
    return apply(DIFF, input, *edges, n=n, dim=d, size=input.shape[d], pads=(0, 0), start=0,
                 stop=total, has=(prepend is not None, append is not None))


bind({"diff": diff, "roll": roll})
