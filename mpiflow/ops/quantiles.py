"""Quantiles: ``quantile`` and ``nanquantile``, with torch's five interpolations.

Layout rule, per mesh axis: with a ``dim``, a split of another dim stays a split (shifted by
the leading dim of a 1-D ``q``); a split of ``dim`` is a collective signature where the columns
are few (:data:`~.layout_rules.COLUMNS`), ``S(dim) -> B``: the two values around each quantile
are found by distributed selection (:func:`mpiflow.algorithms.quantiles`: samples bracket
them, counts are all-gathered, a few thousand candidates are gathered at the end), no sort
and no gather of the data. Without a dim any split is such a signature (only the values, in
any order, matter).

Gradient: each quantile's gradient goes to the values it interpolates, split evenly among
the elements equal to each (torch sends it to the elements its sort put there; where the
values are distinct the two agree).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy

from ..algorithms import quantiles as distributed_quantiles
from ..algorithms.selection import INTERPOLATIONS, lerp, lines, quantile_ranks
from ..layouts.sbp import Split
from ..tensors.tensor import Tensor, bind
from . import pointwise as pw
from .engine import B, Context, OpDef, Signature, apply
from .layout_rules import few_columns, wrap_dim
from .reduction import sum

__all__ = ["nanquantile", "quantile"]

Shape = tuple[int, ...]


def _quantile_shape(shape: Shape, *, q: tuple[float, ...], scalar: bool, dim: int | None,
                    keepdim: bool, **_: Any) -> Shape:
    dims = range(len(shape)) if dim is None else (dim,)
    kept = tuple(1 if d in dims else n for d, n in enumerate(shape) if keepdim or d not in dims)
    return kept if scalar else (len(q), *kept)


def _local_quantiles(xp: Any, matrix: Any, q: numpy.ndarray, interpolation: str,
                     ignore_nan: bool) -> Any:
    """torch's algorithm on one process: sort each column, read the two values, lerp."""
    n, width = matrix.shape
    s = xp.sort(matrix, axis=0)
    valid = n - (xp.count_nonzero(xp.isnan(s), axis=0) if s.dtype.kind == "f"
                 else xp.zeros(width, dtype=numpy.int64))
    valid = numpy.asarray(valid)
    below, above, weight = quantile_ranks(q, valid if ignore_nan else numpy.full(width, n),
                                          interpolation, matrix.dtype)
    usable = (valid > 0) & (ignore_nan | (valid == n))
    columns = numpy.arange(width)
    low = xp.where(usable, s[xp.asarray(below), columns], numpy.nan)
    high = xp.where(usable, s[xp.asarray(above), columns], numpy.nan)
    return lerp(xp, low, high, xp.asarray(weight)).astype(matrix.dtype)


def _quantile_kernel(ctx: Context, a: Any, *, q: tuple[float, ...], scalar: bool,
                     dim: int | None, keepdim: bool, interpolation: str, ignore_nan: bool
                     ) -> Any:
    xp = ctx.xp
    qs = numpy.asarray(q, dtype=a.dtype)
    at = 0 if dim is None else dim
    source = a.reshape(-1) if dim is None else a
    if ctx.comm is None:
        values = _local_quantiles(xp, lines(source, at), qs, interpolation, ignore_nan)
    else:
        values = xp.asarray(distributed_quantiles(source, ctx.comm, at, qs, interpolation,
                                                  ignore_nan=ignore_nan))
    return values.reshape(ctx.out_shape)


def _kept_splits(shape: Shape, *, scalar: bool, dim: int | None, keepdim: bool, **_: Any
                 ) -> list[Signature]:
    if dim is None:
        return []
    shift = 0 if scalar else 1
    return [((Split(d),), Split(shift + (d if keepdim or d < dim else d - 1)))
            for d in range(len(shape)) if d != dim]


def _split_selected(shape: Shape, *, dim: int | None, **_: Any) -> list[Signature]:
    if dim is None:
        return [((Split(d),), B) for d in range(len(shape))]
    return [((Split(dim),), B)] if few_columns(shape, dim) else []


def _quantile_grad(g: Tensor, operands: Any, out: Tensor, *, q: tuple[float, ...],
                   scalar: bool, dim: int | None, keepdim: bool, interpolation: str,
                   ignore_nan: bool) -> tuple[Tensor]:
    """Each quantile's gradient to the two values it interpolates (even among ties)."""
    x = operands[0]
    dims = dim if dim is not None else ()
    grad: Tensor | None = None
    for i, qi in enumerate(q):
        gi = g if scalar else g[i]
        if dim is not None and not keepdim:
            gi = gi.unsqueeze(dim)

        def at(how: str, qi: float = qi) -> Tensor:  # the value, its dims kept to broadcast
            return apply(QUANTILE[ignore_nan], x, q=(qi,), scalar=True, dim=dim, keepdim=True,
                         interpolation=how, ignore_nan=ignore_nan).detach()

        if interpolation in ("lower", "higher", "nearest"):
            part = pw.mul(gi, _share(x, at(interpolation), dims))
        else:
            w = _upper_weight(x, qi, dim, interpolation, ignore_nan)
            rest = 1 - w if isinstance(w, float) else pw.sub(1, w)
            part = pw.add(pw.mul(pw.mul(gi, rest), _share(x, at("lower"), dims)),
                          pw.mul(pw.mul(gi, w), _share(x, at("higher"), dims)))
        grad = part if grad is None else pw.add(grad, part)
    assert grad is not None
    return (grad,)


