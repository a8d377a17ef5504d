"""Writing one HDF5 dataset from every rank: MPI-IO where the format allows, turns where not.

HDF5's ordinary build (pip's h5py) lets one process at a time change a file. What makes a
parallel write possible anyway differs by the dataset's storage:

- **Contiguous** (no chunks, no filters): the dataset's bytes are one C-order block whose file
  offset is known once the dataset exists (created with its space allocated at once and never
  filled, so creating it writes no data). Rank 0 creates it; every rank then writes its region
  there with MPI-IO (:func:`.mpiio.write_region`: one subarray view, one ``Write_all``), fully
  in parallel: the file's metadata does not change.
- **Chunked, with filters** (compression, shuffle, checksums): the expensive part, running the
  filters, is done in parallel. Each rank writes the chunks that lie wholly inside its region
  into an HDF5 file in its own memory (a dataset created with the real one's creation property
  list, so the filters are exactly the same) and takes their filtered bytes out
  (``read_direct_chunk``). Then the ranks take turns, rank 0 first: in its turn a rank opens
  the file, stores its chunks as they are (``write_direct_chunk``: no filter runs again) and
  writes the slabs of its region that lie in chunks shared with a neighbour (HDF5 merges them
  into the chunk the neighbour wrote), and closes it. Only storing bytes is serial; the chunks
  :func:`.regions.aligned_chunks` chooses share no chunk at all when the split is even.
- **Chunked, no filters**: nothing to compute; the ranks write their regions in turns.

With an h5py built against parallel HDF5 (``h5py.get_config().mpi``), :func:`write_mpio` opens
the file on every rank with the ``mpio`` driver instead and writes collectively, any storage.

Examples:
    >>> from mpiflow.io.collective import require, world
    >>> h5py = require("h5py", "save_hdf5")
    >>> comm, rank = world(), world_comm.rank
    >>> with h5py.File("x.h5", "w") as f:
    ...     _ = f.create_dataset("x", (4, 2), "f8", dcpl=contiguous_dcpl(h5py))
    >>> mine = ((2 * rank, 2 * rank + 2), (0, 2)) if world_comm.size == 2 else ((0, 4), (0, 2))
    >>> fill_dataset(comm, h5py, "x.h5", "x", (4, 2), numpy.dtype("f8"), mine,
    ...              numpy.ones(box_shape(mine)))
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import numpy

from ..communication.mpi.group import world_comm
from ..layouts.shards import Box, relative_slices
from .collective import KIND, step
from .errors import blocking
from .mpiio import box_shape, prepare_buffer, write_region
from .regions import chunk_origins, interior, remainder

__all__ = ["contiguous_dcpl", "fill_dataset", "mpio_available", "slices", "write_mpio"]


def mpio_available(h5py: Any) -> bool:
    """Whether this h5py was built with parallel HDF5 (its ``mpio`` driver)."""
    return bool(h5py.get_config().mpi) and world_comm.size > 1


def slices(box: Box) -> tuple[slice, ...]:
    """``box`` as a tuple of slices.

    Examples:
        >>> slices(((1, 3), (0, 2)))
        (slice(1, 3, None), slice(0, 2, None))
    """
    return tuple(slice(a, b) for a, b in box)


def contiguous_dcpl(h5py: Any) -> Any:
    """A dataset creation property list whose space is allocated at creation, never filled.

    The dataset's file offset is then known at once (``dataset.id.get_offset()``), and
    creating it writes none of its bytes: the ranks write them all.
    """
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
    dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
    return dcpl


def _storage(h5py: Any, path: str, name: str) -> tuple[int | None, tuple[int, ...] | None,
                                                           int]:
    """Rank 0: the dataset's data offset (contiguous), chunk shape and number of filters."""
    with h5py.File(path, "r") as f:
        d = f[name]
        filters = d.id.get_create_plist().get_nfilters()
        if d.chunks is None:
            return d.id.get_offset(), None, filters
        return None, tuple(d.chunks), filters


def _compress(h5py: Any, path: str, name: str, shape: tuple[int, ...], chunks: Sequence[int],
              inner: Box, values: numpy.ndarray) -> list[tuple[tuple[int, ...], int, bytes]]:
    """The filtered bytes of the chunks of ``inner``, made in this rank's memory.

    A dataset with the real one's type and creation property list (the same chunks and
    filters) in an in-memory HDF5 file receives ``values``; each chunk's bytes, as HDF5 stores
    them, are then read back raw.

    Returns:
        ``(chunk origin, filter mask, bytes)`` per chunk, in C order.
    """
    with h5py.File(path, "r") as f:
        dataset = f[name]
        dcpl, tid = dataset.id.get_create_plist(), dataset.id.get_type()
    memory = h5py.File(f"mpiflow-chunks-{uuid.uuid4().hex}", "w", driver="core",
                       backing_store=False)
    try:
        dsid = h5py.h5d.create(memory.id, b"chunks", tid, h5py.h5s.create_simple(shape),
                               dcpl=dcpl)
        h5py.Dataset(dsid)[slices(inner)] = values
        return [(origin, *dsid.read_direct_chunk(origin))
                for origin in chunk_origins(inner, chunks)]
    finally:
        memory.close()


