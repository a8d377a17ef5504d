"""The exact sum state: its layout, the constants the kernels share, and its limbs.

A state is a fixed-size ``int64`` array: ``HEADER`` counts (elements, NaNs, +inf, -inf,
whether any element is not ``-0.0``) and then the exact finite sum as an integer number of
``2**-1074`` units, written in ``NLIMBS`` signed base-``2**24`` limbs. States add elementwise.
The kernels that fill states (:mod:`.exact_sum` for flat arrays, :mod:`.exact_rows` per row)
and the rounding that reads them (:mod:`.exact_rounding`) share what is defined here.

Pure numpy; no MPI.

Example:
    >>> from mpiflow.core.exact_state import state_from_int, state_to_int
    >>> state_to_int(state_from_int(-(1 << 1074))) == -(1 << 1074)   # -1.0
    True
"""

from __future__ import annotations

import numpy

__all__ = [
    "BIG", "BIG_SHIFT", "CHUNK", "COUNT", "FORMATS", "HALF_MANTISSA", "HEADER", "LIMB_BITS",
    "LIMB_MASK", "NAN", "NEGINF", "NLIMBS", "NOT_NEGZERO", "POSINF", "SCALE", "STATE_SIZE", "W",
    "normalize", "state_from_int", "state_to_int",
]

W = 47                      # bits per extraction level: 2**15 * 2**47 <= 2**62 (int64 sums)
CHUNK = 1 << 15             # elements per block (cache-sized, and the exactness bound)
SCALE = 1074                # the state counts units of 2**-1074, float64's smallest subnormal
BIG = 2.0 ** 900            # larger magnitudes are summed scaled by 2**-BIG_SHIFT (M stays finite)
BIG_SHIFT = 256
LIMB_BITS = 24
LIMB_MASK = (1 << LIMB_BITS) - 1
NLIMBS = 92                 # 92 * 24 = 2208 bits >= 1074 + 1024 + 63 + slack
COUNT, NAN, POSINF, NEGINF, NOT_NEGZERO = range(5)
HEADER = 5
STATE_SIZE = HEADER + NLIMBS
HALF_MANTISSA = 1 << 51     # the bits of 1.5 * 2**e are ((e + 1023) << 52) | 2**51

#: (precision, minimum normal exponent, maximum exponent) of each float format, by item size
FORMATS = {2: (11, -14, 15), 4: (24, -126, 127), 8: (53, -1022, 1023)}


def state_from_int(total: int) -> numpy.ndarray:
    """A state whose sum is ``total * 2**-1074`` (counts zero), as signed base-2**24 limbs.

    Args:
        total: the exact sum, in units of ``2**-1074``.

    Returns:
        An ``int64`` array of ``STATE_SIZE`` values.

    Example:
        >>> state_from_int(3)[HEADER:HEADER + 2].tolist()
        [3, 0]
    """
    state = numpy.zeros(STATE_SIZE, numpy.int64)
    if total:
        mag = abs(total)
        raw = numpy.frombuffer(mag.to_bytes(NLIMBS * 3, "little"), numpy.uint8)
        raw = raw.reshape(NLIMBS, 3).astype(numpy.int64)
        limbs = raw[:, 0] | (raw[:, 1] << 8) | (raw[:, 2] << 16)
        state[HEADER:] = limbs if total > 0 else -limbs
    return state


def state_to_int(state: numpy.ndarray) -> int:
    """The exact sum of a state, in units of ``2**-1074``.

    Args:
        state: a state (its limbs need not be carried).

    Returns:
        A Python int.

    Example:
        >>> state_to_int(state_from_int(-5))
        -5
    """
    total = 0
    for limb in reversed(state[HEADER:].tolist()):
        total = (total << LIMB_BITS) + limb
    return total


def normalize(limbs: numpy.ndarray) -> None:
    """Carry limbs (last axis) into ``[0, 2**24)`` in place, the top limb keeping the sign.

    Args:
        limbs: signed limbs, least significant first; a few carries at most per limb.

    Example:
        >>> limbs = numpy.array([1 << 24, 0])
        >>> normalize(limbs)
        >>> limbs.tolist()
        [0, 1]
    """
    for _ in range(3):
        carry = limbs[..., :-1] >> LIMB_BITS
        if not carry.any():
            return
        limbs[..., :-1] &= LIMB_MASK
        limbs[..., 1:] += carry
