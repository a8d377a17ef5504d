"""The scientists' file formats in parallel: writing and reading one dataset in each format
against raw MPI-IO of the same bytes (the bound) and against h5py on one process.

Run ``mpiexec -n 2 python -m mpiflow.bench.science_io`` (``--size 256MiB``, ``--dir PATH``,
``--repeat N``, ``--markdown``, ``--memory``); only rank 0 prints. The dataset is a float64
``(rows, 1024)`` tensor split by rows over every rank. Each side is timed from a barrier to
the slowest rank's end, the best of ``--repeat`` rounds (each round runs every format once,
so that the slow moments of a shared machine fall on every side alike); every write makes a
new file (the previous one is removed first, untimed) and is flushed to disk before
its clock stops (``MPI_File_sync`` or ``fsync``, and the rename of mpiflow's temporary file).
Reads follow the writes, so they come mostly from the page cache: they measure the libraries'
overheads beside MPI-IO's rather than the disk. CSV is timed on a sixteenth of the bytes (its
text is formatted and parsed in Python and numpy, not copied) and compared with the bound
scaled to its bytes.

``--memory`` runs the chain load -> normalize per column -> save of an HDF5 dataset (each rank's
share is a ``1 / ranks`` of it) and reports each rank's peak resident memory during the chain
beside its share, from Linux's ``VmHWM``, reset before the chain.

Examples:
    >>> rows = run(None, size_bytes=1 << 20, repeat=1, formats=("mpiio", "hdf5"))
    >>> [r["format"] for r in rows]
    ['MPI-IO (bound)', 'HDF5 contiguous']
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy
from mpi4py import MPI

from ..communication.mpi.group import world_comm
from ..io import (
    load_csv,
    load_hdf5,
    load_netcdf,
    load_npy,
    load_zarr,
    save_csv,
    save_hdf5,
    save_netcdf,
    save_npy,
    save_zarr,
)
from ..layouts.placement import Placement
from ..layouts.sbp import Split
from ..layouts.shards import shard_bounds
from ..tensors.tensor import Tensor
from .plan import format_bytes, parse_bytes

__all__ = ["FORMATS", "format", "main", "measure_chain_memory", "run"]

_BYTES = 256 << 20
_COLUMNS = 1024
FORMATS = ("mpiio", "h5py", "hdf5", "hdf5-gzip", "netcdf", "zarr", "npy", "csv")
_NAMES = {"mpiio": "MPI-IO (bound)", "h5py": "h5py, 1 process", "hdf5": "HDF5 contiguous",
          "hdf5-gzip": "HDF5 gzip-1, chunked", "netcdf": "netCDF-4", "zarr": "Zarr (zstd)",
          "npy": ".npy", "csv": "CSV"}


def _timed(call: Callable[[], Any], comm: Any, repeat: int,
           setup: Callable[[], Any] | None = None) -> float:
    """The best over ``repeat`` runs of the slowest rank's seconds for ``call`` (``setup``
    runs before each, untimed)."""
    best = float("inf")
    for _ in range(repeat):
        if setup is not None:
            setup()
        comm.Barrier()
        start = time.perf_counter()
        call()
        elapsed = numpy.array([time.perf_counter() - start])
        comm.Allreduce(MPI.IN_PLACE, elapsed, MPI.MAX)
        best = min(best, float(elapsed[0]))
    return best


def _dataset(rows: int) -> Tensor:
    """The benchmark's float64 ``(rows, 1024)`` tensor, split by rows (each rank its share)."""
    comm = world_comm
    placement = Placement("cpu", list(range(comm.size)))
    box = shard_bounds((rows, _COLUMNS), (comm.size,), (Split(0),), (comm.rank,))
    lo, hi = box[0]
    return Tensor(_values(lo, hi), placement, (Split(0),), (rows, _COLUMNS))


def _values(lo: int, hi: int) -> numpy.ndarray:
    """Rows ``[lo, hi)`` of the dataset: uniform random doubles rounded to 1/1024 (about
    half their bytes are zeros, as in measured data stored with more digits than it has)."""
    rng = numpy.random.default_rng(lo)
    return numpy.round(rng.random((hi - lo, _COLUMNS)) * 1024.0) / 1024.0