def _upper_weight(x: Tensor, q: float, dim: int | None, interpolation: str,
                  ignore_nan: bool) -> Any:
    """The weight of the upper value: torch's ``rank - floor(rank)``, in ``x``'s dtype (a
    tensor per slice where NaN counts differ)."""
    dtype = x.dtype.numpy
    if interpolation == "midpoint":
        return 0.5
    if not ignore_nan:
        n = x.numel() if dim is None else x.shape[dim]
        rank = dtype.type(q) * dtype.type(max(n - 1, 0))
        return float(rank - numpy.floor(rank))
    counts = sum(pw.logical_not(pw.isnan(x)), dim if dim is not None else (), keepdim=True)
    rank = pw.mul(pw.sub(counts, 1).to(x.dtype), float(dtype.type(q)))
    return pw.sub(rank, pw.floor(rank)).detach()


def _share(x: Tensor, value: Tensor, dims: Any) -> Tensor:
    hit = pw.eq(x, value).to(x.dtype)
    return pw.div(hit, sum(hit, dims, keepdim=True))


QUANTILE = {ignore: OpDef("nanquantile" if ignore else "quantile", _quantile_kernel,
                          _quantile_shape, _kept_splits, lambda dtype, **_: dtype,
                          _quantile_grad, collective=_split_selected)
            for ignore in (False, True)}


def _quantile(name: str, input: Tensor, q: Any, dim: int | None, keepdim: bool,
              interpolation: str, ignore_nan: bool) -> Tensor:
    if input.dtype.numpy not in (numpy.float32, numpy.float64):
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    if isinstance(q, Tensor):
        if q.ndim > 1:
            raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
        if q.dtype != input.dtype:
            raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
        scalar, values = q.ndim == 0, [float(v) for v in numpy.asarray(q.numpy()).reshape(-1)]
    else:
        scalar, values = True, [float(q)]
    if input.numel() == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    bad = [v for v in values if not 0.0 <= v <= 1.0]
    if bad:
        raise RuntimeError(f"{name}() q must be in the range [0, 1] but got {bad[0]}")
    if interpolation not in INTERPOLATIONS:
        raise RuntimeError(f"{name}() interpolation must be one of linear, lower, higher, "
                           f"midpoint or nearest, but got {interpolation}")
    d = None if dim is None else wrap_dim(operator.index(dim), input.ndim)
    return apply(QUANTILE[ignore_nan], input, q=tuple(values), scalar=scalar, dim=d,
                 keepdim=bool(keepdim), interpolation=interpolation, ignore_nan=ignore_nan)


def quantile(input: Tensor, q: Any, dim: int | None = None, keepdim: bool = False, *,
             interpolation: str = "linear") -> Tensor:
    """The ``q``-th quantiles of ``input`` along ``dim`` (of all elements where None).

    Args:
        input: a float32 or float64 tensor.
        q: a number or a 0-d/1-D tensor of ``input``'s dtype, in ``[0, 1]``.
        dim: the dim to reduce, or None for all.
        keepdim: keep the reduced dims with size 1.
        interpolation: between the two values around a quantile: ``linear``, ``lower``,
            ``higher``, ``midpoint`` or ``nearest`` (half to even).

    Returns:
        The quantiles; a 1-D ``q`` adds a leading dim. NaN where a reduced slice holds a NaN.
        A global tensor split along ``dim`` (any dim when ``dim`` is None) is not gathered:
        the values are found by distributed selection, the result broadcast.

    Raises:
        RuntimeError: a dtype, ``q`` or ``interpolation`` torch refuses; every rank raises.

    Examples:
        >>> flow.quantile(flow.tensor([1.0, 2.0, 3.0, 4.0]), 0.5)
        tensor(2.5000)
    """
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


def nanquantile(input: Tensor, q: Any, dim: int | None = None, keepdim: bool = False, *,
                interpolation: str = "linear") -> Tensor:
    """:func:`quantile` of the values that are not NaN (NaN where all are).

    Examples:
        >>> flow.nanquantile(flow.tensor([1.0, float("nan"), 3.0]), 0.5)
        tensor(2.)
    """
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


bind({_name: globals()[_name] for _name in __all__})
