"""Shape ops: reshape, transpose, squeeze, unsqueeze, flip: kernels and layout rules.

``cat``, ``stack``, ``split`` and ``chunk``, which join and cut tensors, are in :mod:`.join`.

Every op rearranges or selects elements without combining them, so a partial layout of any
reduction stays partial (``P -> P``). Split layouts, per mesh axis:

- ``permute``/``transpose``: output ``S(i)`` <- input ``S(perm[i])``.
- ``reshape``/``view``/``flatten``: input ``S(d)`` -> output ``S(d')`` only where the shards
  hold exactly the same elements: the dims before ``d`` and before ``d'`` have the same
  number of elements and the balanced shard boundaries of ``d`` and ``d'`` coincide, for
  every mesh axis size and every nesting of them (the check is concrete). Otherwise the
  flat row-major order is re-chunked (:mod:`.rechunk`: one all-to-all, the result split
  along the output's first dim of extent > 1, balanced); nothing is gathered.
- ``squeeze``/``unsqueeze``/``stack``: a split dim keeps its split, renumbered.
- ``cat``/``split``/``chunk``/``flip``: a split on any dim but the one concatenated, cut
  or flipped is kept; a split on that dim is gathered first.

Local results share memory with their input where the array module allows it (as PyTorch's
views); ``cat``, ``stack`` and ``flip`` always copy.

Gradients are the inverse rearrangement (reshape back, the inverse permutation, unsqueeze for
squeeze, flip again); ``cat`` and ``stack`` hand each input its slice of the gradient, and each
piece of ``split``/``chunk`` (one ``narrow`` op each) puts its gradient into its slice of zeros.

Examples:
    >>> import mpiflow as flow
    >>> x = flow.tensor([[1, 2, 3], [4, 5, 6]])
    >>> x.reshape(3, -1).shape, x.t().shape, flow.cat([x, x], dim=1).shape
    (mpiflow.Size([3, 2]), mpiflow.Size([3, 2]), mpiflow.Size([2, 6]))
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from typing import Any

from ..layouts.sbp import (
    SbpParallel,
    Split,
    balanced_bounds,
)
from ..layouts.shards import local_shape, shard_bounds
from ..runtime import topology
from ..tensors.tape import record
from ..tensors.tensor import Tensor, bind
from .engine import Context, OpDef, Signature, apply
from .layout_rules import keep_partial, wrap_dim
from .rechunk import rechunk

__all__ = [
    "reshape", "view", "flatten", "transpose", "swapaxes", "permute", "t", "squeeze",
    "unsqueeze", "flip", "contiguous",
]

Shape = tuple[int, ...]


def _dims_arg(dims: Sequence[Any]) -> tuple[int, ...]:
    """Shape/dims given as ``f(2, 3)`` or ``f((2, 3))``."""
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    return tuple(int(d) for d in dims)


# -- reshape / view / flatten --------------------------------------------------------------------
def _infer_size(size: Shape, numel: int) -> Shape:
    """``size`` with its one ``-1`` replaced by the extent that keeps ``numel`` elements."""
    unknown = [i for i, d in enumerate(size) if d == -1]
    if len(unknown) > 1:
        raise RuntimeError(f"only one dimension can be inferred, got shape {list(size)}")
    if any(d < -1 for d in size):
        raise RuntimeError(f"invalid shape dimension in {list(size)}")
    known = math.prod(d for d in size if d != -1)
    if unknown:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(size)}' is invalid for input of size {numel}")
        size = (*size[:unknown[0]], numel // known, *size[unknown[0] + 1:])
    elif known != numel:
        raise RuntimeError(f"shape '{list(size)}' is invalid for input of size {numel}")
    return size


def _same_parts(n: int, inner: int, m: int, inner2: int, ks: Sequence[int]) -> bool:
    """Whether ``n`` rows of ``inner`` elements and ``m`` rows of ``inner2``, split by the
    balanced rule nested over mesh sizes ``ks``, give every part the same elements."""
    if not ks:
        return True
    for i in range(ks[0]):
        s, e = balanced_bounds(n, ks[0], i)
        s2, e2 = balanced_bounds(m, ks[0], i)
        if s == e and s2 == e2:
            continue
        if s * inner != s2 * inner2 or e * inner != e2 * inner2:
            return False
        if not _same_parts(e - s, inner, e2 - s2, inner2, ks[1:]):
            return False
    return True


def reshape_split_map(shape: Shape, size: Shape, mesh: Shape) -> dict[int, int]:
    """Input dims whose split can stay a split (of the returned output dim) through a reshape.

    Args:
        shape: the input's logical shape.
        size: the output's logical shape (same number of elements).
        mesh: the placement's mesh shape; the map holds for each mesh axis size and every
            nesting of mesh axes that split the same dim.

    Returns:
        ``{input_dim: output_dim}``.

    Examples:
        >>> reshape_split_map((6, 4), (24,), (3,)), reshape_split_map((5, 4), (20,), (2,))
        ({0: 0}, {})
    """
    total = math.prod(shape)
    if total == 0:
        return {}
    nestings = [tuple(mesh[a] for a in axes) for r in range(1, len(mesh) + 1)
                for axes in itertools.combinations(range(len(mesh)), r)]
    found: dict[int, int] = {}
    for d, n in enumerate(shape):
        before = math.prod(shape[:d])
        for d2, m in enumerate(size):
            if math.prod(size[:d2]) != before:
                continue
            inner, inner2 = total // before // n, total // before // m
            if all(_same_parts(n, inner, m, inner2, ks) for ks in nestings):
                found[d] = d2
                break
    return found


def _reshape_shape(shape: Shape, *, size: Shape, mesh: Shape) -> Shape:
    return size


def _reshape_layouts(shape: Shape, *, size: Shape, mesh: Shape) -> list[Signature]:
    sigs: list[Signature] = [((Split(d),), Split(d2))
                             for d, d2 in reshape_split_map(shape, size, mesh).items()]
    return sigs + keep_partial()


def _reshape_kernel(ctx: Context, a: Any, *, size: Shape, mesh: Shape) -> Any:
    return a.reshape(ctx.out_shape)


def _reshape_grad(g: Tensor, operands: Any, out: Tensor, *, size: Shape, mesh: Shape
                  ) -> tuple[Tensor]:
    return (apply(RESHAPE, g, size=tuple(operands[0].shape), mesh=mesh),)


RESHAPE = OpDef("reshape", _reshape_kernel, _reshape_shape, _reshape_layouts,
                grad=_reshape_grad)


def reshape(input: Tensor, *shape: Any) -> Tensor:
    """``input`` with a new shape of the same number of elements; one extent may be -1.

    On an N-D mesh, a layout whose every shard is one contiguous run of the elements may
    become another layout whose shards are the same runs, with no communication: ``(S(0),
    S(0))`` of a (4, 4) tensor viewed as (2, 8) is ``(S(0), S(1))``, as in OneFlow.

    Args:
        input: a local or global tensor.
        shape: the new shape, as ints or one tuple/list.

    Returns:
        A tensor sharing ``input``'s memory where the array module can (a view).

    Examples:
        >>> flow.arange(6).reshape(2, -1).shape
        mpiflow.Size([2, 3])
    """
    size = _infer_size(_dims_arg(shape), input.numel())
    if not input.is_global:
        return apply(RESHAPE, input, size=size, mesh=())
    mesh = input.placement.mesh_shape
    splits = [s.dim for s in input.sbp if isinstance(s, Split)]
    if splits and not set(splits) <= set(reshape_split_map(tuple(input.shape), size, mesh)):
        if len(splits) > 1:
            kept = same_runs_layout(tuple(input.shape), size, mesh, tuple(input.sbp))
            if kept is not None:
                return _reshape_in_place(input, size, kept)
        if input.numel() > 1:  # a split that no output split matches: re-chunk, not gather
            return rechunk(input, size)
    return apply(RESHAPE, input, size=size, mesh=mesh)


def _flat_run(shape: Shape, region: Sequence[tuple[int, int]]) -> tuple[int, int] | None:
    """(first flat index, length) of ``region`` of a C-order array of ``shape`` when it is
    one contiguous run of elements, else None."""
    lengths = [b - a for a, b in region]
    count = math.prod(lengths)
    if count == 0:
        return (0, 0)
    k = len(shape) - 1
    while k >= 0 and lengths[k] == shape[k]:
        k -= 1
    if any(lengths[i] != 1 for i in range(k)):
        return None
    start, stride = 0, 1
    for d in reversed(range(len(shape))):
        start += region[d][0] * stride
        stride *= shape[d]
    return (start, count)


@functools.lru_cache(maxsize=256)
def same_runs_layout(shape: Shape, size: Shape, mesh: Shape,
                     sbp: tuple[SbpParallel, ...]) -> tuple[SbpParallel, ...] | None:
    """A layout of the reshaped tensor in which every rank holds exactly the elements, in the
    same order, that it holds of the input under ``sbp`` (so the reshape is local), or None.

    Each mesh axis keeps B or P; a split axis may split any output dim. Found only where every
    shard is one contiguous run of the row-major elements.

    Examples:
        >>> from mpiflow.layouts.sbp import split
        >>> same_runs_layout((4, 4), (2, 8), (2, 2), (split(0), split(0)))
        (mpiflow.sbp.split(dim=0), mpiflow.sbp.split(dim=1))
    """
    coords = list(itertools.product(*(range(k) for k in mesh)))
    runs = [_flat_run(shape, shard_bounds(shape, mesh, sbp, c)) for c in coords]
    if any(r is None for r in runs):
        return None
    options = [[Split(d) for d in range(len(size))] if isinstance(s, Split) else [s]
               for s in sbp]
    for candidate in itertools.product(*options):
        if all(_flat_run(size, shard_bounds(size, mesh, candidate, c)) == run
               for c, run in zip(coords, runs)):
            return tuple(candidate)
    return None


def _reshape_in_place(input: Tensor, size: Shape, sbp: tuple[SbpParallel, ...]) -> Tensor:
    """The reshape whose layout ``sbp`` keeps every rank's elements: local, no communication."""
    placement = input.placement
    rank = topology.rank
    data = input._data
    if rank in placement:
        data = data.reshape(local_shape(size, placement, sbp, rank))
    out = Tensor(data, placement, sbp, size)
    if data is not input._data and getattr(data, "base", None) is not None:
        out = out._alias_of(input)
    return record("reshape", _reshape_back, [input], {}, out)


