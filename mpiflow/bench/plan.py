"""What a benchmark run measures: message sizes, iteration counts, and its settings (pure).

Nothing here communicates, so every rule is unit-testable without MPI.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "CHECKPOINT_BYTES",
    "GRAD_RANGES",
    "GRAD_TENSORS",
    "KNEE_BYTES",
    "REDIST_SIZES",
    "SUITES",
    "Settings",
    "format_bytes",
    "iterations",
    "message_sizes",
    "parse_bytes",
    "parse_range",
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


SUITES = ("osu", "redistribution", "grad_sync", "ddp", "checkpoint", "watchdog",
          "to_global_check")
"""The tables a run can print, in the order they run (``--suite``)."""

# The defaults of the suites beyond OSU's (the issues' sizes).
REDIST_SIZES = (1 << 20, 64 << 20)
GRAD_TENSORS = 100
GRAD_RANGES = ((1 << 10, 1 << 20), (256, 4096))  # elements: the goal's model, then a small one
CHECKPOINT_BYTES = 256 << 20


def parse_range(text: str) -> tuple[int, int]:
    """Read an element range ``LO:HI`` such as ``1K:1M`` (K = 1024, as :func:`parse_bytes`).

    Raises:
        ValueError: not two counts separated by ``:``, or not ``0 < LO <= HI``.
    """
    parts = text.split(":")
    if len(parts) != 2:
        raise ValueError(f"not a range: {text!r} (use e.g. 1K:1M)")
    lo, hi = (parse_bytes(p) for p in parts)
    if not 0 < lo <= hi:
        raise ValueError(f"need 0 < LO <= HI in {text!r}")
    return lo, hi


@dataclass(frozen=True)
class Settings:
    """Everything that decides what a run measures; the command line fills it in.

    Attributes:
        ops: the OSU cases to run, by name, in order.
        sizes: the OSU message sizes in bytes.
        iters: timed iterations per batch for small messages (see :func:`iterations`).
        warmup: warm-up iterations per side and size for small messages.
        rounds: timed batches per side and size, the sides alternating.
        stat: how the batches of a side are summarized: ``"min"`` or ``"median"``.
        dtype: the numpy dtype name of the buffers (OSU cases).
        device: where the buffers live: ``"cpu"`` or ``"cuda"`` (OSU cases only).
        min_iters: the least timed iterations of a batch for the largest messages.
        suites: the tables to produce, from :data:`SUITES`, in order.
        redist_sizes: the tensor sizes in bytes of the redistribution suite.
        grad_tensors: parameter tensors of each gradient-sync model.
        grad_ranges: per gradient-sync model, its least and largest tensor in elements
            (float32, log-spaced in between).
        grad_fuse_bytes: the gradient sync's ``fused_small`` side packs the tensors smaller
            than this and all-reduces the others in place.
        grad_chunk_bytes: the ``raw_chunked`` side all-reduces the flat gradient buffer in
            pieces of this many bytes.
        ddp_layers: Linear layers of the DDP model.
        ddp_width: their input and output features.
        ddp_batch: the batch of each DDP step (rows per rank).
        ddp_bucket_mb: the bucket size of the overlapped DDP side (DDP's default: 25).
        checkpoint_bytes: the checkpointed tensor's size.
        checkpoint_dir: where the checkpoint suite writes (None: a temporary directory).
        checkpoint_repeat: timed runs per checkpoint side (the best is kept).
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
    suites: tuple[str, ...] = ("osu",)
    redist_sizes: tuple[int, ...] = REDIST_SIZES
    grad_tensors: int = GRAD_TENSORS
    grad_ranges: tuple[tuple[int, int], ...] = GRAD_RANGES
    grad_fuse_bytes: int = 256 << 10
    grad_chunk_bytes: int = 16 << 20
    ddp_layers: int = 8
    ddp_width: int = 1024
    ddp_batch: int = 32
    ddp_bucket_mb: float = 25.0
    checkpoint_bytes: int = CHECKPOINT_BYTES
    checkpoint_dir: str | None = None
    checkpoint_repeat: int = 3

    def timed_iterations(self, nbytes: int) -> int:
        """Timed iterations of one batch at ``nbytes``."""
        return iterations(nbytes, self.iters, min(self.iters, self.min_iters))

    def warmup_iterations(self, nbytes: int) -> int:
        """Warm-up iterations per side at ``nbytes``."""
        return iterations(nbytes, self.warmup, min(self.warmup, 2))
