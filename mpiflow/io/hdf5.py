"""HDF5 files: :func:`load_hdf5` and :func:`save_hdf5` of global tensors (both collective).

Loading: rank 0 reads the dataset's shape and type and broadcasts them; then every rank opens
the file itself and reads only its own hyperslab (its shard's region), whatever the dataset's
storage (contiguous, chunked, compressed): no rank ever holds more than its shard.

Saving (:mod:`.h5write` says how each storage is written in parallel): rank 0 creates the
dataset (with its attributes), then every rank writes its region. A new file is written under
a temporary name next to ``path`` and renamed to ``path`` when every rank has finished
(``mode="w"``); a dataset added to an existing file (``mode="a"``) is written under a
temporary name in its group and linked under its own name only when complete. Either way a
failed save leaves nothing half-written under the name asked for, and raises
:class:`~mpiflow.io.ParallelIOError` on every rank.

Examples:
    >>> p = flow.placement.all("cpu")
    >>> x = flow.arange(12, dtype=flow.float64, placement=p, sbp=flow.sbp.split(0))
    >>> save_hdf5(x.reshape(4, 3), "run.h5", "fields/t", attrs={"units": "K"})
    >>> load_hdf5("run.h5", "fields/t", p, flow.sbp.split(1)).sum().item()
    66.0
"""

from __future__ import annotations

import os
import posixpath
import uuid
from typing import Any

import numpy

from .. import dtypes as _dtypes
from ..layouts.placement import Placement
from ..tensors.tensor import Tensor
from .collective import (
    check_stamp,
    file_stamp,
    native_dtype,
    read_box,
    region_starts,
    require,
    same_arguments,
    saving,
    step,
    target_layout,
    to_tensor,
    world,
    written_piece,
)
from .errors import blocking
from .files import fsync_file
from .h5write import contiguous_dcpl, fill_dataset, mpio_available, slices, write_mpio
from .mpiio import box_shape
from .npy import check_dtype
from .regions import aligned_chunks

__all__ = ["creation_options", "load_hdf5", "open_dataset", "read_region", "save_hdf5"]

MODES = ("w", "a")


def _describe(h5py: Any, path: str, name: str) -> tuple[Any, tuple[int, ...], str]:
    """Rank 0: the file's stamp, and the dataset's shape and element type."""
    with h5py.File(path, "r") as f:
        stamp = _stamp(f, path)
        dataset = open_dataset(h5py, f, path, name)
        native_dtype(dataset.dtype, f"dataset {name!r} of {path}")
        return stamp, tuple(dataset.shape), dataset.dtype.str


def _stamp(f: Any, path: str) -> Any:
    """The stamp of an open h5py file (by its descriptor where the driver has one)."""
    try:
        return file_stamp(int(f.id.get_vfd_handle()))
    except (TypeError, ValueError, OSError, AttributeError):
        return file_stamp(path)


def open_dataset(h5py: Any, f: Any, path: str, name: str) -> Any:
    """``f[name]``, which must be a dataset (clear errors for a missing name or a group).

    Raises:
        KeyError: ``name`` is not in the file (the message lists what is at its level).
        TypeError: ``name`` is a group.
    """
    if name not in f:
        parent = posixpath.dirname(name.rstrip("/")) or "/"
        there = sorted(f[parent]) if parent in f and isinstance(f[parent], h5py.Group) else []
        raise KeyError(f"{path} has no dataset {name!r}" +
                       (f" ({parent} holds {', '.join(there[:10])})" if there else ""))
    dataset = f[name]
    if not isinstance(dataset, h5py.Dataset):
        raise TypeError(f"{name!r} in {path} is a group, not a dataset")
    return dataset


