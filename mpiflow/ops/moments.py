"""Moments: ``var_mean``, ``std_mean`` (one pass), ``cov`` and ``corrcoef``.

``var_mean`` is one op, ``moments``, whose result stacks the variance and the mean (shape
``(2, *reduced)``), so that both carry gradients. Layout rule, per mesh axis: a split of a dim
that is not reduced stays a split (of the shifted dim); a split of a reduced dim gives a whole
(``B``) result, a collective signature: each rank computes the count, mean and sum of squared
deviations of its part, and one all-gather combines them
(:func:`mpiflow.algorithms.moments`; exact as a two-pass variance, no element moves).

``cov`` and ``corrcoef`` are composites: the weighted means and the product of the centred
observations with their transpose are mpiflow ops, so observations split across ranks (``S(1)``
of the ``(variables, observations)`` input) give local products and one all-reduce of the small
``(variables, variables)`` result (the matmul's ``(S(1), S(0)) -> P``); nothing else moves.

Examples:
    >>> v, m = flow.var_mean(flow.tensor([1.0, 2.0, 3.0, 4.0]))
    >>> round(v.item(), 4), m.item()
    (1.6667, 2.5)
"""

from __future__ import annotations

import builtins
import math
import warnings
from typing import Any

import numpy

from ..algorithms import moments as distributed_moments
from ..algorithms.moments import local_moments
from ..layouts.sbp import Split
from ..tensors.creation import tensor
from ..tensors.tensor import Tensor, bind
from . import pointwise as pw
from .deterministic_sum import CONJ
from .engine import B, Context, OpDef, Signature, apply
from .indexing import getitem
from .linalg import matmul
from .reduction import amin, mean
from .reduction import sum as reduce_sum
from .reduction_rules import DimArg, Dims, Shape, reduced_shape, reduction_dims, unreduce
from .shape import reshape, squeeze, t, unsqueeze

__all__ = ["corrcoef", "cov", "std_mean", "var_mean"]


def _moments_shape(shape: Shape, *, dims: Dims, keepdim: bool, correction: float) -> Shape:
    return (2, *reduced_shape(shape, dims=dims, keepdim=keepdim))


def _moments_layouts(shape: Shape, *, dims: Dims, keepdim: bool, correction: float
                     ) -> list[Signature]:
    return [((Split(d),), Split(1 + (d if keepdim else d - builtins.sum(r < d for r in dims))))
            for d in range(len(shape)) if d not in dims]


def _moments_collective(shape: Shape, *, dims: Dims, **_: Any) -> list[Signature]:
    return [((Split(d),), B) for d in dims]


def _moments_kernel(ctx: Context, a: Any, *, dims: Dims, keepdim: bool, correction: float
                    ) -> Any:
    xp = ctx.xp
    if ctx.comm is None:
        count, average, m2 = local_moments(a, dims, numpy.float64)
    else:
        count, average, m2 = distributed_moments(a, dims, ctx.comm)
    with numpy.errstate(divide="ignore", invalid="ignore"):
        variance = m2 / builtins.max(0, count - correction)
    if count == 0:
        average = xp.full(average.shape, numpy.nan)
    out = xp.stack([variance, average])
    if not keepdim and dims:
        out = xp.squeeze(out, axis=tuple(d + 1 for d in dims))
    return out.astype(ctx.out_dtype, copy=False)


def _moments_grad(g: Tensor, operands: Any, out: Tensor, *, dims: Dims, keepdim: bool,
                  correction: float) -> tuple[Tensor]:
    """``d var = 2 (x - mean) / (n - correction)``, ``d mean = 1 / n``, each times its
    gradient (rows 0 and 1 of ``g``)."""
    x = operands[0]
    n = math.prod(x.shape[d] for d in dims)
    g_var = unreduce(getitem(g, 0), dims, keepdim)
    g_mean = unreduce(getitem(g, 1), dims, keepdim)
    average = unreduce(getitem(out, 1), dims, keepdim)
    with numpy.errstate(divide="ignore", invalid="ignore"):
        spread = pw.mul(pw.sub(x, average), 2.0 / builtins.max(0, n - correction)
                        if n - correction > 0 else numpy.inf)
        return (pw.add(pw.mul(g_var, spread), pw.div(g_mean, builtins.max(n, 1))),)


