"""Zarr stores: :func:`load_zarr` and :func:`save_zarr` of global tensors (both collective).

A Zarr array is a directory of chunk files beside a small JSON description, a natural fit for
many writers: each rank writes the files of the chunks it owns. Loading: rank 0 reads the
description; every rank opens the array and reads its own region (only the chunks that
meet it). Saving: rank 0 creates the array (its description and attributes); every rank
writes the chunks that lie wholly inside its region, all at once; the chunks two ranks share
are written in turns afterwards (:mod:`.regions`: each rank merges its part into the chunk).
By default the chunks follow the ranks' regions (:func:`.regions.aligned_chunks`): for an
even split no chunk is shared, and every byte is written in parallel.

A new store is written as a temporary directory next to ``path``, which takes its place when
complete (``mode="w"``; an existing directory is replaced only if it is a Zarr store). An
array added to an existing group (``mode="a"``, with ``name``) is written under a temporary
name in the group and renamed when complete. Either way a failed save leaves nothing
half-written under the name asked for. Zarr format 3 is written by default (``zarr_format=2``
for the older readers); both are read.

Examples:
    >>> p = flow.placement.all("cpu")
    >>> t = flow.arange(12, dtype=flow.float32, placement=p, sbp=flow.sbp.split(0))
    >>> save_zarr(t.reshape(6, 2), "data.zarr", name="x", attrs={"units": "m"})
    >>> load_zarr("data.zarr", p, flow.sbp.broadcast, name="x").shape
    mpiflow.Size([6, 2])
"""

from __future__ import annotations

import json
import os
import posixpath
import uuid
from typing import Any

import numpy

from .. import dtypes as _dtypes
from ..layouts.placement import Placement
from ..layouts.shards import relative_slices
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
from .files import fsync_directory, remove_path
from .h5write import slices
from .mpiio import prepare_buffer
from .npy import check_dtype
from .regions import aligned_chunks, interior, remainder

__all__ = ["load_zarr", "save_zarr"]

MODES = ("w", "a")
_METADATA = ("zarr.json", ".zarray", ".zgroup")


def _metadata_file(store: str, name: str | None) -> str:
    """The JSON file that describes the array ``name`` of ``store`` (its stamp tells a change)."""
    where = os.path.join(store, name.strip("/")) if name else store
    for candidate in ("zarr.json", ".zarray"):
        path = os.path.join(where, candidate)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"{store} has no Zarr array " + (f"{name!r}" if name else "at its "
                            "root") + (f" (it holds {', '.join(_members(store))})"
                                       if _members(store) else ""))


def _members(store: str) -> list[str]:
    try:
        return sorted(e for e in os.listdir(store) if not e.startswith("."))[:10]
    except OSError:
        return []


def _open(zarr: Any, store: str, name: str | None, mode: str) -> Any:
    return zarr.open_array(store=store, path=name.strip("/") if name else "", mode=mode)


def _describe(zarr: Any, store: str, name: str | None) -> tuple[Any, tuple[int, ...], str]:
    stamp = file_stamp(_metadata_file(store, name))
    array = _open(zarr, store, name, "r")
    native_dtype(array.dtype, f"the Zarr array {name or store!r}")
    return stamp, tuple(array.shape), numpy.dtype(array.dtype).str


def _read(zarr: Any, store: str, name: str | None, stamp: Any, shape: tuple[int, ...],
          found: str, box: Any, dtype: numpy.dtype) -> numpy.ndarray:
    meta = _metadata_file(store, name)
    check_stamp(file_stamp(meta), stamp, meta)
    array = _open(zarr, store, name, "r")
    if tuple(array.shape) != shape or numpy.dtype(array.dtype).str != found:
        raise RuntimeError(f"{store} changed between the ranks' opens: the array is "
                           f"{array.shape} {array.dtype} here, {shape} {found} on rank 0")
    return numpy.asarray(array[slices(box)] if box else array[()], dtype=dtype)


