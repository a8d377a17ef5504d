"""CSV files (mpiflow.io.csv_files): rows split by byte ranges, round trips between layouts,
numpy's text files loading, and errors on every rank."""

from __future__ import annotations

import io
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
    global_tensor,
    layouts,
    leftovers,
    on_rank0,
    shared_dir,
    value,
)

import mpiflow as flow
from mpiflow.io import ParallelIOError, load_csv, save_csv
from mpiflow.io.csv_files import line_start

pytestmark = pytest.mark.mpi
__all__ = ["shared_dir"]


def test_line_start_finds_the_next_line() -> None:
    text = b"a,b\n1,2\n\n33,44\n5,6"
    f = io.BytesIO(text)
    size = len(text)
    starts = [line_start(f, at, 4, size) for at in range(size + 1)]
    assert starts[:5] == [4] * 5                   # the data starts after the header
    assert starts[5:9] == [8] * 4 and starts[9] == 9 and starts[10:16] == [15] * 6
    assert starts[16:] == [size] * (size - 15)    # no line starts after the last one


def test_round_trips(shared_dir: Path) -> None:
    full = value((ROWS, 3))
    pairs = layouts(short=True)
    for i, (placement, sbp) in enumerate(pairs):
        path = shared_dir / f"r{i}.csv"
        save_csv(global_tensor(full, placement, sbp), path, header="a,b,c")
        stored = on_rank0(lambda path=path: numpy.loadtxt(path, delimiter=",", skiprows=1))
        numpy.testing.assert_array_equal(stored, full)
        placement2, sbp2 = pairs[(i + 1) % len(pairs)]
        x = load_csv(path, placement2, sbp2, header_lines=1, dtype=flow.float64)
        assert (x.placement, x.sbp) == (placement2, sbp2)
        numpy.testing.assert_array_equal(x.numpy(), full)
    assert leftovers(shared_dir) == []


def test_text_of_numpy_and_others(shared_dir: Path) -> None:
    data = numpy.random.default_rng(1).normal(size=(5 * SIZE + 2, 4))
    path = shared_dir / "np.txt"
    on_rank0(lambda: numpy.savetxt(path, data, delimiter=";", header="x;y;z;w\nsecond line"))
    x = load_csv(path, ALL, S1, sep=";", header_lines=2, dtype=flow.float64)
    numpy.testing.assert_allclose(x.numpy(), data, rtol=1e-15)
    assert load_csv(path, sep=";", header_lines=2).dtype == flow.float32  # the default float
    # Long lines, blank lines, CRLF endings, comments, a missing final newline.
    path = shared_dir / "odd.csv"
    rows = ["1,2", "", "# a comment", "3,4\r", "5," + "0" * 300 + "6", "7,8"]
    on_rank0(lambda: path.write_text("\n".join(rows)) and None)
    x = load_csv(path, dtype=flow.int64)
    numpy.testing.assert_array_equal(x.numpy(), [[1, 2], [3, 4], [5, 6], [7, 8]])
    column = shared_dir / "col.csv"
    save_csv(flow.tensor(numpy.arange(ROWS), placement=ALL, sbp=S0), column)
    y = load_csv(column, dtype=flow.int64)
    assert tuple(y.shape) == (ROWS, 1)
    numpy.testing.assert_array_equal(y.numpy()[:, 0], numpy.arange(ROWS))


def test_formats_and_small_files(shared_dir: Path) -> None:
    path = shared_dir / "f.csv"
    save_csv(flow.tensor([[True, False]], placement=ALL, sbp=S0), path)
    assert on_rank0(lambda: path.read_text()) == "1,0\n"
    save_csv(flow.tensor([[0.1, 2.0]], dtype=flow.float64, placement=ALL, sbp=S1), path,
             fmt="%.3f", sep=" ")
    assert on_rank0(lambda: path.read_text()) == "0.100 2.000\n"
    empty = shared_dir / "empty.csv"
    on_rank0(lambda: empty.write_text("h\n") and None)
    assert tuple(load_csv(empty, header_lines=1).shape) == (0, 0)


def test_errors(shared_dir: Path) -> None:
    with pytest.raises(ParallelIOError, match=r"failed on rank 0"):
        load_csv(shared_dir / "missing.csv")
    ragged = shared_dir / "ragged.csv"
    lines = [f"{i},{i}" for i in range(4 * SIZE)] + ["1,2,3"] * 2
    on_rank0(lambda: ragged.write_text("\n".join(lines) + "\n") and None)
    with pytest.raises(ParallelIOError, match=r"columns"):
        load_csv(ragged)
    bad = shared_dir / "bad.csv"
    on_rank0(lambda: bad.write_text("1,2\n3,x\n") and None)
    with pytest.raises(ParallelIOError, match=r"could not convert|x"):
        load_csv(bad)
    with pytest.raises(ParallelIOError, match=r"fewer than its 5 header lines"):
        load_csv(bad, header_lines=5)
    with pytest.raises(ValueError, match=r"1-D or 2-D"):
        save_csv(flow.zeros(2, 2, 2, placement=ALL, sbp=S0), shared_dir / "x.csv")
    if SIZE > 1:
        with pytest.raises(ParallelIOError, match=r"different arguments"):
            load_csv(bad, sep="," if RANK else ";")