def read_region(dataset: Any, box: Any, dtype: numpy.dtype) -> numpy.ndarray:
    """Read ``box`` of an h5py dataset into a new array of ``dtype`` (HDF5 reads only it)."""
    if not box:  # a 0-d dataset
        return numpy.asarray(dataset[()], dtype=dtype).reshape(())
    native = native_dtype(dataset.dtype, "the dataset")
    out = numpy.empty(box_shape(box), dtype=native)
    dataset.read_direct(out, source_sel=slices(box))
    return out if native == dtype else out.astype(dtype)


def _read(h5py: Any, path: str, name: str, stamp: Any, shape: tuple[int, ...], found: str,
          box: Any, dtype: numpy.dtype) -> numpy.ndarray:
    """This rank: open the file, check it is the one rank 0 saw, read ``box``."""
    with h5py.File(path, "r") as f:
        check_stamp(_stamp(f, path), stamp, path)
        dataset = open_dataset(h5py, f, path, name)
        if tuple(dataset.shape) != shape or dataset.dtype.str != found:
            raise RuntimeError(f"{path} changed between the ranks' opens: {name!r} is "
                               f"{dataset.shape} {dataset.dtype} here, {shape} {found} on "
                               "rank 0")
        out = read_region(dataset, box, dtype)
        check_stamp(_stamp(f, path), stamp, path)  # not written meanwhile
    return out


def load_hdf5(path: str | os.PathLike[str], dataset: str, placement: Placement | None = None,
              sbp: Any = None, dtype: Any = None) -> Tensor:
    """Load an HDF5 dataset as a global tensor, each rank reading only its shard (collective).

    Args:
        path: the HDF5 file (the same on every rank).
        dataset: the dataset's path in the file (``"fields/temperature"``).
        placement: where the tensor goes (default: every rank).
        sbp: its layout, one per mesh axis (default: ``split(0)``; see :func:`mpiflow.tensor`).
        dtype: convert to this dtype (default: the dataset's, in native byte order).

    Returns:
        The global tensor. Ranks on a broadcast axis each read the whole extent of that axis;
        a partial layout is read as broadcast, then kept on the coordinate-0 ranks.

    Raises:
        ParallelIOError: a missing file or dataset, a group, an element type mpiflow has no
            dtype for, a damaged or truncated file, a file that changed between the ranks'
            opens, ranks that passed different arguments (on every rank).
        ModuleNotFoundError: h5py is not installed (``pip install 'mpiflow[io]'``).

    Examples:
        >>> import h5py
        >>> if flow.env.get_rank() == 0:
        ...     with h5py.File("plain.h5", "w") as f:
        ...         _ = f.create_dataset("x", data=numpy.arange(10.0).reshape(5, 2))
        >>> flow.comm.barrier()
        >>> x = load_hdf5("plain.h5", "x")
        >>> x.shape, x.sbp, x.dtype
        (mpiflow.Size([5, 2]), (mpiflow.sbp.split(dim=0),), mpiflow.float64)
    """
    h5py = require("h5py", "load_hdf5")
    wanted = _dtypes.as_dtype(dtype).numpy if dtype is not None else None
    comm = world()
    target = os.path.abspath(os.fspath(path))
    what = f"loading {dataset!r} from {target}"
    same_arguments(comm, what, path=target, dataset=dataset, placement=placement, sbp=sbp,
                   dtype=wanted)
    info = None
    with step(comm, what):
        if comm.Get_rank() == 0:
            info = _describe(h5py, target, dataset)
    with blocking(f"io: broadcasting the description of {dataset!r} in {target}", comm):
        stamp, shape, found = comm.bcast(info, root=0)
    layout = target_layout(placement, sbp, len(shape))
    out_dtype = wanted if wanted is not None else native_dtype(numpy.dtype(found), what)
    box = read_box(shape, layout)
    data = None
    with step(comm, f"reading {dataset!r} from {target}"):
        if box is not None:
            data = _read(h5py, target, dataset, stamp, shape, found, box, out_dtype)
    return to_tensor(data, shape, layout, out_dtype)


