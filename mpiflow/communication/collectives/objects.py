"""Collectives of picklable Python objects, with PyTorch's signatures.

Objects travel through :mod:`mpi4py.util.pkl5`: pickle protocol 5 with out-of-band buffers, so
the data of a large numpy array is sent from its own memory instead of being copied into the
pickle, and each buffer may exceed 2 GiB (pkl5 sends it with a large MPI datatype). pkl5's
gather, scatter and all-gather talk on a duplicate of the group's communicator that mpi4py
makes once per communicator, so their messages never meet the user's sends and receives.

The watchdog: pkl5 blocks inside mpi4py's Python functions, not in a blocking site of this
layer, so every call runs in ``watchdog.watched(operation, comm)``, and a frame reader names
the operation, its group and the caller's line in the report. pkl5's own functions are not
registered as blocking sites: user code (and ``mpi4py.futures`` with ``use_pkl5``) waits in
the same functions, for as long as it likes, outside any mpiflow call.

Ranks given as ``src``/``dst`` are world ranks; on a rank outside ``group`` every function
returns at once and leaves its arguments untouched; a destroyed group raises everywhere.
"""

from __future__ import annotations

import weakref
from types import FrameType
from typing import Any

import numpy
from mpi4py import MPI
from mpi4py.util import pkl5

from ..debug.mode import CollectiveMismatchError
from ..mpi.group import ProcessGroup
from ..mpi.interface import Communicator
from ..watchdog.monitor import BlockedCall, register_frame_reader
from ..watchdog.state import watched
from .torch_api import resolve_group

__all__ = ["all_gather_object", "broadcast_object_list", "gather_object", "scatter_object_list"]

OPERATIONS = ("broadcast_object_list", "all_gather_object", "gather_object",
               "scatter_object_list")
_ROOT_NAMES = {"broadcast_object_list": "src", "gather_object": "dst",
               "scatter_object_list": "src"}


def _pkl5_comm(comm: Communicator, operation: str) -> pkl5.Intracomm:
    """pkl5's view of the mpi4py communicator behind ``comm``.

    Made per call rather than cached: wrapping shares the MPI handle and costs about 0.4 us,
    while a cached wrapper would keep using the handle after ``MPI.Finalize()``, where the
    group's ``mpi_comm`` becomes a stand-in that raises a clear error (MPICH would abort).
    """
    mpi_comm = getattr(comm, "mpi_comm", None)
    if isinstance(mpi_comm, MPI.Intracomm):
        return pkl5.Intracomm(mpi_comm)
    if MPI.Is_finalized():
        raise RuntimeError(f"MPI is finalized: mpiflow cannot communicate after MPI.Finalize() "
                           f"(called {operation})")
    raise TypeError(f"{operation} needs a group over an MPI communicator, got {comm!r}")


# The communicators whose pkl5 context exists: mpi4py's duplicate of the communicator, which
# pkl5's gather, scatter and all-gather make at their first call on it.
_with_context: weakref.WeakSet[Communicator] = weakref.WeakSet()


def _make_context(comm: Communicator, mpi: pkl5.Intracomm) -> None:
    """Have every rank arrive before pkl5's first gather, scatter or all-gather on ``comm``.

    mpi4py makes the context (``MPI_Comm_dup``) holding the GIL, so a rank that never arrived
    would freeze every thread of the others, the watchdog's included, with no report. A barrier
    releases the GIL while it waits; once all have passed it, the duplicate completes.
    """
    if comm not in _with_context:
        mpi.Barrier()
        _with_context.add(comm)


