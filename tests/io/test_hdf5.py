"""HDF5 files (mpiflow.io.hdf5): round trips between layouts and rank counts, files of plain
h5py loading in mpiflow and the reverse, append mode, and errors raised alike on every rank."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy
import pytest
from file_helpers import (
    ALL,
    RANK,
    ROWS,
    S0,
    S1,
    SIZE,
    B,
    global_tensor,
    layouts,
    leftovers,
    on_all,
    on_rank0,
    shared_dir,
    value,
)

import mpiflow as flow
from mpiflow.core.errors import GlobalTensorError
from mpiflow.io import ParallelIOError, load_hdf5, save_hdf5

h5py = pytest.importorskip("h5py", reason="h5py is not installed (pip install 'mpiflow[io]')")
pytestmark = pytest.mark.mpi
__all__ = ["shared_dir"]


def read_with_h5py(path: Path, name: str) -> tuple[numpy.ndarray, dict]:
    with h5py.File(path, "r") as f:
        return f[name][()], dict(f[name].attrs)


def test_round_trips_between_every_layout(shared_dir: Path) -> None:
    full = value((ROWS, 5))
    pairs = layouts()
    for i, (placement, sbp) in enumerate(pairs):
        path = shared_dir / f"r{i}.h5"
        save_hdf5(global_tensor(full, placement, sbp), path, "group/x", attrs={"i": i})
        stored, attrs = on_rank0(lambda path=path: read_with_h5py(path, "group/x"))
        numpy.testing.assert_array_equal(stored, full)
        assert attrs == {"i": i}
        load_placement, load_sbp = pairs[(i + 1) % len(pairs)]  # another layout
        x = load_hdf5(path, "group/x", load_placement, load_sbp)
        assert (x.placement, x.sbp, x.dtype) == (load_placement, load_sbp, flow.float64)
        numpy.testing.assert_array_equal(x.numpy(), full)
    assert leftovers(shared_dir) == []


def test_files_of_plain_h5py_load(shared_dir: Path) -> None:
    path = shared_dir / "plain.h5"
    data = {"f8": value((ROWS, 3)), "be": value((ROWS,), ">f4"), "i2": value((4, ROWS), "i2"),
            "b": value((ROWS, 2)) > 2, "c": value((ROWS,)) + 1j, "s": numpy.float32(2.5)}

    def write() -> None:
        with h5py.File(path, "w") as f:
            for name, array in data.items():
                f.create_dataset(name, data=array)
            f.create_dataset("gz", data=data["f8"], chunks=(2, 2), compression="gzip",
                             shuffle=True)
    on_rank0(write)
    for name, array in [*data.items(), ("gz", data["f8"])]:
        for sbp in ((S0,), (S1,), (B,)):
            if numpy.ndim(array) == 0:
                sbp = (B,)
            elif numpy.ndim(array) == 1 and sbp == (S1,):
                continue
            x = load_hdf5(path, name, ALL, sbp)
            assert x.dtype.numpy == numpy.dtype(array.dtype).newbyteorder("="), name
            numpy.testing.assert_array_equal(x.numpy(), array)
    x = load_hdf5(path, "i2", dtype=flow.float32)
    assert x.dtype == flow.float32 and x.sbp == (S0,)
    numpy.testing.assert_array_equal(x.numpy(), data["i2"].astype(numpy.float32))


def test_chunked_and_compressed_saves(shared_dir: Path) -> None:
    full = value((ROWS, 7), numpy.float32)
    for options in ({"compression": "gzip", "compression_opts": 1, "shuffle": True},
                    {"chunks": (2, 3)},                            # shared chunks, no filter
                    {"chunks": (3, 2), "compression": "lzf", "fletcher32": True},
                    {"chunks": True}):
        for sbp in ((S0,), (S1,)):
            t = global_tensor(full, ALL, sbp)
            save_hdf5(t, shared_dir / "c.h5", "x", **options)

            def check(options: dict = options) -> tuple:
                with h5py.File(shared_dir / "c.h5", "r") as f:
                    d = f["x"]
                    return d[()], d.chunks, d.compression, d.fletcher32
            stored, chunks, compression, fletcher = on_rank0(check)
            numpy.testing.assert_array_equal(stored, full)
            assert chunks is not None
            if isinstance(options.get("chunks"), tuple):
                assert chunks == options["chunks"]
            assert compression == options.get("compression")
            assert fletcher == options.get("fletcher32", False)
            numpy.testing.assert_array_equal(load_hdf5(shared_dir / "c.h5", "x", ALL,
                                                       (S1,)).numpy(), full)


def test_default_chunks_follow_an_even_split(shared_dir: Path) -> None:
    t = global_tensor(value((4 * SIZE, 3)), ALL, (S0,))
    save_hdf5(t, shared_dir / "even.h5", "x", compression="gzip")
    chunks = on_rank0(lambda: h5py.File(shared_dir / "even.h5", "r")["x"].chunks)
    assert chunks == (4, 3)  # one chunk per rank: no chunk is written in turns


def test_append_datasets_and_modes(shared_dir: Path) -> None:
    path = shared_dir / "a.h5"
    one, two = value((ROWS, 2)), value((3, ROWS), seed=1)
    save_hdf5(global_tensor(one, ALL, (S0,)), path, "one", mode="a")  # creates the file
    save_hdf5(global_tensor(two, ALL, (S1,)), path, "deeper/two", mode="a",
              compression="gzip", attrs={"units": "K"})
    names = on_rank0(lambda: sorted(h5py.File(path, "r").keys()))
    assert names == ["deeper", "one"]
    numpy.testing.assert_array_equal(load_hdf5(path, "one").numpy(), one)
    numpy.testing.assert_array_equal(load_hdf5(path, "deeper/two").numpy(), two)
    with pytest.raises(ParallelIOError, match=r"already holds 'one'"):
        save_hdf5(global_tensor(one, ALL, (S0,)), path, "one", mode="a")
    save_hdf5(global_tensor(two, ALL, (S0,)), path, "only")  # mode="w": a new file
    assert on_rank0(lambda: sorted(h5py.File(path, "r").keys())) == ["only"]
    with pytest.raises(ValueError, match=r"mode must be one of"):
        save_hdf5(global_tensor(one, ALL, (S0,)), path, "x", mode="r+")


def test_scalars_empty_and_local_tensors(shared_dir: Path) -> None:
    path = shared_dir / "odd.h5"
    save_hdf5(flow.tensor(3.5, dtype=flow.float64, placement=ALL, sbp=B), path, "scalar")
    numpy.testing.assert_array_equal(load_hdf5(path, "scalar").numpy(), 3.5)
    save_hdf5(flow.zeros(0, 3, placement=ALL, sbp=S0), path, "empty")
    assert tuple(load_hdf5(path, "empty", ALL, S1).shape) == (0, 3)
    local = flow.tensor(value((2, ROWS)))  # a local tensor, the same on every rank
    save_hdf5(local, path, "local")
    numpy.testing.assert_array_equal(load_hdf5(path, "local", ALL, S1).numpy(), value((2, ROWS)))


# -- errors, the same on every rank ----------------------------------------------------------
def test_missing_file_dataset_group_and_types(shared_dir: Path) -> None:
    path = shared_dir / "e.h5"
    with pytest.raises(ParallelIOError, match=r"failed on rank 0.*e.h5"):
        load_hdf5(path, "x")

    def write() -> None:
        with h5py.File(path, "w") as f:
            f.create_dataset("g/x", data=numpy.zeros(3))
            f.create_dataset("text", data=numpy.array([b"ab", b"cd"]))
    on_rank0(write)
    with pytest.raises(ParallelIOError, match=r"no dataset 'nope' \(/ holds g, text\)"):
        load_hdf5(path, "nope")
    with pytest.raises(ParallelIOError, match=r"'g' in .* is a group"):
        load_hdf5(path, "g")
    with pytest.raises(ParallelIOError, match=r"elements of type .S2"):
        load_hdf5(path, "text")
    with pytest.raises(GlobalTensorError, match=r"splits dim 1"):  # known to every rank
        load_hdf5(path, "g/x", ALL, S1)


def test_truncated_file(shared_dir: Path) -> None:
    path = shared_dir / "t.h5"
    on_rank0(lambda: h5py.File(path, "w").create_dataset("x", data=value((64, 8))) and None)

    def truncate() -> None:
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)
    on_rank0(truncate)
    with pytest.raises(ParallelIOError, match=r"failed on rank 0"):
        load_hdf5(path, "x")


def test_a_file_that_changed_between_the_opens(shared_dir: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 0 describes the file; the ranks that read must find the same file, unchanged."""
    from mpiflow.io import hdf5

    path = shared_dir / "c.h5"
    on_rank0(lambda: h5py.File(path, "w").create_dataset("x", data=value((ROWS, 2))) and None)
    describe = hdf5._describe

    def older(*args: object) -> tuple:
        stamp, shape, found = describe(*args)
        return (*stamp[:3], stamp[3] - 1), shape, found  # as if it was written since
    monkeypatch.setattr(hdf5, "_describe", older)
    with pytest.raises(ParallelIOError, match=r"changed between the ranks' opens"):
        load_hdf5(path, "x")


