"""Exact sum states of each row of a 2-D float array (the per-row form of :mod:`.exact_sum`).

The same extraction levels as the flat kernel, vectorized over rows: each row has its own
first grid ``2**b`` (from its largest magnitude), and a row leaves the loop once the grid
reaches the last bit of its smallest magnitude or its remainders are all zero. The units of
each level are added straight into the rows' limbs (:mod:`.exact_state`).

Pure numpy; no MPI.

Example:
    >>> import numpy
    >>> from mpiflow.core.exact_rows import rows_state
    >>> from mpiflow.core.exact_state import state_to_int
    >>> state_to_int(rows_state(numpy.array([[0.5, 0.25]]))[0]) == 3 << 1072
    True
"""

from __future__ import annotations

from typing import Any

import numpy

from .exact_state import (
    BIG,
    BIG_SHIFT,
    CHUNK,
    COUNT,
    FORMATS,
    HALF_MANTISSA,
    HEADER,
    LIMB_BITS,
    LIMB_MASK,
    NAN,
    NEGINF,
    NOT_NEGZERO,
    POSINF,
    SCALE,
    STATE_SIZE,
    W,
    normalize,
)

__all__ = ["rows_state"]


def _add_units(limbs: numpy.ndarray, rows: numpy.ndarray, units: numpy.ndarray,
               pos: numpy.ndarray) -> None:
    """Add ``units * 2**pos`` (int64 units below 2**53, per row) into the rows' limbs."""
    k = pos // LIMB_BITS
    o = pos % LIMB_BITS
    lo = units & LIMB_MASK
    mid = (units >> LIMB_BITS) & LIMB_MASK
    top = units >> (2 * LIMB_BITS)
    limbs[rows, k] += lo << o
    limbs[rows, k + 1] += mid << o
    limbs[rows, k + 2] += top << o


def _rows_finite(a: numpy.ndarray, limbs: numpy.ndarray, shift: int, prec: int) -> None:
    """Add the exact row sums of a finite float array (magnitudes below BIG) into limbs.

    The same levels as the flat kernel, per row (each row has its own ``2**b``), on blocks of
    rows of about ``CHUNK`` elements. Rows of at most ``CHUNK`` elements keep the integer sums
    of the bit patterns below ``2**62``.
    """
    nrows, n = a.shape
    if n == 0:
        return
    step = max(1, CHUNK // n)
    for first in range(0, nrows, step):
        block = a[first:first + step]
        magnitude = numpy.abs(block)
        peak = magnitude.max(axis=1)
        live = numpy.flatnonzero(peak > 0)
        if not live.size:
            continue
        rows = live + first
        r = block[live].astype(numpy.float64)          # a contiguous copy
        smallest = magnitude.min(axis=1)[live]
        b = numpy.frexp(peak[live])[1].astype(numpy.int64) - W
        while rows.size:
            b = numpy.maximum(b, -SCALE)
            big_m = numpy.ldexp(1.5, b + 52)[:, None]
            t = r + big_m
            # integer sums of the bit patterns, less M's (int64 arithmetic wraps: exact)
            units = t.view(numpy.int64).sum(axis=1) - (((b + 1075) << 52) | HALF_MANTISSA) * n
            pos = b + SCALE + shift
            _add_units(limbs, rows, units, pos)
            normalize(limbs[first:first + step,
                            int(pos.min()) // LIMB_BITS:int(pos.max()) // LIMB_BITS + 4])
            more = (b > -SCALE) & (smallest < numpy.ldexp(1.0, b + prec - 1))
            if not more.any():
                break
            t -= big_m
            numpy.subtract(r, t, out=r)                   # the exact remainders
            more &= r.any(axis=1)
            if not more.all():                            # copy only when rows drop out
                rows, r, b, smallest = rows[more], r[more], b[more], smallest[more]
            b = b - W


def rows_state(x: Any) -> numpy.ndarray:
    """Exact sum states of each row of a 2-D real float array.

    Args:
        x: array-like of shape ``(rows, n)``.

    Returns:
        An ``int64`` array of shape ``(rows, STATE_SIZE)``.

    Example:
        >>> import numpy
        >>> from mpiflow.core.exact_rounding import state_values
        >>> s = rows_state(numpy.array([[1e16, 1.0, -1e16], [0.5, 0.25, 0.0]]))
        >>> state_values(s, numpy.float64).tolist()
        [1.0, 0.75]
    """
    a = numpy.asarray(x)
    if a.dtype.kind != "f" or a.dtype.itemsize not in FORMATS:
        a = a.astype(numpy.float64)
    prec = FORMATS[a.dtype.itemsize][0]
    nrows, n = a.shape
    state = numpy.zeros((nrows, STATE_SIZE), numpy.int64)
    state[:, COUNT] = n
    limbs = state[:, HEADER:]
    for start in range(0, n, CHUNK):
        piece = a[:, start:start + CHUNK]
        hi, lo = (float(piece.max()), float(piece.min())) if piece.size else (0.0, 0.0)
        if not (hi < BIG and -lo < BIG):    # NaN, infinities or huge values: count, scale
            piece = numpy.array(piece, dtype=numpy.float64)
            nan = numpy.isnan(piece)
            pos = piece == numpy.inf
            neg = piece == -numpy.inf
            state[:, NAN] += nan.sum(axis=1)
            state[:, POSINF] += pos.sum(axis=1)
            state[:, NEGINF] += neg.sum(axis=1)
            piece[nan | pos | neg] = 0.0
            big = numpy.abs(piece) >= BIG
            if big.any():
                _rows_finite(numpy.where(big, piece * 2.0 ** -BIG_SHIFT, 0.0), limbs,
                             BIG_SHIFT, prec)
                piece[big] = 0.0
        _rows_finite(piece, limbs, 0, prec)
    # a sum of only -0.0 is -0.0: look only at the rows whose exact sum is zero
    zero = numpy.flatnonzero(~limbs.any(axis=1))
    if zero.size:
        sub = a[zero]
        with numpy.errstate(invalid="ignore"):
            state[zero, NOT_NEGZERO] = ~((sub == 0) & numpy.signbit(sub)).all(axis=1)
    state[:, NOT_NEGZERO] |= limbs.any(axis=1)
    state[:, NOT_NEGZERO] |= (state[:, NAN] + state[:, POSINF] + state[:, NEGINF]) > 0
    state[:, NOT_NEGZERO] &= n > 0
    return state