def _reshape_back(g: Tensor, operands: Any, out: Tensor) -> tuple[Tensor]:
    return (reshape(g, tuple(operands[0].shape)),)


view = reshape  # no strides here: a view is a reshape that shares memory where it can


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """``input`` with dims ``start_dim..end_dim`` merged into one.

    Args:
        input: a tensor.
        start_dim: the first and last dims to merge (negative counts from the end).
        end_dim: the first and last dims to merge (negative counts from the end).

    Returns:
        The reshaped tensor (a 0-d input gives shape ``(1,)``).

    Examples:
        >>> flow.zeros(2, 3, 4).flatten(1).shape
        mpiflow.Size([2, 12])
    """
    shape = tuple(input.shape)
    if not shape:
        return reshape(input, 1)
    start, end = wrap_dim(start_dim, len(shape)), wrap_dim(end_dim, len(shape))
    if start > end:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    return reshape(input, *shape[:start], math.prod(shape[start:end + 1]), *shape[end + 1:])


# -- permute / transpose -------------------------------------------------------------------------
def _permute_shape(shape: Shape, *, perm: Shape) -> Shape:
    return tuple(shape[p] for p in perm)


def _permute_layouts(shape: Shape, *, perm: Shape) -> list[Signature]:
    sigs: list[Signature] = [((Split(p),), Split(i)) for i, p in enumerate(perm)]
    return sigs + keep_partial()


