"""Collectives of picklable Python objects, with PyTorch's signatures.

Objects travel as pickled bytes in numpy ``uint8`` arrays over the same communicator as arrays:
sizes first (one small fixed-size collective), then the bytes, so no side ever guesses a length.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy

from . import Communicator
from .collectives import resolve_group
from .group import ProcessGroup

__all__ = ["all_gather_object", "broadcast_object_list", "gather_object", "scatter_object_list"]

# Tag of the point-to-point messages of gather_object/scatter_object_list. mpiflow talks on its
# own duplicate of COMM_WORLD, so only mpiflow.distributed.send(tag=...) could collide with it.
_OBJECT_TAG = 32001


def _dumps(obj: Any) -> numpy.ndarray:
    return numpy.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), dtype=numpy.uint8)


def _loads(data: numpy.ndarray) -> Any:
    return pickle.loads(data.tobytes())


def _member(group: ProcessGroup | None) -> tuple[ProcessGroup, Communicator | None]:
    g = resolve_group(group)
    return g, g.comm


def broadcast_object_list(object_list: list[Any], src: int = 0,
                          group: ProcessGroup | None = None, device: Any = None) -> None:
    """Replace the entries of ``object_list`` with those of world rank ``src``, in place.

    Every rank passes a list of the same length.

    Examples:
        >>> objs = [{"lr": 0.1}, "tag"] if dist.get_rank() == 0 else [None, None]
        >>> dist.broadcast_object_list(objs, src=0)
    """
    if not isinstance(object_list, list):
        raise TypeError(f"object_list must be a list, got {type(object_list).__name__}")
    g, comm = _member(group)
    if comm is None:
        return
    root = g.group_rank(src, "src")
    payload = _dumps(list(object_list)) if comm.rank == root else None
    length = numpy.array([0 if payload is None else payload.size], dtype=numpy.int64)
    comm.broadcast(length, root)
    data = payload if payload is not None else numpy.empty(int(length[0]), dtype=numpy.uint8)
    comm.broadcast(data, root)
    if comm.rank != root:
        received = _loads(data)
        if len(received) != len(object_list):
            raise ValueError(f"object_list has {len(object_list)} entries here but "
                             f"{len(received)} on the source rank {src}")
        object_list[:] = received


def all_gather_object(object_list: list[Any], obj: Any,
                      group: ProcessGroup | None = None) -> None:
    """Fill ``object_list[i]`` with rank ``i``'s ``obj`` on every rank of the group."""
    if not isinstance(object_list, list):
        raise TypeError(f"object_list must be a list, got {type(object_list).__name__}")
    _, comm = _member(group)
    if comm is None:
        return
    if len(object_list) != comm.size:
        raise ValueError(f"object_list must have one entry per rank of the group ({comm.size}), "
                         f"got {len(object_list)}")
    payload = _dumps(obj)
    sizes = numpy.empty(comm.size, dtype=numpy.int64)
    comm.all_gather(numpy.array([payload.size], dtype=numpy.int64), sizes)
    counts = [int(s) for s in sizes]
    data = numpy.empty(sum(counts), dtype=numpy.uint8)
    comm.all_gather_v(payload, data, counts)
    offset = 0
    for i, count in enumerate(counts):
        object_list[i] = _loads(data[offset:offset + count])
        offset += count


def gather_object(obj: Any, object_gather_list: list[Any] | None = None, dst: int = 0,
                  group: ProcessGroup | None = None) -> None:
    """Collect every rank's ``obj`` into ``object_gather_list`` on world rank ``dst``."""
    g, comm = _member(group)
    if comm is None:
        return
    root = g.group_rank(dst, "dst")
    if comm.rank == root and (not isinstance(object_gather_list, list)
                              or len(object_gather_list) != comm.size):
        raise ValueError(f"object_gather_list must be a list with one entry per rank of the "
                             f"group ({comm.size}) on the destination rank")
    payload = _dumps(obj)
    sizes = numpy.empty(comm.size, dtype=numpy.int64) if comm.rank == root else None
    comm.gather(numpy.array([payload.size], dtype=numpy.int64), sizes, root)
    if comm.rank != root:
        comm.send(payload, root, _OBJECT_TAG)
        return
    assert sizes is not None and object_gather_list is not None
    buffers = [numpy.empty(int(s), dtype=numpy.uint8) for s in sizes]
    works = [comm.irecv(buf, i, _OBJECT_TAG) for i, buf in enumerate(buffers) if i != root]
    for work in works:
        work.wait()
    buffers[root] = payload
    for i, buf in enumerate(buffers):
        object_gather_list[i] = _loads(buf)


def scatter_object_list(scatter_object_output_list: list[Any],
                        scatter_object_input_list: list[Any] | None = None, src: int = 0,
                        group: ProcessGroup | None = None) -> None:
    """Give rank ``i`` the object ``scatter_object_input_list[i]`` of world rank ``src``.

    The object lands in ``scatter_object_output_list[0]``.
    """
    if not isinstance(scatter_object_output_list, list) or not scatter_object_output_list:
        raise ValueError("scatter_object_output_list must be a non-empty list")
    g, comm = _member(group)
    if comm is None:
        return
    root = g.group_rank(src, "src")
    sizes = None
    payloads: list[numpy.ndarray] = []
    if comm.rank == root:
        if (not isinstance(scatter_object_input_list, list)
                or len(scatter_object_input_list) != comm.size):
            raise ValueError(f"scatter_object_input_list must be a list with one entry per rank "
                             f"of the group ({comm.size}) on the source rank")
        payloads = [_dumps(o) for o in scatter_object_input_list]
        sizes = numpy.array([p.size for p in payloads], dtype=numpy.int64)
    size = numpy.empty(1, dtype=numpy.int64)
    comm.scatter(sizes, size, root)
    if comm.rank == root:
        works = [comm.send(p, i, _OBJECT_TAG, async_op=True)
                 for i, p in enumerate(payloads) if i != root]
        for work in works:
            assert work is not None
            work.wait()
        scatter_object_output_list[0] = _loads(payloads[root])
        return
    data = numpy.empty(int(size[0]), dtype=numpy.uint8)
    comm.recv(data, root, _OBJECT_TAG)
    scatter_object_output_list[0] = _loads(data)