def load_zarr(path: str | os.PathLike[str], placement: Placement | None = None,
              sbp: Any = None, name: str | None = None, dtype: Any = None) -> Tensor:
    """Load a Zarr array as a global tensor, each rank reading only its region (collective).

    Args:
        path: the Zarr store, a directory (the same on every rank).
        placement: where the tensor goes (default: every rank).
        sbp: its layout (default: ``split(0)``; see :func:`mpiflow.tensor`).
        name: the array's path in the store's groups (None: the store is the array).
        dtype: convert to this dtype (default: the array's).

    Returns:
        The global tensor.

    Raises:
        ParallelIOError: a missing store or array, a damaged chunk, an array that changed
            between the ranks' opens, ranks that passed different arguments (every rank).
        ModuleNotFoundError: zarr is not installed (``pip install 'mpiflow[io]'``).

    Examples:
        >>> import zarr
        >>> if flow.env.get_rank() == 0:
        ...     _ = zarr.create_array("plain.zarr", data=numpy.arange(8.0), chunks=(3,))
        >>> flow.comm.barrier()
        >>> load_zarr("plain.zarr").sum().item()
        28.0
    """
    zarr = require("zarr", "load_zarr")
    wanted = _dtypes.as_dtype(dtype).numpy if dtype is not None else None
    comm = world()
    target = os.path.abspath(os.fspath(path))
    what = f"loading the Zarr array {name or ''!r} of {target}" if name else \
        f"loading the Zarr array {target}"
    same_arguments(comm, what, path=target, name=name, placement=placement, sbp=sbp,
                   dtype=wanted)
    info = None
    with step(comm, what):
        if comm.Get_rank() == 0:
            info = _describe(zarr, target, name)
    with blocking(f"io: broadcasting the description of {target}", comm):
        stamp, shape, found = comm.bcast(info, root=0)
    layout = target_layout(placement, sbp, len(shape))
    out_dtype = wanted if wanted is not None else native_dtype(numpy.dtype(found), what)
    box = read_box(shape, layout)
    data = None
    with step(comm, f"reading {target}"):
        if box is not None:
            data = _read(zarr, target, name, stamp, shape, found, box, out_dtype)
    return to_tensor(data, shape, layout, out_dtype)


def check_store(path: str) -> None:
    """Raise unless a new Zarr store may replace ``path``: absent, empty, or a Zarr store.

    Raises:
        FileExistsError: ``path`` is a file, or a directory that is not a Zarr store (a save
            must never delete a user's other data).
    """
    if not os.path.lexists(path):
        return
    if not os.path.isdir(path):
        raise FileExistsError(f"{path} exists and is not a directory; a Zarr store is one")
    if os.listdir(path) and not any(os.path.exists(os.path.join(path, m)) for m in _METADATA):
        raise FileExistsError(f"refusing to replace {path}: it is a directory that is not a "
                              "Zarr store")


def _create(zarr: Any, store: str, link: str | None, new: bool, shape: tuple[int, ...],
            dtype: numpy.dtype, options: dict[str, Any], attrs: dict[str, Any]) -> None:
    """Rank 0: create the array (as ``link`` in the store's groups) and its attributes."""
    if link is None:
        zarr.create_array(store=store, shape=shape, dtype=dtype, attributes=attrs, **options)
        return
    group = (zarr.open_group(store=store, mode="w", zarr_format=options.get("zarr_format"))
             if new else zarr.open_group(store=store, mode="a"))
    where, base = posixpath.split(link.strip("/"))
    for part in filter(None, where.split("/")):
        group = group.require_group(part)
    group.create_array(base, shape=shape, dtype=dtype, attributes=attrs,
                       **{k: v for k, v in options.items() if k != "zarr_format"})


def _fill(comm: Any, zarr: Any, store: str, link: str | None, shape: tuple[int, ...],
          dtype: numpy.dtype, box: Any, data: Any) -> None:
    """Every rank: write its whole chunks at once, then the shared chunks in turns."""
    what = f"writing {store}" + (f" ({link!r})" if link else "")
    unit: Any = None
    array: Any = None
    with step(comm, f"{what}: preparing"):
        local = prepare_buffer(data, dtype, box)
        if box is not None:
            array = _open(zarr, store, link, "r+")
            unit = array.shards or array.chunks  # the smallest piece zarr writes whole
    inner = interior(box, unit, shape) if box is not None and unit is not None else None
    slabs = remainder(box, inner) if box is not None else []
    with step(comm, f"{what}: the chunks of each rank alone"):
        if inner is not None:
            array[slices(inner)] = local[relative_slices(inner, box)]
    for turn in range(comm.Get_size()):
        with step(comm, f"{what}: the shared chunks (rank {turn}'s turn)"):
            if comm.Get_rank() == turn:
                for slab in slabs:
                    array[slices(slab)] = local[relative_slices(slab, box)]


