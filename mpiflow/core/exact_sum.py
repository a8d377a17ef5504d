"""Exact, order-independent sums of floating-point arrays (the reproducible-reduction kernel).

A sum is carried as a fixed-size ``int64`` *state*: a few counts (elements, NaNs, +inf, -inf,
whether any element is not ``-0.0``) and the exact finite sum as an integer number of
``2**-1074`` units, written in signed base-``2**24`` limbs. Integer addition is associative,
so states from any split of the data (blocks, ranks, layouts) add to the same state, and one
correctly rounded conversion (:func:`state_value`) gives the same bits for every split.

The kernel works on blocks of 32K elements and never looks at single bits. For a block whose
largest magnitude is below ``2**E`` it extracts the part of every element on the grid of
``2**b`` with ``b = E - W``: ``t = x + M`` for ``M = 1.5 * 2**(b + 52)`` rounds ``x`` to a
multiple of ``2**b`` exactly, and lands in ``M``'s binade, where a float's bit pattern grows by
one per ``2**b``; so the integer sum of the bit patterns, less ``M``'s, counts the ``2**b`` units
exactly (``|q| <= 2**(b + W)`` and ``2**15`` elements keep it below ``2**62``). The remainders
``x - (t - M)`` (exact) go through the same step with ``b - W`` until the grid reaches the last
bit of the block's smallest magnitude (then none is left: the loop ends without looking), or
until none is left (the few non-zero remainders are compressed first). Float16/32 blocks are
widened to float64, which is exact.

Two fast paths cover most blocks: float64 blocks whose range two levels cover skip the dense
remainder (:func:`_fast64`); float16/32 blocks are summed in float64 groups small enough to be
exact in any order (:func:`_rows_narrow`). Other blocks take the general levels.

This module holds the flat kernel (:func:`sum_state`) and is the facade of the others: the
state's layout and limbs (:mod:`.exact_state`), the per-row kernel (:mod:`.exact_rows`) and
the rounding (:mod:`.exact_rounding`).

Pure numpy; no MPI (the communication layers all-reduce states as integers).

Example:
    >>> import numpy
    >>> from mpiflow.core.exact_sum import sum_state, state_value
    >>> x = numpy.array([1e16, 1.0, -1e16, 1.0])
    >>> float(state_value(sum_state(x), numpy.float64))
    2.0
"""

from __future__ import annotations

import math
from typing import Any

import numpy

from .exact_rounding import round_ratio, state_value, state_values
from .exact_rows import rows_state
from .exact_state import (
    BIG,
    BIG_SHIFT,
    CHUNK,
    COUNT,
    FORMATS,
    HALF_MANTISSA,
    HEADER,
    LIMB_BITS,
    NAN,
    NEGINF,
    NLIMBS,
    NOT_NEGZERO,
    POSINF,
    SCALE,
    STATE_SIZE,
    W,
    normalize,
    state_from_int,
    state_to_int,
)

__all__ = [
    "STATE_SIZE", "COUNT", "NAN", "POSINF", "NEGINF", "NOT_NEGZERO", "LIMB_BITS", "NLIMBS",
    "sum_state", "rows_state", "state_value", "state_values", "state_from_int", "state_to_int",
    "round_ratio", "normalize",
]

FAST_CHUNK = 1 << 16        # elements per block of the fast paths
FAST_W = 46                 # bits per level of the float64 fast path: 2**16 * 2**46 <= 2**62


class _Buffers:
    """Scratch arrays reused across blocks, so the loop allocates nothing per block."""

    def __init__(self) -> None:
        self.wide = numpy.empty(FAST_CHUNK, numpy.float64)
        self.t = numpy.empty(FAST_CHUNK, numpy.float64)
        self.r = numpy.empty(CHUNK, numpy.float64)
        self.mask = numpy.empty(CHUNK, bool)
        self.magnitude: dict[numpy.dtype, numpy.ndarray] = {}

    def abs(self, block: numpy.ndarray) -> numpy.ndarray:
        """``|block|`` in a buffer of the block's dtype (float64: ``t``, free until used)."""
        buf = self.t if block.dtype == numpy.float64 else self.magnitude.get(block.dtype)
        if buf is None:
            buf = self.magnitude[block.dtype] = numpy.empty(FAST_CHUNK, block.dtype)
        return numpy.abs(block, out=buf[:block.size])


