"""netCDF-4 files: :func:`load_netcdf` and :func:`save_netcdf` of global tensors (collective).

A netCDF-4 file is an HDF5 file with conventions (named dimensions shared by variables,
dimension scales, ``_NCProperties``); mpiflow reads and writes them with **h5netcdf**, which
implements those conventions in pure Python on top of h5py. h5netcdf is the lighter choice:
h5py is already the HDF5 dependency of :mod:`.hdf5`, and h5netcdf adds a small pure-Python
package, where the netCDF4 package brings its own netCDF-C and HDF5 libraries (a second
HDF5 in the process beside h5py's). Files written either way open in the other.

Reading and writing are those of HDF5 (:mod:`.hdf5`, :mod:`.h5write`): rank 0 reads the
variable's description (or creates the variable, its dimensions and attributes); every rank
reads, or writes, only its own region of the variable's dataset, in parallel (MPI-IO for
contiguous variables, parallel compression and turns for chunked ones). Values are returned
as stored: ``scale_factor``/``add_offset`` and ``_FillValue`` are not applied (they are
attributes, which h5netcdf or netCDF4 show). netCDF-3 (classic) files are not HDF5 files and
are not read (``nccopy -k nc4`` converts them).

A new file is written under a temporary name and renamed when complete (``mode="w"``). A
variable added to an existing file (``mode="a"``) is created under a temporary name and
renamed when complete; a *coordinate* variable (named as one of its dimensions, which
netCDF ties to the dimension itself) is instead added to a copy of the file that replaces it
when complete. Either way a failed save leaves nothing half-written under the name asked for.

Examples:
    >>> p = flow.placement.all("cpu")
    >>> t = flow.ones(4, 3, dtype=flow.float64, placement=p, sbp=flow.sbp.split(0))
    >>> save_netcdf(t, "air.nc", "temperature", dimensions=("time", "x"),
    ...             attrs={"units": "K"})
    >>> load_netcdf("air.nc", "temperature", p, flow.sbp.split(1)).shape
    mpiflow.Size([4, 3])
"""

from __future__ import annotations

import os
import posixpath
import shutil
import uuid
from collections.abc import Sequence
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
from .h5write import fill_dataset, slices
from .hdf5 import creation_options
from .npy import check_dtype

__all__ = ["load_netcdf", "save_netcdf"]

MODES = ("w", "a")
_NON_COORD = "_nc4_non_coord_"  # h5netcdf's and netCDF-C's name of a variable named as a dim


def _open(h5netcdf: Any, path: str, mode: str) -> Any:
    try:
        return h5netcdf.File(path, mode)
    except OSError as exc:
        if mode == "r" and os.path.isfile(path) and "signature" in str(exc):
            raise OSError(f"{path} is not a netCDF-4 (HDF5) file; netCDF-3 classic files are "
                          "not read (nccopy -k nc4 converts them)") from exc
        raise


def _variable(f: Any, path: str, name: str) -> Any:
    try:
        variable = f[name]
    except KeyError:
        raise KeyError(f"{path} has no variable {name!r} (it holds "
                       f"{', '.join(sorted(f.variables)) or 'no variable'} at its root)"
                       ) from None
    if not hasattr(variable, "dimensions") or not hasattr(variable, "dtype"):
        raise TypeError(f"{name!r} in {path} is a group, not a variable")
    return variable


def _describe(h5netcdf: Any, path: str, name: str) -> tuple[Any, tuple[int, ...], str]:
    with _open(h5netcdf, path, "r") as f:
        variable = _variable(f, path, name)
        native_dtype(variable.dtype, f"variable {name!r} of {path}")
        return file_stamp(path), tuple(variable.shape), numpy.dtype(variable.dtype).str


def _read(h5netcdf: Any, path: str, name: str, stamp: Any, shape: tuple[int, ...], found: str,
          box: Any, dtype: numpy.dtype) -> numpy.ndarray:
    with _open(h5netcdf, path, "r") as f:
        check_stamp(file_stamp(path), stamp, path)
        variable = _variable(f, path, name)
        if tuple(variable.shape) != shape or numpy.dtype(variable.dtype).str != found:
            raise RuntimeError(f"{path} changed between the ranks' opens: {name!r} is "
                               f"{variable.shape} {variable.dtype} here, {shape} {found} on "
                               "rank 0")
        out = numpy.asarray(variable[slices(box)] if box else variable[()], dtype=dtype)
        check_stamp(file_stamp(path), stamp, path)
    return out