MOMENTS = OpDef("moments", _moments_kernel, _moments_shape, _moments_layouts,
                grad=_moments_grad, collective=_moments_collective)


def _moments(name: str, input: Tensor, dim: DimArg, unbiased: bool | None, keepdim: bool,
             correction: float | None) -> tuple[Tensor, Tensor]:
    if input.dtype.numpy.kind != "f":
        raise TypeError(f"{name}(): input dtype should be floating point, got {input.dtype}")
    if correction is None:
        correction = 0 if unbiased is False else 1
    dims = reduction_dims(dim, input.ndim)
    n = math.prod(input.shape[d] for d in dims)
    if n - correction <= 0:
        warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly "
                      "less than the reduction factor (input numel divided by output numel).",
                      stacklevel=3)
    out = apply(MOMENTS, input, dims=dims, keepdim=bool(keepdim), correction=correction)
    return getitem(out, 0), getitem(out, 1)


def var_mean(input: Tensor, dim: DimArg = None, unbiased: bool | None = None,
             keepdim: bool = False, *, correction: float | None = None
             ) -> tuple[Tensor, Tensor]:
    """The variance and the mean over ``dim``, in one pass (torch's ``var_mean``).

    Args:
        input: a floating-point tensor.
        dim: the dims to reduce (None: all).
        unbiased: True (default) is ``correction=1``, False ``correction=0``.
        keepdim: keep the reduced dims (size 1).
        correction: subtracted from the count in the variance's divisor.

    Returns:
        ``(variance, mean)``. A split of a reduced dim gives whole results (each rank's part
        moments, combined with one all-gather).

    Examples:
        >>> v, m = flow.var_mean(flow.tensor([[1.0, 2.0], [3.0, 5.0]]), 0, correction=0)
        >>> v.tolist(), m.tolist()
        ([1.0, 2.25], [2.0, 3.5])
    """
    return _moments("var_mean", input, dim, unbiased, keepdim, correction)


def std_mean(input: Tensor, dim: DimArg = None, unbiased: bool | None = None,
             keepdim: bool = False, *, correction: float | None = None
             ) -> tuple[Tensor, Tensor]:
    """The standard deviation and the mean over ``dim`` (torch's ``std_mean``; see
    :func:`var_mean`).

    Examples:
        >>> s, m = flow.std_mean(flow.tensor([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]),
        ...                      correction=0)
        >>> s.item(), m.item()
        (2.0, 5.0)
    """
    variance, average = _moments("std_mean", input, dim, unbiased, keepdim, correction)
    return pw.sqrt(variance), average


# -- cov, corrcoef (composites) ----------------------------------------------------------------
def _weights(w: Tensor | None, name: str, kinds: str, observations: int) -> None:
    """Check ``fweights``/``aweights`` (shapes and dtypes first, then the sign, agreed)."""
    if w is None:
        return
    if w.ndim > 1:
        raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got "
                           f"{name} with {w.ndim} dimensions")
    if w.numel() != observations:
        raise RuntimeError(f"cov(): expected {name} to have the same numel as there are "
                           f"observations in the input but got {w.numel()} != {observations}")
    if w.dtype.numpy.kind not in kinds:
        raise RuntimeError(f"cov(): expected {name} to have "
                           f"{'integral' if kinds == 'iu' else 'floating point'} dtype but got "
                           f"{w.dtype}")
    if observations and amin(w).item() < 0:  # one all-reduce: every rank raises alike
        raise RuntimeError(f"cov(): {name} cannot be negative")


