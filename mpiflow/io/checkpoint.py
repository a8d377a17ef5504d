"""Saving and loading checkpoints: :func:`save` and :func:`load` (both collective).

Every array leaf becomes one ``.npy`` file of its whole logical value, written and read in
parallel with MPI-IO (:mod:`.mpiio`): each rank moves only the bytes of its own shard, so a
checkpoint saved on N ranks in one layout loads on M ranks in any other. The directory layout
and the metadata are described in :mod:`.format`; the failure handling in :mod:`.errors`.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from collections.abc import Callable
from typing import Any

import numpy

from .._version import __version__
from ..boxing.execute import redistribute
from ..communication.mpi.group import world_comm
from ..layouts.layout import Layout
from ..layouts.placement import Placement
from ..layouts.sbp import SbpParallel
from ..layouts.shards import check_shape, shard_bounds, volume
from ..tensors.tensor import Tensor
from .collective import same_arguments, written_piece
from .errors import CheckpointError, agreed, blocking
from .files import (
    METADATA,
    OBJECTS,
    check_target,
    fsync_directory,
    fsync_file,
    is_temporary,
    make_temporary,
    remove_stale,
    replace_directory,
    stale_temporaries,
)
from .format import FORMAT, VERSION, ArraySpec, file_names, parse_metadata, structure_of
from .mpiio import read_array, write_array
from .npy import check_dtype, header_bytes, read_header
from .tree import flatten, unflatten
from .unpickle import loads

__all__ = ["SbpChoice", "load", "save"]

# What ``load`` takes as ``sbp``: one layout for every tensor, or a function of the name.
SbpChoice = SbpParallel | tuple[SbpParallel, ...] | list[SbpParallel] | Callable[[str], Any]


def _is_array(value: Any) -> bool:
    return isinstance(value, Tensor) or (isinstance(value, numpy.ndarray)
                                         and value.dtype.kind in "biufc"
                                         and value.dtype.fields is None)


def _spec(name: str, file: str, value: Any) -> ArraySpec:
    if isinstance(value, numpy.ndarray):
        return ArraySpec(name, file, "ndarray", value.dtype, tuple(value.shape))
    dtype = numpy.dtype(value._data.dtype)
    check_dtype(dtype, name)
    if value.is_local:
        return ArraySpec(name, file, "local", dtype, tuple(value._data.shape),
                         value.requires_grad)
    layout = {"placement": {"type": value.placement.type,
                            "ranks": value.placement.ranks.tolist()},
              "sbp": [str(s) for s in value.sbp]}
    return ArraySpec(name, file, "global", dtype, tuple(value.shape), value.requires_grad,
                     layout)


def _write_leaf(comm: Any, directory: str, spec: ArraySpec, value: Any) -> None:
    if spec.kind == "global":
        box, data = written_piece(value)
    elif comm.Get_rank() == 0:  # local tensors and arrays: rank 0's, assumed replicated
        box = tuple((0, n) for n in spec.shape)
        data = value._data if isinstance(value, Tensor) else value
    else:
        box, data = None, None
    if box is not None and volume(box) == 0:
        box = None
    write_array(comm, os.path.join(directory, spec.file), header_bytes(spec.dtype, spec.shape),
                spec.dtype, spec.shape, box, data)


def _write_index(directory: str, meta: dict[str, Any], objects: list[tuple[str, Any]]) -> None:
    """Rank 0: write ``objects.pkl`` (if needed) and ``metadata.json``, flushed to disk."""
    if objects:
        blobs = []
        for name, value in objects:
            try:
                blobs.append(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
            except Exception as exc:
                raise TypeError(f"{name!r}: a {type(value).__name__} is neither an array, a "
                                f"JSON value nor picklable ({exc})") from exc
        with open(os.path.join(directory, OBJECTS), "wb") as f:
            pickle.dump(blobs, f, protocol=pickle.HIGHEST_PROTOCOL)
        fsync_file(os.path.join(directory, OBJECTS))
    with open(os.path.join(directory, METADATA), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1, allow_nan=False)
        f.write("\n")
    fsync_file(os.path.join(directory, METADATA))
    fsync_directory(directory)


def save(obj: Any, path: str | os.PathLike[str]) -> None:
    """Save ``obj`` as a checkpoint directory at ``path`` (collective: every rank calls it).

    Each global tensor becomes one ``.npy`` file of its whole logical value, written in
    parallel: every rank writes only its shard's bytes, collectively through MPI-IO (partial
    tensors are reduce-scattered first; of broadcast copies only one is written). Local
    tensors, numpy arrays and Python values are *assumed replicated*: rank 0's are written,
    by rank 0 alone. Python values are stored in the JSON metadata where JSON can hold them
    (None, bools, ints, finite floats, strings), others pickled into ``objects.pkl``.

    Every rank must pass the same ``path`` (one all-reduce of its hash checks it first: ranks
    that name different directories, ``f"ckpt_{rank}"``, all raise before anything is written).
    The checkpoint is written into a temporary directory next to ``path`` and takes its place
    atomically, only after every rank has finished and the data is on disk. If any rank fails
    the call raises on every rank and what was at ``path`` is untouched. The temporary
    directories that interrupted saves of ``path`` left (``.NAME.tmp-*``: a save killed by a
    signal, the watchdog or Ctrl-C) are removed first; one job at a time may save to a path.

    Args:
        obj: (nested) dicts, lists and tuples of tensors, numpy arrays and Python values,
            e.g. ``{"model": model.state_dict(), "optim": optim.state_dict(), "step": 100}``.
        path: the checkpoint directory; an existing checkpoint there is replaced (any other
            non-empty directory is refused). Missing parent directories are created.

    Raises:
        CheckpointError: the ranks passed different paths, or some rank failed (raised on
            every rank, with its message).

    Examples:
        >>> w = flow.randn(8, 4, placement=flow.placement.all("cpu"), sbp=flow.sbp.split(0))
        >>> flow.save({"w": w, "step": 3}, "ckpt/step-3")
        >>> numpy.load("ckpt/step-3/w.npy").shape
        (8, 4)
    """
    comm = world_comm.mpi_comm
    rank = comm.Get_rank()
    target = os.path.abspath(os.fspath(path))
    same_arguments(comm, f"saving {target}", CheckpointError, path=target)
    with agreed(comm, f"saving {target}: preparing"):
        flat = flatten(obj, _is_array)
        names = [name for name, _ in flat.arrays]
        specs = [_spec(n, f, v) for n, f, (_, v) in zip(names, file_names(names), flat.arrays)]
        mine = {"format": FORMAT, "version": VERSION, "mpiflow_version": __version__,
                "world_size": comm.Get_size(), "tree": flat.node,
                "arrays": [s.to_json() for s in specs], "objects": len(flat.objects)}
        json.dumps(mine, allow_nan=False)
    with blocking(f"checkpoint: broadcasting the metadata of {target}", comm):
        meta = comm.bcast(mine, root=0)
    with agreed(comm, f"saving {target}: the ranks passed different structures (every rank "
                      "must pass the same tree, with the same global tensors)"):
        if structure_of(mine) != structure_of(meta):
            raise ValueError("this rank's tree or global tensors differ from rank 0's")
    specs = [ArraySpec.from_json(a) for a in meta["arrays"]]  # rank 0's local arrays
    tmp = None
    with agreed(comm, f"saving {target}: creating a temporary directory"):
        if rank == 0:
            check_target(target)
            remove_stale(target)
            tmp = make_temporary(target)
    with blocking(f"checkpoint: broadcasting the temporary directory of {target}", comm):
        tmp = comm.bcast(tmp, root=0)
    try:
        for spec, (_, value) in zip(specs, flat.arrays):
            _write_leaf(comm, tmp, spec, value)
        with agreed(comm, f"saving {target}: writing the metadata"):
            if rank == 0:
                _write_index(tmp, meta, flat.objects)
        with agreed(comm, f"saving {target}: moving the checkpoint into place"):
            if rank == 0:
                replace_directory(tmp, target)
    except BaseException:
        if rank == 0:
            shutil.rmtree(tmp, ignore_errors=True)
        raise


def _inside(directory: str, name: str) -> str:
    """The path of the file ``name`` of checkpoint ``directory``, refused if it leads outside.

    A checkpoint's files may be symlinks only to files inside the checkpoint directory (both
    resolved, so a checkpoint directory that is itself a symlink is fine): a link to a file
    elsewhere would make ``load`` read data the checkpoint does not hold.

    Raises:
        ValueError: the resolved file lies outside the resolved directory.
    """
    path = os.path.join(directory, name)
    if os.path.islink(path):  # only links need resolving: the names themselves are plain
        real, root = os.path.realpath(path), os.path.realpath(directory)
        if os.path.commonpath([real, root]) != root:
            raise ValueError(f"{path} is a symlink to {real}, outside the checkpoint directory "
                             f"{root}: refusing to load it (copy the file into the checkpoint, "
                             "or link to a file inside it)")
    return path


def _read_index(directory: str) -> tuple[dict[str, Any], list[int], list[bytes]]:
    """Rank 0: the metadata, each array's data offset and the pickled objects, all checked."""
    if is_temporary(directory):
        raise FileNotFoundError(f"{directory} is not a checkpoint: it is the temporary "
                                "directory of a save that did not finish")
    if not os.path.isdir(directory):
        stale = stale_temporaries(directory)
        raise FileNotFoundError(f"no checkpoint at {directory}" + (
            " (it is not a directory)" if os.path.exists(directory) else "") + (
            f" (an interrupted save left {os.path.basename(stale[0])}, which the next save of "
            "this path removes)" if stale else ""))
    meta_path = os.path.join(directory, METADATA)
    if not os.path.isfile(meta_path):
        raise FileNotFoundError(f"{directory} is not an mpiflow checkpoint: it has no "
                                f"{METADATA}")
    _inside(directory, METADATA)
    try:
        with open(meta_path, encoding="utf-8") as f:
            meta = json.load(f)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{meta_path} is corrupted: not valid JSON ({exc})") from None
    specs, n_objects = parse_metadata(meta)
    offsets = []
    for spec in specs:
        header = read_header(_inside(directory, spec.file))
        if (header.dtype != spec.dtype or header.shape != spec.shape
                or header.fortran_order):
            raise ValueError(f"{spec.file} does not match the metadata: it holds "
                             f"{header.dtype} {header.shape}"
                             f"{' in Fortran order' if header.fortran_order else ''}, the "
                             f"metadata says {spec.dtype} {spec.shape}")
        offsets.append(header.offset)
    blobs: list[bytes] = []
    if n_objects:
        with open(_inside(directory, OBJECTS), "rb") as f:
            blobs = loads(f.read())  # a list of bytes: nothing else is allowed, ever
        if (not isinstance(blobs, list) or len(blobs) != n_objects
                or any(type(b) is not bytes for b in blobs)):
            raise ValueError(f"{OBJECTS} does not hold the {n_objects} objects the metadata "
                             "says")
    return meta, offsets, blobs