def creation_options(h5py: Any, tensor: Tensor, chunks: Any, compression: Any,
                     compression_opts: Any, shuffle: bool, fletcher32: bool) -> dict[str, Any]:
    """The ``create_dataset`` options of a tensor's dataset (the same on every rank).

    Without chunks and filters the dataset is contiguous, its space allocated at creation
    (:func:`.h5write.contiguous_dcpl`). With filters and no chunk shape (or ``chunks=True``)
    the chunks follow the ranks' regions (:func:`.regions.aligned_chunks`).

    Raises:
        ValueError: chunks or filters for a 0-d tensor (HDF5 cannot chunk a scalar).
    """
    shape = tuple(int(n) for n in tensor.shape)
    filtered = compression is not None or shuffle or fletcher32
    if not chunks and not filtered:
        return {"dcpl": contiguous_dcpl(h5py)}
    if not shape:
        raise ValueError("a 0-d dataset cannot be chunked or compressed")
    if chunks is None or chunks is True:
        itemsize = numpy.dtype(tensor._data.dtype).itemsize
        chunks = aligned_chunks(shape, itemsize, region_starts(tensor))
    options: dict[str, Any] = {"chunks": tuple(int(c) for c in chunks)}
    if compression is not None:
        options["compression"] = compression
        options["compression_opts"] = compression_opts
    if shuffle:
        options["shuffle"] = True
    if fletcher32:
        options["fletcher32"] = True
    return options


def _check_tensor(tensor: Any, what: str) -> tuple[tuple[int, ...], numpy.dtype]:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{what} saves an mpiflow tensor, got {type(tensor).__name__}")
    dtype = numpy.dtype(tensor._data.dtype)
    check_dtype(dtype, what)
    return tuple(int(n) for n in tensor.shape), dtype


def _layout_key(tensor: Tensor) -> Any:
    return "local" if tensor.is_local else (tensor.placement, tensor.sbp)


def _create(h5py: Any, path: str, name: str, link: str, new: bool, shape: tuple[int, ...],
            dtype: numpy.dtype, options: dict[str, Any], attrs: dict[str, Any]) -> None:
    """Rank 0: create the dataset ``link`` (to become ``name``) with its attributes."""
    with h5py.File(path, "w" if new else "a") as f:
        if name in f:
            raise FileExistsError(f"{path} already holds {name!r}: save under another name, or "
                                  "rewrite the whole file with mode='w'")
        dataset = f.create_dataset(link, shape, dtype, **options)
        dataset.attrs.update(attrs)


def _write(comm: Any, h5py: Any, path: str, name: str, link: str, new: bool,
           shape: tuple[int, ...], dtype: numpy.dtype, options: dict[str, Any],
           attrs: dict[str, Any], box: Any, data: Any) -> None:
    what = f"saving {name!r} to {path}"
    if mpio_available(h5py):
        write_mpio(comm, h5py, path, "w" if new else "a", link, shape, dtype, options, attrs,
                   box, data)
    else:
        with step(comm, f"{what}: creating the dataset"):
            if comm.Get_rank() == 0:
                _create(h5py, path, name, link, new, shape, dtype, options, attrs)
        fill_dataset(comm, h5py, path, link, shape, dtype, box, data)
    if link != name:
        with step(comm, f"{what}: linking it under its name"):
            if comm.Get_rank() == 0:
                with h5py.File(path, "a") as f:
                    f.move(link, name)
                fsync_file(path)


def _drop_link(h5py: Any, path: str, link: str) -> None:
    """Rank 0, after a failed append: remove the unfinished dataset (best effort)."""
    try:
        with h5py.File(path, "a") as f:
            if link in f:
                del f[link]
    except Exception:  # the save's own error is the one to report
        pass


