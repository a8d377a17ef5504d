"""What the watchdog knows of blocking calls: the sites and frame readers modules register.

The watchdog (:mod:`.watchdog`) imports none of the modules it watches. Each module that
blocks registers here, at import, the functions that call a blocking MPI function
(:func:`register_blocking_site`, :func:`register_blocking_names`) and, where a frame can tell
which operation and group it serves, a reader of such frames (:func:`register_frame_reader`).
The watchdog's thread then reads other threads' stacks with :func:`in_blocking_site` and
:func:`describe_stack`. Every name here is also reachable as ``watchdog.<name>``.

Example:
    >>> from mpiflow.communication.watchdog import sites
    >>> def wait_for_peer():          # a function that would call a blocking MPI function
    ...     pass
    >>> sites.register_blocking_site(wait_for_peer)
    >>> code = wait_for_peer.__code__
    >>> code.co_name in sites.blocking_sites()[code.co_filename]
    True
    >>> sites.unregister_blocking_site(wait_for_peer)
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any, NamedTuple

from mpi4py import MPI

__all__ = [
    "BlockedCall",
    "FrameReader",
    "blocking_sites",
    "describe_stack",
    "in_blocking_site",
    "operation_of",
    "register_blocking_names",
    "register_blocking_site",
    "register_frame_reader",
    "unregister_blocking_site",
]

# mpiflow/: the package directory (this file is mpiflow/communication/watchdog/sites.py)
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


# -- MPI's thread level: whether other ranks can be asked ------------------------------------

_level: list[int] = []  # MPI's thread level, read once by the main thread


def thread_level_provided() -> int:
    if not _level:
        _level.append(MPI.Query_thread())
    return _level[0]


def thread_multiple() -> bool:
    return thread_level_provided() == MPI.THREAD_MULTIPLE


def thread_level_name() -> str:
    names = {MPI.THREAD_SINGLE: "MPI_THREAD_SINGLE", MPI.THREAD_FUNNELED: "MPI_THREAD_FUNNELED",
             MPI.THREAD_SERIALIZED: "MPI_THREAD_SERIALIZED",
             MPI.THREAD_MULTIPLE: "MPI_THREAD_MULTIPLE"}
    return names.get(thread_level_provided(), "an unknown thread level")


# -- what a process is doing: what the blocking modules register --------------------------

class BlockedCall(NamedTuple):
    """The mpiflow call a frame is in, as a :func:`register_frame_reader` reader sees it.

    Attributes:
        op: the operation, as the report names it (``"all_reduce"``, ``"recv (Work.wait)"``).
        comm: the mpi4py communicator it runs on, or None when unknown.
        size: the group's size, or None to ask ``comm``.
        peer: the peer of a point-to-point call, a rank of ``comm``; None otherwise.
        debug: whether the frame is debug mode's argument check before the operation.
        api: the public function the frame runs, when it is one itself (a fast path made
            with a public face's signature): the report names it rather than the frame's
            module and function.
    """

    op: str
    comm: Any = None
    size: int | None = None
    peer: int | None = None
    debug: bool = False
    api: str | None = None


FrameReader = Callable[[FrameType], BlockedCall | None]
"""Maps a frame to the call it runs, or None when the frame is none of the reader's."""

# Source file -> names of its functions that call a blocking MPI function. Each registration
# replaces one entry by a new frozenset, so that the watchdog thread reads it without a lock.
_sites: dict[str, frozenset[str]] = {}
_readers: tuple[FrameReader, ...] = ()
_registering = threading.Lock()


def register_blocking_names(filename: str, names: Iterable[str]) -> None:
    """Let the watchdog watch the functions of one source file with these names.

    For the functions that :func:`register_blocking_site` cannot name by object: lambdas
    (``"<lambda>"``) and closures made per call or per communicator. Every such function must
    call the watchdog's marker (``mark_call()``) before it blocks.

    Args:
        filename: the file's name as its code objects carry it (``f.__code__.co_filename``).
        names: the functions' names (``co_name``).
    """
    with _registering:
        _sites[filename] = _sites.get(filename, frozenset()) | frozenset(names)


def register_blocking_site(function: Any) -> None:
    """Let the watchdog watch a function that calls a blocking MPI (or device) function.

    The function must call the watchdog's marker (``mark_call()``) before it blocks,
    so that the watchdog tells one call from the next. Sites are known by file and name, not
    by code object, so that wrappers (``count_collectives``) change nothing.

    Args:
        function: a Python function (or method); a thread whose innermost frame runs it is
            inside a call.
    """
    code = getattr(function, "__func__", function).__code__
    register_blocking_names(code.co_filename, (code.co_name,))


def unregister_blocking_site(function: Any) -> None:
    """Undo :func:`register_blocking_site` (every site of the function's file and name)."""
    code = getattr(function, "__func__", function).__code__
    with _registering:
        names = _sites.get(code.co_filename, frozenset()) - {code.co_name}
        if names:
            _sites[code.co_filename] = names
        else:
            _sites.pop(code.co_filename, None)


def register_frame_reader(reader: FrameReader) -> None:
    """Teach the watchdog to tell which call a frame of some module is in.

    Reports name the operation and group of every blocked thread from its stack: the
    innermost mpiflow frame that some reader recognizes gives them. A reader must be quick and
    must not block or communicate (it runs on the watchdog's thread, on other threads'
    frames); an exception in it counts as "not mine".

    Args:
        reader: maps a frame to a :class:`BlockedCall`, or to None for a frame of no
            operation it knows.
    """
    global _readers
    with _registering:
        _readers = (*_readers, reader)


def blocking_sites() -> dict[str, frozenset[str]]:
    """The registered blocking sites: function names by source file.

    A thread whose innermost Python frame is one of them is blocked in MPI (C code makes no
    Python frames).
    """
    return dict(_sites)


def in_blocking_site(frame: Any) -> bool:
    """Whether ``frame`` (a thread's innermost) is one of :func:`blocking_sites`."""
    if frame is None:
        return False
    names = _sites.get(frame.f_code.co_filename)
    return names is not None and frame.f_code.co_name in names


def in_package(frame: Any) -> bool:
    return str(frame.f_code.co_filename).startswith(PACKAGE_DIR)


def site_of(frame: Any) -> str:
    return f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"


def world_ranks(mpi_comm: Any) -> tuple[int, ...] | None:
    """The world ranks of an mpi4py communicator, in its rank order (None if unknown)."""
    if mpi_comm is None or not thread_multiple():
        return None
    try:
        group, world = mpi_comm.Get_group(), MPI.COMM_WORLD.Get_group()
        try:
            ranks = MPI.Group.Translate_ranks(group, list(range(group.Get_size())), world)
        finally:
            group.Free()
            world.Free()
    except Exception:
        return None
    return tuple(int(r) for r in ranks)


def call_record(op: str, mpi_comm: Any, size: int | None, peer: int | None) -> dict[str, Any]:
    group = world_ranks(mpi_comm)
    if size is None and mpi_comm is not None:
        with contextlib.suppress(Exception):
            size = int(mpi_comm.Get_size())
    world_peer = None
    if peer is not None and peer >= 0:
        world_peer = group[peer] if group is not None and peer < len(group) else None
    return {"op": op, "group": group, "size": size, "peer": world_peer, "api": "", "site": "",
            "debug": False}


def operation_of(start: Any) -> tuple[str, Any]:
    """The operation and mpi4py communicator of what started a ``Work`` (its ``what``).

    Args:
        start: an ``(operation, mpi4py communicator, ...)`` tuple, a bound mpi4py method
            (``comm.Ibarrier``), or a closure made inside the operation's method.
    """
    if isinstance(start, tuple):
        return str(start[0]), start[1] if len(start) > 1 else None
    owner = getattr(start, "__self__", None)
    if isinstance(owner, MPI.Comm):  # a bound method such as comm.Ibarrier
        name = str(getattr(start, "__name__", "?"))
        return (name[1:].lower() if name.startswith("I") else name), owner
    parts = str(getattr(start, "__qualname__", "")).split(".")
    name = parts[parts.index("<locals>") - 1] if "<locals>" in parts else "an operation"
    comm = None
    for cell in getattr(start, "__closure__", None) or ():
        with contextlib.suppress(ValueError):
            if isinstance(cell.cell_contents, MPI.Comm):
                comm = cell.cell_contents
    return name, comm


def read_frame(frame: Any) -> BlockedCall | None:
    """What the registered readers say of ``frame``: the first answer, or None."""
    for reader in _readers:
        try:
            found = reader(frame)
        except Exception:  # a reader's bug must not stop the watchdog's thread
            continue
        if found is not None:
            return found
    return None


def describe_stack(frame: Any) -> dict[str, Any] | None:
    """The blocking mpiflow call a thread whose innermost frame is ``frame`` is in.

    The innermost mpiflow frame that a registered reader (:func:`register_frame_reader`)
    recognizes names the operation; the outermost mpiflow frame around it, the public entry
    point; the frame that called that, the user's call site.

    Args:
        frame: a frame (from ``sys._current_frames()``), or None.

    Returns:
        ``{"op", "group" (world ranks or None), "size", "peer", "api", "site", "debug"}``, or
        None when the stack is in no mpiflow operation.
    """
    chain = []
    while frame is not None:
        chain.append(frame)
        frame = frame.f_back
    for i, f in enumerate(chain):
        if not in_package(f):
            continue
        found = read_frame(f)
        if found is None:
            continue
        call = call_record(found.op, found.comm, found.size, found.peer)
        j = i
        while j + 1 < len(chain) and in_package(chain[j + 1]):
            j += 1
        api = chain[j]
        # A fast path made with a public signature is the public function (its frame's
        # module is the fast path's): its reader names it.
        outer = found if j == i else read_frame(api)
        call["api"] = outer.api if outer is not None and outer.api else \
            f"{api.f_globals.get('__name__', '?')}.{api.f_code.co_name}"
        call["site"] = site_of(chain[j + 1]) if j + 1 < len(chain) else ""
        call["debug"] = bool(found.debug)
        return call
    return None


def innermost_site(frame: Any) -> str:
    """Where a running thread is: its innermost frame outside mpiflow (or the innermost)."""
    first = frame
    while frame is not None and in_package(frame):
        frame = frame.f_back
    chosen = frame if frame is not None else first
    return site_of(chosen) if chosen is not None else "unknown"
