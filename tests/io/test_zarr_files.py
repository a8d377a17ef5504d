"""Zarr stores (mpiflow.io.zarr_files): round trips, stores of zarr itself loading in mpiflow
and the reverse, chunks shared between ranks, groups and append mode, errors on every rank."""

from __future__ import annotations

from pathlib import Path

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
    on_rank0,
    shared_dir,
    value,
)

from mpiflow.io import ParallelIOError, load_zarr, save_zarr

zarr = pytest.importorskip("zarr", reason="zarr is not installed (pip install 'mpiflow[io]')")
pytestmark = pytest.mark.mpi
__all__ = ["shared_dir"]


def test_round_trips_open_in_zarr(shared_dir: Path) -> None:
    full = value((ROWS, 5))
    pairs = layouts(short=True)
    for i, (placement, sbp) in enumerate(pairs):
        store = shared_dir / f"r{i}.zarr"
        chunks = None if i % 2 else (2, 3)  # (2, 3): chunks shared by two ranks
        save_zarr(global_tensor(full, placement, sbp), store, chunks=chunks,
                  attrs={"units": "m"}, zarr_format=2 if i == 1 else 3)

        def check(store: Path = store) -> tuple:
            array = zarr.open_array(store, mode="r")
            return array[...], dict(array.attrs), array.metadata.zarr_format
        stored, attrs, version = on_rank0(check)
        numpy.testing.assert_array_equal(stored, full)
        assert attrs == {"units": "m"} and version == (2 if i == 1 else 3)
        placement2, sbp2 = pairs[(i + 1) % len(pairs)]
        x = load_zarr(store, placement2, sbp2)
        assert (x.placement, x.sbp) == (placement2, sbp2)
        numpy.testing.assert_array_equal(x.numpy(), full)
    assert leftovers(shared_dir) == []


def test_default_chunks_follow_an_even_split(shared_dir: Path) -> None:
    save_zarr(global_tensor(value((2 * SIZE, 3 * SIZE)), ALL, (S1,)), shared_dir / "e.zarr")
    assert on_rank0(lambda: zarr.open_array(shared_dir / "e.zarr", mode="r").chunks) == (
        2 * SIZE, 3)


def test_stores_of_zarr_load(shared_dir: Path) -> None:
    data = value((ROWS, 3), numpy.int32)

    def write() -> None:
        zarr.create_array(shared_dir / "v3.zarr", data=data, chunks=(2, 2))
        group = zarr.open_group(shared_dir / "g.zarr", mode="w", zarr_format=2)
        group.create_array("deep/x", data=data.astype(numpy.float32), chunks=(3, 1))
    on_rank0(write)
    x = load_zarr(shared_dir / "v3.zarr", ALL, S1)
    assert x.dtype.numpy == numpy.int32
    numpy.testing.assert_array_equal(x.numpy(), data)
    y = load_zarr(shared_dir / "g.zarr", ALL, B, name="deep/x", dtype="float64")
    numpy.testing.assert_array_equal(y.numpy(), data)
    assert y.dtype.numpy == numpy.float64


def test_groups_and_append(shared_dir: Path) -> None:
    store = shared_dir / "g.zarr"
    a, b = value((ROWS, 2)), value((3, ROWS), seed=1)
    save_zarr(global_tensor(a, ALL, (S0,)), store, name="a")
    save_zarr(global_tensor(b, ALL, (S1,)), store, name="sub/b", mode="a", chunks=(2, 2))
    names = on_rank0(lambda: sorted(zarr.open_group(store, mode="r").array_keys()))
    assert names == ["a"]
    numpy.testing.assert_array_equal(load_zarr(store, name="sub/b").numpy(), b)
    with pytest.raises(ParallelIOError, match=r"already holds 'a'"):
        save_zarr(global_tensor(a, ALL, (S0,)), store, name="a", mode="a")
    with pytest.raises(ValueError, match=r"pass its name="):
        save_zarr(global_tensor(a, ALL, (S0,)), store, mode="a")
    assert leftovers(shared_dir) == [] and leftovers(store) == []


def test_errors(shared_dir: Path) -> None:
    with pytest.raises(ParallelIOError, match=r"has no Zarr array"):
        load_zarr(shared_dir / "none.zarr")
    other = shared_dir / "mine"

    def make_other() -> None:
        other.mkdir()
        (other / "notes.txt").write_text("keep")
    on_rank0(make_other)
    with pytest.raises(ParallelIOError, match=r"refusing to replace .* not a Zarr store"):
        save_zarr(global_tensor(value((ROWS,)), ALL, (S0,)), other)
    assert on_rank0(lambda: (other / "notes.txt").read_text()) == "keep"
    with pytest.raises(TypeError, match=r"not JSON serializable"):
        save_zarr(global_tensor(value((ROWS,)), ALL, (S0,)), shared_dir / "j.zarr",
                  attrs={"bad": object()})
    if SIZE > 1:
        with pytest.raises(ParallelIOError, match=r"different arguments"):
            save_zarr(global_tensor(value((ROWS,)), ALL, (S0,)), shared_dir / "k.zarr",
                      attrs={"rank": RANK})
    assert leftovers(shared_dir) == []