def _clean(block: numpy.ndarray, counts: numpy.ndarray) -> tuple[numpy.ndarray, int]:
    """Count and zero the non-finite elements; sum the huge ones apart (scaled, exactly).

    Returns:
        The block as float64 with only finite magnitudes below ``BIG``, and the exact sum of the
        removed huge elements in units of ``2**-1074``.
    """
    a = numpy.array(block, dtype=numpy.float64)
    nan = numpy.isnan(a)
    pos = a == numpy.inf
    neg = a == -numpy.inf
    counts[NAN] += int(nan.sum())
    counts[POSINF] += int(pos.sum())
    counts[NEGINF] += int(neg.sum())
    a[nan | pos | neg] = 0.0
    big = numpy.abs(a) >= BIG
    extra = 0
    if big.any():
        # scaling by a power of two is exact for these magnitudes
        extra = _finite_sum(a[big] * 2.0 ** -BIG_SHIFT, _Buffers()) << BIG_SHIFT
        a[big] = 0.0
    return a, extra


def _finite_sum(x: numpy.ndarray, bufs: _Buffers, counts: numpy.ndarray | None = None) -> int:
    """The exact sum of a 1-D float array, in units of ``2**-1074`` (a Python int).

    Each block takes a fast path when its range allows one (:func:`_fast64`, :func:`_rows_narrow`),
    else the general levels of :func:`_block_sum`. float16/32 blocks on the fast path leave exact
    float64 partial sums, which are summed exactly at the end. The fast paths take blocks of
    ``FAST_CHUNK`` elements (fewer numpy calls), the general levels pieces of ``CHUNK``.
    """
    acc = 0
    wide64 = x.dtype == numpy.float64
    prec, emin, _ = FORMATS[x.dtype.itemsize]
    partials: list[numpy.ndarray] = []
    for start in range(0, x.size, FAST_CHUNK):
        block = x[start:start + FAST_CHUNK]
        magnitude = bufs.abs(block)
        hi, lo = float(magnitude.max()), float(magnitude.min())
        if hi < BIG:
            if hi == 0.0:
                continue
            if lo == 0.0:
                lo = _smallest_nonzero(magnitude)
            if wide64:
                fast = _fast64(block, hi, lo, bufs)
                if fast is not None:
                    acc += fast
                    continue
            else:
                part = _rows_narrow(block, hi, lo, prec, emin, bufs)
                if part is not None:
                    partials.append(part)
                    continue
        for first in range(0, block.size, CHUNK):
            acc += _general(block[first:first + CHUNK], prec, bufs, counts)
    if partials:
        acc += _finite_sum(numpy.concatenate(partials), _Buffers())
    return acc


def _general(block: numpy.ndarray, prec: int, bufs: _Buffers,
             counts: numpy.ndarray | None) -> int:
    """Exact sum of a block of at most ``CHUNK`` elements by the general levels."""
    wide64 = block.dtype == numpy.float64
    magnitude = bufs.abs(block)
    hi, lo = float(magnitude.max()), float(magnitude.min())
    own = not wide64                # the caller's data are never written
    extra = 0
    if not hi < BIG:                # NaN, infinities or huge values
        if counts is None:
            raise AssertionError("non-finite values reached the finite kernel")
        block, extra = _clean(block, counts)
        magnitude = numpy.abs(block)
        hi, lo = float(magnitude.max()), float(magnitude.min())
        own = True
    elif not wide64:
        wide = bufs.wide[:block.size]
        numpy.copyto(wide, block)
        block = wide
    if hi == 0.0:
        return extra
    return extra + _block_sum(block, math.frexp(hi)[1] - W, lo, prec, bufs,
                              dense_first=wide64, own=own)