def cov(input: Tensor, *, correction: int = 1, fweights: Tensor | None = None,
        aweights: Tensor | None = None) -> Tensor:
    """The covariance matrix of the variables (rows) of ``input`` over its observations
    (columns), torch's ``cov``.

    Args:
        input: a tensor of at most 2 dims: ``(variables, observations)`` (1-D: one variable).
        correction: subtracted from the (weighted) number of observations: 1 is Bessel's.
        fweights: integer frequency weights, one per observation.
        aweights: floating observation weights, one per observation.

    Returns:
        The ``(variables, variables)`` matrix (0-d for one variable). Observations split
        across ranks are multiplied where they lie: one all-reduce of the result.

    Examples:
        >>> flow.cov(flow.tensor([[1.0, 2.0, 4.0], [1.0, 0.0, 3.0]])).tolist()[0][1]
        1.8333333730697632
    """
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an "
                           f"input with {input.ndim} dimensions")
    x = input if input.ndim == 2 else reshape(input, 1, -1)
    if x.dtype.numpy.kind in "biu":
        x = pw.cast(x, numpy.float32)
    observations = x.shape[1]
    _weights(fweights, "fweights", "iu", observations)
    _weights(aweights, "aweights", "f", observations)
    w = fweights
    if aweights is not None:
        w = aweights if w is None else pw.mul(w, aweights)
    if w is None:
        w_sum: Any = observations
        average = mean(x, 1) if observations else pw.mul(reduce_sum(x, 1), numpy.nan)
    else:
        w = pw.cast(w, x.dtype) if w.dtype.numpy.kind in "biu" else w
        w_sum = reduce_sum(w)
        average = pw.div(reduce_sum(pw.mul(x, w), 1), w_sum)
    if w is not None and aweights is not None and correction != 0:
        norm: Any = pw.sub(w_sum, pw.div(pw.mul(reduce_sum(pw.mul(w, aweights)), correction),
                                         w_sum))
    else:
        norm = pw.sub(w_sum, correction) if isinstance(w_sum, Tensor) else w_sum - correction
    if isinstance(norm, Tensor):
        norm = pw.where(pw.le(norm, 0), 0, norm)
    elif norm <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less "
                      "than the number of observations.", stacklevel=2)
        norm = 0
    centred = pw.sub(x, unsqueeze(average, 1))
    weighted = centred if w is None else pw.mul(centred, w)
    other = t(centred)
    if other.dtype.numpy.kind == "c":
        other = apply(CONJ, other)
    with numpy.errstate(divide="ignore", invalid="ignore"):
        product = pw.div(matmul(weighted, other), norm)
    if product.is_global:  # the result is small: whole on every rank (one all-reduce)
        product = product.to_global(product.placement, (B,) * product.placement.ndim)
    return squeeze(product)


def corrcoef(input: Tensor) -> Tensor:
    """The Pearson correlation coefficients of the variables (rows) of ``input``
    (torch's ``corrcoef``): ``cov`` divided by the outer product of the deviations, clipped
    to ``[-1, 1]``.

    Examples:
        >>> round(flow.corrcoef(flow.tensor([[1.0, 2.0, 4.0], [1.0, 0.0, 3.0]]))[0, 1].item(), 4)
        0.7857
    """
    c = cov(input)
    if c.ndim == 0:
        return pw.div(c, c)
    eye = numpy.eye(c.shape[0], dtype=bool)
    mask = (tensor(eye, placement=c.placement, sbp=(B,) * c.placement.ndim) if c.is_global
            else tensor(eye))
    diagonal = reduce_sum(pw.where(mask, c, 0), 1)
    deviation = pw.sqrt(diagonal)
    c = pw.div(pw.div(c, unsqueeze(deviation, 1)), unsqueeze(deviation, 0))
    if c.dtype.numpy.kind == "c":
        return c
    return pw.clamp(c, -1, 1)


bind({"cov": cov, "corrcoef": corrcoef})