def _mpiio_write(path: str, t: Tensor) -> None:
    comm: Any = world_comm.mpi_comm
    lo = shard_bounds(tuple(t.shape), (comm.Get_size(),), (Split(0),), (comm.Get_rank(),))[0][0]
    fh = MPI.File.Open(comm, path, MPI.MODE_WRONLY | MPI.MODE_CREATE)
    fh.Write_at(lo * _COLUMNS * 8, t._data)  # one contiguous block per rank: independent
    fh.Sync()
    fh.Close()


def _mpiio_read(path: str, t: Tensor) -> None:
    comm: Any = world_comm.mpi_comm
    lo = shard_bounds(tuple(t.shape), (comm.Get_size(),), (Split(0),), (comm.Get_rank(),))[0][0]
    out = numpy.empty_like(t._data)
    fh = MPI.File.Open(comm, path, MPI.MODE_RDONLY)
    fh.Read_at(lo * _COLUMNS * 8, out)
    fh.Close()


def _h5py_write(path: str, whole: numpy.ndarray | None) -> None:
    if world_comm.rank != 0 or whole is None:
        return
    h5py = importlib.import_module("h5py")
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=whole)
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


def _h5py_read(path: str) -> None:
    if world_comm.rank == 0:
        h5py = importlib.import_module("h5py")
        with h5py.File(path, "r") as f:
            f["x"][()]


def _sides(kind: str, path: str, t: Tensor, whole: numpy.ndarray | None
           ) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """The write and the read of one format."""
    placement, sbp = t.placement, t.sbp
    sides: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
        "mpiio": (lambda: _mpiio_write(path, t), lambda: _mpiio_read(path, t)),
        "h5py": (lambda: _h5py_write(path, whole), lambda: _h5py_read(path)),
        "hdf5": (lambda: save_hdf5(t, path, "x"),
                 lambda: load_hdf5(path, "x", placement, sbp)),
        "hdf5-gzip": (lambda: save_hdf5(t, path, "x", compression="gzip",
                                        compression_opts=1),
                      lambda: load_hdf5(path, "x", placement, sbp)),
        "netcdf": (lambda: save_netcdf(t, path, "x"),
                   lambda: load_netcdf(path, "x", placement, sbp)),
        "zarr": (lambda: save_zarr(t, path), lambda: load_zarr(path, placement, sbp)),
        "npy": (lambda: save_npy(t, path), lambda: load_npy(path, placement, sbp)),
        "csv": (lambda: save_csv(t, path),
                lambda: load_csv(path, placement, sbp, dtype="float64")),
    }
    return sides[kind]


@contextlib.contextmanager
def _directory(directory: str | None) -> Iterator[str]:
    """``directory``, or a new temporary one (rank 0's choice, removed afterwards)."""
    comm: Any = world_comm.mpi_comm
    if directory is not None:
        yield directory
        return
    made = tempfile.mkdtemp(prefix="mpiflow-science-io-") if comm.Get_rank() == 0 else None
    made = comm.bcast(made, root=0)
    try:
        yield made
    finally:
        comm.Barrier()
        if comm.Get_rank() == 0:
            shutil.rmtree(made, ignore_errors=True)


