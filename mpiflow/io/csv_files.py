"""CSV (delimited text) files: :func:`load_csv` and :func:`save_csv` (both collective).

Loading splits the file by **bytes**, not rows (rows are not known before the file is read):
after the header lines, rank ``r`` of ``p`` takes the ``r``-th of ``p`` balanced byte ranges
and parses the lines that *start* in it (it reads on past its range's end to finish its last
line, and skips the partial line at its start, which its neighbour parses). No rank reads
more than its range and one line. The ranks then hold uneven numbers of rows; one all-gather
of the counts and a rebalance (moving only the rows that cross the balanced parts'
boundaries, :func:`mpiflow.algorithms.exchange.rebalance`) make them a balanced ``S(0)``
tensor, which is redistributed to the layout asked for.

Saving: each rank formats the rows it holds (a tensor that is not split by rows is first
redistributed so that it is), one all-gather of the text's byte counts gives each rank its
offset, and every rank writes its text there with MPI-IO, into a temporary file that takes
the target's name when complete.

Examples:
    >>> p = flow.placement.all("cpu")
    >>> t = flow.tensor([[1.5, 2.0], [3.0, 4.25], [5.0, 6.0]], placement=p,
    ...                 sbp=flow.sbp.split(0))
    >>> save_csv(t, "t.csv", header="a,b")
    >>> open("t.csv").read()
    'a,b\\n1.5,2.0\\n3.0,4.25\\n5.0,6.0\\n'
    >>> load_csv("t.csv", header_lines=1).numpy().tolist()
    [[1.5, 2.0], [3.0, 4.25], [5.0, 6.0]]
"""

from __future__ import annotations

import io
import os
from typing import Any

import numpy
from mpi4py import MPI

from .. import dtypes as _dtypes
from ..algorithms.exchange import rebalance
from ..boxing.execute import redistribute
from ..communication.mpi.group import world_comm
from ..layouts.layout import Layout
from ..layouts.placement import Placement
from ..layouts.sbp import Split, balanced_bounds, balanced_sizes
from ..layouts.shards import shard_bounds
from ..tensors.tensor import Tensor
from .collective import (
    KIND,
    check_stamp,
    file_stamp,
    same_arguments,
    saving,
    step,
    target_layout,
    to_tensor,
    world,
    written_piece,
)
from .errors import blocking
from .npy import check_dtype

__all__ = ["line_start", "load_csv", "save_csv"]

_BLOCK = 1 << 16
_WRITE = 1 << 30  # MPI counts are ints: write at most 1 GiB per call


def line_start(f: Any, at: int, first: int, size: int) -> int:
    """Where the first line that starts at or after byte ``at`` starts (``size``: none does).

    Args:
        f: the file, open in binary mode.
        at: a byte offset.
        first: where the data's first line starts (after the header lines).
        size: the file's size.

    Examples:
        >>> f = io.BytesIO(b"1,2\\n3,4\\n5,6\\n")
        >>> line_start(f, 0, 0, 12), line_start(f, 1, 0, 12), line_start(f, 4, 0, 12)
        (0, 4, 4)
    """
    if at <= first:
        return first
    position = at - 1  # a line starts at ``at`` if the byte before it ends a line
    while position < size:
        f.seek(position)
        block = f.read(_BLOCK)
        if not block:
            break
        newline = block.find(b"\n")
        if newline >= 0:
            return position + newline + 1
        position += len(block)
    return size


def _header_end(path: str, lines: int) -> tuple[Any, int]:
    """Rank 0: the file's stamp and where its data starts, after ``lines`` header lines."""
    with open(path, "rb") as f:
        stamp = file_stamp(f.fileno())
        for i in range(lines):
            if not f.readline():
                raise ValueError(f"{path} has {i} lines, fewer than its {lines} header lines")
        return stamp, f.tell()


def _parse(text: bytes, sep: str, dtype: numpy.dtype, start: int, path: str) -> numpy.ndarray:
    """The rows of ``text`` as a 2-D array (``(0, 0)`` when it holds none)."""
    if not text.strip():
        return numpy.empty((0, 0), dtype=dtype)
    try:
        rows = numpy.loadtxt(io.StringIO(text.decode("utf-8")), delimiter=sep, dtype=dtype,
                             ndmin=2, comments="#")
    except ValueError as exc:
        raise ValueError(f"{path}: in the lines from byte {start}: {exc}") from None
    return numpy.ascontiguousarray(rows)


