"""Reproducible reductions: exact sums whose bits do not depend on ranks, placement or sbp.

Under :func:`mpiflow.use_deterministic_algorithms` (or ``MPIFLOW_DETERMINISTIC=1``) the float
``sum``/``mean``/``nansum``, ``var``/``std``, ``norm`` (p = 2, 1) and ``dot``/``vdot`` run as two
ops. ``exact_state`` turns each rank's shard into exact integer sum states
(:mod:`mpiflow.core.exact_sum`); a split reduced dim leaves a partial (``P``) state, which the
engine finishes with an integer all-reduce (associative, so its order cannot matter).
``exact_round`` rounds each state once, correctly, to the output dtype. The result is ``B``
(or split along a kept dim), never a float partial. Gradients are those of the plain ops.

Example:
    >>> with flow.deterministic():
    ...     flow.sum(flow.tensor([1e16, 1.0, -1e16, 1.0], dtype=flow.float64)).item()
    2.0
"""

from __future__ import annotations

import builtins
import math
from typing import Any

import numpy

from ..core import exact_sum as xs
from ..core.deterministic import are_deterministic_algorithms_enabled
from ..layouts.sbp import Split
from ..tensors.tape import no_grad, record
from ..tensors.tensor import Tensor, bind
from . import pointwise as pw
from .engine import Context, OpDef, Signature, apply

__all__ = ["enabled", "exact_sum", "exact_dot", "exact_norm2", "nansum", "vdot"]

Shape = tuple[int, ...]
Dims = tuple[int, ...]


def enabled(tensor: Tensor) -> bool:
    """Whether ``tensor``'s float reduction should run exactly: the switch is on and the data
    are float or complex numpy arrays (GPU arrays keep the plain path)."""
    return (are_deterministic_algorithms_enabled() and tensor.dtype.numpy.kind in "fc"
            and type(tensor._data) is numpy.ndarray)


# -- exact_state: shard -> integer states ------------------------------------------------------
def _state_shape(shape: Shape, *, dims: Dims, keepdim: bool, pairs: bool, **_: Any) -> Shape:
    kept = tuple(1 if i in dims else n for i, n in enumerate(shape) if keepdim or i not in dims)
    return kept + ((2,) if pairs else ()) + (xs.STATE_SIZE,)


def _state_layouts(shape: Shape, *, dims: Dims, keepdim: bool, **_: Any) -> list[Signature]:
    """A kept split stays one; a split reduced dim leaves partial states (exact integer sums)."""
    from .reduction_rules import P_SUM

    kept = [((Split(d),), Split(d if keepdim else d - builtins.sum(r < d for r in dims)))
            for d in range(len(shape)) if d not in dims]
    return [*kept, *[((Split(d),), P_SUM) for d in dims]]


def _state_kernel(ctx: Context, a: Any, *, dims: Dims, keepdim: bool, pairs: bool,
                  **_: Any) -> Any:
    a = numpy.asarray(a)
    if pairs:   # complex: the real and imaginary parts are two independent sums
        a = numpy.stack([a.real, a.imag], axis=-1)
    kept = [d for d in range(a.ndim) if d not in dims]
    moved = numpy.transpose(a, kept + list(dims))
    lead = moved.shape[:len(kept)]
    # contiguous rows: the kernel streams along them (one transposing copy when needed)
    rows = numpy.ascontiguousarray(moved).reshape(math.prod(lead),
                                                  math.prod(moved.shape[len(kept):]))
    states = (xs.sum_state(rows[0])[None] if rows.shape[0] == 1
              else xs.rows_state(rows))
    if keepdim:
        lead = tuple(1 if i in dims else n for i, n in enumerate(a.shape))
    return states.reshape(*lead, xs.STATE_SIZE)


EXACT_STATE = OpDef("exact_state", _state_kernel, _state_shape, _state_layouts,
                    lambda dtype, **_: numpy.dtype(numpy.int64))


# -- exact_round: states -> correctly rounded values -------------------------------------------
def _round_shape(shape: Shape, *, pairs: bool, **_: Any) -> Shape:
    return shape[:-2] if pairs else shape[:-1]


def _round_layouts(shape: Shape, **attrs: Any) -> list[Signature]:
    return [((Split(d),), Split(d)) for d in range(len(_round_shape(shape, **attrs)))]


