"""Placements: the device type and the ranks (a 1-D list or an N-D mesh) a global tensor lives on.

Examples:
    >>> import mpiflow as flow
    >>> p = flow.placement("cpu", [[1, 0], [3, 2]])
    >>> p.ranks.tolist()          # canonical order
    [[0, 1], [2, 3]]
    >>> p == flow.placement("cpu", [[0, 1], [2, 3]])
    True
"""

from __future__ import annotations

from typing import Any

import numpy

from ..core.errors import GlobalTensorError

__all__ = ["DEVICE_TYPES", "Placement", "placement", "set_world_size", "world_size"]

DEVICE_TYPES = ("cpu", "cuda")

# The world's size, told by the runtime when MPI starts (placements are pure values: this
# layer imports no MPI).
_world_size: int | None = None


def set_world_size(size: int) -> None:
    """Tell placements how many ranks the world has; the runtime does so when MPI starts.

    Args:
        size: the number of ranks in ``MPI.COMM_WORLD``.
    """
    global _world_size
    _world_size = int(size)


def world_size() -> int:
    """The number of ranks a placement may name.

    Raises:
        RuntimeError: MPI has not started (``import mpiflow`` starts it).
    """
    if _world_size is None:
        raise RuntimeError("placements need the world's size: import mpiflow to start MPI first")
    return _world_size


class Placement:
    """Where a global tensor lives: a device type and a mesh of world ranks.

    Args:
        type: "cpu" or "cuda".
        ranks: world ranks, a list (1-D) or nested lists (an N-D mesh). They are put in
            canonical (sorted) order, keeping the mesh's shape, so ``[1, 0]`` equals ``[0, 1]``.

    Raises:
        ValueError: an unknown type, an empty or ragged mesh, repeated ranks, or a rank that
            the world does not have.
    """

    __slots__ = ("_flat", "_hash", "_index", "_ranks", "type")

    def __init__(self, type: str, ranks: Any) -> None:
        if type not in DEVICE_TYPES:
            raise GlobalTensorError(f"placement type must be one of {DEVICE_TYPES}, got {type!r}")
        try:
            raw = numpy.array(ranks)
        except (TypeError, ValueError):
            raw = numpy.array([object()])  # ragged nesting: reported below
        if raw.dtype.kind not in "iu" and raw.size:
            raise GlobalTensorError(
                f"placement ranks must be integers, in a list or nested lists of the "
                f"same length, got {ranks!r}")
        array = raw.astype(numpy.int64)
        if array.ndim == 0:
            array = array.reshape(1)
        if array.size == 0:
            raise GlobalTensorError("a placement needs at least one rank")
        flat = numpy.sort(array, axis=None)
        if len(numpy.unique(flat)) != flat.size:
            raise GlobalTensorError(f"placement ranks repeat: {array.tolist()}")
        size = world_size()
        if flat[0] < 0 or flat[-1] >= size:
            raise GlobalTensorError(
                f"placement ranks {array.tolist()} are not all ranks of the world "
                f"(0..{size - 1})")
        canonical = flat.reshape(array.shape)
        canonical.flags.writeable = False
        self.type = type
        self._ranks = canonical
        self._flat: tuple[int, ...] = tuple(int(r) for r in flat)
        self._index = {r: i for i, r in enumerate(self._flat)}
        self._hash = hash((type, canonical.shape, self._flat))

    @staticmethod
    def all(type: str) -> Placement:
        """The placement of every rank of the world, as a 1-D mesh."""
        return Placement(type, list(range(world_size())))

    @property
    def ranks(self) -> numpy.ndarray:
        """The mesh of world ranks (read-only), shaped as the mesh."""
        return self._ranks

    @property
    def mesh_shape(self) -> tuple[int, ...]:
        return tuple(self._ranks.shape)

    @property
    def ndim(self) -> int:
        return self._ranks.ndim

    @property
    def rank_list(self) -> tuple[int, ...]:
        """The ranks in canonical (row-major mesh) order."""
        return self._flat

    def __contains__(self, rank: object) -> bool:
        return rank in self._index

    def coordinates(self, rank: int) -> tuple[int, ...] | None:
        """The mesh coordinates of world ``rank``, or None if it is not in the placement."""
        index = self._index.get(rank)
        if index is None:
            return None
        return tuple(int(c) for c in numpy.unravel_index(index, self._ranks.shape))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Placement):
            return NotImplemented
        return (self.type == other.type and self._ranks.shape == other._ranks.shape
                and self._flat == other._flat)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f'mpiflow.placement(type="{self.type}", ranks={self._ranks.tolist()})'

    def __reduce__(self) -> tuple[Any, ...]:
        return (Placement, (self.type, self._ranks.tolist()))


# OneFlow's spelling: flow.placement("cpu", [0, 1]), flow.placement.all("cpu")
placement = Placement
