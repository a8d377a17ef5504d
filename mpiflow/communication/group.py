"""Process groups: a set of world ranks and the communicator that connects them.

Ranks given to the public functions (``src``, ``dst``) are *world* ranks, as in PyTorch; a group
translates them to its communicator's ranks. A rank outside the group holds a group whose
``comm`` is None, and every collective on it is a no-op there.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable

from mpi4py import MPI

from .communicator import Communicator
from .mpi import MPICommunicator

__all__ = ["ProcessGroup", "new_group", "world_comm", "world_group"]


class ProcessGroup:
    """A group of world ranks, in group-rank order, and this rank's communicator over them.

    Examples:
        >>> g = new_group([0])
        >>> g.ranks
        (0,)
    """

    __slots__ = ("_index", "comm", "ranks")

    def __init__(self, ranks: Iterable[int], comm: Communicator | None) -> None:
        self.ranks: tuple[int, ...] = tuple(int(r) for r in ranks)
        self.comm = comm
        self._index = {r: i for i, r in enumerate(self.ranks)}

    @property
    def is_member(self) -> bool:
        return self.comm is not None

    def rank(self) -> int:
        """This process's rank in the group, or -1 outside it."""
        return -1 if self.comm is None else self.comm.rank

    def size(self) -> int:
        """The number of ranks in the group."""
        return len(self.ranks)

    def group_rank(self, world_rank: int, what: str = "rank") -> int:
        """Translate a world rank into this group's rank, with a ``ValueError`` outside it."""
        if isinstance(world_rank, bool):
            raise TypeError(f"{what} must be an int rank, got {world_rank!r}")
        try:
            world_rank = operator.index(world_rank)  # ints and numpy integers, nothing else
        except TypeError:
            raise TypeError(f"{what} must be an int rank, got {world_rank!r}") from None
        index = self._index.get(world_rank)
        if index is None:
            raise ValueError(f"{what}={world_rank} is not a rank of {self.describe()}")
        return index

    def describe(self) -> str:
        """A short human-readable name, for error messages."""
        if self.ranks == tuple(range(len(self.ranks))):
            return f"the world (ranks 0..{len(self.ranks) - 1})"
        return f"the group {list(self.ranks)}"

    def __repr__(self) -> str:
        return f"ProcessGroup(ranks={list(self.ranks)})"


# mpiflow talks on its own duplicate of COMM_WORLD so that a user's own mpi4py messages on
# COMM_WORLD can never match ours.
world_comm = MPICommunicator(MPI.COMM_WORLD.Dup())
world_group = ProcessGroup(range(world_comm.size), world_comm)


def new_group(ranks: Iterable[int] | None = None) -> ProcessGroup:
    """Make a group of ``ranks`` (world ranks; None = all). Collective over the whole world.

    Every rank must call it with the same ranks, members or not, as in PyTorch.

    Args:
        ranks: world ranks; sorted, they give the group's rank order (as in PyTorch).

    Returns:
        The group; on non-members it has no communicator and collectives on it do nothing.
    """
    if ranks is None:
        members = list(world_group.ranks)
    else:
        if isinstance(ranks, (str, bytes)) or not isinstance(ranks, Iterable):
            raise TypeError(f"ranks must be a list of ints, got {ranks!r}")
        ranks = list(ranks)
        members = sorted(world_group.group_rank(r, "ranks entry") for r in ranks)
        if len(set(members)) != len(members) or not members:
            raise ValueError(f"group ranks must be distinct and non-empty, got {ranks}")
    comm = world_comm.split(members)
    return ProcessGroup(members, comm)
