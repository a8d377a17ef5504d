"""Rounding exact sum states to floats: once, to nearest with ties to even.

:func:`state_value` rounds one state with Python integers; :func:`state_values` rounds many at
once, vectorized over their limbs. Both follow IEEE's rules for NaN, the infinities and the
sign of zero, and divide exactly first when asked (a mean). :func:`round_ratio` is the
rounding of an exact ratio of integers that both use.

Pure numpy; no MPI.

Example:
    >>> from mpiflow.core.exact_rounding import round_ratio
    >>> round_ratio(2, 3, "float32")
    0.6666666865348816
"""

from __future__ import annotations

import math
from typing import Any

import numpy

from .exact_state import (
    COUNT,
    FORMATS,
    HEADER,
    LIMB_BITS,
    LIMB_MASK,
    NAN,
    NEGINF,
    NOT_NEGZERO,
    POSINF,
    SCALE,
    STATE_SIZE,
    state_to_int,
)

__all__ = ["round_ratio", "state_value", "state_values"]


def round_ratio(num: int, den: int, dtype: Any) -> float:
    """``num / den`` correctly rounded (to nearest, ties to even) to a float format.

    Args:
        num: numerator (any sign).
        den: positive denominator.
        dtype: float16, float32 or float64.

    Returns:
        A Python float holding the rounded value exactly (``inf`` on overflow; ``+0.0`` for 0).

    Example:
        >>> round_ratio(1, 3, "float16")
        0.333251953125
    """
    prec, emin, emax = FORMATS[numpy.dtype(dtype).itemsize]
    if num == 0:
        return 0.0
    sign = -1.0 if num < 0 else 1.0
    num = abs(num)
    # e with 2**e <= num/den < 2**(e + 1)
    e = num.bit_length() - den.bit_length()
    if (num << max(-e, 0)) < (den << max(e, 0)):
        e -= 1
    quantum = max(e, emin) - prec + 1          # exponent of the result's last bit
    if quantum >= 0:
        m, rem = divmod(num, den << quantum)
        unit = den << quantum
    else:
        m, rem = divmod(num << -quantum, den)
        unit = den
    twice = 2 * rem
    if twice > unit or (twice == unit and m & 1):
        m += 1
    if m.bit_length() + quantum > emax + 1:
        return sign * math.inf
    return sign * math.ldexp(m, quantum)


def state_value(state: numpy.ndarray, dtype: Any, *, divisor: int = 1,
                nan_as_zero: bool = False) -> numpy.generic:
    """The correctly rounded value of a sum state (divided by ``divisor``) in ``dtype``.

    IEEE rules for the special values: any NaN, or both infinities, give NaN; one infinity
    wins over finite values; an exact zero is ``-0.0`` only when every element was ``-0.0``.

    Args:
        state: a state from :func:`sum_state` (or a sum of states).
        dtype: the result's float dtype.
        divisor: a positive integer to divide by exactly (``mean``: the element count);
            0 gives NaN.
        nan_as_zero: count NaNs as zeros (``nansum``).

    Returns:
        A numpy scalar of ``dtype``.
    """
    dt = numpy.dtype(dtype)
    s = [int(v) for v in state[:HEADER]]
    if (s[NAN] and not nan_as_zero) or (s[POSINF] and s[NEGINF]) or divisor == 0:
        return dt.type(math.nan)
    if s[POSINF] or s[NEGINF]:
        return dt.type(math.inf if s[POSINF] else -math.inf)
    total = state_to_int(state)
    if total == 0:
        negzero = s[COUNT] > 0 and not s[NOT_NEGZERO]
        return dt.type(-0.0 if negzero else 0.0)
    return dt.type(round_ratio(total, divisor << SCALE, dt))


def _standardize(limbs: numpy.ndarray) -> None:
    """Carry every limb but the top one into ``[0, 2**24)`` in place (rows on the first axis).

    A few plain passes shrink the carries to -1, 0 or 1; a carry can then ripple through a run
    of limbs (0s for a borrow, ``2**24 - 1`` for a carry), which a prefix scan of each limb's
    carry map (carry in -> carry out) resolves in ``log2(limbs)`` vectorized steps.
    """
    body = limbs[:, :-1]
    passes = 0
    while True:
        carry = body >> LIMB_BITS
        if not carry.any():
            return
        if passes >= 4 and ((body >= -1) & (body <= LIMB_MASK + 1)).all():
            break   # long ripples left: scan them
        body &= LIMB_MASK
        limbs[:, 1:] += carry
        passes += 1
    rows = numpy.flatnonzero(carry.any(axis=1))
    d = body[rows]
    ins = numpy.arange(-1, 2)
    # maps[r, k, c + 1]: the carry out of limb k for a carry c into it
    maps = (d[:, :, None] + ins) >> LIMB_BITS
    step = 1
    while step < d.shape[1]:
        maps[:, step:] = numpy.take_along_axis(maps[:, step:], maps[:, :-step] + 1, axis=2)
        step *= 2
    out = maps[:, :, 1]                              # carry out of limb k, none into limb 0
    into = numpy.concatenate([numpy.zeros((len(rows), 1), numpy.int64), out[:, :-1]], axis=1)
    body[rows] = d + into - (out << LIMB_BITS)
    limbs[rows, -1] += out[:, -1]


