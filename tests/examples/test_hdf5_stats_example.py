"""examples/hdf5_stats.py: per-column statistics of an HDF5 dataset at 1-3 ranks, checked
against numpy on the whole dataset (read with h5py in this process), printed and written."""

from __future__ import annotations

import pathlib
import re

import numpy
import pytest
from helpers import run_job

h5py = pytest.importorskip("h5py", reason="h5py is not installed (pip install 'mpiflow[io]')")

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "hdf5_stats.py"
LINE = re.compile(r"column (\d+): mean (\S+) std (\S+) min (\S+) max (\S+)")


def run_example(ranks: int, *args: str) -> str:
    code = ("import runpy, sys; "
            f"sys.argv = [{str(EXAMPLE)!r}, *{list(args)!r}]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")
    job = run_job(ranks, code, timeout=120)
    assert job.returncode == 0, f"hdf5_stats at {ranks} rank(s) failed:\n{job.stdout}\n{job.stderr}"
    return job.stdout


@pytest.mark.timeout(300)
def test_statistics_match_numpy_at_1_to_3_ranks(tmp_path: pathlib.Path) -> None:
    summaries = set()
    for ranks in (1, 2, 3):
        output = tmp_path / f"stats{ranks}.h5"
        out = run_example(ranks, "--rows", "403", "--columns", "4", "--output", str(output))
        with h5py.File(tmp_path / f"stats{ranks}-input.h5", "r") as f:
            data = f["data"][()]
        expected = numpy.stack([data.mean(0), data.std(0, ddof=1), data.min(0), data.max(0)])
        printed = numpy.array([[float(v) for v in m.groups()[1:]] for m in LINE.finditer(out)])
        assert printed.shape == (4, 4), out
        numpy.testing.assert_allclose(printed.T, expected, rtol=1e-12, atol=1e-12)
        with h5py.File(output, "r") as f:
            numpy.testing.assert_allclose(f["statistics"][()], expected, rtol=1e-12,
                                          atol=1e-12)
            assert f["statistics"].attrs["rows"] == "mean,std,min,max"
            assert f["statistics"].attrs["count"] == 403
        summaries.add(out.strip().splitlines()[-1])
    assert len(summaries) == 1, summaries  # the same data and summary at every rank count
    assert summaries.pop().startswith("hdf5_stats 403x4: ")


@pytest.mark.timeout(120)
def test_a_file_of_plain_h5py(tmp_path: pathlib.Path) -> None:
    data = numpy.random.default_rng(0).normal(size=(57, 3)).astype(numpy.float32)
    with h5py.File(tmp_path / "mine.h5", "w") as f:
        f.create_dataset("obs/t", data=data, chunks=(8, 3), compression="gzip")
    out = run_example(2, "--input", str(tmp_path / "mine.h5"), "--dataset", "obs/t",
                      "--output", str(tmp_path / "s.h5"))
    printed = numpy.array([[float(v) for v in m.groups()[1:]] for m in LINE.finditer(out)])
    d = data.astype(numpy.float64)
    expected = numpy.stack([d.mean(0), d.std(0, ddof=1), d.min(0), d.max(0)])
    numpy.testing.assert_allclose(printed.T, expected, rtol=1e-12, atol=1e-12)
