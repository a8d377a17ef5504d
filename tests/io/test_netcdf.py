"""netCDF-4 files (mpiflow.io.netcdf, through h5netcdf): round trips, files of the netCDF4
package loading in mpiflow and the reverse, appending variables, errors on every rank."""

from __future__ import annotations

from pathlib import Path

import numpy
import pytest
from file_helpers import (
    ALL,
    ROWS,
    S0,
    S1,
    global_tensor,
    layouts,
    leftovers,
    on_rank0,
    shared_dir,
    value,
)

from mpiflow.io import ParallelIOError, load_netcdf, save_netcdf

pytest.importorskip("h5netcdf", reason="h5netcdf is not installed (pip install 'mpiflow[io]')")
netCDF4 = pytest.importorskip("netCDF4", reason="the netCDF4 package (to check the files "
                              "against netCDF-C) is not installed")
pytestmark = pytest.mark.mpi
__all__ = ["shared_dir"]


def read_with_netcdf4(path: Path, name: str) -> tuple[numpy.ndarray, tuple, dict]:
    with netCDF4.Dataset(path) as ds:
        variable = ds[name]
        variable.set_auto_mask(False)
        return variable[...], variable.dimensions, {k: variable.getncattr(k)
                                                    for k in variable.ncattrs()}


def test_round_trips_open_in_netcdf4(shared_dir: Path) -> None:
    full = value((ROWS, 4), numpy.float32)
    pairs = layouts(short=True)
    for i, (placement, sbp) in enumerate(pairs):
        path = shared_dir / f"r{i}.nc"
        options = {"compression": "gzip", "shuffle": True} if i % 2 else {}
        save_netcdf(global_tensor(full, placement, sbp), path, "temp", dimensions=("t", "x"),
                    attrs={"units": "K"}, **options)
        stored, dims, attrs = on_rank0(lambda path=path: read_with_netcdf4(path, "temp"))
        numpy.testing.assert_array_equal(stored, full)
        assert dims == ("t", "x") and attrs == {"units": "K"}
        placement2, sbp2 = pairs[(i + 1) % len(pairs)]
        x = load_netcdf(path, "temp", placement2, sbp2)
        assert (x.placement, x.sbp) == (placement2, sbp2)
        numpy.testing.assert_array_equal(x.numpy(), full)
    assert leftovers(shared_dir) == []


def test_files_of_the_netcdf4_package_load(shared_dir: Path) -> None:
    path = shared_dir / "nc4.nc"
    field, lat = value((3, ROWS), numpy.float64), numpy.arange(3, dtype=numpy.float32)

    def write() -> None:
        with netCDF4.Dataset(path, "w") as ds:
            ds.createDimension("lat", 3)
            ds.createDimension("lon", ROWS)
            ds.createVariable("lat", "f4", ("lat",))[:] = lat
            v = ds.createVariable("sst", "f8", ("lat", "lon"), zlib=True, chunksizes=(2, 2))
            v[:] = field
            ds.createGroup("g").createVariable("n", "i2", ("lon",))[:] = numpy.arange(ROWS)
    on_rank0(write)
    numpy.testing.assert_array_equal(load_netcdf(path, "sst", ALL, S1).numpy(), field)
    numpy.testing.assert_array_equal(load_netcdf(path, "lat").numpy(), lat)
    n = load_netcdf(path, "g/n")
    assert n.dtype.numpy == numpy.int16
    numpy.testing.assert_array_equal(n.numpy(), numpy.arange(ROWS))


def test_append_variables_and_coordinates(shared_dir: Path) -> None:
    path = shared_dir / "a.nc"
    field = value((ROWS, 3))
    save_netcdf(global_tensor(field, ALL, (S0,)), path, "u", dimensions=("time", "x"))
    time = value((ROWS,), seed=2)
    save_netcdf(global_tensor(time, ALL, (S0,)), path, "time", mode="a",
                dimensions=("time",), attrs={"units": "s"})  # a coordinate variable
    save_netcdf(global_tensor(2 * field, ALL, (S1,)), path, "inner/v", mode="a",
                dimensions=("time", "x"), compression="gzip")

    def check() -> tuple:
        with netCDF4.Dataset(path) as ds:
            return (sorted(ds.variables), ds["time"].units, ds["inner/v"].dimensions,
                    ds["inner/v"][...].data.tolist())
    names, units, dims, inner = on_rank0(check)
    assert names == ["time", "u"] and units == "s" and dims == ("time", "x")
    numpy.testing.assert_array_equal(inner, 2 * field)
    numpy.testing.assert_array_equal(load_netcdf(path, "time").numpy(), time)
    with pytest.raises(ParallelIOError, match=r"dimension 'time' of size .* does not match"):
        save_netcdf(global_tensor(value((2, 3)), ALL, (S0,)), path, "w", mode="a",
                    dimensions=("time", "x"))
    with pytest.raises(ParallelIOError, match=r"already holds a variable 'u'"):
        save_netcdf(global_tensor(field, ALL, (S0,)), path, "u", mode="a",
                    dimensions=("time", "x"))
    names_after = on_rank0(lambda: sorted(netCDF4.Dataset(path).variables))
    assert names_after == ["time", "u"]
    assert leftovers(shared_dir) == []


def test_errors(shared_dir: Path) -> None:
    with pytest.raises(ParallelIOError, match=r"failed on rank 0"):
        load_netcdf(shared_dir / "missing.nc", "x")
    path = shared_dir / "classic.nc"

    def classic() -> None:
        with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
            ds.createDimension("x", 2)
            ds.createVariable("v", "f4", ("x",))[:] = [1, 2]
    on_rank0(classic)
    with pytest.raises(ParallelIOError, match=r"not a netCDF-4 .HDF5. file"):
        load_netcdf(path, "v")
    save_netcdf(global_tensor(value((ROWS,)), ALL, (S0,)), shared_dir / "ok.nc", "v")
    with pytest.raises(ParallelIOError, match=r"has no variable 'w'"):
        load_netcdf(shared_dir / "ok.nc", "w")
    with pytest.raises(ValueError, match=r"1 dimension names for a tensor of 2 dims"):
        save_netcdf(global_tensor(value((ROWS, 2)), ALL, (S0,)), shared_dir / "x.nc", "v",
                    dimensions=("a",))