def _round_kernel(ctx: Context, s: Any, *, pairs: bool, divisor: int, nan_as_zero: bool,
                  **_: Any) -> Any:
    s = numpy.asarray(s)
    part = numpy.float64 if ctx.out_dtype.kind == "c" else ctx.out_dtype
    if pairs:
        part = numpy.dtype(numpy.float32 if ctx.out_dtype == numpy.complex64 else numpy.float64)
    values = xs.state_values(s, part, divisor=divisor, nan_as_zero=nan_as_zero)
    if pairs:
        values = values[..., 0] + 1j * values[..., 1].astype(ctx.out_dtype)
    return values.astype(ctx.out_dtype)


EXACT_ROUND = OpDef("exact_round", _round_kernel, _round_shape, _round_layouts,
                    lambda dtype, *, out, **_: out)


# -- the reductions ----------------------------------------------------------------------------
def _sum_rule(g: Tensor, operands: Any, result: Tensor, *, dims: Dims, keepdim: bool,
              divisor: int = 1, **_: Any) -> tuple[Tensor]:
    """The gradient of a sum (over ``divisor`` for means): ``g`` broadcast to the input."""
    from .reduction_rules import unreduce

    x = operands[0]
    g = unreduce(g, dims, keepdim)
    if divisor != 1:
        g = pw.div(g, divisor)
    return (pw.expand(g, tuple(x.shape)),)


def exact_sum(input: Tensor, dims: Dims, keepdim: bool = False, *, out_dtype: Any = None,
              divisor: int = 1, nan_as_zero: bool = False, extra: Tensor | None = None
              ) -> Tensor:
    """The exact sum over ``dims`` (sorted, non-negative), divided by ``divisor``, rounded once.

    Args:
        input: a float or complex tensor, local or global.
        dims: the reduced dims.
        keepdim: keep them with size 1.
        out_dtype: the result's dtype (default: the input's).
        divisor: exact integer divisor (``mean``: the count; ``var``: ``n - correction``).
        nan_as_zero: NaNs count as zeros (``nansum``).
        extra: a tensor of the input's shape whose values join the sum (the error terms of
            exact products); no gradient flows into it.

    Returns:
        The correctly rounded value, ``B`` (or split along a kept dim) on global tensors; the
        gradient is that of ``sum`` (divided by ``divisor``).

    Example:
        >>> exact_sum(flow.tensor([0.1, 0.2, 0.3]), (0,)).item()
        0.6000000238418579
    """
    dtype = numpy.dtype(out_dtype) if out_dtype is not None else input.dtype.numpy
    pairs = input.dtype.numpy.kind == "c"
    with no_grad():
        states = apply(EXACT_STATE, input, dims=dims, keepdim=keepdim, pairs=pairs)
        if extra is not None:
            states = pw.add(states, apply(EXACT_STATE, extra, dims=dims, keepdim=keepdim,
                                          pairs=pairs))
        with numpy.errstate(all="ignore"):
            result = apply(EXACT_ROUND, states, pairs=pairs, divisor=divisor,
                           nan_as_zero=nan_as_zero, out=dtype)
    return record("sum", _sum_rule, [input], {"dims": dims, "keepdim": keepdim,
                                              "divisor": divisor}, result)


def nansum(input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None
           ) -> Tensor:
    """The sum over ``dim`` (all by default) with NaNs counted as zeros.

    Exact and layout-independent under the reproducibility switch; otherwise
    ``sum(where(isnan(x), 0, x))``.

    Args:
        input: the tensor.
        dim: an int, a sequence of ints, or None for all.
        keepdim: keep the reduced dims with size 1.
        dtype: the dtype to compute in and return.

    Returns:
        The reduced tensor.

    Example:
        >>> flow.nansum(flow.tensor([1.0, float("nan"), 2.0])).item()
        3.0
    """
    from . import reduction as red
    from .reduction_rules import reduction_dims

    if dtype is not None:
        input = pw.cast(input, dtype)
    dims = reduction_dims(dim, input.ndim)
    if enabled(input):
        return exact_sum(input, dims, keepdim, nan_as_zero=True)
    if input.dtype.numpy.kind in "fc":
        input = pw.where(pw.isnan(input), 0, input)
    return red.sum(input, dim, keepdim)