def run(settings: Any = None, *, size_bytes: int | None = None, directory: str | None = None,
        repeat: int | None = None, formats: Sequence[str] = FORMATS) -> list[dict[str, Any]]:
    """Time writing and reading the dataset in each format (collective).

    Args:
        settings: the bench's settings; read for ``science_io_bytes``, ``science_io_dir`` and
            ``science_io_repeat`` where it has them (None: the defaults).
        size_bytes: the dataset's size (default 256 MiB; whole rows of 1024 float64).
        directory: where to write, the same path on every rank (default: a new temporary
            directory on rank 0's disk).
        repeat: timed runs per side (the best is kept; default 3).
        formats: which of :data:`FORMATS`, in order.

    Returns:
        One dict per format: ``format``, ``bytes``, ``write_s``, ``read_s``, ``write_GBps``,
        ``read_GBps`` and, where the bound was measured, ``write_vs_bound`` and
        ``read_vs_bound`` (seconds over the bound's seconds for as many bytes).
    """
    size = size_bytes or getattr(settings, "science_io_bytes", None) or _BYTES
    repeat = repeat or getattr(settings, "science_io_repeat", None) or 3
    directory = directory or getattr(settings, "science_io_dir", None)
    comm = world_comm.mpi_comm
    with _directory(directory) as where:
        cases = []
        for kind in formats:
            nbytes = size // 16 if kind == "csv" else size
            rows = max(nbytes // (8 * _COLUMNS), world_comm.size)
            whole = None
            if kind == "h5py" and world_comm.rank == 0:
                whole = _values(0, rows)
            path = os.path.join(where, f"data.{kind}")
            cases.append((kind, rows, path, *_sides(kind, path, _dataset(rows), whole)))
        best = {kind: [float("inf"), float("inf")] for kind in formats}
        # Rounds: every format once per round, so that a slow moment of a shared machine
        # costs each side alike; the best round of each side is kept.
        for _ in range(repeat):
            for kind, _rows, path, write, read in cases:
                # Each write makes a new file (mpiflow's saves always do: a temporary, renamed).
                seconds_w = _timed(write, comm, 1, functools.partial(_remove, path))
                seconds_r = _timed(read, comm, 1)
                best[kind] = [min(best[kind][0], seconds_w), min(best[kind][1], seconds_r)]
        _clear(where)
    rows_out: list[dict[str, Any]] = []
    bound: dict[str, float] = {}
    for kind, rows, *_ in cases:
        seconds_w, seconds_r = best[kind]
        moved = rows * _COLUMNS * 8
        row: dict[str, Any] = {"format": _NAMES[kind], "bytes": moved, "write_s": seconds_w,
                               "read_s": seconds_r, "write_GBps": moved / seconds_w / 1e9,
                               "read_GBps": moved / seconds_r / 1e9}
        if kind == "mpiio":
            bound = {"write": seconds_w / moved, "read": seconds_r / moved}
        if bound:
            row["write_vs_bound"] = seconds_w / (bound["write"] * moved)
            row["read_vs_bound"] = seconds_r / (bound["read"] * moved)
        rows_out.append(row)
    return rows_out


def _remove(path: str) -> None:
    """Remove the file or directory ``path`` if it exists (rank 0), then wait (collective)."""
    world_comm.mpi_comm.Barrier()
    if world_comm.rank == 0 and os.path.lexists(path):
        (shutil.rmtree if os.path.isdir(path) else os.remove)(path)
    world_comm.mpi_comm.Barrier()


def _clear(where: str) -> None:
    """Remove everything in ``where`` (rank 0), then wait for it (collective)."""
    world_comm.mpi_comm.Barrier()
    if world_comm.rank == 0:
        for entry in os.listdir(where):
            target = os.path.join(where, entry)
            (shutil.rmtree if os.path.isdir(target) else os.remove)(target)
    world_comm.mpi_comm.Barrier()


def format(rows: list[dict[str, Any]], markdown: bool = False) -> str:
    """The table of :func:`run`'s rows (plain text, or Markdown).

    Examples:
        >>> print(format([{"format": "x", "bytes": 1 << 20, "write_s": 0.5, "read_s": 0.25,
        ...                "write_GBps": 0.002, "read_GBps": 0.004}], markdown=True))
        | format | bytes | write s | read s | write GB/s | read GB/s | write/bound | read/bound |
        |---|---|---|---|---|---|---|---|
        | x | 1 MiB | 0.500 | 0.250 | 0.00 | 0.00 | - | - |
    """
    head = ["format", "bytes", "write s", "read s", "write GB/s", "read GB/s",
            "write/bound", "read/bound"]
    body = []
    for r in rows:
        ratio = [f"{r[k]:.2f}x" if k in r else "-" for k in ("write_vs_bound", "read_vs_bound")]
        body.append([r["format"], format_bytes(r["bytes"]), f"{r['write_s']:.3f}",
                     f"{r['read_s']:.3f}", f"{r['write_GBps']:.2f}", f"{r['read_GBps']:.2f}",
                     *ratio])
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(cells) + " |" for cells in body]
        return "\n".join(lines)
    widths = [max(len(str(c)) for c in col) for col in zip(head, *body)]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(cells, widths))
                     for cells in [head, *body])