def test_unwritable_path_leaves_nothing(shared_dir: Path) -> None:
    blocker = shared_dir / "file"
    on_rank0(lambda: blocker.write_text("not a directory") and None)
    t = global_tensor(value((ROWS, 2)), ALL, (S0,))
    with pytest.raises(ParallelIOError, match=r"failed on rank 0"):
        save_hdf5(t, blocker / "sub" / "x.h5", "x")
    with pytest.raises(ParallelIOError, match=r"is a directory"):
        save_hdf5(t, shared_dir, "x")
    assert leftovers(shared_dir) == []


def test_a_failed_save_leaves_the_old_file(shared_dir: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that fails on the last rank only: every rank raises, nothing half-written."""
    from mpiflow.io import mpiio

    path = shared_dir / "keep.h5"
    old, new = value((ROWS, 2)), value((ROWS, 2), seed=3)
    save_hdf5(global_tensor(old, ALL, (S0,)), path, "x")
    real = mpiio.prepare_buffer

    def failing(*args: Any) -> Any:
        if RANK == SIZE - 1:
            raise OSError("disk full (injected)")
        return real(*args)
    monkeypatch.setattr(mpiio, "prepare_buffer", failing)
    with pytest.raises(ParallelIOError, match=f"failed on rank {SIZE - 1}.*disk full"):
        save_hdf5(global_tensor(new, ALL, (S0,)), path, "x")
    with pytest.raises(ParallelIOError, match=r"disk full"):
        save_hdf5(global_tensor(new, ALL, (S0,)), path, "y", mode="a")
    numpy.testing.assert_array_equal(load_hdf5(path, "x").numpy(), old)
    assert on_rank0(lambda: sorted(h5py.File(path, "r").keys())) == ["x"]  # no "y", no link
    assert leftovers(shared_dir) == []


@pytest.mark.mpi(min_size=2)
def test_ranks_that_pass_different_paths_all_raise(shared_dir: Path) -> None:
    t = global_tensor(value((ROWS, 2)), ALL, (S0,))
    with pytest.raises(ParallelIOError, match=r"ranks passed different arguments .*: path is "
                       r"'.*x0.h5' on rank 0 but '.*x1.h5' on rank 1") as info:
        save_hdf5(t, shared_dir / f"x{RANK}.h5", "x")
    assert len(set(on_all(str(info.value)))) == 1  # the same message on every rank
    save_hdf5(t, shared_dir / "x.h5", "x")
    with pytest.raises(ParallelIOError, match=r"dataset is 'x' on rank 0 but 'y' on rank 1"):
        load_hdf5(shared_dir / "x.h5", "x" if RANK == 0 else "y")
    assert leftovers(shared_dir) == []
