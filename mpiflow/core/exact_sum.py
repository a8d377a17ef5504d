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

__all__ = [
    "STATE_SIZE", "COUNT", "NAN", "POSINF", "NEGINF", "NOT_NEGZERO", "LIMB_BITS", "NLIMBS",
    "sum_state", "rows_state", "state_value", "state_values", "state_from_int", "state_to_int",
    "round_ratio", "normalize",
]

W = 47                      # bits per extraction level: 2**15 * 2**47 <= 2**62 (int64 sums)
CHUNK = 1 << 15             # elements per block (cache-sized, and the exactness bound)
FAST_CHUNK = 1 << 16        # elements per block of the fast paths
FAST_W = 46                 # bits per level of the float64 fast path: 2**16 * 2**46 <= 2**62
SCALE = 1074                # the state counts units of 2**-1074, float64's smallest subnormal
BIG = 2.0 ** 900            # larger magnitudes are summed scaled by 2**-BIG_SHIFT (M stays finite)
BIG_SHIFT = 256
LIMB_BITS = 24
LIMB_MASK = (1 << LIMB_BITS) - 1
NLIMBS = 92                 # 92 * 24 = 2208 bits >= 1074 + 1024 + 63 + slack
COUNT, NAN, POSINF, NEGINF, NOT_NEGZERO = range(5)
HEADER = 5
STATE_SIZE = HEADER + NLIMBS

#: (precision, minimum normal exponent, maximum exponent) of each float format
_FORMATS = {2: (11, -14, 15), 4: (24, -126, 127), 8: (53, -1022, 1023)}


# -- flat sums ---------------------------------------------------------------------------------
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
    prec, emin, _ = _FORMATS[x.dtype.itemsize]
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
    u1 = ((raw1 - m * (((b1 + 1075) << 52) | _HALF_MANTISSA) + _HALF) & _WRAP) - _HALF
    u2 = ((raw2 - m * (((b2 + 1075) << 52) | _HALF_MANTISSA) + _HALF) & _WRAP) - _HALF
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
        raw = int(t.view(numpy.int64).sum()) - m * (((b + 1075) << 52) | _HALF_MANTISSA)
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
_HALF_MANTISSA = 1 << 51    # the bits of 1.5 * 2**e are ((e + 1023) << 52) | 2**51


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
    if a.dtype.kind != "f" or a.dtype.itemsize not in _FORMATS:
        a = a.astype(numpy.float64)
    a = numpy.ascontiguousarray(a).reshape(-1)
    counts = numpy.zeros(HEADER, numpy.int64)
    total = _finite_sum(a, _Buffers(), counts)
    counts[COUNT] = a.size
    counts[NOT_NEGZERO] = 1 if total else _negzero_flag(a)
    return numpy.concatenate([counts, state_from_int(total)[HEADER:]])


# -- limbs -------------------------------------------------------------------------------------
def state_from_int(total: int) -> numpy.ndarray:
    """A state whose sum is ``total * 2**-1074`` (counts zero), as signed base-2**24 limbs."""
    state = numpy.zeros(STATE_SIZE, numpy.int64)
    if total:
        mag = abs(total)
        raw = numpy.frombuffer(mag.to_bytes(NLIMBS * 3, "little"), numpy.uint8)
        raw = raw.reshape(NLIMBS, 3).astype(numpy.int64)
        limbs = raw[:, 0] | (raw[:, 1] << 8) | (raw[:, 2] << 16)
        state[HEADER:] = limbs if total > 0 else -limbs
    return state


def state_to_int(state: numpy.ndarray) -> int:
    """The exact sum of a state, in units of ``2**-1074``."""
    total = 0
    for limb in reversed(state[HEADER:].tolist()):
        total = (total << LIMB_BITS) + limb
    return total


def normalize(limbs: numpy.ndarray) -> None:
    """Carry limbs (last axis) into ``[0, 2**24)`` in place, the top limb keeping the sign."""
    for _ in range(3):
        carry = limbs[..., :-1] >> LIMB_BITS
        if not carry.any():
            return
        limbs[..., :-1] &= LIMB_MASK
        limbs[..., 1:] += carry


# -- rows --------------------------------------------------------------------------------------
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
            units = t.view(numpy.int64).sum(axis=1) - (((b + 1075) << 52) | _HALF_MANTISSA) * n
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
        >>> s = rows_state(numpy.array([[1e16, 1.0, -1e16], [0.5, 0.25, 0.0]]))
        >>> state_values(s, numpy.float64).tolist()
        [1.0, 0.75]
    """
    a = numpy.asarray(x)
    if a.dtype.kind != "f" or a.dtype.itemsize not in _FORMATS:
        a = a.astype(numpy.float64)
    prec = _FORMATS[a.dtype.itemsize][0]
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


# -- rounding ----------------------------------------------------------------------------------
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
    prec, emin, emax = _FORMATS[numpy.dtype(dtype).itemsize]
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
        >>> s = numpy.stack([sum_state(numpy.array([1.0, 2.0])), sum_state(numpy.array([]))])
        >>> state_values(s, numpy.float64, divisor=3).tolist()
        [1.0, 0.0]
    """
    dt = numpy.dtype(dtype)
    prec, emin, emax = _FORMATS[dt.itemsize]
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
