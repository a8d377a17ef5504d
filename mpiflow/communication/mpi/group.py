"""Process groups: a set of world ranks and the communicator that connects them.

Ranks given to the public functions (``src``, ``dst``) are *world* ranks, as in PyTorch; a group
translates them to its communicator's ranks. A rank outside the group holds a group whose
``comm`` is None, and every collective on it is a no-op there. A group released by
``destroy_process_group`` is marked ``destroyed``: every call on it raises, members or not.
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Iterable
from typing import Any

from mpi4py import MPI

from ..watchdog.exits import register_exit_check
from .communicator import MPICommunicator, new_communicator
from .interface import Communicator
from .leftovers import unreceived_lines

_WORLD_SIZE = MPI.COMM_WORLD.Get_size()

__all__ = ["ProcessGroup", "check_at_exit", "group_from_mpi4py", "keep_until_exit", "new_group",
           "world_comm", "world_group"]


class ProcessGroup:
    """A group of world ranks, in group-rank order, and this rank's communicator over them.

    Examples:
        >>> g = new_group([0])
        >>> g.ranks
        (0,)
    """

    __slots__ = ("_index", "comm", "destroyed", "ranks")

    def __init__(self, ranks: Iterable[int], comm: Communicator | None) -> None:
        self.ranks: tuple[int, ...] = tuple(int(r) for r in ranks)
        self.comm = comm
        self.destroyed = False  # set by destroy_process_group: calls on it raise
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
        """A short human-readable name, for error messages.

        Only a group of every world rank is "the world"; a group of ranks 0..k of a larger
        world is named by its ranks.
        """
        if len(self.ranks) == _WORLD_SIZE and self.ranks == tuple(range(_WORLD_SIZE)):
            return f"the world (ranks 0..{_WORLD_SIZE - 1})"
        return f"the group {list(self.ranks)}"

    def __repr__(self) -> str:
        return f"ProcessGroup(ranks={list(self.ranks)})"


# mpiflow talks on its own duplicate of COMM_WORLD so that a user's own mpi4py messages on
# COMM_WORLD can never match ours. MPI reports its errors there as return codes (mpi4py's
# exceptions), whatever mpi4py.rc.errors set on COMM_WORLD, so that a failed collective becomes
# a report naming the call (.failure); groups split from it inherit the handler.
_world_dup = MPI.COMM_WORLD.Dup()
_world_dup.Set_errhandler(MPI.ERRORS_RETURN)
world_comm = new_communicator(_world_dup)
world_group = ProcessGroup(range(world_comm.size), world_comm)


class _Finalized:
    """Stands in for the MPI communicators of mpiflow's groups once MPI is finalized: any use
    raises ``RuntimeError`` where MPICH would abort the process with its own message."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"MPI is finalized: mpiflow cannot communicate after MPI.Finalize() "
                           f"(called {name})")


_live_comms: weakref.WeakSet[MPICommunicator] = weakref.WeakSet([world_comm])


def _on_finalize(comm: MPI.Comm, keyval: int, value: Any) -> None:
    """Run by MPI_Finalize (it deletes COMM_SELF's attributes first, while MPI still works):
    send every later call of mpiflow's groups to a clear error. Costs nothing per call: the
    fast paths are switched off and the communicators swapped, once."""
    from .. import fast

    fast.pause()  # never resumed: the fast paths call MPI directly
    for live in list(_live_comms):
        live.mpi_comm = _Finalized()  # type: ignore[assignment]


register_exit_check(lambda: unreceived_lines(list(_live_comms)))

# The communicators of destroyed groups kept unfreed for the exit check (keep_until_exit).
_KEPT = 16
_kept: list[MPICommunicator] = []


def check_at_exit(comm: MPICommunicator) -> None:
    """Look for messages nobody received on ``comm`` at exit (:mod:`.leftovers`), as on the
    groups mpiflow makes itself: for the communicators the torch backend's groups run on.

    >>> check_at_exit(world_comm)
    """
    _live_comms.add(comm)


def keep_until_exit(comm: MPICommunicator) -> None:
    """Keep the communicator of a destroyed group unfreed, so that the exit check still finds
    the messages sent on it that nobody received (freeing it would drop them silently).

    At most 16 are kept: beyond that the oldest is freed (MPI frees it once its pending
    operations end), so programs that make and destroy many groups do not run out of
    communicators.
    """
    _kept.append(comm)
    _live_comms.add(comm)
    if len(_kept) > _KEPT:
        old = _kept.pop(0)
        _live_comms.discard(old)
        if isinstance(old.mpi_comm, MPI.Comm) and old.mpi_comm != MPI.COMM_WORLD:
            old.mpi_comm.Free()
_finalize_key = MPI.Comm.Create_keyval(delete_fn=_on_finalize)
MPI.COMM_SELF.Set_attr(_finalize_key, True)


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
    if comm is not None:
        _live_comms.add(comm)
    return ProcessGroup(members, comm)


def group_from_mpi4py(comm: MPI.Comm, ranks: Iterable[int] | None = None) -> ProcessGroup:
    """A group over the processes of an existing mpi4py communicator, in its rank order.

    For programs that split their own communicators: mpiflow's collectives then run on them.
    Collective over ``comm``'s processes only (the rest of the world does not take part).
    mpiflow talks on a duplicate of ``comm``, so the program's own messages on ``comm`` never
    match mpiflow's.

    Args:
        comm: an intracommunicator whose processes are all in mpiflow's world.
        ranks: the world ranks the caller expects the group to have (any order), checked
            before anything collective happens; None takes ``comm``'s.

    Returns:
        The group: its ranks are the world ranks of ``comm``'s ranks 0, 1, ...

    Raises:
        TypeError: ``comm`` is not an mpi4py intracommunicator (or is ``COMM_NULL``).
        ValueError: ``ranks`` are not ``comm``'s processes.

    >>> from mpi4py import MPI
    >>> g = group_from_mpi4py(MPI.COMM_SELF)
    >>> g.ranks == (MPI.COMM_WORLD.Get_rank(),), g.rank()
    (True, 0)
    """
    if not isinstance(comm, MPI.Intracomm) or comm == MPI.COMM_NULL:
        raise TypeError(f"expected an mpi4py intracommunicator, got {comm!r}")
    mine = comm.Get_group()
    world = MPI.COMM_WORLD.Get_group()
    try:
        members = MPI.Group.Translate_ranks(mine, list(range(comm.Get_size())), world)
    finally:
        mine.Free()
        world.Free()
    if any(r == MPI.UNDEFINED for r in members):
        raise ValueError("the communicator has processes outside mpiflow's world")
    if ranks is not None and sorted(ranks) != sorted(members):
        raise ValueError(f"ranks {list(ranks)} are not those of the given communicator "
                         f"{list(members)}")
    dup = comm.Dup()
    dup.Set_errhandler(MPI.ERRORS_RETURN)
    made = new_communicator(dup)
    _live_comms.add(made)
    return ProcessGroup(members, made)