def _read_part(path: str, stamp: Any, first: int, sep: str, dtype: numpy.dtype,
               rank: int, size: int) -> numpy.ndarray:
    """This rank: parse the lines that start in its byte range."""
    with open(path, "rb") as f:
        check_stamp(file_stamp(f.fileno()), stamp, path)
        total = stamp[2]
        lo, hi = balanced_bounds(total - first, size, rank)
        start = line_start(f, first + lo, first, total)
        stop = line_start(f, first + hi, first, total) if first + hi < total else total
        f.seek(start)
        text = f.read(max(stop - start, 0))
        check_stamp(file_stamp(f.fileno()), stamp, path)
    return _parse(text, sep, dtype, start, path)


def load_csv(path: str | os.PathLike[str], placement: Placement | None = None,
             sbp: Any = None, sep: str = ",", header_lines: int = 0,
             dtype: Any = None) -> Tensor:
    """Load a delimited text file as a 2-D global tensor, rows split by bytes (collective).

    Args:
        path: the text file (the same on every rank).
        placement: where the tensor goes (default: every rank).
        sbp: its layout (default: ``split(0)``, rows; see :func:`mpiflow.tensor`).
        sep: the column separator.
        header_lines: lines to skip at the start.
        dtype: the element type (default: mpiflow's default float type, float32, as
            :func:`mpiflow.tensor` gives Python floats; pass ``flow.float64`` for doubles).

    Returns:
        A ``(rows, columns)`` tensor (one column gives ``(rows, 1)``). Blank lines and
        ``#`` comments are skipped.

    Raises:
        ParallelIOError: a missing file, a value that does not parse, rows of different
            lengths, a file that changed between the ranks' opens, ranks that passed
            different arguments (every rank).

    Examples:
        >>> if flow.env.get_rank() == 0:
        ...     _ = open("a.csv", "w").write("x;y\\n1;2\\n3;4\\n")
        >>> flow.comm.barrier()
        >>> load_csv("a.csv", sep=";", header_lines=1, dtype=flow.int64).numpy().tolist()
        [[1, 2], [3, 4]]
    """
    out_dtype = (_dtypes.as_dtype(dtype) if dtype is not None else _dtypes.default_float).numpy
    if header_lines < 0:
        raise ValueError(f"load_csv: header_lines must be >= 0, got {header_lines}")
    if not sep:
        raise ValueError("load_csv: sep must be a non-empty string")
    comm = world()
    rank, size = comm.Get_rank(), comm.Get_size()
    target = os.path.abspath(os.fspath(path))
    what = f"loading {target}"
    same_arguments(comm, what, path=target, placement=placement, sbp=sbp, sep=sep,
                   header_lines=header_lines, dtype=out_dtype)
    info = None
    with step(comm, what):
        if rank == 0:
            info = _header_end(target, header_lines)
    with blocking(f"io: broadcasting the header of {target}", comm):
        stamp, first = comm.bcast(info, root=0)
    rows = numpy.empty((0, 0), dtype=out_dtype)
    with step(comm, f"reading {target}"):
        rows = _read_part(target, stamp, first, sep, out_dtype, rank, size)
    with blocking(f"io: gathering the row counts of {target}", comm):
        counts = comm.allgather(rows.shape)
    widths = {w for n, w in counts if n}
    if len(widths) > 1:
        raise _ragged(target, counts)
    width = widths.pop() if widths else 0
    if not rows.shape[0]:
        rows = numpy.empty((0, width), dtype=out_dtype)
    n = sum(c for c, _ in counts)
    shape = (n, width)
    layout = target_layout(placement, sbp, 2)
    world_rows = Layout(Placement(layout.placement.type, list(range(size))), Split(0))
    balanced = rebalance(rows, world_comm, 0, [c for c, _ in counts], balanced_sizes(n, size))
    if layout == world_rows:
        return to_tensor(balanced, shape, layout, out_dtype)
    local = redistribute(balanced, shape, world_rows, layout.without_partial())
    box_data = local if layout.placement.coordinates(world_comm.rank) is not None else None
    return to_tensor(box_data, shape, layout, out_dtype)


def _ragged(path: str, counts: list[tuple[int, int]]) -> Exception:
    widths = [f"{w} on rank {r}" for r, (n, w) in enumerate(counts) if n]
    return KIND(f"loading {path}: its rows have different numbers of columns "
                f"({', '.join(widths)})")


def _format(rows: numpy.ndarray, sep: str, fmt: str | None) -> bytes:
    """The rows as text, one line each (floats in their shortest exact form)."""
    if not rows.size:
        return b""
    if rows.dtype == numpy.bool_:
        rows = rows.astype(numpy.uint8)
    cells = numpy.char.mod(fmt, rows) if fmt is not None else rows.astype(str)
    if cells.ndim == 1:
        return ("\n".join(cells.tolist()) + "\n").encode("utf-8")
    return ("\n".join(sep.join(row) for row in cells.tolist()) + "\n").encode("utf-8")


