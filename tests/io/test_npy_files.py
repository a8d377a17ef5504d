"""Any .npy file in parallel (mpiflow.io.npy_files): numpy's files of every order and byte
order load in every layout; save_npy writes files numpy reads; errors on every rank."""

from __future__ import annotations

from pathlib import Path

import numpy
import pytest
from file_helpers import (
    ALL,
    ROWS,
    S1,
    global_tensor,
    layouts,
    leftovers,
    on_rank0,
    shared_dir,
    value,
)

import mpiflow as flow
from mpiflow.io import ParallelIOError, load_npy, save_npy

pytestmark = pytest.mark.mpi
__all__ = ["shared_dir"]


def test_round_trips(shared_dir: Path) -> None:
    full = value((ROWS, 3), numpy.float32)
    pairs = layouts()
    for i, (placement, sbp) in enumerate(pairs):
        path = shared_dir / f"r{i}.npy"
        save_npy(global_tensor(full, placement, sbp), path)
        numpy.testing.assert_array_equal(on_rank0(lambda path=path: numpy.load(path)), full)
        placement2, sbp2 = pairs[(i + 1) % len(pairs)]
        x = load_npy(path, placement2, sbp2)
        assert (x.placement, x.sbp, x.dtype) == (placement2, sbp2, flow.float32)
        numpy.testing.assert_array_equal(x.numpy(), full)
    assert leftovers(shared_dir) == []


def test_files_of_numpy_in_every_order(shared_dir: Path) -> None:
    base = value((ROWS, 4, 3))
    arrays = {"c": base, "f": numpy.asfortranarray(base), "be": base.astype(">f8"),
              "fbe": numpy.asfortranarray(base.astype(">i8")), "b": base > 3,
              "z": numpy.float16(1.5), "c64": (base + 2j).astype(numpy.complex64)}
    on_rank0(lambda: [numpy.save(shared_dir / f"{k}.npy", a) for k, a in arrays.items()]
             and None)
    for name, array in arrays.items():
        sbps = [flow.sbp.broadcast] if array.ndim == 0 else [S1, flow.sbp.split(2)]
        for sbp in sbps:
            x = load_npy(shared_dir / f"{name}.npy", ALL, sbp)
            assert x.dtype.numpy == array.dtype.newbyteorder("=")
            numpy.testing.assert_array_equal(x.numpy(), array)
    x = load_npy(shared_dir / "fbe.npy", dtype=flow.float32)
    numpy.testing.assert_array_equal(x.numpy(), arrays["fbe"].astype(numpy.float32))


def test_errors(shared_dir: Path) -> None:
    with pytest.raises(ParallelIOError, match=r"failed on rank 0.*No such file"):
        load_npy(shared_dir / "missing.npy")
    on_rank0(lambda: numpy.save(shared_dir / "o.npy", numpy.array([{}, 1], dtype=object)))
    with pytest.raises(ParallelIOError, match=r"elements of type object"):
        load_npy(shared_dir / "o.npy")
    path = shared_dir / "t.npy"

    def truncated() -> None:
        numpy.save(path, value((ROWS, 8)))
        with open(path, "r+b") as f:
            f.truncate(200)
    on_rank0(truncated)
    with pytest.raises(ParallelIOError, match=r"is truncated"):
        load_npy(path)
