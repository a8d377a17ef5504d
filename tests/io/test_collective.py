"""What the data-file functions share (mpiflow.io.collective): the agreement on arguments,
the temporary file published by one rename, the regions ranks read and write."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import numpy
import pytest
from file_helpers import (
    ALL,
    RANK,
    S0,
    S1,
    SIZE,
    B,
    P,
    leftovers,
    on_all,
    on_rank0,
    shared_dir,
    value,
)

import mpiflow as flow
from mpiflow.core.errors import GlobalTensorError
from mpiflow.io import ParallelIOError
from mpiflow.io.collective import (
    native_dtype,
    read_box,
    region_starts,
    same_arguments,
    saving,
    step,
    target_layout,
    world,
    written_piece,
)
from mpiflow.io.files import temporary_name

pytestmark = pytest.mark.mpi
__all__ = ["shared_dir"]


def test_same_arguments() -> None:
    same_arguments(world(), "op", path="/x", n=3, layout=(ALL, (S0,)))
    if SIZE == 1:
        return
    with pytest.raises(ParallelIOError, match=r"^op: the ranks passed different arguments .*: "
                       r"n is 3 on rank 0 but 4 on rank 1(, 4 on rank [23])*$") as info:
        same_arguments(world(), "op", path="/x", n=3 if RANK == 0 else 4)
    assert info.value.rank == 1
    assert info.value.ranks == tuple(range(1, SIZE))  # every rank that differs is named
    assert len(set(on_all(str(info.value)))) == 1


def test_saving_publishes_when_every_rank_succeeded(shared_dir: Path) -> None:
    target = str(shared_dir / "sub" / "out.txt")
    with saving(world(), target, "writing") as tmp:
        assert os.path.basename(tmp).startswith(".out.txt.tmp-")
        if RANK == 0:
            Path(tmp).write_text("new")
    assert on_rank0(lambda: Path(target).read_text()) == "new"
    with pytest.raises(ParallelIOError, match=f"failed on rank {SIZE - 1}: OSError: no"), \
            saving(world(), target, "writing") as tmp:
        if RANK == 0:
            Path(tmp).write_text("half")
        with step(world(), "the body"):
            if RANK == SIZE - 1:
                raise OSError("no")
    assert on_rank0(lambda: Path(target).read_text()) == "new"  # untouched
    assert leftovers(shared_dir / "sub") == []


def test_saving_removes_what_interrupted_saves_left(shared_dir: Path) -> None:
    target = str(shared_dir / "x.bin")
    stale = temporary_name(target) if RANK == 0 else None
    on_rank0(lambda: Path(stale).write_bytes(b"killed mid-save") and None)
    with saving(world(), target, "writing") as tmp:
        if RANK == 0:
            Path(tmp).write_bytes(b"ok")
    assert leftovers(shared_dir) == []


def test_target_layout() -> None:
    layout = target_layout(None, None, 2)
    assert layout.placement == ALL and layout.sbp == (S0,)
    assert target_layout(None, None, 0).sbp == (B,)
    assert target_layout(ALL, S1, 2).sbp == (S1,)
    with pytest.raises(TypeError, match="placement must be"):
        target_layout([0], S0, 1)  # type: ignore[arg-type]
    with pytest.raises(GlobalTensorError, match="splits dim 1"):
        target_layout(ALL, S1, 1)
    with pytest.raises(GlobalTensorError, match="2 sbp entries"):
        target_layout(ALL, (S0, S0), 1)


def test_regions_read_and_written() -> None:
    full = value((3 * SIZE + 1, 2))
    boxes = on_all(read_box(full.shape, target_layout(ALL, S0, 2)))
    rows = [b[0] for b in boxes if b is not None]
    assert rows[0][0] == 0 and rows[-1][1] == full.shape[0]
    assert all(a[1] == b[0] for a, b in itertools.pairwise(rows))
    assert on_all(read_box(full.shape, target_layout(ALL, P, 2))) == [((0, full.shape[0]),
                                                                       (0, 2))] * SIZE
    t = flow.tensor(full, placement=ALL, sbp=B)
    written = on_all(written_piece(t)[0])
    assert written == [((0, full.shape[0]), (0, 2))] + [None] * (SIZE - 1)
    p = flow.tensor(full, placement=ALL, sbp=B).to_global(ALL, P)
    box, data = written_piece(p)  # reduce-scattered: each rank writes its rows, summed
    if box is not None:
        numpy.testing.assert_array_equal(data, full[box[0][0]:box[0][1]])
    assert region_starts(flow.tensor(full, placement=ALL, sbp=S1)) == [[0], [0, 1][:min(SIZE, 2)]]


def test_native_dtype() -> None:
    assert native_dtype(numpy.dtype(">i2"), "x") == numpy.dtype("int16")
    with pytest.raises(TypeError, match="holds elements of type <U3"):
        native_dtype(numpy.dtype("<U3"), "x")
    with pytest.raises(TypeError, match="mpiflow has no dtype"):
        native_dtype(numpy.dtype("float128"), "x")