def _write_in_turns(comm: Any, h5py: Any, path: str, name: str, shape: tuple[int, ...],
                    chunks: tuple[int, ...], filtered: bool, box: Box | None,
                    local: numpy.ndarray) -> None:
    """Write a chunked dataset: filters in parallel, then each rank's bytes in its turn."""
    inner = interior(box, chunks, shape) if box is not None and filtered else None
    slabs = remainder(box, inner) if box is not None else []
    pieces: list[tuple[tuple[int, ...], int, bytes]] = []
    with step(comm, f"compressing the chunks of {name!r} for {path}"):
        if inner is not None and box is not None:
            pieces = _compress(h5py, path, name, shape, chunks, inner,
                               local[relative_slices(inner, box)])
    for turn in range(comm.Get_size()):
        with step(comm, f"writing {name!r} to {path} (rank {turn}'s turn)"):
            if comm.Get_rank() == turn and box is not None and (pieces or slabs):
                with h5py.File(path, "r+") as f:
                    dataset = f[name]
                    for origin, mask, raw in pieces:
                        dataset.id.write_direct_chunk(origin, raw, mask)
                    for slab in slabs:
                        dataset[slices(slab)] = local[relative_slices(slab, box)]
                pieces.clear()


def fill_dataset(comm: Any, h5py: Any, path: str, name: str, shape: tuple[int, ...],
                 dtype: numpy.dtype, box: Box | None, data: Any) -> None:
    """Write every rank's region of the existing, closed dataset ``name`` of ``path``.

    Every rank calls it; the regions are disjoint and cover the dataset. Contiguous datasets
    are written with MPI-IO at their offset, chunked ones as the module says.

    Args:
        comm: the mpi4py communicator of every rank.
        h5py: the h5py module.
        path: the HDF5 file (nobody holds it open).
        name: the dataset's path in the file.
        shape: its shape.
        dtype: its element type (the values' bytes are written as they are).
        box: the region this rank writes, or None.
        data: the region's values.

    Raises:
        ParallelIOError: a rank failed (on every rank).
    """
    info = None
    with step(comm, f"finding the storage of {name!r} in {path}"):
        if comm.Get_rank() == 0:
            info = _storage(h5py, path, name)
    with blocking(f"io: broadcasting the storage of {name!r} in {path}", comm):
        offset, chunks, filters = comm.bcast(info, root=0)
    if chunks is None and offset is not None:
        write_region(comm, path, offset, dtype, shape, box, data, kind=KIND)
        return
    # Chunked; or contiguous without an offset (a 0-d or empty dataset): through HDF5.
    with step(comm, f"preparing the data of {name!r} for {path}"):
        local = prepare_buffer(data, dtype, box)
    _write_in_turns(comm, h5py, path, name, shape, chunks or (), filters > 0, box, local)


def write_mpio(comm: Any, h5py: Any, path: str, mode: str, link: str,
               shape: tuple[int, ...], dtype: numpy.dtype, options: dict[str, Any],
               attrs: dict[str, Any], box: Box | None, data: Any) -> None:
    """Create and write a dataset with parallel HDF5 (h5py's ``mpio`` driver; collective).

    Every rank opens the file, creates the dataset with the same arguments (HDF5 requires its
    metadata calls to be collective) and writes its region in one collective ``H5Dwrite``
    (ranks with nothing to write take part with an empty selection). Filters work too:
    parallel HDF5 compresses chunks collectively.

    Args:
        comm: the mpi4py communicator of every rank.
        h5py: an h5py with ``get_config().mpi``.
        path: the file.
        mode: ``"w"`` (a new file) or ``"a"`` (an existing one).
        link: the dataset's path in the file.
        shape: its shape.
        dtype: its element type.
        options: ``create_dataset`` options (chunks, compression, ...).
        attrs: attributes of the dataset.
        box: the region this rank writes, or None.
        data: the region's values.
    """
    with step(comm, f"preparing the data of {link!r} for {path}"):
        local = prepare_buffer(data, dtype, box)
        options = {k: v for k, v in options.items() if k != "dcpl"}
    with step(comm, f"opening {path} (mpio)"), blocking(f"io: H5Fopen (mpio) of {path}", comm):
        f = h5py.File(path, mode, driver="mpio", comm=comm)
    try:
        with step(comm, f"creating {link!r} in {path}"), \
                blocking(f"io: H5Dcreate (mpio) of {link!r}", comm):
            dataset = f.create_dataset(link, shape, dtype, **options)
            dataset.attrs.update(attrs)
        with step(comm, f"writing {link!r} to {path}"), \
                blocking(f"io: H5Dwrite (mpio) of {link!r}", comm):
            dxpl = h5py.h5p.create(h5py.h5p.DATASET_XFER)
            dxpl.set_dxpl_mpio(h5py.h5fd.MPIO_COLLECTIVE)
            fspace = dataset.id.get_space()
            if box is None:  # nothing to write: an empty selection, still collective
                memory = h5py.h5s.create_simple((1,))
                memory.select_none()
                fspace.select_none()
                buf = numpy.zeros((1,), dtype=dtype)
            elif not shape:  # a 0-d dataset
                memory, buf = h5py.h5s.create(h5py.h5s.SCALAR), local.reshape(())
            else:
                fspace.select_hyperslab(tuple(a for a, _ in box), box_shape(box))
                memory = h5py.h5s.create_simple(box_shape(box))
                buf = local
            dataset.id.write(memory, fspace, buf, dxpl=dxpl)
    finally:
        with blocking(f"io: H5Fclose (mpio) of {path}", comm):
            f.close()