def save_hdf5(tensor: Tensor, path: str | os.PathLike[str], dataset: str, mode: str = "w", *,
              chunks: Any = None, compression: Any = None, compression_opts: Any = None,
              shuffle: bool = False, fletcher32: bool = False,
              attrs: dict[str, Any] | None = None) -> None:
    """Save a tensor as an HDF5 dataset, every rank writing its own shard (collective).

    A contiguous dataset (the default) is written with MPI-IO by all ranks at once; a chunked
    or compressed one is compressed by all ranks at once and stored in turns (see
    :mod:`mpiflow.io.h5write`); with a parallel h5py, through its ``mpio`` driver.

    Args:
        tensor: a global tensor of any layout (a local tensor is taken as the same on every
            rank: rank 0 writes it).
        path: the HDF5 file (the same on every rank).
        dataset: the dataset's path in the file; missing groups are created.
        mode: ``"w"`` writes a new file, which replaces ``path`` when complete; ``"a"`` adds
            the dataset to the file at ``path`` (created if missing; a dataset already there
            under that name is an error).
        chunks: a chunk shape, or True for chunks that follow the ranks' shards; None:
            contiguous unless a filter is asked for.
        compression: an h5py compression filter (``"gzip"``, ``"lzf"``, ...).
        compression_opts: its option (the gzip level).
        shuffle: the byte-shuffle filter.
        fletcher32: the checksum filter.
        attrs: attributes of the dataset (strings, numbers, small arrays).

    Raises:
        ValueError: an unknown mode (on every rank, before anything is written).
        ParallelIOError: a rank failed: an unwritable path, an existing dataset in append
            mode, ranks that passed different arguments, ... (on every rank; nothing is left
            under ``path`` or ``dataset``).
        ModuleNotFoundError: h5py is not installed (``pip install 'mpiflow[io]'``).

    Examples:
        >>> t = flow.randn(6, 2, placement=flow.placement.all("cpu"), sbp=flow.sbp.split(0))
        >>> save_hdf5(t, "out.h5", "t", compression="gzip")
        >>> import h5py
        >>> with h5py.File("out.h5") as f:
        ...     f["t"].shape, f["t"].compression
        ((6, 2), 'gzip')
    """
    h5py = require("h5py", "save_hdf5")
    if mode not in MODES:
        raise ValueError(f"save_hdf5: mode must be one of {MODES}, got {mode!r}")
    shape, dtype = _check_tensor(tensor, "save_hdf5")
    attrs = dict(attrs or {})
    comm = world()
    target = os.path.abspath(os.fspath(path))
    what = f"saving {dataset!r} to {target}"
    same_arguments(comm, what, path=target, dataset=dataset, mode=mode, shape=shape,
                   dtype=dtype.str, layout=_layout_key(tensor), chunks=chunks,
                   compression=compression, compression_opts=compression_opts,
                   shuffle=shuffle, fletcher32=fletcher32, attrs=attrs)
    options = creation_options(h5py, tensor, chunks, compression, compression_opts, shuffle,
                               fletcher32)
    box, data = written_piece(tensor)
    exists = None
    with step(comm, what):
        if comm.Get_rank() == 0:
            exists = mode == "a" and os.path.exists(target)
            if exists:
                with h5py.File(target, "r") as f:
                    if dataset in f:
                        raise FileExistsError(f"{target} already holds {dataset!r}: save under "
                                              "another name, or rewrite the whole file with "
                                              "mode='w'")
    with blocking(f"io: broadcasting whether {target} exists", comm):
        exists = comm.bcast(exists, root=0)
    if not exists:
        with saving(comm, target, what) as tmp:
            _write(comm, h5py, tmp, dataset, dataset, True, shape, dtype, options, attrs, box,
                   data)
        return
    group, base = posixpath.split(dataset.rstrip("/"))
    link = posixpath.join(group, f".{base}.tmp-{uuid.uuid4().hex[:12]}")
    with blocking(f"io: broadcasting the temporary name of {dataset!r}", comm):
        link = comm.bcast(link, root=0)
    try:
        _write(comm, h5py, target, dataset, link, False, shape, dtype, options, attrs, box,
               data)
    except BaseException:
        if comm.Get_rank() == 0:
            _drop_link(h5py, target, link)
        raise
