"""Ranks agreeing on what a ``to_global`` call means, before it moves any data.

``to_global`` is collective: every rank must pass the same placement and sbp, and, for a local
tensor, local shapes and dtypes that fit them. A rank that disagrees would otherwise run other
collectives than its peers (a hang) or receive a wrong shard (a silent wrong tensor). Each rank
contributes one fixed-size row of int64 (checksums of the placement and layouts, the dtype, the
shape) to one all-gather of the world, and every rank reads the same table, so all of them
raise the same error, or none does. Only when that table shows a disagreement do the ranks
exchange the full descriptions (a second, pickled all-gather) to say what differs.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy

from ..communication.collectives.objects import all_gather_object
from ..communication.mpi.group import world_comm
from ..core.errors import GlobalTensorError
from ..layouts.placement import Placement
from ..layouts.sbp import SbpParallel

__all__ = ["MAX_DIMS", "agree", "describe_sbp", "dtype_code"]

MAX_DIMS = 16  # dims carried in a row; a longer shape sends its checksum and -1 as ndim
_HEAD = 7  # magic, what, placement, sbp, dtype, ndim, target checksum
_MAGIC = 0x6D66_6D65_7461  # tells a row from stray data


def describe_sbp(sbp: Sequence[SbpParallel]) -> str:
    """``(S(0), B)``: a layout as the errors show it."""
    return "(" + ", ".join(str(s) for s in sbp) + ")"


@lru_cache(maxsize=1024)
def _crc(text: str) -> int:
    return int(zlib.crc32(text.encode()))


@lru_cache(maxsize=1024)
def _layout_codes(placement: Placement | None, sbp: tuple[SbpParallel, ...] | None
                  ) -> tuple[int, int]:
    """Checksums of a placement and a layout (values, hashable: computed once each)."""
    return (_crc(_placement_text(placement)), _crc("" if sbp is None else describe_sbp(sbp)))


def _placement_text(placement: Placement | None) -> str:
    return "local" if placement is None else repr(placement)


def dtype_code(dtype: Any) -> int:
    """The checksum of ``dtype`` that :func:`agree` gathers."""
    return _crc(dtype.str if isinstance(dtype, numpy.dtype) else numpy.dtype(dtype).str)


def agree(what: str, placement: Placement | None, sbp: Sequence[SbpParallel] | None,
          dtype: Any, shape: Sequence[int], target: str = ""
          ) -> tuple[list[tuple[int, ...] | None], numpy.ndarray]:
    """All-gather this rank's view of a ``to_global`` call; raise on every rank if the ranks
    disagree on the placement, the sbp or ``target`` (collective over the world).

    Args:
        what: the call, for errors ("to_global").
        placement: the placement this rank passed.
        sbp: the layout this rank passed (normalized).
        dtype: this rank's dtype.
        shape: this rank's (local or logical) shape.
        target: anything else every rank must pass alike (a global source's layout), as text.

    Returns:
        Every rank's shape (None for a shape of more than :data:`MAX_DIMS` dimensions, which
        does not fit a row: only its checksum travels) and every rank's :func:`dtype_code`.

    Raises:
        ValueError: on every rank, naming the ranks and what they passed.
    """
    row = numpy.zeros(_HEAD + MAX_DIMS, dtype=numpy.int64)
    ndim = len(shape)
    layout = None if sbp is None else tuple(sbp)
    row[:_HEAD] = (_MAGIC, _crc(what), *_layout_codes(placement, layout), dtype_code(dtype),
                   ndim if ndim <= MAX_DIMS else -1, _crc(target))
    if ndim <= MAX_DIMS:
        row[_HEAD:_HEAD + ndim] = shape
    else:
        row[_HEAD] = _crc(repr(tuple(shape)))
    table = numpy.empty((world_comm.size, row.size), dtype=numpy.int64)
    world_comm.all_gather(row, table)
    for column, field in ((1, "operation"), (2, "placement"), (3, "sbp"), (6, "source")):
        if (table[:, column] != table[0, column]).any():
            _raise_mismatch(what, field, placement, sbp, target)
    shapes = [tuple(int(n) for n in r[_HEAD:_HEAD + int(r[5])]) if r[5] >= 0 else None
              for r in table]
    return shapes, table[:, 4].copy()


def _raise_mismatch(what: str, field: str, placement: Placement | None,
                    sbp: Sequence[SbpParallel] | None, target: str) -> None:
    """Every rank saw the same table: all of them come here and raise the same error."""
    mine = (_placement_text(placement), "" if sbp is None else describe_sbp(sbp), target)
    every: list[Any] = [None] * world_comm.size
    all_gather_object(every, mine)
    groups: dict[tuple[str, str, str], list[int]] = {}
    for r, entry in enumerate(every):
        groups.setdefault(tuple(entry), []).append(r)
    lines = []
    for (p, s, t), ranks in groups.items():
        text = f"placement={p}, sbp={s}" + (f", source {t}" if t else "")
        lines.append(f"  ranks {ranks}: {text}")
    raise GlobalTensorError(
        f"{what}: the ranks passed different {field}s (every rank must pass the "
        "same placement and sbp to this collective call):\n" + "\n".join(lines))