def _agree(group: ProcessGroup, comm: Communicator, operation: str, root: int) -> None:
    """``MPIFLOW_DEBUG=1``: raise on every rank unless all call ``operation`` with ``root``.

    pkl5 bypasses the debug communicator's own argument checks, so the object collectives make
    theirs: one all-gather of (operation, root) through the checked communicator, which also
    catches a rank that is in a different, non-object collective.

    Raises:
        CollectiveMismatchError: the ranks called different object collectives or roots.
    """
    if not getattr(comm, "checks_every_call", False) or comm.size == 1:
        return
    mine = numpy.array([OPERATIONS.index(operation), root], dtype=numpy.int64)
    table = numpy.empty(2 * comm.size, dtype=numpy.int64)
    comm.all_gather(mine, table)
    rows = table.reshape(comm.size, 2)
    if (rows == rows[0]).all():
        return
    calls: dict[str, list[int]] = {}
    for r, (op, at) in enumerate(rows.tolist()):
        name = OPERATIONS[op]
        root_name = _ROOT_NAMES.get(name)
        text = name if root_name is None else f"{name}({root_name}={group.ranks[at]})"
        calls.setdefault(text, []).append(group.ranks[r])
    lines = [f"ranks called mismatched object collectives on {group.describe()}:"]
    lines += [f"  rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}: {text}"
              for text, ranks in calls.items()]
    raise CollectiveMismatchError("\n".join(lines))


def broadcast_object_list(object_list: list[Any], src: int = 0,
                          group: ProcessGroup | None = None, device: Any = None) -> None:
    """Replace the entries of ``object_list`` with those of world rank ``src``, in place.

    Every rank of the group passes a list of the same length; the source's list is left as it
    is, the others get unpickled copies.

    Args:
        object_list: the objects to send on ``src``, the list to fill elsewhere.
        src: the world rank that sends.
        group: the group (None: the world); a rank outside it does nothing.
        device: accepted for PyTorch's signature; objects are unpickled as they were sent.

    Raises:
        TypeError: ``object_list`` is not a list (on every rank).
        ValueError: ``src`` is not a rank of the group; or, after the broadcast and on the
            receiving ranks only, their list's length differs from the source's.

    Examples:
        >>> from mpiflow.communication.mpi.group import world_comm
        >>> objs = [{"lr": 0.1}, "tag"] if world_comm.rank == 0 else [None, None]
        >>> broadcast_object_list(objs, src=0)
        >>> objs
        [{'lr': 0.1}, 'tag']
    """
    if not isinstance(object_list, list):
        raise TypeError(f"object_list must be a list, got {type(object_list).__name__}")
    g = resolve_group(group)
    comm = g.comm
    if comm is None:
        return
    root = g.group_rank(src, "src")
    mpi = _pkl5_comm(comm, "broadcast_object_list")
    _agree(g, comm, "broadcast_object_list", root)
    with watched("broadcast_object_list", mpi):
        received = mpi.bcast(object_list if comm.rank == root else None, root)
    if comm.rank != root:
        if len(received) != len(object_list):
            raise ValueError(f"object_list has {len(object_list)} entries here but "
                             f"{len(received)} on the source rank {src}")
        object_list[:] = received


def all_gather_object(object_list: list[Any], obj: Any,
                      group: ProcessGroup | None = None) -> None:
    """Fill ``object_list[i]`` with group rank ``i``'s ``obj``, on every rank of the group.

    Every entry, this rank's included, is an unpickled copy.

    Args:
        object_list: a list with one entry per rank of the group, overwritten in place.
        obj: this rank's picklable object.
        group: the group (None: the world); a rank outside it does nothing.

    Raises:
        TypeError: ``object_list`` is not a list.
        ValueError: its length is not the group's size.

    Examples:
        >>> from mpiflow.communication.mpi.group import world_comm
        >>> ranks = [None] * world_comm.size
        >>> all_gather_object(ranks, world_comm.rank)
        >>> ranks == list(range(world_comm.size))
        True
    """
    if not isinstance(object_list, list):
        raise TypeError(f"object_list must be a list, got {type(object_list).__name__}")
    g = resolve_group(group)
    comm = g.comm
    if comm is None:
        return
    if len(object_list) != comm.size:
        raise ValueError(f"object_list must have one entry per rank of the group ({comm.size}), "
                         f"got {len(object_list)}")
    mpi = _pkl5_comm(comm, "all_gather_object")
    _agree(g, comm, "all_gather_object", 0)
    with watched("all_gather_object", mpi):
        _make_context(comm, mpi)
        gathered = mpi.allgather(obj)
    object_list[:] = gathered


