"""What every loader and saver of a data file shares: arguments, layouts, regions, publishing.

The data files of :mod:`mpiflow.io` (HDF5, netCDF, Zarr, CSV, ``.npy``) are read and written by
every world rank together, as checkpoints are (:mod:`.errors`): each step that can fail on
some ranks only is agreed on, so a failure anywhere raises :class:`.ParallelIOError` with the
same message on every rank and no rank is left waiting. This module holds the steps they share:

- :func:`same_arguments`: every rank must pass the same path (and dataset, mode, shape...); one
  all-reduce of a hash checks it, so ranks that disagree all raise instead of opening two files;
- :func:`target_layout` and :func:`read_box`: the layout a loader builds (all ranks, ``S(0)``
  unless told) and the region of the file this rank reads, the only bytes it ever holds;
- :func:`to_tensor`: that region as this rank's shard (partial layouts are read as broadcast,
  then reduced to the coordinate-0 ranks, as :func:`mpiflow.tensor` does);
- :func:`written_piece`: the region of a global tensor this rank writes (a partial tensor is
  reduce-scattered first; of broadcast copies only the coordinate-0 ranks write);
- :func:`saving`: a save writes a temporary file (or directory) next to its target, which takes
  the target's name in one rename on rank 0 only after every rank succeeded; a failed save
  removes it, and leaves what was at the target untouched;
- :func:`file_stamp`: a file's identity and version (device, inode, size, modification time),
  which rank 0 broadcasts so that the others notice a file that changed between their opens.

Examples:
    >>> comm = world_comm.mpi_comm
    >>> same_arguments(comm, "loading x.h5", path=os.path.abspath("x.h5"), dataset="x")
    >>> layout = target_layout(None, None, 2)
    >>> layout.sbp
    (mpiflow.sbp.split(dim=0),)
"""

from __future__ import annotations

import hashlib
import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy
from mpi4py import MPI

from .. import dtypes as _dtypes
from ..boxing.execute import redistribute
from ..communication.mpi.group import world_comm
from ..layouts.layout import Layout
from ..layouts.placement import Placement
from ..layouts.sbp import Broadcast, Partial, Split, normalize_sbp
from ..layouts.shards import Box, check_shape, shard_bounds, split_leaves, volume
from ..tensors.creation import check_device
from ..tensors.tensor import Tensor
from .errors import ParallelIOError, agreed, blocking
from .files import remove_path, remove_stale, replace_directory, replace_file, temporary_name

__all__ = ["KIND", "check_stamp", "file_stamp", "native_dtype", "read_box", "region_starts",
           "require", "same_arguments", "saving", "step", "target_layout", "to_tensor", "world",
           "written_piece"]

KIND = ParallelIOError
"""The error class every data-file function raises on every rank when some rank failed."""


