"""What a benchmark run measures: message sizes, iteration counts, and its settings (pure).

Nothing here communicates, so every rule is unit-testable without MPI.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "KNEE_BYTES",
    "Settings",
    "format_bytes",
    "iterations",
    "message_sizes",
    "parse_bytes",
]

# Above this size the iteration count falls in proportion to the size, so that every timed
# batch moves about the same number of bytes (OSU switches to fewer iterations at 8 KiB).
KNEE_BYTES = 64 * 1024

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20,
          "mb": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}


def parse_bytes(text: str) -> int:
    """Read a byte count such as ``8``, ``4096``, ``64K``, ``1MiB`` or ``64 MiB`` (binary units).

    Args:
        text: a non-negative integer with an optional unit (B, K/KiB, M/MiB, G/GiB).

    Returns:
        The number of bytes.

    Raises:
        ValueError: ``text`` is not a byte count.
    """
    match = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise ValueError(f"not a byte count: {text!r} (use e.g. 8, 64K, 1MiB)")
    return int(match.group(1)) * _UNITS[unit]


def format_bytes(nbytes: int) -> str:
    """Write a byte count compactly: ``8 B``, ``64 KiB``, ``1 MiB``, ``1536 B`` (exact only)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def message_sizes(min_bytes: int, max_bytes: int, factor: int = 2) -> list[int]:
    """List the message sizes of a run: ``min_bytes * factor**k`` up to ``max_bytes``.

    ``max_bytes`` itself is always included, so a run reaches the size it was asked for even
    when it is not on the geometric ladder.

    Args:
        min_bytes: the first size (> 0).
        max_bytes: the last size (>= ``min_bytes``).
        factor: the ratio between consecutive sizes (2 for powers of two, 4 for powers of 4).

    Returns:
        The sizes in bytes, ascending, without repeats.

    Raises:
        ValueError: a bound is not positive, they are reversed, or ``factor`` < 2.
    """
    if min_bytes <= 0 or max_bytes < min_bytes:
        raise ValueError(f"need 0 < min_bytes <= max_bytes, got {min_bytes} and {max_bytes}")
    if factor < 2:
        raise ValueError(f"the size factor must be at least 2, got {factor}")
    sizes, size = [], min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size *= factor
    if sizes[-1] != max_bytes:
        sizes.append(max_bytes)
    return sizes


def iterations(nbytes: int, base: int, floor: int = 1, knee: int = KNEE_BYTES) -> int:
    """The number of iterations of one timed batch (or of the warm-up) for a message size.

    Up to ``knee`` bytes every batch runs ``base`` iterations; above it the count falls in
    proportion to the size (a constant volume ``base * knee`` per batch), but never below
    ``floor``, nor above ``base``.

    Args:
        nbytes: the message size in bytes.
        base: the count for small messages (``--iters`` or ``--warmup``).
        floor: the least count for the largest messages.
        knee: the size from which the count decreases.

    Returns:
        The iteration count (at least ``min(base, floor)``, and 0 only when ``base`` is 0).
    """
    if base <= 0:
        return 0
    if nbytes <= knee:
        return base
    return min(base, max(floor, base * knee // nbytes))


@dataclass(frozen=True)
class Settings:
    """Everything that decides what a run measures; the command line fills it in.

    Attributes:
        ops: the benchmark cases to run, by name, in order.
        sizes: the message sizes in bytes.
        iters: timed iterations per batch for small messages (see :func:`iterations`).
        warmup: warm-up iterations per side and size for small messages.
        rounds: timed batches per side and size, mpiflow and raw alternating.
        stat: how the batches of a side are summarized: ``"min"`` or ``"median"``.
        dtype: the numpy dtype name of the buffers.
        device: where the buffers live (only ``"cpu"`` so far).
        min_iters: the least timed iterations of a batch for the largest messages.
    """

    ops: tuple[str, ...]
    sizes: tuple[int, ...]
    iters: int = 1000
    warmup: int = 100
    rounds: int = 16
    stat: str = "min"
    dtype: str = "float32"
    device: str = "cpu"
    min_iters: int = 10

    def timed_iterations(self, nbytes: int) -> int:
        """Timed iterations of one batch at ``nbytes``."""
        return iterations(nbytes, self.iters, min(self.iters, self.min_iters))

    def warmup_iterations(self, nbytes: int) -> int:
        """Warm-up iterations per side at ``nbytes``."""
        return iterations(nbytes, self.warmup, min(self.warmup, 2))
