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


def printed_statistics(out: str) -> numpy.ndarray:
    """The ``(4, columns)`` statistics the example printed, one line per column."""
    return numpy.array([[float(v) for v in m.groups()[1:]] for m in LINE.finditer(out)]).T


def numpy_statistics(data: numpy.ndarray) -> numpy.ndarray:
    d = data.astype(numpy.float64)
    return numpy.stack([d.mean(0), d.std(0, ddof=1), d.min(0), d.max(0)])


@pytest.mark.timeout(300)
def test_statistics_match_numpy_at_1_to_3_ranks(tmp_path: pathlib.Path) -> None:
    """1 and 3 ranks: the synthetic dataset (the same summary); 2 ranks: a file of plain h5py,
    chunked and compressed, float32, in a group."""
    mine = numpy.random.default_rng(0).normal(size=(57, 3)).astype(numpy.float32)
    with h5py.File(tmp_path / "mine.h5", "w") as f:
        f.create_dataset("obs/t", data=mine, chunks=(8, 3), compression="gzip")
    summaries = set()
    for ranks in (1, 2, 3):
        output = tmp_path / f"stats{ranks}.h5"
        if ranks == 2:
            out = run_example(2, "--input", str(tmp_path / "mine.h5"), "--dataset", "obs/t",
                              "--output", str(output))
            data, name, rows = mine, "obs/t", 57
        else:
            out = run_example(ranks, "--rows", "403", "--columns", "4", "--output", str(output))
            with h5py.File(tmp_path / f"stats{ranks}-input.h5", "r") as f:
                data = f["data"][()]
            name, rows = "data", 403
            summaries.add(out.strip().splitlines()[-1])
        expected = numpy_statistics(data)
        numpy.testing.assert_allclose(printed_statistics(out), expected, rtol=1e-12,
                                      atol=1e-12)
        with h5py.File(output, "r") as f:
            numpy.testing.assert_allclose(f["statistics"][()], expected, rtol=1e-12,
                                          atol=1e-12)
            attrs = dict(f["statistics"].attrs)
        assert attrs["rows"] == "mean,std,min,max" and attrs["count"] == rows
        assert attrs["dataset"] == name
    assert len(summaries) == 1, summaries  # the same data and summary at 1 and 3 ranks
    assert summaries.pop().startswith("hdf5_stats 403x4: ")