def require(module: str, what: str) -> Any:
    """Import the optional package ``module`` that ``what`` needs, or say how to install it.

    Raises:
        ModuleNotFoundError: it is not installed (the message names the ``io`` extra).

    Examples:
        >>> require("numpy", "load_npy").__name__
        'numpy'
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(f"{what} needs the {module} package: pip install "
                                  f"'mpiflow[io]' (or pip install {module})") from exc


def world() -> Any:
    """The mpi4py communicator of every world rank (data files are world-collective)."""
    return world_comm.mpi_comm


def step(comm: Any, what: str) -> Any:
    """:func:`.errors.agreed` raising :data:`KIND`: run the body, then agree on whether it
    raised (collective)."""
    return agreed(comm, what, KIND)


def _digest(value: Any) -> int:
    return int.from_bytes(hashlib.blake2b(repr(value).encode(), digest_size=7).digest(), "little")


def same_arguments(comm: Any, what: str, raising: type[ParallelIOError] = KIND,
                   **arguments: Any) -> None:
    """Raise :data:`KIND` on every rank unless every rank passed the same ``arguments``.

    A collective file operation whose ranks name different files (a path built from the rank,
    a relative path in different working directories) would open several files, or hang in
    the first collective on one of them; this checks it first with one all-reduce of a
    56-bit hash of their ``repr`` (and, only when they differ, one all-gather of the values
    for the message).

    Args:
        comm: the mpi4py communicator of every rank taking part.
        what: the operation, for the message (``"saving /data/x.h5"``).
        raising: the class of the error (checkpoints raise ``CheckpointError``).
        arguments: the values that must agree (paths made absolute first).

    Raises:
        ParallelIOError: the ranks passed different values (on every rank; the message names
            the first argument that differs, rank 0's value and each other rank's that
            differs, up to four of them; ``ranks`` holds them all).

    Examples:
        >>> same_arguments(world_comm.mpi_comm, "loading", path="/data/x.h5")
    """
    mine = _digest(sorted(arguments.items()))
    pair = numpy.array([mine, -mine], dtype=numpy.int64)
    layer = "io" if raising is KIND else "checkpoint"
    with blocking(f"{layer}: comparing the arguments of {what}", comm):
        comm.Allreduce(MPI.IN_PLACE, pair, MPI.MAX)
    if int(pair[0]) == mine and int(pair[1]) == -mine:
        return
    with blocking(f"{layer}: gathering the arguments of {what}", comm):
        everyone = comm.allgather((what, {k: repr(v) for k, v in arguments.items()}))
    what, first = everyone[0]  # rank 0's words: the same message on every rank
    for name, value in first.items():
        differ = [(rank, theirs.get(name)) for rank, (_, theirs) in enumerate(everyone)
                  if theirs.get(name) != value]
        if differ:
            shown = ", ".join(f"{v} on rank {r}" for r, v in differ[:4])
            more = f" (and {len(differ) - 4} more ranks)" if len(differ) > 4 else ""
            raise raising(f"{what}: the ranks passed different arguments (a collective file "
                          f"operation takes the same ones on every rank): {name} is {value} "
                          f"on rank 0 but {shown}{more}", differ[0][0],
                          tuple(r for r, _ in differ))
    raise raising(f"{what}: the ranks passed different arguments")  # a hash collision


def target_layout(placement: Placement | None, sbp: Any, ndim: int) -> Layout:
    """The layout a loader builds: ``placement`` and ``sbp``, or all ranks and ``S(0)``.

    Args:
        placement: where the tensor goes (None: every world rank, a 1-D mesh).
        sbp: one layout, or one per mesh axis (None: ``split(0)`` on every mesh axis, or
            broadcast for a 0-d value).
        ndim: the number of dims of the value loaded.

    Returns:
        The layout.

    Raises:
        TypeError, ValueError: ``placement`` is no placement, ``sbp`` does not fit the mesh or
            splits a dim the value lacks (every rank raises: they all know the same).

    Examples:
        >>> target_layout(None, flow.sbp.broadcast, 1).sbp
        (mpiflow.sbp.broadcast,)
    """
    if placement is None:
        placement = Placement("cpu", list(range(world_comm.size)))
    elif not isinstance(placement, Placement):
        raise TypeError(f"placement must be a mpiflow.placement, got {placement!r}")
    if sbp is None:
        sbp = tuple(Split(0) if ndim else Broadcast() for _ in range(placement.ndim))
    layout = Layout(placement, normalize_sbp(sbp, placement.ndim))
    check_shape((0,) * ndim, layout.sbp)
    return layout


def read_box(shape: tuple[int, ...], layout: Layout) -> Box | None:
    """The region of the logical value this rank reads for ``layout`` (None: nothing).

    Partial axes are read as broadcast (:func:`to_tensor` then keeps the value on their
    coordinate-0 ranks); ranks outside the placement, and ranks whose region is empty, read
    nothing.

    Examples:
        >>> read_box((4, 3), target_layout(None, None, 2)) == (
        ...     ((0, 4), (0, 3)) if world_comm.size == 1 else read_box((4, 3),
        ...     target_layout(None, None, 2)))
        True
    """
    coords = layout.placement.coordinates(world_comm.rank)
    if coords is None:
        return None
    box = shard_bounds(shape, layout.placement.mesh_shape, layout.without_partial().sbp,
                       coords)
    return box if volume(box) else None


def to_tensor(data: numpy.ndarray | None, shape: tuple[int, ...], layout: Layout,
              dtype: numpy.dtype) -> Tensor:
    """This rank's shard of a loaded value as a global tensor (collective for partial layouts).

    Args:
        data: what this rank read (the region :func:`read_box` gave), or None.
        shape: the logical shape.
        layout: the layout wanted.
        dtype: the tensor's dtype.

    Returns:
        The global tensor; its data on the placement's device.
    """
    rank = world_comm.rank
    coords = layout.placement.coordinates(rank)
    plain = layout.without_partial()
    if coords is None:
        local = numpy.empty((0,), dtype=dtype)
    else:
        box = shard_bounds(shape, layout.placement.mesh_shape, plain.sbp, coords)
        local = (numpy.empty(tuple(b - a for a, b in box), dtype=dtype) if data is None
                 else numpy.asarray(data, dtype=dtype, order="C"))
    if layout.is_partial:
        local = redistribute(local, shape, plain, layout)
    xp = check_device(layout.placement, None)
    if xp is not numpy:
        local = xp.asarray(local)
    return Tensor(local, layout.placement, layout.sbp, shape)


def written_piece(tensor: Tensor) -> tuple[Box | None, Any]:
    """The region of ``tensor``'s logical value this rank writes, and its values (collective
    for partial tensors).

    Partial tensors are first reduce-scattered (to ``S(0)`` on each partial axis; all-reduced
    to ``B`` for a 0-d tensor); on broadcast axes only the ranks at coordinate 0 write, so
    every element is written by exactly one rank. Ranks outside the placement, and ranks whose
    region is empty, write nothing (None). A local tensor is taken as the same on every rank
    (as :func:`mpiflow.save` does): rank 0 writes it.

    Examples:
        >>> t = flow.ones(4, 2, placement=flow.placement.all("cpu"), sbp=flow.sbp.broadcast)
        >>> box, data = written_piece(t)
        >>> box if world_comm.rank == 0 else None
        ((0, 4), (0, 2))
    """
    shape, data = tuple(tensor.shape), tensor._data
    if tensor.is_local:
        whole = tuple((0, n) for n in shape)
        return (whole, data) if world_comm.rank == 0 and volume(whole) else (None, None)
    placement, sbp = tensor.placement, tensor.sbp
    if any(isinstance(s, Partial) for s in sbp):
        reduced = _written_sbp(tensor)
        data = redistribute(data, shape, Layout(placement, sbp), Layout(placement, reduced))
        sbp = reduced
    coords = placement.coordinates(world_comm.rank)
    if coords is None or any(coords[a] for a, s in enumerate(sbp) if isinstance(s, Broadcast)):
        return None, None
    box = shard_bounds(shape, placement.mesh_shape, sbp, coords)
    return (box, data) if volume(box) else (None, None)


def _written_sbp(tensor: Tensor) -> tuple[Any, ...]:
    """The layout :func:`written_piece` writes ``tensor`` from: partial axes reduce-scattered."""
    return tuple((Split(0) if len(tensor.shape) else Broadcast()) if isinstance(s, Partial)
                 else s for s in tensor.sbp)


def region_starts(tensor: Tensor) -> list[list[int]]:
    """Per dim of ``tensor``, where the regions that the ranks write start (chunks follow them).

    Examples:
        >>> t = flow.zeros(10, 4, placement=flow.placement("cpu", [0]), sbp=flow.sbp.split(0))
        >>> region_starts(t)
        [[0], [0]]
    """
    shape = tuple(int(n) for n in tensor.shape)
    if tensor.is_local:
        return [[0] for _ in shape]
    layout = Layout(tensor.placement, _written_sbp(tensor))
    return [[a for a, _ in split_leaves(shape, layout, d)] or [0] for d in range(len(shape))]


def native_dtype(found: Any, what: str) -> numpy.dtype:
    """The mpiflow dtype (native byte order) of a file's element type, or a clear error.

    Args:
        found: the file's numpy dtype (``'>f8'`` for big-endian doubles).
        what: the dataset, for the message.

    Raises:
        TypeError: not a bool, integer, float or complex type mpiflow has.

    Examples:
        >>> native_dtype(numpy.dtype(">f8"), "x")
        dtype('float64')
    """
    dtype = numpy.dtype(found)
    if dtype.fields is not None or dtype.subdtype is not None or dtype.kind not in "biufc":
        raise TypeError(f"{what} holds elements of type {dtype}; mpiflow tensors hold bool, "
                        "integer, float and complex values")
    dtype = dtype.newbyteorder("=")
    try:
        return _dtypes.as_dtype(dtype).numpy
    except TypeError as exc:
        raise TypeError(f"{what} holds elements of type {dtype}: {exc}") from None


def file_stamp(path_or_fd: str | int) -> tuple[int, int, int, int]:
    """A file's identity and version: ``(device, inode, size, modification time in ns)``.

    Rank 0 broadcasts the stamp of the file it opened; every other rank compares the stamp of
    the one it opened, so a file replaced or rewritten between the ranks' opens is an error on
    every rank rather than a tensor made of two files.

    Examples:
        >>> numpy.save("x.npy", numpy.zeros(3))
        >>> file_stamp("x.npy")[2]
        152
    """
    st = os.stat(path_or_fd) if isinstance(path_or_fd, str) else os.fstat(path_or_fd)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def check_stamp(stamp: tuple[int, int, int, int], expected: tuple[int, int, int, int],
                path: str) -> None:
    """Raise unless ``stamp`` is rank 0's ``expected`` one: the same file, unchanged."""
    if stamp[:2] != expected[:2]:
        raise RuntimeError(f"{path} is not the file rank 0 opened: it was replaced between the "
                           "ranks' opens (or the ranks see different file systems)")
    if stamp[2:] != expected[2:]:
        raise RuntimeError(f"{path} changed between the ranks' opens (size {expected[2]} -> "
                           f"{stamp[2]} bytes, or its modification time): a file being loaded "
                           "must not be written meanwhile")