def _permute_kernel(ctx: Context, a: Any, *, perm: Shape) -> Any:
    return ctx.xp.transpose(a, perm)


def _permute_grad(g: Tensor, operands: Any, out: Tensor, *, perm: Shape) -> tuple[Tensor]:
    inverse = tuple(sorted(range(len(perm)), key=perm.__getitem__))
    return (apply(PERMUTE, g, perm=inverse),)


PERMUTE = OpDef("permute", _permute_kernel, _permute_shape, _permute_layouts,
                grad=_permute_grad)


def permute(input: Tensor, *dims: Any) -> Tensor:
    """``input`` with its dims reordered: output dim ``i`` is input dim ``dims[i]``.

    Args:
        input: a tensor.
        dims: a permutation of the dims, as ints or one tuple/list (negative allowed).

    Returns:
        The permuted tensor (a view for local tensors).

    Examples:
        >>> flow.zeros(2, 3, 4).permute(2, 0, 1).shape
        mpiflow.Size([4, 2, 3])
    """
    perm = tuple(wrap_dim(d, input.ndim) for d in _dims_arg(dims))
    if sorted(perm) != list(range(input.ndim)):
        raise RuntimeError(f"permute: {list(_dims_arg(dims))} is not a permutation of the "
                           f"{input.ndim} dims of a tensor of shape {tuple(input.shape)}")
    return apply(PERMUTE, input, perm=perm)


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """``input`` with dims ``dim0`` and ``dim1`` swapped.

    Args:
        input: a tensor.
        dim0: the two dims (negative counts from the end).
        dim1: the two dims (negative counts from the end).

    Returns:
        The transposed tensor (a view for local tensors).

    Examples:
        >>> flow.zeros(2, 3, 4).transpose(0, -1).shape
        mpiflow.Size([4, 3, 2])
    """
    perm = list(range(input.ndim))
    a, b = wrap_dim(dim0, input.ndim), wrap_dim(dim1, input.ndim)
    perm[a], perm[b] = perm[b], perm[a]
    return apply(PERMUTE, input, perm=tuple(perm))


