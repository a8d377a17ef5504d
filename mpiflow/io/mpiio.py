"""Collective MPI-IO of one ``.npy`` file: every rank writes or reads only its own region.

A rank's region is a box of the logical array (one ``[start, stop)`` per dim, as
:func:`mpiflow.layouts.shards.shard_bounds` gives). It becomes a subarray file view
(``MPI.Datatype.Create_subarray`` of the box inside the logical shape, C order) at the
header's offset, so one ``Write_all``/``Read_all`` moves a shard of any layout, nested 2-D
meshes and splits of any dim included; a rank with nothing to move takes part with a count
of 0. Every step that can fail on some ranks is agreed on (:mod:`.errors`), so a failure on one
rank raises on all and no rank is left waiting in a collective; every MPI-IO call is marked for
the watchdog (:func:`.errors.blocking`), so a rank that never arrives is reported, not waited for.

Examples:
    >>> from mpiflow.io.npy import header_bytes
    >>> comm, rank = MPI.COMM_WORLD, MPI.COMM_WORLD.Get_rank()
    >>> dtype, shard = numpy.dtype("float64"), numpy.full((2, 3), float(rank))
    >>> write_array(comm, "x.npy", header_bytes(dtype, (4, 3)), dtype, (4, 3),
    ...             ((2 * rank, 2 * rank + 2), (0, 3)), shard)      # 2 ranks, split by rows
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress
from typing import Any

import numpy
from mpi4py import MPI

from ..layouts.shards import Box
from .errors import CheckpointError, ParallelIOError, agreed, blocking

__all__ = ["box_shape", "prepare_buffer", "read_array", "write_array", "write_region"]


def box_shape(box: Box) -> tuple[int, ...]:
    """The shape of the array that holds ``box``.

    Examples:
        >>> box_shape(((2, 5), (0, 3)))
        (3, 3)
    """
    return tuple(b - a for a, b in box)


def prepare_buffer(local: Any, dtype: numpy.dtype, box: Box | None) -> numpy.ndarray:
    """This rank's data to write, as C-contiguous host memory (empty when ``box`` is None).

    Args:
        local: the region's values (numpy or CuPy), shaped as ``box``.
        dtype: the file's element type.
        box: the region this rank writes, or None.

    Returns:
        A C-contiguous numpy array of ``box``'s shape (``(0,)`` for None).
    """
    if box is None:
        return numpy.empty((0,), dtype=dtype)
    get = getattr(local, "get", None)
    host = numpy.asarray(get() if get is not None else local)
    if host.shape != box_shape(box):
        raise ValueError(f"the data to write has shape {host.shape}, its region {box} needs "
                         f"{box_shape(box)}")
    return numpy.ascontiguousarray(host, dtype=dtype)


def _types(itemsize: int, shape: Sequence[int], box: Box | None
           ) -> tuple[MPI.Datatype, MPI.Datatype]:
    """The element type (``itemsize`` bytes) and the file type of ``box`` in ``shape``."""
    etype = MPI.BYTE.Create_contiguous(itemsize).Commit()
    if box is None:
        return etype, etype
    if not box:  # a 0-d array: one element
        return etype, etype.Create_subarray([1], [1], [0]).Commit()
    filetype = etype.Create_subarray([int(n) for n in shape], list(box_shape(box)),
                                     [a for a, _ in box], order=MPI.ORDER_C).Commit()
    return etype, filetype


def _free(etype: MPI.Datatype, filetype: MPI.Datatype) -> None:
    for t in (etype,) if filetype == etype else (etype, filetype):
        with suppress(MPI.Exception):
            t.Free()


def _close(comm: Any, fh: MPI.File, path: str, ok: bool,
           kind: type[ParallelIOError] = CheckpointError) -> None:
    """Close ``fh`` (collective): agreed after success, best effort after an agreed failure.

    Not called while Ctrl-C or an exit unwinds the rank (a ``BaseException`` that is no
    ``Exception``, :func:`_unwinding`): the other ranks did not see it and wait in another
    call, which a collective close would meet. The rank leaves the handle to the abort.
    """
    operation = f"checkpoint: MPI-IO File.Close of {path}"
    if ok:
        with agreed(comm, f"closing {path}", kind), blocking(operation, comm):
            fh.Close()
    else:
        with suppress(MPI.Exception), blocking(operation, comm):
            fh.Close()


def _unwinding(exc: BaseException) -> bool:
    """Whether ``exc`` is Ctrl-C or an exit, seen by this rank alone, not an agreed failure."""
    return not isinstance(exc, Exception)


def _write_header(fh: MPI.File, header: bytes) -> None:
    fh.Write_at(0, numpy.frombuffer(header, dtype=numpy.uint8))


def write_array(comm: Any, path: str, header: bytes, dtype: numpy.dtype,
                shape: Sequence[int], box: Box | None, local: Any) -> None:
    """Write one ``.npy`` file collectively: rank 0 the header, each rank its region's data.

    Every rank of ``comm`` calls it for the same file, with the same header, dtype and shape.
    The regions of the ranks must not overlap, and together cover the array.

    Args:
        comm: the mpi4py communicator of every rank taking part.
        path: the file to create.
        header: its ``.npy`` header (:func:`.npy.header_bytes`).
        dtype: the element type.
        shape: the logical shape.
        box: the region this rank writes, or None for nothing.
        local: the region's values, shaped as ``box`` (ignored for None).

    Raises:
        CheckpointError: a rank failed (on every rank).
    """
    write_region(comm, path, len(header), dtype, shape, box, local, header=header, create=True)


def write_region(comm: Any, path: str, offset: int, dtype: numpy.dtype, shape: Sequence[int],
                 box: Box | None, local: Any, *, header: bytes = b"", create: bool = False,
                 kind: type[ParallelIOError] = CheckpointError) -> None:
    """Write every rank's region of a C-order array stored at ``offset`` of a file (collective).

    The bytes of the whole array start at ``offset`` and run in C order (a ``.npy`` file's data
    after its header, an HDF5 dataset's contiguous storage); each rank writes only the bytes of
    its region, through one subarray file view and one ``Write_all``, and the file is flushed
    to disk (``Sync``) before it is closed.

    Args:
        comm: the mpi4py communicator of every rank taking part.
        path: the file.
        offset: where the array's first byte goes.
        dtype: the element type.
        shape: the logical shape.
        box: the region this rank writes, or None for nothing.
        local: the region's values, shaped as ``box`` (ignored for None).
        header: bytes rank 0 writes at the start of the file first (a ``.npy`` header).
        create: create the file if it does not exist (else it must).
        kind: the class of the error raised when a rank fails.

    Raises:
        CheckpointError: a rank failed (on every rank), or ``kind``.
    """
    with agreed(comm, f"preparing the data of {path}", kind):
        buf = prepare_buffer(local, dtype, box)
        etype, filetype = _types(dtype.itemsize, shape, box)
    amode = MPI.MODE_WRONLY | (MPI.MODE_CREATE if create else 0)
    try:
        with agreed(comm, f"{'creating' if create else 'opening'} {path}", kind), \
                blocking(f"checkpoint: MPI-IO File.Open of {path}", comm):
            fh = MPI.File.Open(comm, path, amode)
        ok = False
        try:
            if header:
                with agreed(comm, f"writing the header of {path}", kind):
                    if comm.Get_rank() == 0:
                        with blocking(f"checkpoint: MPI-IO Write_at (the header) of {path}",
                                      None):
                            _write_header(fh, header)
            with agreed(comm, f"setting the file view of {path}", kind), \
                    blocking(f"checkpoint: MPI-IO Set_view of {path}", comm):
                fh.Set_view(offset, etype, filetype)
            with agreed(comm, f"writing {path}", kind), \
                    blocking(f"checkpoint: MPI-IO Write_all of {path}", comm):
                fh.Write_all([buf.reshape(-1).view(numpy.uint8), buf.size, etype])
            with agreed(comm, f"flushing {path} to disk", kind), \
                    blocking(f"checkpoint: MPI-IO Sync of {path}", comm):
                fh.Sync()
            ok = True
        except BaseException as exc:
            if not _unwinding(exc):
                _close(comm, fh, path, False, kind)
            raise
        _close(comm, fh, path, ok, kind)
    finally:
        _free(etype, filetype)


def _check_size(size: int, path: str, offset: int, dtype: numpy.dtype,
                shape: Sequence[int]) -> None:
    """Raise the truncation error when the file is shorter than its header says.

    The count that ``Read_all`` reports is not to be trusted for a short read: ROMIO (MPICH,
    Intel MPI) and OMPIO (Open MPI) differ, and some report the whole count. The file's size
    is the same on every rank and every library.
    """
    need = offset + dtype.itemsize * int(numpy.prod(shape, dtype=numpy.int64))
    if size < need:
        raise ValueError(f"{path} is truncated: it holds {size} bytes, its header and the "
                         f"{tuple(shape)} {dtype} array it announces need {need}")


def read_array(comm: Any, path: str, offset: int, dtype: numpy.dtype, shape: Sequence[int],
               box: Box | None, kind: type[ParallelIOError] = CheckpointError
               ) -> numpy.ndarray:
    """Read this rank's region of a ``.npy`` file collectively (every rank of ``comm`` calls).

    Args:
        comm: the mpi4py communicator of every rank taking part.
        path: the file.
        offset: where its data starts (the header's length).
        dtype: the element type.
        shape: the logical shape.
        box: the region this rank reads, or None for nothing.
        kind: the class of the error raised when a rank fails.

    Returns:
        The region's values, a new array of ``box``'s shape (``(0,)`` for None).

    Raises:
        CheckpointError: a rank failed, or the file holds fewer bytes than the region needs.
    """
    with agreed(comm, f"preparing to read {path}", kind):  # a rank that cannot allocate fails all
        out = numpy.empty(box_shape(box) if box is not None else (0,), dtype=dtype)
        etype, filetype = _types(dtype.itemsize, shape, box)
    try:
        with agreed(comm, f"opening {path}", kind), \
                blocking(f"checkpoint: MPI-IO File.Open of {path}", comm):
            fh = MPI.File.Open(comm, path, MPI.MODE_RDONLY)
        ok = False
        try:
            with agreed(comm, f"reading {path}", kind):
                _check_size(fh.Get_size(), path, offset, dtype, shape)
            with agreed(comm, f"setting the file view of {path}", kind), \
                    blocking(f"checkpoint: MPI-IO Set_view of {path}", comm):
                fh.Set_view(offset, etype, filetype)
            status = MPI.Status()
            with agreed(comm, f"reading {path}", kind), \
                    blocking(f"checkpoint: MPI-IO Read_all of {path}", comm):
                fh.Read_all([out.reshape(-1).view(numpy.uint8), out.size, etype], status)
            with agreed(comm, f"reading {path}", kind):
                got = status.Get_count(etype) if out.size else 0
                if got != out.size:
                    raise ValueError(f"{path} is truncated: read {got} of the {out.size} "
                                     f"elements of the region {box}")
            ok = True
        except BaseException as exc:
            if not _unwinding(exc):
                _close(comm, fh, path, False, kind)
            raise
        _close(comm, fh, path, ok, kind)
    finally:
        _free(etype, filetype)
    return out