def _smallest_nonzero(magnitude: numpy.ndarray) -> float:
    """The smallest non-zero value of a non-negative float array (0.0 when all are zero).

    Overwrites ``magnitude``: as unsigned integers, ``bits - 1`` wraps zeros to the largest
    value and keeps the order of the others.
    """
    kind = numpy.uint64 if magnitude.dtype.itemsize == 8 else (
        numpy.uint32 if magnitude.dtype.itemsize == 4 else numpy.uint16)
    bits = magnitude.view(kind)
    numpy.subtract(bits, kind(1), out=bits)
    low = bits.min()
    if low == numpy.iinfo(kind).max:
        return 0.0
    return float(numpy.array(low + kind(1), kind).view(magnitude.dtype))


def _fast64(x: numpy.ndarray, hi: float, lo: float, bufs: _Buffers) -> int | None:
    """Exact sum of a float64 block in two levels, or None when two do not cover its range.

    The second level's input ``r + M2`` (``r = x - q1``) comes from one subtraction:
    ``t1 - (M1 + M2) = q1 - M2`` is exact, and so is the rounding of ``x - (q1 - M2)``, whose
    real value is ``r + M2``; so the dense remainder is never formed.
    """
    b1 = math.frexp(hi)[1] - FAST_W
    b2 = b1 - FAST_W
    if b2 < -SCALE or not lo >= math.ldexp(1.0, b2 + 52):
        return None                     # bits below the second level's grid
    m = x.size
    m1 = math.ldexp(1.5, b1 + 52)
    m2 = math.ldexp(1.5, b2 + 52)
    t = bufs.t[:m]
    numpy.add(x, m1, out=t)
    raw1 = int(t.view(numpy.int64).sum())
    numpy.subtract(t, m1 + m2, out=t)   # q1 - M2 (exact: both sides on the grid of 2**b1)
    numpy.subtract(x, t, out=t)         # fl(r + M2)
    raw2 = int(t.view(numpy.int64).sum())
    u1 = ((raw1 - m * (((b1 + 1075) << 52) | HALF_MANTISSA) + _HALF) & _WRAP) - _HALF
    u2 = ((raw2 - m * (((b2 + 1075) << 52) | HALF_MANTISSA) + _HALF) & _WRAP) - _HALF
    return (u1 << (b1 + SCALE)) + (u2 << (b2 + SCALE))


def _rows_narrow(x: numpy.ndarray, hi: float, lo: float, prec: int, emin: int,
                 bufs: _Buffers) -> numpy.ndarray | None:
    """Exact float64 partial sums of a float16/32 block, or None when its range is too wide.

    Every element is a multiple of ``u``, the last bit of the smallest non-zero magnitude, and
    below ``2**E``; so any sum of ``k <= 2**53 * u / 2**E`` of them, in any order, is a multiple
    of ``u`` below ``2**53 * u``: exact in float64. The block is widened and summed in groups
    of ``k`` (a BLAS matrix-vector product; its order does not matter).
    """
    e = math.frexp(hi)[1]
    unit = max(math.frexp(lo)[1] - 1, emin) - prec + 1
    logk = min(53 + unit - e, _LOG_CHUNK)
    if logk < _MIN_LOG_GROUP:
        return None
    k = 1 << logk
    m = x.size
    wide = bufs.wide[:m]
    numpy.copyto(wide, x)
    whole = m - m % k
    parts = [_group_sums(wide[:whole], k)] if whole else []
    if whole < m:
        parts.append(numpy.array([wide[whole:].sum()]))
    return parts[0] if len(parts) == 1 else numpy.concatenate(parts)


def _group_sums(wide: numpy.ndarray, k: int) -> numpy.ndarray:
    """Sums of ``wide.size // k`` disjoint groups of ``k`` elements (float64, BLAS gemv)."""
    ones = _ONES.get(k)
    if ones is None:
        ones = _ONES[k] = numpy.ones(k)
    if k >= 256:
        return wide.reshape(-1, k) @ ones           # rows
    return ones @ wide.reshape(k, -1)               # strided columns: long inner loops