def state_values(states: numpy.ndarray, dtype: Any, *, divisor: int = 1,
                 nan_as_zero: bool = False) -> numpy.ndarray:
    """:func:`state_value` of each state along the last axis; the result drops that axis.

    Vectorized over the states: the limbs are carried, divided by ``divisor`` (long division,
    limb by limb) and the ``precision + 1`` bits below the leading one are cut out with a
    sticky bit, so every value is rounded once, to nearest with ties to even.

    Example:
        >>> import numpy
        >>> from mpiflow.core.exact_sum import sum_state
        >>> s = numpy.stack([sum_state(numpy.array([1.0, 2.0])), sum_state(numpy.array([]))])
        >>> state_values(s, numpy.float64, divisor=3).tolist()
        [1.0, 0.0]
    """
    dt = numpy.dtype(dtype)
    prec, emin, emax = FORMATS[dt.itemsize]
    flat = numpy.asarray(states, numpy.int64).reshape(-1, STATE_SIZE)
    rows = flat.shape[0]
    # one extra low bit (units of 2**-1075), so the quotient's fraction only ever feeds sticky
    full = flat[:, HEADER:]
    used = numpy.flatnonzero(full.any(axis=0))
    # work on the limbs in use only (plus room for carries above and quotient digits below)
    base = max(int(used[0]) - 4, 0) if used.size else 0
    stop = int(used[-1]) + 1 if used.size else 1
    limbs = numpy.zeros((rows, stop - base + 5), numpy.int64)
    limbs[:, :stop - base] = full[:, base:stop] * 2
    # balanced digits first (no long ripples): the sign is that of the top non-zero digit;
    # positive rows then standardize with carries confined to the value's own digits
    for _ in range(limbs.shape[1]):
        carry = (limbs[:, :-1] + (1 << (LIMB_BITS - 1))) >> LIMB_BITS
        if not carry.any():
            break
        limbs[:, :-1] -= carry << LIMB_BITS
        limbs[:, 1:] += carry
    nonzero = limbs != 0
    top = limbs.shape[1] - 1 - numpy.argmax(nonzero[:, ::-1], axis=1)
    negative = numpy.take_along_axis(limbs, top[:, None], axis=1)[:, 0] < 0
    limbs[negative] = -limbs[negative]
    _standardize(limbs)
    frac = numpy.zeros(rows, bool)
    if divisor > 1:
        rem = numpy.zeros(rows, numpy.int64)
        for k in range(limbs.shape[1] - 1, -1, -1):
            cur = (rem << LIMB_BITS) + limbs[:, k]
            limbs[:, k] = cur // divisor
            rem = cur % divisor
        frac = rem != 0
    nonzero = limbs != 0
    live = nonzero.any(axis=1)
    top = limbs.shape[1] - 1 - numpy.argmax(nonzero[:, ::-1], axis=1)
    lead = numpy.take_along_axis(limbs, top[:, None], axis=1)[:, 0]
    nbits = numpy.frexp(numpy.maximum(lead, 1).astype(numpy.float64))[1].astype(numpy.int64)
    msb = LIMB_BITS * (top + base) + nbits - 1             # bit index of the leading one
    exponent = msb - (SCALE + 1)
    quantum = numpy.maximum(exponent, emin) - prec + 1     # power of two of the last kept bit
    low = quantum + SCALE                                  # bit index of the rounding bit
    k0, o = low // LIMB_BITS - base, low % LIMB_BITS
    # the window [low, msb] holds at most prec + 1 bits: four limbs cover it without overflow;
    # limbs outside the slice are zero (k0 >= -3 since msb lies inside it)
    width = limbs.shape[1]
    pad = numpy.concatenate([numpy.zeros((rows, 4), numpy.int64), limbs,
                             numpy.zeros((rows, 4), numpy.int64)], axis=1)
    pick = [numpy.take_along_axis(pad, numpy.clip(k0 + j + 4, 0, width + 7)[:, None],
                                  axis=1)[:, 0] for j in range(4)]
    window = ((pick[0] >> o) + (pick[1] << (LIMB_BITS - o)) + (pick[2] << (2 * LIMB_BITS - o))
              + (pick[3] << (3 * LIMB_BITS - o)))
    below = numpy.concatenate([numpy.zeros((rows, 1), numpy.int64),
                               numpy.cumsum(nonzero, axis=1)], axis=1)
    sticky = (frac | (numpy.take_along_axis(below, numpy.clip(k0, 0, width)[:, None],
                                            axis=1)[:, 0] > 0)
              | ((pick[0] & ((1 << o) - 1)) != 0))
    mant = window >> 1
    up = ((window & 1) == 1) & (sticky | ((mant & 1) == 1))
    mant = mant + up
    with numpy.errstate(over="ignore"):
        value = numpy.ldexp(mant.astype(numpy.float64), quantum)
        # float64's bound is inf itself (ldexp overflowed already)
        value = numpy.where(value >= numpy.ldexp(1.0, emax + 1), numpy.inf, value)
    value = numpy.where(negative, -value, value)
    count, nan, pos, neg = (flat[:, i] for i in (COUNT, NAN, POSINF, NEGINF))
    zero = numpy.where((count > 0) & (flat[:, NOT_NEGZERO] == 0), -0.0, 0.0)
    value = numpy.where(live, value, zero)
    value = numpy.where(pos > 0, numpy.inf, numpy.where(neg > 0, -numpy.inf, value))
    bad = ((nan > 0) & (not nan_as_zero)) | ((pos > 0) & (neg > 0)) | (divisor == 0)
    value = numpy.where(bad, numpy.nan, value)
    with numpy.errstate(over="ignore"):
        return value.astype(dt).reshape(numpy.shape(states)[:-1])