def _target_layout(spec: ArraySpec, placement: Placement | None,
                   sbp: SbpChoice | None) -> Layout | None:
    """The layout ``spec``'s tensor is loaded in, or None for a local whole value."""
    if spec.kind == "ndarray" or placement is None:
        return None
    # sbp values are callable too (OneFlow's flow.sbp.broadcast()): a function is anything else
    choice = sbp(spec.name) if callable(sbp) and not isinstance(sbp, SbpParallel) else sbp
    if choice is None:
        return None
    layout = Layout(placement, choice)
    try:
        check_shape(spec.shape, layout.sbp)
    except ValueError as exc:
        raise ValueError(f"{spec.name!r}: {exc} (pass sbp as a function of the name to choose "
                         "a layout per tensor)") from None
    return layout


def _read_leaf(comm: Any, directory: str, spec: ArraySpec, offset: int,
               layout: Layout | None) -> Any:
    path = os.path.join(directory, spec.file)
    if layout is None:  # every rank reads the whole value
        whole = tuple((0, n) for n in spec.shape)
        data = read_array(comm, path, offset, spec.dtype, spec.shape,
                          whole if volume(whole) else None).reshape(spec.shape)
        if spec.kind == "ndarray":
            return data
        return Tensor(data, requires_grad=spec.requires_grad)
    placement = layout.placement
    plain = layout.without_partial()  # read as broadcast, then keep it on coordinate 0
    coords = placement.coordinates(comm.Get_rank())
    box = None if coords is None else shard_bounds(spec.shape, placement.mesh_shape,
                                                   plain.sbp, coords)
    data = read_array(comm, path, offset, spec.dtype, spec.shape,
                      box if box is not None and volume(box) else None)
    if box is not None:
        data = data.reshape(tuple(b - a for a, b in box))
    if layout.is_partial:
        data = redistribute(data, spec.shape, plain, layout)
    return Tensor(data, placement, layout.sbp, spec.shape, requires_grad=spec.requires_grad)