def vdot(input: Tensor, other: Tensor) -> Tensor:
    """The dot product of two 1-D tensors, conjugating the first (as ``torch.vdot``).

    Args:
        input: a 1-D tensor (conjugated if complex).
        other: a 1-D tensor of the same length.

    Returns:
        A 0-d tensor.

    Example:
        >>> flow.vdot(flow.tensor([1.0, 2.0]), flow.tensor([3.0, 4.0])).item()
        11.0
    """
    from . import linalg

    if input.dtype.numpy.kind == "c":
        input = apply(CONJ, input)
    return linalg.dot(input, other)


CONJ = OpDef("conj", lambda ctx, a, **_: ctx.xp.conj(a), lambda shape, **_: shape,
             lambda shape, **_: [((Split(d),), Split(d)) for d in range(len(shape))])


# -- exact products: dot, norm -----------------------------------------------------------------
def _product_error(ctx: Context, a: Any, b: Any, **_: Any) -> Any:
    """``a * b - fl(a * b)`` exactly (Dekker's TwoProduct with Veltkamp's split, no FMA).

    Exact while no product or partial product overflows or underflows (magnitudes between
    about ``2**-480`` and ``2**995``)."""
    a = numpy.asarray(a, numpy.float64)
    b = numpy.asarray(b, numpy.float64)
    with numpy.errstate(all="ignore"):
        p = a * b
        c = 134217729.0 * a     # 2**27 + 1
        ah = c - (c - a)
        al = a - ah
        c = 134217729.0 * b
        bh = c - (c - b)
        bl = b - bh
        err = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return numpy.where(numpy.isfinite(err), err, 0.0)


PRODUCT_ERROR = OpDef("product_error", _product_error, lambda shape, other, **_: shape,
                      lambda shape, other, **_: [((Split(d), Split(d)), Split(d))
                                                 for d in range(len(shape))],
                      lambda *dtypes, **_: numpy.dtype(numpy.float64))


def _exact_products(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor | None]:
    """``x * y`` as float64 products plus, for float64 inputs, their exact errors."""
    if x.dtype.numpy.itemsize <= 4 and y.dtype.numpy.itemsize <= 4:
        # float16/32 products are exact in float64
        return pw.mul(pw.cast(x, numpy.float64), pw.cast(y, numpy.float64)), None
    with no_grad():
        err = apply(PRODUCT_ERROR, x, y)
    return pw.mul(x, y), err


def exact_dot(input: Tensor, other: Tensor) -> Tensor:
    """The correctly rounded dot product of two real 1-D float tensors (complex: of the
    complex128 products).

    Args:
        input: a 1-D tensor.
        other: a 1-D tensor of the same length.

    Returns:
        A 0-d tensor of the promoted dtype.

    Example:
        >>> exact_dot(flow.tensor([1e8, 1.0, -1e8]), flow.tensor([1e8, 1.0, 1e8])).item()
        1.0
    """
    from .engine import result_dtype

    dtype = result_dtype([input.dtype.numpy, other.dtype.numpy])
    if dtype.kind == "c":
        prods = pw.mul(pw.cast(input, numpy.complex128), pw.cast(other, numpy.complex128))
        return exact_sum(prods, (0,), out_dtype=dtype)
    prods, err = _exact_products(pw.cast(input, dtype), pw.cast(other, dtype))
    return exact_sum(prods, (0,), out_dtype=dtype, extra=err)


def exact_norm2(input: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """``sqrt`` of the exact sum of squares (rounded to float64 once), in the input's dtype.

    Args:
        input: a real float tensor.
        dim: as :func:`mpiflow.sum`.
        keepdim: as :func:`mpiflow.sum`.

    Returns:
        The 2-norm.

    Example:
        >>> exact_norm2(flow.tensor([3.0, 4.0])).item()
        5.0
    """
    from .reduction_rules import reduction_dims

    dims = reduction_dims(dim, input.ndim)
    squares, err = _exact_products(input, input)
    total = exact_sum(squares, dims, keepdim, out_dtype=numpy.float64, extra=err)
    return pw.cast(pw.sqrt(total), input.dtype.numpy)


bind({"nansum": nansum, "vdot": vdot})