swapaxes = transpose


def t(input: Tensor) -> Tensor:
    """The transpose of a tensor of at most 2 dims (0-d and 1-d come back as they are).

    Examples:
        >>> flow.zeros(2, 3).t().shape
        mpiflow.Size([3, 2])
    """
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                           f"{input.ndim}D")
    return input if input.ndim < 2 else transpose(input, 0, 1)


def _reversed_dims(input: Tensor) -> Tensor:
    """``input.T``: the dims in reverse order."""
    return input if input.ndim < 2 else permute(input, *reversed(range(input.ndim)))


# -- squeeze / unsqueeze -------------------------------------------------------------------------
def _squeeze_shape(shape: Shape, *, dims: Shape) -> Shape:
    return tuple(n for d, n in enumerate(shape) if d not in dims)


def _squeeze_layouts(shape: Shape, *, dims: Shape) -> list[Signature]:
    sigs: list[Signature] = [((Split(d),), Split(d - sum(r < d for r in dims)))
                             for d in range(len(shape)) if d not in dims]
    return sigs + keep_partial()


def _squeeze_kernel(ctx: Context, a: Any, *, dims: Shape) -> Any:
    return ctx.xp.squeeze(a, axis=dims) if dims else a


def _squeeze_grad(g: Tensor, operands: Any, out: Tensor, *, dims: Shape) -> tuple[Tensor]:
    for d in dims:  # ascending: each size-1 dim goes back to its place
        g = apply(UNSQUEEZE, g, dim=d)
    return (g,)


SQUEEZE = OpDef("squeeze", _squeeze_kernel, _squeeze_shape, _squeeze_layouts,
                grad=_squeeze_grad)


def squeeze(input: Tensor, dim: int | Sequence[int] | None = None) -> Tensor:
    """``input`` without its size-1 dims (all of them, or those of ``dim`` that have size 1).

    Args:
        input: a tensor.
        dim: a dim or dims to remove if their size is 1; None: every size-1 dim.

    Returns:
        The squeezed tensor (a view for local tensors).

    Examples:
        >>> flow.zeros(2, 1, 3, 1).squeeze().shape, flow.zeros(2, 1).squeeze(0).shape
        (mpiflow.Size([2, 3]), mpiflow.Size([2, 1]))
    """
    shape = tuple(input.shape)
    if dim is None:
        wanted = list(range(len(shape)))
    else:
        wanted = [wrap_dim(d, len(shape)) for d in ((dim,) if isinstance(dim, int) else dim)]
    dims = tuple(sorted({d for d in wanted if shape and shape[d] == 1}))
    return apply(SQUEEZE, input, dims=dims)


def _unsqueeze_shape(shape: Shape, *, dim: int) -> Shape:
    return (*shape[:dim], 1, *shape[dim:])