def save_zarr(tensor: Tensor, path: str | os.PathLike[str], name: str | None = None,
              mode: str = "w", *, chunks: Any = None, compressors: Any = "auto",
              attrs: dict[str, Any] | None = None, zarr_format: int = 3) -> None:
    """Save a tensor as a Zarr array, each rank writing the chunks it owns (collective).

    Args:
        tensor: a global tensor of any layout (a local tensor: rank 0 writes it).
        path: the Zarr store, a directory (the same on every rank).
        name: the array's path in the store's groups (None: the store is the array).
        mode: ``"w"`` writes a new store, which replaces ``path`` when complete; ``"a"`` adds
            the array ``name`` to the group at ``path`` (created if missing).
        chunks: the chunk shape (default: chunks that follow the ranks' regions, at most
            8 MiB).
        compressors: zarr's ``compressors`` (``"auto"``: zarr's default, zstd; None: none).
        attrs: attributes of the array (JSON values).
        zarr_format: 3 (default) or 2.

    Raises:
        ValueError: an unknown mode, or ``mode="a"`` without ``name`` (on every rank).
        ParallelIOError: a rank failed: an existing array of that name, a directory that is
            not a Zarr store, ranks that passed different arguments (every rank; nothing is
            left under ``path`` or ``name``).
        ModuleNotFoundError: zarr is not installed (``pip install 'mpiflow[io]'``).

    Examples:
        >>> t = flow.ones(5, 4, placement=flow.placement.all("cpu"), sbp=flow.sbp.split(1))
        >>> save_zarr(t, "ones.zarr", chunks=(5, 2))
        >>> import zarr
        >>> zarr.open_array("ones.zarr", mode="r").chunks
        (5, 2)
    """
    zarr = require("zarr", "save_zarr")
    if mode not in MODES:
        raise ValueError(f"save_zarr: mode must be one of {MODES}, got {mode!r}")
    if mode == "a" and not name:
        raise ValueError("save_zarr: mode='a' adds an array to a group: pass its name=")
    if not isinstance(tensor, Tensor):
        raise TypeError(f"save_zarr saves an mpiflow tensor, got {type(tensor).__name__}")
    shape = tuple(int(n) for n in tensor.shape)
    dtype = numpy.dtype(tensor._data.dtype)
    check_dtype(dtype, "save_zarr")
    attrs = dict(attrs or {})
    json.dumps(attrs)  # zarr keeps attributes as JSON: fail here, on every rank alike
    if chunks is None:
        chunks = aligned_chunks(shape, dtype.itemsize, region_starts(tensor))
    options = {"chunks": tuple(int(c) for c in chunks), "compressors": compressors,
               "zarr_format": zarr_format}
    comm = world()
    target = os.path.abspath(os.fspath(path))
    what = f"saving {target}" + (f" ({name!r})" if name else "")
    same_arguments(comm, what, path=target, name=name, mode=mode, shape=shape, dtype=dtype.str,
                   layout="local" if tensor.is_local else (tensor.placement, tensor.sbp),
                   options=options, attrs=attrs)
    box, data = written_piece(tensor)
    exists = None
    with step(comm, what):
        if comm.Get_rank() == 0:
            exists = mode == "a" and os.path.isdir(target)
            if exists and name and os.path.exists(os.path.join(target, name.strip("/"))):
                raise FileExistsError(f"{target} already holds {name!r}: save under another "
                                      "name, or rewrite the whole store with mode='w'")
    with blocking(f"io: broadcasting whether {target} exists", comm):
        exists = comm.bcast(exists, root=0)
    if not exists:
        with saving(comm, target, what, directory=True, check=check_store) as tmp:
            with step(comm, f"{what}: creating the array"):
                if comm.Get_rank() == 0:
                    _create(zarr, tmp, name, True, shape, dtype, options, attrs)
            _fill(comm, zarr, tmp, name, shape, dtype, box, data)
        return
    assert name is not None
    where, base = posixpath.split(name.strip("/"))
    link = posixpath.join(where, f".{base}.tmp-{uuid.uuid4().hex[:12]}")
    with blocking(f"io: broadcasting the temporary name of {name!r}", comm):
        link = comm.bcast(link, root=0)
    try:
        with step(comm, f"{what}: creating the array"):
            if comm.Get_rank() == 0:
                _create(zarr, target, link, False, shape, dtype, options, attrs)
        _fill(comm, zarr, target, link, shape, dtype, box, data)
        with step(comm, f"{what}: renaming it to {name!r}"):
            if comm.Get_rank() == 0:
                os.rename(os.path.join(target, link), os.path.join(target, name.strip("/")))
                fsync_directory(os.path.join(target, where))
    except BaseException:
        if comm.Get_rank() == 0:
            remove_path(os.path.join(target, link))
        raise