def _rows_of(tensor: Tensor) -> tuple[int, numpy.ndarray]:
    """This rank's first row and the whole rows it writes (collective where the tensor is
    split by columns: it is first redistributed to rows split over its ranks)."""
    shape = tuple(int(n) for n in tensor.shape)
    if not tensor.is_local and any(isinstance(s, Split) and s.dim == 1 for s in tensor.sbp):
        placement = tensor.placement
        rows = Layout(Placement(placement.type, list(placement.rank_list)), Split(0))
        data = redistribute(tensor._data, shape, Layout(placement, tensor.sbp), rows)
        coords = rows.placement.coordinates(world_comm.rank)
        box = (None if coords is None else
               shard_bounds(shape, rows.placement.mesh_shape, rows.sbp, coords))
    else:
        box, data = written_piece(tensor)
    if box is None or data is None:
        return 0, numpy.empty((0, *shape[1:]), dtype=numpy.dtype(tensor._data.dtype))
    return box[0][0], numpy.asarray(data.get() if hasattr(data, "get") else data)


def save_csv(tensor: Tensor, path: str | os.PathLike[str], sep: str = ",", *,
             header: str | None = None, fmt: str | None = None) -> None:
    """Save a 1-D or 2-D tensor as delimited text, each rank writing its rows (collective).

    Args:
        tensor: a global tensor of any layout (a local tensor: rank 0 writes it).
        path: the file (the same on every rank); written under a temporary name and renamed
            when complete.
        sep: the column separator.
        header: a first line (or lines) to write, without the final newline.
        fmt: a ``%`` format for every value (``"%.6g"``); default: the shortest text that
            reads back to the same value (bools as 0/1).

    Raises:
        ValueError: a tensor of another number of dims (on every rank).
        ParallelIOError: a rank failed (an unwritable path, ranks that passed different
            arguments), on every rank; nothing is left under ``path``.

    Examples:
        >>> t = flow.arange(4, placement=flow.placement.all("cpu"), sbp=flow.sbp.split(0))
        >>> save_csv(t, "n.csv")
        >>> open("n.csv").read().split()
        ['0', '1', '2', '3']
    """
    if not isinstance(tensor, Tensor):
        raise TypeError(f"save_csv saves an mpiflow tensor, got {type(tensor).__name__}")
    if tensor.dim() not in (1, 2):
        raise ValueError(f"save_csv writes 1-D or 2-D tensors, got {tensor.dim()} dims")
    check_dtype(numpy.dtype(tensor._data.dtype), "save_csv")
    comm = world()
    target = os.path.abspath(os.fspath(path))
    what = f"saving {target}"
    same_arguments(comm, what, path=target, sep=sep, header=header, fmt=fmt,
                   shape=tuple(tensor.shape), dtype=str(tensor.dtype),
                   layout="local" if tensor.is_local else (tensor.placement, tensor.sbp))
    first, rows = _rows_of(tensor)
    text = b""
    with step(comm, f"{what}: formatting the rows"):
        text = _format(rows, sep, fmt)
    head = (header + "\n").encode("utf-8") if header is not None else b""
    with blocking(f"io: gathering the text sizes of {target}", comm):
        sizes = comm.allgather((first, len(text)))
    me = comm.Get_rank()
    offset = len(head) + sum(n for r, (s, n) in enumerate(sizes) if n and (s, r) < (first, me))
    with saving(comm, target, what) as tmp:
        _write_text(comm, tmp, head, offset, text)


def _write_text(comm: Any, path: str, head: bytes, offset: int, text: bytes) -> None:
    """Every rank writes ``text`` at ``offset`` of a new file (rank 0 ``head`` first)."""
    with step(comm, f"creating {path}"), blocking(f"io: MPI-IO File.Open of {path}", comm):
        fh = MPI.File.Open(comm, path, MPI.MODE_WRONLY | MPI.MODE_CREATE)
    try:
        with step(comm, f"writing {path}"):
            if comm.Get_rank() == 0 and head:
                fh.Write_at(0, head)
            view = memoryview(text)
            for at in range(0, len(text), _WRITE):
                fh.Write_at(offset + at, view[at:at + _WRITE])
        with step(comm, f"flushing {path} to disk"), \
                blocking(f"io: MPI-IO Sync of {path}", comm):
            fh.Sync()
    finally:
        with blocking(f"io: MPI-IO File.Close of {path}", comm):
            fh.Close()