def load(path: str | os.PathLike[str], placement: Placement | None = None,
         sbp: SbpChoice | None = None, *, weights_only: bool = True) -> Any:
    """Load a checkpoint written by :func:`save` (collective: every rank calls it).

    Whatever the world size and layouts at save time, each rank reads (MPI-IO) only the bytes
    it needs. Without ``placement`` every tensor comes back local with its whole value; with a
    placement and an ``sbp`` tensors come back global in that layout, each rank reading only
    its shard. numpy arrays come back as numpy arrays (whole), Python values as they were
    (pickled ones through a restricted unpickler unless ``weights_only=False``).

    Args:
        path: the checkpoint directory.
        placement: where global tensors go (None: local tensors).
        sbp: their layout: one for every tensor, or a function from the leaf's name
            (``"model.layer.weight"``) to its layout, or to None for a local tensor.
        weights_only: unpickle the Python values of ``objects.pkl`` with a restricted
            unpickler that rebuilds only plain data (sets, complex numbers, ``OrderedDict``,
            numpy scalars and arrays, ...: :mod:`mpiflow.io.unpickle`) and refuses any other
            class or function, so a checkpoint from elsewhere cannot run code on load (as
            ``torch.load``'s default). ``False`` unpickles anything: only for checkpoints
            whose source you trust.

    Returns:
        The saved structure (dicts, lists, tuples) with its leaves, dicts as plain dicts.

    Raises:
        ValueError: ``placement`` without ``sbp`` or the reverse (on every rank: the ranks
            have agreed on their arguments first).
        CheckpointError: the ranks passed different paths (or placements, layouts), a
            missing or damaged checkpoint, a malformed metadata field (named),
            an unknown format version, a value ``weights_only`` refuses, a layout that does
            not fit a tensor, a read error (on every rank).

    Examples:
        >>> flow.save({"w": flow.zeros(4, 6), "step": 3}, "ckpt/step-3")
        >>> state = flow.load("ckpt/step-3", flow.placement.all("cpu"), flow.sbp.split(1))
        >>> state["w"].sbp, state["step"]
        ((mpiflow.sbp.split(dim=1),), 3)
    """
    comm = world_comm.mpi_comm
    directory = os.path.abspath(os.fspath(path))
    same_arguments(comm, f"loading {directory}", CheckpointError, path=directory,
                   placement=placement, weights_only=weights_only,
                   sbp="a function" if callable(sbp) and not isinstance(sbp, SbpParallel)
                   else sbp)
    if (placement is None) != (sbp is None):
        raise ValueError("load takes a placement and an sbp together (or neither, for local "
                         "tensors)")
    if placement is not None and not isinstance(placement, Placement):
        raise TypeError(f"placement must be a mpiflow.placement, got {placement!r}")
    index = None
    with agreed(comm, f"loading {directory}"):
        if comm.Get_rank() == 0:
            index = _read_index(directory)
    with blocking(f"checkpoint: broadcasting the index of {directory}", comm):
        meta, offsets, blobs = comm.bcast(index, root=0)
    with agreed(comm, f"loading {directory}: unpickling its Python objects"):
        objects = [loads(b, weights_only) for b in blobs]
        specs = [ArraySpec.from_json(a) for a in meta["arrays"]]
    values = []
    for spec, offset in zip(specs, offsets):
        with agreed(comm, f"loading {directory}: choosing the layout of {spec.name!r}"):
            layout = _target_layout(spec, placement, sbp)
        values.append(_read_leaf(comm, directory, spec, offset, layout))
    with agreed(comm, f"loading {directory}: rebuilding its structure"):
        tree = unflatten(meta["tree"], values, objects)
    return tree