def gather_object(obj: Any, object_gather_list: list[Any] | None = None, dst: int = 0,
                  group: ProcessGroup | None = None) -> None:
    """Collect every rank's ``obj`` into ``object_gather_list`` on world rank ``dst``.

    Args:
        obj: this rank's picklable object.
        object_gather_list: on ``dst``, a list with one entry per rank of the group, filled in
            group-rank order; ignored (and left as it is) elsewhere, where PyTorch passes None.
        dst: the world rank that receives.
        group: the group (None: the world); a rank outside it does nothing.

    Raises:
        ValueError: ``dst`` is not a rank of the group; or, on ``dst``,
            ``object_gather_list`` is not a list of the group's size.

    Examples:
        >>> from mpiflow.communication.mpi.group import world_comm
        >>> out = [None] * world_comm.size if world_comm.rank == 0 else None
        >>> gather_object(f"from {world_comm.rank}", out, dst=0)
        >>> out[0] if world_comm.rank == 0 else "from 0"
        'from 0'
    """
    g = resolve_group(group)
    comm = g.comm
    if comm is None:
        return
    root = g.group_rank(dst, "dst")
    if comm.rank == root and (not isinstance(object_gather_list, list)
                              or len(object_gather_list) != comm.size):
        raise ValueError(f"object_gather_list must be a list with one entry per rank of the "
                         f"group ({comm.size}) on the destination rank")
    mpi = _pkl5_comm(comm, "gather_object")
    _agree(g, comm, "gather_object", root)
    with watched("gather_object", mpi):
        _make_context(comm, mpi)
        gathered = mpi.gather(obj, root)
    if comm.rank == root:
        assert object_gather_list is not None and gathered is not None
        object_gather_list[:] = gathered


def scatter_object_list(scatter_object_output_list: list[Any],
                        scatter_object_input_list: list[Any] | None = None, src: int = 0,
                        group: ProcessGroup | None = None) -> None:
    """Give group rank ``i`` the object ``scatter_object_input_list[i]`` of world rank ``src``.

    The object, an unpickled copy (on ``src`` too), lands in
    ``scatter_object_output_list[0]``; the list's other entries are left as they are.

    Args:
        scatter_object_output_list: a non-empty list, on every rank.
        scatter_object_input_list: on ``src``, one picklable object per rank of the group;
            ignored elsewhere.
        src: the world rank that sends.
        group: the group (None: the world); a rank outside it does nothing.

    Raises:
        ValueError: the output list is not a non-empty list (on every rank); ``src`` is not a
            rank of the group; or, on ``src``, the input list is not one of the group's size.

    Examples:
        >>> from mpiflow.communication.mpi.group import world_comm
        >>> mine = [None]
        >>> scatter_object_list(mine, [r * r for r in range(world_comm.size)], src=0)
        >>> mine == [world_comm.rank ** 2]
        True
    """
    if not isinstance(scatter_object_output_list, list) or not scatter_object_output_list:
        raise ValueError("scatter_object_output_list must be a non-empty list")
    g = resolve_group(group)
    comm = g.comm
    if comm is None:
        return
    root = g.group_rank(src, "src")
    inputs = None
    if comm.rank == root:
        if (not isinstance(scatter_object_input_list, list)
                or len(scatter_object_input_list) != comm.size):
            raise ValueError(f"scatter_object_input_list must be a list with one entry per rank "
                             f"of the group ({comm.size}) on the source rank")
        inputs = scatter_object_input_list
    mpi = _pkl5_comm(comm, "scatter_object_list")
    _agree(g, comm, "scatter_object_list", root)
    with watched("scatter_object_list", mpi):
        _make_context(comm, mpi)
        scatter_object_output_list[0] = mpi.scatter(inputs, root)


_CODES = {f.__code__: f.__name__ for f in (broadcast_object_list, all_gather_object,
                                           gather_object, scatter_object_list)}


def _read_frame(frame: FrameType) -> BlockedCall | None:
    """The object collective a frame runs, for the watchdog's report (None: not one of ours)."""
    name = _CODES.get(frame.f_code)
    if name is None:
        return None
    return BlockedCall(name, frame.f_locals.get("mpi"))


register_frame_reader(_read_frame)
