"""The ``.npy`` format: a header (magic, version, a dict of dtype, order and shape), then data.

mpiflow writes the header itself (numpy's own helpers, so ``numpy.load`` reads the result) and
the data, always in logical C order, at the header's length from the start of the file; the
ranks write their shards' bytes there in parallel (:mod:`.mpiio`).

Examples:
    >>> header = header_bytes(numpy.dtype("float32"), (3, 4))
    >>> len(header) % 64          # numpy aligns the data to 64 bytes
    0
"""

from __future__ import annotations

import io
import math
import os
import sys
from typing import NamedTuple

import numpy
from numpy.lib import format as npy_format

__all__ = ["MAX_BYTES", "NpyHeader", "check_dtype", "check_size", "header_bytes",
           "read_header"]

# bool, signed and unsigned ints, floats, complex: what mpiflow tensors hold.
_KINDS = "biufc"

MAX_BYTES = sys.maxsize
"""The most bytes an array may hold (numpy's limit: the largest ``intp``)."""


def check_dtype(dtype: numpy.dtype, what: str) -> None:
    """Raise ``TypeError`` unless ``dtype`` is a plain numeric or bool dtype.

    Args:
        dtype: the dtype.
        what: the array's name, for the message.
    """
    if dtype.kind not in _KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise TypeError(f"{what}: arrays of dtype {dtype} cannot be saved as data; only bool, "
                        "integer, float and complex arrays can")


def check_size(shape: tuple[int, ...], dtype: numpy.dtype, what: str) -> int:
    """The number of data bytes of ``shape`` and ``dtype``, checked in exact integers.

    ``numpy.prod`` wraps around in int64, so a shape such as ``(2**62 + 1, 4)`` would pass a
    size check done with it; this one uses Python integers.

    Args:
        shape: the shape (non-negative Python ints).
        dtype: the element type.
        what: the array, for the message.

    Returns:
        ``prod(shape) * itemsize``.

    Raises:
        ValueError: the array would hold more than :data:`MAX_BYTES` bytes (even ignoring its
            zero-length dims, as numpy does), so no process could allocate it.

    Examples:
        >>> check_size((3, 4), numpy.dtype("<f4"), "w")
        48
    """
    nonzero = math.prod(max(int(n), 1) for n in shape) * max(dtype.itemsize, 1)
    if nonzero > MAX_BYTES:
        raise ValueError(f"{what}: shape {list(shape)} of {dtype} is too large "
                         f"({nonzero} bytes; an array holds at most {MAX_BYTES})")
    return math.prod(shape) * dtype.itemsize


def header_bytes(dtype: numpy.dtype, shape: tuple[int, ...]) -> bytes:
    """The ``.npy`` header of a C-order array of ``dtype`` and ``shape``, padded for alignment.

    Args:
        dtype: the element type.
        shape: the array's shape.

    Returns:
        The bytes before the data (format 1.0, or 2.0 for a header too long for 1.0).

    Examples:
        >>> header_bytes(numpy.dtype("<i8"), (2,))[:6]
        b'\\x93NUMPY'
    """
    fields = {"descr": npy_format.dtype_to_descr(dtype), "fortran_order": False,
              "shape": tuple(int(n) for n in shape)}
    out = io.BytesIO()
    try:
        npy_format.write_array_header_1_0(out, fields)
    except ValueError:  # more than 64 KiB of header: format 2.0
        out = io.BytesIO()
        npy_format.write_array_header_2_0(out, fields)
    return out.getvalue()


class NpyHeader(NamedTuple):
    """What a ``.npy`` file's header says.

    Attributes:
        dtype: the element type.
        shape: the array's shape.
        fortran_order: whether the data is in Fortran order (mpiflow never writes that).
        offset: where the data starts, in bytes from the start of the file.
        file_size: the file's size in bytes.
    """

    dtype: numpy.dtype
    shape: tuple[int, ...]
    fortran_order: bool
    offset: int
    file_size: int

    @property
    def data_bytes(self) -> int:
        """The number of data bytes the header announces."""
        return math.prod(self.shape) * self.dtype.itemsize  # exact: no int64 wrap-around


def read_header(path: str) -> NpyHeader:
    """Read and check the header of the ``.npy`` file at ``path``.

    Args:
        path: the file.

    Returns:
        Its header.

    Raises:
        ValueError: not a ``.npy`` file, an unreadable header, or fewer data bytes than the
            header announces (a truncated file).
        OSError: the file cannot be read.

    Examples:
        >>> numpy.save("model.w.npy", numpy.zeros((13, 5)))
        >>> read_header("model.w.npy").shape
        (13, 5)
    """
    with open(path, "rb") as f:
        try:
            version = npy_format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = npy_format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, fortran, dtype = npy_format.read_array_header_2_0(f)
            else:
                raise ValueError(f".npy format version {version} is not supported")
        except ValueError as exc:
            raise ValueError(f"{path} is not a readable .npy file: {exc}") from None
        offset = f.tell()
        size = os.fstat(f.fileno()).st_size
    header = NpyHeader(numpy.dtype(dtype), tuple(shape), bool(fortran), offset, size)
    check_size(header.shape, header.dtype, path)
    if size < offset + header.data_bytes:
        raise ValueError(f"{path} is truncated: its header announces {header.data_bytes} bytes "
                         f"of data but the file holds {size - offset}")
    return header