_ONES: dict[int, numpy.ndarray] = {}
_LOG_CHUNK = FAST_CHUNK.bit_length() - 1
_MIN_LOG_GROUP = 3


def _block_sum(r: numpy.ndarray, b: int, smallest: float, prec: int, bufs: _Buffers,
               dense_first: bool, own: bool) -> int:
    """Exact sum of one float64 block whose magnitudes are below ``2**(b + W)``.

    Args:
        r: the block.
        b: the first level's unit is ``2**b``.
        smallest: the smallest magnitude in the block: once ``2**b`` is at most its last bit
            (of ``prec`` bits), no remainder is left and the loop stops without looking.
        prec: the precision of the data's own format (11, 24 or 53).
        bufs: scratch buffers.
        dense_first: keep the first level's remainders dense (float64 data has bits below
            any first level).
        own: ``r`` is scratch that the last level may overwrite.
    """
    acc = 0
    ldexp = math.ldexp
    m = r.size
    dense = dense_first
    spare = [bufs.t, bufs.r]
    while True:
        b = max(b, -SCALE)
        big_m = ldexp(1.5, b + 52)
        last = b == -SCALE or smallest >= ldexp(1.0, b + prec - 1)
        t = r if last and own else spare[0][:m]    # in place streams faster
        numpy.add(r, big_m, out=t)
        # Every t lies in M's binade, where a float's bits grow by one per 2**b: the integer
        # sum of the bits is the exact count of 2**b units (mod 2**64; |count| < 2**62).
        raw = int(t.view(numpy.int64).sum()) - m * (((b + 1075) << 52) | HALF_MANTISSA)
        units = ((raw + _HALF) & _WRAP) - _HALF
        if units:
            acc += units << (b + SCALE)
        if last:
            return acc                  # nothing below 2**b remains in any element
        numpy.subtract(t, big_m, out=t)  # q, the part taken at this level
        if dense:
            numpy.subtract(r, t, out=t)
            r = t
            own = True
            spare.reverse()
            dense = False
        else:
            nz = numpy.flatnonzero(numpy.not_equal(r, t, out=bufs.mask[:m]))
            if nz.size == 0:
                return acc
            if nz.size * 4 > m:
                nxt = numpy.empty(m)
                numpy.subtract(r, t, out=nxt)
                r = nxt
            else:
                r = r[nz] - t[nz]
                m = r.size
            own = True
        b -= W


_HALF = 1 << 63
_WRAP = (1 << 64) - 1


def _negzero_flag(x: numpy.ndarray) -> int:
    """1 when some element is not ``-0.0`` (a sum of only ``-0.0`` is ``-0.0``)."""
    return int(not bool(numpy.all((x == 0) & numpy.signbit(x)))) if x.size else 0


def sum_state(x: Any) -> numpy.ndarray:
    """The exact sum state of all elements of a real float array (float16, float32, float64).

    Args:
        x: array-like of a real floating dtype (other dtypes are converted to float64).

    Returns:
        An ``int64`` array of ``STATE_SIZE`` values; states add elementwise (integers).

    Example:
        >>> import numpy
        >>> s = sum_state(numpy.array([0.1, 0.2, 0.3], numpy.float32))
        >>> float(state_value(s, numpy.float32))
        0.6000000238418579
    """
    a = numpy.asarray(x)
    if a.dtype.kind != "f" or a.dtype.itemsize not in FORMATS:
        a = a.astype(numpy.float64)
    a = numpy.ascontiguousarray(a).reshape(-1)
    counts = numpy.zeros(HEADER, numpy.int64)
    total = _finite_sum(a, _Buffers(), counts)
    counts[COUNT] = a.size
    counts[NOT_NEGZERO] = 1 if total else _negzero_flag(a)
    return numpy.concatenate([counts, state_from_int(total)[HEADER:]])