@contextmanager
def saving(comm: Any, target: str, what: str, *, directory: bool = False,
           check: Any = None) -> Iterator[str]:
    """Write a new file (or directory) under a temporary name; publish it when all succeeded.

    Rank 0 removes what interrupted saves of ``target`` left (``.NAME.tmp-*``), creates the
    missing parent directories and chooses the temporary name, which every rank gets. The body
    writes there. When it returns on every rank, rank 0 renames the temporary to ``target`` in
    one step (files: ``os.replace``; directories: :func:`.files.replace_directory`, with
    ``check`` saying whether the old one may go), flushed to disk; when it raised (on any rank:
    the body's steps are agreed), rank 0 removes the temporary and ``target`` is untouched.

    Args:
        comm: the mpi4py communicator of every rank.
        target: the absolute path of the file or directory to write.
        what: the operation, for messages.
        directory: the result is a directory (a Zarr store) rather than a file.
        check: for directories, raises unless what is at ``target`` may be replaced.

    Yields:
        The temporary path (nothing exists there yet).

    Examples:
        >>> with saving(world_comm.mpi_comm, os.path.abspath("out.txt"), "writing") as tmp:
        ...     if world_comm.rank == 0:
        ...         _ = open(tmp, "w").write("done")
        >>> open("out.txt").read()
        'done'
    """
    rank = comm.Get_rank()
    tmp = None
    with step(comm, f"{what}: preparing {target}"):
        if rank == 0:
            if directory:
                if check is not None:
                    check(target)
            elif os.path.isdir(target):
                raise IsADirectoryError(f"{target} is a directory")
            remove_stale(target)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            tmp = temporary_name(target)
            if not os.access(os.path.dirname(target), os.W_OK):
                raise PermissionError(f"cannot write into {os.path.dirname(target)}")
    with blocking(f"io: broadcasting the temporary name of {target}", comm):
        tmp = comm.bcast(tmp, root=0)
    try:
        yield tmp
        with step(comm, f"{what}: moving {tmp} to {target}"):
            if rank == 0:
                if directory:
                    replace_directory(tmp, target, check or (lambda _: None))
                else:
                    replace_file(tmp, target)
    except BaseException:
        if rank == 0:
            remove_path(tmp)
        raise
