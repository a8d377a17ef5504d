"""Writing HDF5 datasets from every rank (mpiflow.io.h5write): chunked and compressed datasets
of every layout, with chunks shared by ranks; the parallel-HDF5 path where h5py has it."""

from __future__ import annotations

from pathlib import Path

import numpy
import pytest
from file_helpers import ALL, ROWS, S0, SIZE, global_tensor, layouts, on_rank0, shared_dir, value

from mpiflow.io import load_hdf5, save_hdf5
from mpiflow.io.collective import world, written_piece
from mpiflow.io.h5write import contiguous_dcpl, fill_dataset, mpio_available

h5py = pytest.importorskip("h5py", reason="h5py is not installed (pip install 'mpiflow[io]')")
pytestmark = pytest.mark.mpi
__all__ = ["shared_dir"]


def stored(path: Path, name: str = "x") -> tuple[numpy.ndarray, tuple | None, str | None]:
    with h5py.File(path, "r") as f:
        return f[name][()], f[name].chunks, f[name].compression


@pytest.mark.parametrize("options", [{"chunks": (2, 2), "compression": "gzip"},
                                     {"chunks": (3, 1)}], ids=["gzip", "plain"])
def test_every_layout_with_shared_chunks(shared_dir: Path, options: dict) -> None:
    full = value((ROWS, 5), numpy.float32)
    for i, (placement, sbp) in enumerate(layouts(short=True)):
        path = shared_dir / f"{i}.h5"
        save_hdf5(global_tensor(full, placement, sbp), path, "x", **options)
        data, chunks, compression = on_rank0(lambda path=path: stored(path))
        numpy.testing.assert_array_equal(data, full)
        assert chunks == options["chunks"] and compression == options.get("compression")


def test_fill_an_existing_contiguous_dataset(shared_dir: Path) -> None:
    """fill_dataset writes into a dataset another program created (what save_netcdf uses)."""
    path = shared_dir / "made.h5"
    full = value((ROWS, 3))

    def create() -> None:
        with h5py.File(path, "w") as f:
            f.create_dataset("x", full.shape, full.dtype, dcpl=contiguous_dcpl(h5py))
    on_rank0(create)
    box, data = written_piece(global_tensor(full, ALL, (S0,)))
    fill_dataset(world(), h5py, str(path), "x", full.shape, full.dtype, box, data)
    numpy.testing.assert_array_equal(on_rank0(lambda: stored(path)[0]), full)


@pytest.mark.skipif(not h5py.get_config().mpi or SIZE == 1,
                    reason="needs an h5py built with parallel HDF5 (h5py.get_config().mpi) and "
                           "2+ ranks; pip's h5py has no mpio driver")
def test_parallel_hdf5_driver(shared_dir: Path) -> None:
    assert mpio_available(h5py)
    full = value((ROWS, 4))
    for options in ({}, {"chunks": (2, 2), "compression": "gzip"}):
        save_hdf5(global_tensor(full, ALL, (S0,)), shared_dir / "m.h5", "x", **options)
        numpy.testing.assert_array_equal(load_hdf5(shared_dir / "m.h5", "x").numpy(), full)