def _rss() -> tuple[int, int]:
    """This process's resident and peak resident memory in bytes (Linux ``/proc``)."""
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(rest.split()[0]) * 1024
    return fields["VmRSS"], fields["VmHWM"]


def _reset_peak() -> int:
    """Reset this process's peak resident memory to its current one; return that (bytes)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # Linux: VmHWM := VmRSS
    return _rss()[0]


def measure_chain_memory(size_bytes: int = 1 << 30, directory: str | None = None
                         ) -> list[dict[str, Any]]:
    """Peak memory of each rank in the chain load -> normalize columns -> save (collective).

    An HDF5 dataset of ``size_bytes`` (float64, 1024 columns) is written first. Then, with
    each rank's peak resident memory reset before each step (``/proc/self/clear_refs``): the
    load (:func:`~mpiflow.io.load_hdf5`, split by rows), the normalization (each column made
    zero-mean and unit-variance, in place: ``x.sub_(x.mean(0)).div_(x.std(0))``) and the save
    (:func:`~mpiflow.io.save_hdf5`).

    Returns:
        Per rank: ``share`` (its bytes of the dataset), ``dataset`` (all of it), ``before``
        (resident bytes before the chain), ``peak`` (the most resident bytes during it) and
        ``load``, ``normalize``, ``save``: how many bytes each step's peak rose above the
        resident memory it started from.
    """
    comm: Any = world_comm.mpi_comm
    rows = max(size_bytes // (8 * _COLUMNS), world_comm.size)
    with _directory(directory) as where:
        source, target = os.path.join(where, "in.h5"), os.path.join(where, "out.h5")
        t = _dataset(rows)
        save_hdf5(t, source, "x")
        share = t._data.nbytes
        del t
        comm.Barrier()
        before = start = _reset_peak()
        x = load_hdf5(source, "x")
        load = _rss()[1] - start
        start = _reset_peak()
        mean, std = x.mean(0), x.std(0)
        x.sub_(mean).div_(std)
        normalize = _rss()[1] - start
        start = _reset_peak()
        save_hdf5(x, target, "x")
        save = _rss()[1] - start
        peak = before + max(load, (start - before) + save, load + normalize)
        mine = {"rank": world_comm.rank, "share": share, "dataset": rows * _COLUMNS * 8,
                "before": before, "peak": peak, "load": load, "normalize": normalize,
                "save": save}
        del x
        return list(comm.allgather(mine))


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: ``mpiexec -n 2 python -m mpiflow.bench.science_io [--markdown]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=parse_bytes, default=_BYTES, help="dataset bytes")
    parser.add_argument("--dir", default=None, help="where to write (shared by the ranks)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per side")
    parser.add_argument("--formats", default=",".join(FORMATS),
                        help=f"comma-separated, of {', '.join(FORMATS)}")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--memory", action="store_true",
                        help="measure the peak memory of a load -> normalize -> save chain")
    args = parser.parse_args(argv)
    if args.memory:
        ranks = measure_chain_memory(args.size, args.dir)
        if world_comm.rank == 0:
            mib = 1 << 20
            print(f"dataset {ranks[0]['dataset'] / mib:.0f} MiB on {len(ranks)} ranks")
            for r in ranks:
                steps = ", ".join(f"{k} +{r[k] / mib:.0f} MiB ({r[k] / r['share']:.2f} x share)"
                                  for k in ("load", "normalize", "save"))
                print(f"rank {r['rank']}: share {r['share'] / mib:.0f} MiB; resident before "
                      f"{r['before'] / mib:.0f} MiB, peak {r['peak'] / mib:.0f} MiB; {steps}")
        return
    rows = run(None, size_bytes=args.size, directory=args.dir, repeat=args.repeat,
               formats=[f for f in args.formats.split(",") if f])
    if world_comm.rank == 0:
        print(f"{world_comm.size} ranks, float64 (rows, {_COLUMNS}), best of {args.repeat}")
        print(format(rows, args.markdown))


if __name__ == "__main__":
    main()