def _unsqueeze_layouts(shape: Shape, *, dim: int) -> list[Signature]:
    sigs: list[Signature] = [((Split(d),), Split(d if d < dim else d + 1))
                             for d in range(len(shape))]
    return sigs + keep_partial()


def _unsqueeze_kernel(ctx: Context, a: Any, *, dim: int) -> Any:
    return ctx.xp.expand_dims(a, dim)


UNSQUEEZE = OpDef("unsqueeze", _unsqueeze_kernel, _unsqueeze_shape, _unsqueeze_layouts,
                  grad=lambda g, operands, out, *, dim: (apply(SQUEEZE, g, dims=(dim,)),))


def unsqueeze(input: Tensor, dim: int) -> Tensor:
    """``input`` with a new size-1 dim at position ``dim`` (negative: from the end).

    Examples:
        >>> flow.zeros(2, 3).unsqueeze(-1).shape
        mpiflow.Size([2, 3, 1])
    """
    return apply(UNSQUEEZE, input, dim=wrap_dim(dim, input.ndim, extra=1))


# -- flip / contiguous ---------------------------------------------------------------------------
def _flip_layouts(shape: Shape, *, dims: Shape) -> list[Signature]:
    sigs: list[Signature] = [((Split(d),), Split(d)) for d in range(len(shape)) if d not in dims]
    return sigs + keep_partial()


def _flip_kernel(ctx: Context, a: Any, *, dims: Shape) -> Any:
    if ctx.comm is not None:
        a = _flip_split(ctx, a, dims)
    return ctx.xp.flip(a, axis=dims).copy() if dims else a.copy()


def _flip_along(shape: Shape, *, dims: Shape) -> list[Signature]:
    return [((Split(d),), Split(d)) for d in dims]


def _flip_split(ctx: Context, a: Any, dims: Shape) -> Any:
    """Along the split dim of the flipped ones, each rank first fetches the rows that its
    part of the result mirrors (one ``all_to_all_v``), in order: the local flip reverses
    them."""
    from ..algorithms import fetch, offsets

    assert ctx.out_sbp is not None and ctx.comm is not None
    split = [s.dim for axis, s in enumerate(ctx.out_sbp)
             if axis in ctx.comm_axes and isinstance(s, Split)]
    if len(set(split)) > 1:
        raise NotImplementedError("flip along two split dims of one tensor: flip one, then "
                                  "the other")
    d = split[0]
    counts = ctx.extents(ctx.global_shape, ctx.out_sbp, d)
    n, bounds = sum(counts), offsets(counts)
    wants = [[(n - bounds[r + 1], n - bounds[r])] for r in range(len(counts))]
    return fetch(a, ctx.comm, d, counts, wants)


def _flip_grad(g: Tensor, operands: Any, out: Tensor, *, dims: Shape) -> tuple[Tensor]:
    return (apply(FLIP, g, dims=dims),)


FLIP = OpDef("flip", _flip_kernel, lambda shape, **_: shape, _flip_layouts, grad=_flip_grad,
             collective=_flip_along)


def flip(input: Tensor, dims: int | Sequence[int]) -> Tensor:
    """``input`` with the order of elements along ``dims`` reversed (a copy, as PyTorch).

    Examples:
        >>> flow.tensor([[1, 2], [3, 4]]).flip(1).tolist()
        [[2, 1], [4, 3]]
    """
    wanted = (dims,) if isinstance(dims, int) else tuple(dims)
    normal = tuple(wrap_dim(d, input.ndim) for d in wanted)
    if len(set(normal)) != len(normal):
        raise RuntimeError(f"flip: dims {list(wanted)} repeat a dim")
    return apply(FLIP, input, dims=tuple(sorted(normal)))


def contiguous(input: Tensor) -> Tensor:
    """``input`` itself: mpiflow tensors have no strides to make contiguous.

    Examples:
        >>> x = flow.zeros(2); x.contiguous() is x
        True
    """
    return input


bind({"reshape": reshape, "view": view, "flatten": flatten, "transpose": transpose,
      "swapaxes": swapaxes, "permute": permute, "t": t, "squeeze": squeeze,
      "unsqueeze": unsqueeze, "flip": flip,
      "contiguous": contiguous, "T": property(_reversed_dims)})
