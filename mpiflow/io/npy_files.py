"""``.npy`` files: :func:`load_npy` and :func:`save_npy` of global tensors (both collective).

Any ``.npy`` file loads, not only the ones mpiflow writes: rank 0 reads its header (format
1.0 or 2.0, either byte order, C or Fortran order), and every rank reads only its own region
with collective MPI-IO (:func:`.mpiio.read_array`: one subarray file view, one
``Read_all``). A Fortran-order file holds the transpose of its array in C order: each rank
reads its region of that transpose and transposes it back. :func:`save_npy` writes a C-order
file (as :func:`mpiflow.save` writes each array of a checkpoint): rank 0 the header, every
rank its region, into a temporary file renamed to ``path`` when complete.

Examples:
    >>> if flow.env.get_rank() == 0:
    ...     numpy.save("f.npy", numpy.asfortranarray(numpy.arange(6.0).reshape(2, 3)))
    >>> flow.comm.barrier()
    >>> load_npy("f.npy", sbp=flow.sbp.split(1)).numpy().tolist()
    [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
"""

from __future__ import annotations

import os
from typing import Any

import numpy

from .. import dtypes as _dtypes
from ..layouts.placement import Placement
from ..tensors.tensor import Tensor
from .collective import (
    KIND,
    check_stamp,
    file_stamp,
    native_dtype,
    read_box,
    same_arguments,
    saving,
    step,
    target_layout,
    to_tensor,
    world,
    written_piece,
)
from .errors import blocking
from .mpiio import read_array, write_region
from .npy import check_dtype, header_bytes, read_header

__all__ = ["load_npy", "save_npy"]


def _describe(path: str) -> tuple[Any, str, tuple[int, ...], bool, int]:
    header = read_header(path)
    native_dtype(header.dtype, path)
    return (file_stamp(path), header.dtype.str, header.shape, header.fortran_order,
            header.offset)


def load_npy(path: str | os.PathLike[str], placement: Placement | None = None,
             sbp: Any = None, dtype: Any = None) -> Tensor:
    """Load a ``.npy`` file as a global tensor, each rank reading only its shard (collective).

    Args:
        path: the file (the same on every rank).
        placement: where the tensor goes (default: every rank).
        sbp: its layout (default: ``split(0)``; see :func:`mpiflow.tensor`).
        dtype: convert to this dtype (default: the file's, in native byte order).

    Returns:
        The global tensor.

    Raises:
        ParallelIOError: a missing, damaged or truncated file, an element type mpiflow has
            no dtype for (objects, records, strings), a file that changed between the ranks'
            opens, ranks that passed different arguments (on every rank).

    Examples:
        >>> if flow.env.get_rank() == 0:
        ...     numpy.save("v.npy", numpy.arange(5, dtype=">i4"))     # big-endian
        >>> flow.comm.barrier()
        >>> v = load_npy("v.npy")
        >>> v.dtype, v.numpy().tolist()
        (mpiflow.int32, [0, 1, 2, 3, 4])
    """
    wanted = _dtypes.as_dtype(dtype).numpy if dtype is not None else None
    comm = world()
    target = os.path.abspath(os.fspath(path))
    what = f"loading {target}"
    same_arguments(comm, what, path=target, placement=placement, sbp=sbp, dtype=wanted)
    info = None
    with step(comm, what):
        if comm.Get_rank() == 0:
            info = _describe(target)
    with blocking(f"io: broadcasting the header of {target}", comm):
        stamp, found, shape, fortran, offset = comm.bcast(info, root=0)
    file_dtype = numpy.dtype(found)
    out_dtype = wanted if wanted is not None else native_dtype(file_dtype, what)
    layout = target_layout(placement, sbp, len(shape))
    box = read_box(shape, layout)
    with step(comm, f"{what}: checking it is the file rank 0 read"):
        check_stamp(file_stamp(target), stamp, target)
    # A Fortran-order file is the C-order file of the transpose: read the transposed region.
    stored_shape = tuple(reversed(shape)) if fortran else shape
    stored_box = tuple(reversed(box)) if fortran and box is not None else box
    data = read_array(comm, target, offset, file_dtype, stored_shape, stored_box, KIND)
    local = None
    if box is not None:
        local = data.reshape(tuple(b - a for a, b in stored_box or ()))
        if fortran:
            local = local.T
        local = local.astype(out_dtype, copy=False)
    return to_tensor(local, shape, layout, out_dtype)


def save_npy(tensor: Tensor, path: str | os.PathLike[str]) -> None:
    """Save a tensor as a ``.npy`` file, each rank writing its own shard (collective).

    Args:
        tensor: a global tensor of any layout (a local tensor: rank 0 writes it).
        path: the file (the same on every rank); written under a temporary name and renamed
            when complete, so a failed save leaves nothing there.

    Raises:
        ParallelIOError: a rank failed (on every rank).

    Examples:
        >>> t = flow.ones(3, 2, placement=flow.placement.all("cpu"), sbp=flow.sbp.split(1))
        >>> save_npy(t, "ones.npy")
        >>> numpy.load("ones.npy").shape
        (3, 2)
    """
    if not isinstance(tensor, Tensor):
        raise TypeError(f"save_npy saves an mpiflow tensor, got {type(tensor).__name__}")
    shape = tuple(int(n) for n in tensor.shape)
    dtype = numpy.dtype(tensor._data.dtype)
    check_dtype(dtype, "save_npy")
    comm = world()
    target = os.path.abspath(os.fspath(path))
    what = f"saving {target}"
    same_arguments(comm, what, path=target, shape=shape, dtype=dtype.str,
                   layout="local" if tensor.is_local else (tensor.placement, tensor.sbp))
    box, data = written_piece(tensor)
    with saving(comm, target, what) as tmp:
        header = header_bytes(dtype, shape)
        write_region(comm, tmp, len(header), dtype, shape, box, data, header=header,
                     create=True, kind=KIND)
