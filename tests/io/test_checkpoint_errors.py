"""Checkpoints that must fail cleanly (issue #18): sizes that overflow int64, symlinks that lead
out of the checkpoint, and ranks that never arrive at one of its MPI calls.

The first two run on every rank (any rank count) and must raise the same error on every rank;
the watchdog cases start their own ``mpiexec`` jobs, so they run in the 1-rank session only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy
import pytest
from helpers import MPIEXEC, job_env, run_job
from numpy.testing import assert_array_equal

import mpiflow as flow
from mpiflow.communication.mpi.group import world_comm
from mpiflow.distributed import barrier
from mpiflow.io import CheckpointError, load, mpiio, save
from mpiflow.io.npy import MAX_BYTES, check_size, header_bytes, read_header
from mpiflow.layouts.shards import scatter_value

pytestmark = pytest.mark.mpi

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
ALL = flow.placement("cpu", list(range(SIZE)))
S0 = flow.sbp.split(0)
HUGE = [1, 2**62 + 1, 4]  # numpy.prod(HUGE) * 4 wraps around to 16 in int64


@pytest.fixture
def ckpt_dir(mpi_tmp_path: Path) -> str:
    """A fresh directory, the same path on every rank (pytest-mpi's ``mpi_tmp_path``)."""
    return str(mpi_tmp_path)


def rank0(action: Any) -> None:
    """Run ``action`` on rank 0 only, then wait for it everywhere."""
    if RANK == 0:
        action()
    barrier()


def rows(n: int = 3 * SIZE + 1, seed: int = 0) -> numpy.ndarray:
    return (numpy.arange(n * 4, dtype=numpy.float32) + seed).reshape(n, 4)


def save_rows(path: str, extra: dict[str, Any] | None = None) -> numpy.ndarray:
    full = rows()
    w = flow.Tensor(scatter_value(full, ALL, (S0,), RANK), ALL, (S0,), full.shape)
    save({"w": w, **(extra or {})}, path)
    return full


def expect_everywhere(path: str, message: str) -> None:
    """Every way of loading ``path`` raises ``message`` on every rank (rank 0 found it)."""
    for args in ((), (ALL, S0)):
        with pytest.raises(CheckpointError, match=message) as info:
            load(path, *args)
        assert info.value.rank == 0


# -- 1. sizes that overflow int64 ---------------------------------------------------------------

def test_size_checks_use_exact_integers() -> None:
    f4 = numpy.dtype("<f4")
    assert int(numpy.prod(HUGE, dtype=numpy.int64)) * 4 == 16  # what the old check saw
    with pytest.raises(ValueError, match=r"too large \(73786976294838206480 bytes"):
        check_size(tuple(HUGE), f4, "w")
    with pytest.raises(ValueError, match="too large"):  # numpy refuses these too
        check_size((0, 2**62), f4, "w")
    assert check_size((3, 4), f4, "w") == 48
    assert check_size((0, 2**40), numpy.dtype("u1"), "w") == 0
    assert check_size((MAX_BYTES // 8,), numpy.dtype("<f8"), "w") <= MAX_BYTES


def overflow_metadata_and_header(path: str) -> None:
    """Make ``w`` claim shape HUGE in both the metadata and the .npy header (data: 16 bytes)."""
    with open(os.path.join(path, "metadata.json"), encoding="utf-8") as f:
        meta = json.load(f)
    meta["arrays"][0]["shape"] = HUGE
    with open(os.path.join(path, "metadata.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f)
    with open(os.path.join(path, "w.npy"), "wb") as f:
        f.write(header_bytes(numpy.dtype("<f4"), tuple(HUGE)) + bytes(16))


def overflow_header(path: str) -> None:
    with open(os.path.join(path, "w.npy"), "wb") as f:
        f.write(header_bytes(numpy.dtype("<f4"), tuple(HUGE)) + bytes(16))


def test_a_shape_overflowing_int64_fails_on_every_rank(ckpt_dir: str) -> None:
    path = os.path.join(ckpt_dir, "ckpt")
    save_rows(path)
    rank0(lambda: overflow_metadata_and_header(path))
    # S(0) of a dim of 1: rank 0 alone would have had to allocate it, the others nothing
    expect_everywhere(path, r"array 'w': shape \[1, 4611686018427387905, 4\] of float32 is "
                            r"too large")


def test_a_npy_header_overflowing_int64_fails_on_every_rank(ckpt_dir: str) -> None:
    path = os.path.join(ckpt_dir, "ckpt")
    save_rows(path)
    rank0(lambda: overflow_header(path))
    with pytest.raises(ValueError, match="too large"):
        read_header(os.path.join(path, "w.npy"))
    barrier()
    expect_everywhere(path, r"w\.npy: shape \[1, 4611686018427387905, 4\] of float32 is too "
                            "large")


def test_a_region_one_rank_cannot_allocate_fails_on_every_rank(ckpt_dir: str) -> None:
    path = os.path.join(ckpt_dir, "big.npy")
    shape = (2**57,)  # 2**60 bytes of float64: a valid size that no process can allocate
    header = header_bytes(numpy.dtype("<f8"), shape)

    def write() -> None:
        with open(path, "wb") as f:
            f.write(header)

    rank0(write)
    box = ((0, 2**57),) if RANK == 0 else None
    with pytest.raises(CheckpointError, match=r"preparing to read .*big\.npy failed on rank 0"):
        mpiio.read_array(world_comm.mpi_comm, path, len(header), numpy.dtype("<f8"), shape, box)


# -- 2. symlinks out of the checkpoint ----------------------------------------------------------

def link_outside(path: str, name: str, outside: str) -> None:
    os.replace(os.path.join(path, name), outside)
    os.symlink(outside, os.path.join(path, name))


def test_a_npy_symlink_to_a_file_outside_the_checkpoint_is_refused(ckpt_dir: str) -> None:
    path = os.path.join(ckpt_dir, "ckpt")
    save_rows(path)
    outside = os.path.join(ckpt_dir, "elsewhere.npy")
    rank0(lambda: link_outside(path, "w.npy", outside))
    expect_everywhere(path, r"w\.npy is a symlink to .*elsewhere\.npy, outside the checkpoint "
                            "directory")


def test_a_relative_symlink_leading_out_is_refused_too(ckpt_dir: str) -> None:
    path = os.path.join(ckpt_dir, "ckpt")
    save_rows(path, {"obj": {1, 2}})

    def damage() -> None:
        os.replace(os.path.join(path, "objects.pkl"), os.path.join(ckpt_dir, "objects.pkl"))
        os.symlink(os.path.join("..", "objects.pkl"), os.path.join(path, "objects.pkl"))

    rank0(damage)
    expect_everywhere(path, r"objects\.pkl is a symlink to .*, outside the checkpoint")


def test_symlinks_that_stay_inside_the_checkpoint_are_allowed(ckpt_dir: str) -> None:
    path = os.path.join(ckpt_dir, "ckpt")
    full = save_rows(path)
    alias = os.path.join(ckpt_dir, "alias")

    def relink() -> None:
        os.makedirs(os.path.join(path, "data"))
        os.replace(os.path.join(path, "w.npy"), os.path.join(path, "data", "w.bin"))
        os.symlink(os.path.join("data", "w.bin"), os.path.join(path, "w.npy"))
        os.symlink(path, alias)  # the checkpoint directory itself may be a link

    rank0(relink)
    for where in (path, alias):
        assert_array_equal(load(where)["w"].numpy(), full)
        assert_array_equal(load(where, ALL, S0)["w"].to_local().numpy(),
                           scatter_value(full, ALL, (S0,), RANK))


# -- 3. a rank that never arrives: the watchdog reports it ----------------------------------------

STUCK = """
import os, sys, time, numpy
import mpiflow as flow
from mpiflow.io import load, mpiio, save
RANK = flow.env.get_rank()
path = {path!r}
save({{"w": numpy.arange(12.0), "step": 1}}, path)
if {case!r} == "save":       # stuck inside a step of save: the others wait in its agreement
    real = mpiio.prepare_buffer
    def stuck(local, dtype, box):
        if RANK == 1:
            time.sleep(60)
        return real(local, dtype, box)
    mpiio.prepare_buffer = stuck
    save({{"w": numpy.arange(12.0), "step": 2}}, path)
elif {case!r} == "load":     # never calls load: the others wait in its first agreement
    if RANK == 1:
        time.sleep(60)
    load(path)
else:                       # leaves without calling load
    if RANK == 1:
        sys.exit(0)
    load(path)
print("unreachable", flush=True)
"""


@pytest.mark.single_process
@pytest.mark.parametrize("case", ["save", "load", "exits"])
def test_a_rank_that_never_arrives_in_save_or_load_is_reported(tmp_path: Any, case: str) -> None:
    code = textwrap.dedent(STUCK.format(path=str(tmp_path / "ckpt"), case=case))
    result = run_job(3, code, timeout=60, env={"MPIFLOW_TIMEOUT": "3"})
    err = result.stderr
    assert result.returncode != 0, err
    assert result.seconds < 30, (result.seconds, err)
    assert "unreachable" not in result.stdout
    if case == "save":
        assert "mpiflow watchdog: checkpoint agreement after" in err
        assert "'preparing the data of" in err, err
    else:  # load's first call compares the ranks' arguments
        assert "mpiflow watchdog: checkpoint: comparing the arguments of loading" in err, err
    if case == "exits":
        assert "rank 1: has exited (sys.exit(0)" in err, err
    else:
        assert "has not completed after" in err and "(MPIFLOW_TIMEOUT=3)" in err, err
        assert "arrived (waiting in the same call): ranks 0, 2" in err, err
        assert "not arrived: rank 1" in err, err
        assert "rank 1: not in an mpiflow call" in err, err


# -- 4. Ctrl-C while a save waits inside MPI ------------------------------------------------------

INTERRUPTED = """
import sys, time, numpy
import mpiflow as flow
from mpiflow.io import mpiio, save
RANK = flow.env.get_rank()
path = {path!r}
save({{"w": numpy.arange(12.0)}}, path)
if {case!r} == "header":     # rank 0 in Python inside the open file, rank 1 in an agreement
    def slow(fh, header):
        time.sleep(60)
    mpiio._write_header = slow
elif RANK == 1:              # rank 1 in a collective of its own, rank 0 in save's agreement
    def stuck(local, dtype, box):
        flow.comm.barrier()
    mpiio.prepare_buffer = stuck
sys.stdout.write("ready\\n")
sys.stdout.flush()
save({{"w": numpy.arange(12.0)}}, path)
print("unreachable", flush=True)
"""


@pytest.mark.single_process
@pytest.mark.parametrize("case", ["header", "mpi"])
def test_ctrl_c_while_a_save_waits_reports_and_exits_130(tmp_path: Any, case: str) -> None:
    code = textwrap.dedent(INTERRUPTED.format(path=str(tmp_path / "ckpt"), case=case))
    env = job_env()
    env["MPIFLOW_TIMEOUT"] = "600"
    env["MPIFLOW_CHECK"] = "off"  # the ranks wait in different calls: no check can compare them
    proc = subprocess.Popen([MPIEXEC, "-n", "2", sys.executable, "-c", code], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert [proc.stdout.readline() for _ in range(2)] == ["ready\n", "ready\n"]
        time.sleep(1.5)  # both wait now: in MPI, or in Python inside the open file
        start = time.monotonic()
        proc.send_signal(signal.SIGINT)  # the launcher forwards it to every rank
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert time.monotonic() - start < 15
    assert proc.returncode == 130, (proc.returncode, err)
    assert "unreachable" not in out
    if case == "header":
        # rank 0 raises KeyboardInterrupt inside the open file; it must not close the file
        # collectively on its way out (rank 1 waits in an agreement, not in a close)
        assert "[rank 0] KeyboardInterrupt" in err or "interrupted (Ctrl-C)" in err, err
        assert "File.Close" not in err, err
    else:
        assert "mpiflow watchdog: interrupted (Ctrl-C) after" in err, err
        assert "checkpoint agreement after 'preparing the data of" in err, err
        assert "rank 1: waiting in barrier on the world (ranks 0..1)" in err, err