def load_netcdf(path: str | os.PathLike[str], variable: str,
                placement: Placement | None = None, sbp: Any = None,
                dtype: Any = None) -> Tensor:
    """Load a netCDF-4 variable as a global tensor, each rank reading its shard (collective).

    Args:
        path: the netCDF-4 file (the same on every rank).
        variable: the variable's name, or its path in the file's groups (``"ocean/sst"``).
        placement: where the tensor goes (default: every rank).
        sbp: its layout (default: ``split(0)``; see :func:`mpiflow.tensor`).
        dtype: convert to this dtype (default: the variable's).

    Returns:
        The global tensor: the stored values (no ``scale_factor``, ``add_offset`` or
        ``_FillValue`` masking is applied).

    Raises:
        ParallelIOError: a missing file or variable, a netCDF-3 file, a damaged file, a file
            that changed between the ranks' opens, ranks that passed different arguments.
        ModuleNotFoundError: h5netcdf is not installed (``pip install 'mpiflow[io]'``).

    Examples:
        >>> save_netcdf(flow.zeros(5, 2, placement=flow.placement.all("cpu"),
        ...                        sbp=flow.sbp.split(0)), "z.nc", "z")
        >>> load_netcdf("z.nc", "z").sbp
        (mpiflow.sbp.split(dim=0),)
    """
    h5netcdf = require("h5netcdf", "load_netcdf")
    wanted = _dtypes.as_dtype(dtype).numpy if dtype is not None else None
    comm = world()
    target = os.path.abspath(os.fspath(path))
    what = f"loading {variable!r} from {target}"
    same_arguments(comm, what, path=target, variable=variable, placement=placement, sbp=sbp,
                   dtype=wanted)
    info = None
    with step(comm, what):
        if comm.Get_rank() == 0:
            info = _describe(h5netcdf, target, variable)
    with blocking(f"io: broadcasting the description of {variable!r} in {target}", comm):
        stamp, shape, found = comm.bcast(info, root=0)
    layout = target_layout(placement, sbp, len(shape))
    out_dtype = wanted if wanted is not None else native_dtype(numpy.dtype(found), what)
    box = read_box(shape, layout)
    data = None
    with step(comm, f"reading {variable!r} from {target}"):
        if box is not None:
            data = _read(h5netcdf, target, variable, stamp, shape, found, box, out_dtype)
    return to_tensor(data, shape, layout, out_dtype)


def _group(f: Any, path: str) -> Any:
    """The group at ``path`` of an h5netcdf file, created (with its parents) if missing."""
    group = f
    for part in filter(None, path.split("/")):
        group = group.groups[part] if part in group.groups else group.create_group(part)
    return group


def _dimension(group: Any, name: str) -> Any:
    """The dimension ``name`` as ``group`` sees it (its own, or a parent group's), or None."""
    while group is not None:
        if name in group.dimensions:
            return group.dimensions[name]
        parent = group.parent
        group = None if parent is group else parent
    return None


def _create(h5netcdf: Any, h5py: Any, path: str, name: str, link: str, new: bool,
            dims: Sequence[str], shape: tuple[int, ...], dtype: numpy.dtype,
            options: dict[str, Any], attrs: dict[str, Any]) -> str:
    """Rank 0: create the variable (as ``link``), its missing dimensions and attributes.

    Returns:
        The path of the variable's HDF5 dataset.
    """
    where, base = posixpath.split(name.strip("/"))
    with _open(h5netcdf, path, "w" if new else "a") as f:
        group = _group(f, where)
        if base in group.variables:
            raise FileExistsError(f"{path} already holds a variable {name!r}: save under "
                                  "another name, or rewrite the whole file with mode='w'")
        for dim, size in zip(dims, shape):
            found = _dimension(group, dim)
            if found is None:
                group.dimensions[dim] = size
            elif found.size != size:
                raise ValueError(f"{path} has a dimension {dim!r} of size {found.size}; the "
                                 f"tensor's {size} does not match (pass other dimensions=)")
        variable = group.create_variable(posixpath.basename(link), tuple(dims), dtype,
                                         **options)
        variable.attrs.update(attrs)
    with h5py.File(path, "r") as f:
        return link if link in f else posixpath.join(where, _NON_COORD + base)


def _write(comm: Any, h5netcdf: Any, h5py: Any, path: str, name: str, link: str, new: bool,
           dims: Sequence[str], shape: tuple[int, ...], dtype: numpy.dtype,
           options: dict[str, Any], attrs: dict[str, Any], box: Any, data: Any) -> None:
    what = f"saving {name!r} to {path}"
    h5name = None
    with step(comm, f"{what}: creating the variable"):
        if comm.Get_rank() == 0:
            h5name = _create(h5netcdf, h5py, path, name, link, new, dims, shape, dtype, options,
                             attrs)
    with blocking(f"io: broadcasting the dataset of {name!r}", comm):
        h5name = comm.bcast(h5name, root=0)
    fill_dataset(comm, h5py, path, h5name, shape, dtype, box, data)
    if link != name:
        with step(comm, f"{what}: linking it under its name"):
            if comm.Get_rank() == 0:
                with h5py.File(path, "a") as f:
                    f.move(link, name.strip("/"))
                fsync_file(path)


def save_netcdf(tensor: Tensor, path: str | os.PathLike[str], variable: str, mode: str = "w",
                *, dimensions: Sequence[str] | None = None, chunks: Any = None,
                compression: Any = None, compression_opts: Any = None, shuffle: bool = False,
                attrs: dict[str, Any] | None = None) -> None:
    """Save a tensor as a netCDF-4 variable, every rank writing its own shard (collective).

    Args:
        tensor: a global tensor of any layout (a local tensor: rank 0 writes it).
        path: the netCDF-4 file (the same on every rank).
        variable: the variable's name, or path in groups (missing groups are created).
        mode: ``"w"`` writes a new file, which replaces ``path`` when complete; ``"a"`` adds
            the variable to the file at ``path`` (created if missing).
        dimensions: the names of its dimensions (default ``dim_0``, ``dim_1``, ...). Missing
            ones are created; existing ones must have the tensor's sizes.
        chunks: a chunk shape, or True for chunks that follow the ranks' shards (None:
            contiguous unless compressed).
        compression: ``"gzip"`` (netCDF's zlib) or another filter h5netcdf accepts.
        compression_opts: the gzip level.
        shuffle: the byte-shuffle filter.
        attrs: attributes of the variable (``units``, ``long_name``, ...).

    Raises:
        ValueError: an unknown mode, or ``dimensions`` of the wrong length (every rank).
        ParallelIOError: a rank failed: a dimension of another size, an existing variable,
            an unwritable path, ranks that passed different arguments (every rank; nothing is
            left under ``path`` or ``variable``).
        ModuleNotFoundError: h5netcdf is not installed (``pip install 'mpiflow[io]'``).

    Examples:
        >>> t = flow.arange(6, dtype=flow.float32, placement=flow.placement.all("cpu"),
        ...                 sbp=flow.sbp.split(0))
        >>> save_netcdf(t, "t.nc", "t", dimensions=("time",), attrs={"units": "s"})
        >>> import h5netcdf
        >>> with h5netcdf.File("t.nc", "r") as f:
        ...     f["t"].dimensions, f["t"].attrs["units"]
        (('time',), 's')
    """
    h5netcdf = require("h5netcdf", "save_netcdf")
    h5py = require("h5py", "save_netcdf")
    if mode not in MODES:
        raise ValueError(f"save_netcdf: mode must be one of {MODES}, got {mode!r}")
    if not isinstance(tensor, Tensor):
        raise TypeError(f"save_netcdf saves an mpiflow tensor, got {type(tensor).__name__}")
    shape = tuple(int(n) for n in tensor.shape)
    dtype = numpy.dtype(tensor._data.dtype)
    check_dtype(dtype, "save_netcdf")
    dims = tuple(dimensions) if dimensions is not None else tuple(
        f"dim_{i}" for i in range(len(shape)))
    if len(dims) != len(shape):
        raise ValueError(f"save_netcdf: {len(dims)} dimension names for a tensor of "
                         f"{len(shape)} dims")
    attrs = dict(attrs or {})
    comm = world()
    target = os.path.abspath(os.fspath(path))
    what = f"saving {variable!r} to {target}"
    same_arguments(comm, what, path=target, variable=variable, mode=mode, shape=shape,
                   dtype=dtype.str, dims=dims, layout="local" if tensor.is_local else
                   (tensor.placement, tensor.sbp), chunks=chunks, compression=compression,
                   compression_opts=compression_opts, shuffle=shuffle, attrs=attrs)
    options = creation_options(h5py, tensor, chunks, compression, compression_opts, shuffle,
                               False)
    box, data = written_piece(tensor)
    exists = None
    with step(comm, what):
        if comm.Get_rank() == 0:
            exists = mode == "a" and os.path.exists(target)
    with blocking(f"io: broadcasting whether {target} exists", comm):
        exists = comm.bcast(exists, root=0)
    base = posixpath.basename(variable.strip("/"))
    if not exists or base in dims:  # a new file, or a copy (a coordinate variable)
        with saving(comm, target, what) as tmp:
            with step(comm, f"{what}: copying {target}"):
                if comm.Get_rank() == 0 and exists:
                    shutil.copyfile(target, tmp)
            _write(comm, h5netcdf, h5py, tmp, variable, variable, not exists, dims, shape,
                   dtype, options, attrs, box, data)
        return
    where = posixpath.dirname(variable.strip("/"))
    link = posixpath.join(where, f".{base}.tmp-{uuid.uuid4().hex[:12]}")
    with blocking(f"io: broadcasting the temporary name of {variable!r}", comm):
        link = comm.bcast(link, root=0)
    try:
        _write(comm, h5netcdf, h5py, target, variable, link, False, dims, shape, dtype,
               options, attrs, box, data)
    except BaseException:
        if comm.Get_rank() == 0:
            _drop(h5py, target, link)
        raise


def _drop(h5py: Any, path: str, link: str) -> None:
    """Rank 0, after a failed append: remove the unfinished variable (best effort), first
    detaching it from its dimensions' scales so that they keep no reference to it."""
    try:
        with h5py.File(path, "a") as f:
            if link in f:
                for dim in f[link].dims:
                    for scale in list(dim.values()):
                        dim.detach_scale(scale)
                del f[link]
    except Exception:  # the save's own error is the one to report
        pass
