"""Checkpoints across jobs: save on N ranks and load on M, and a rank dying in the middle of a save.

These start their own ``mpiexec`` jobs, so they run in the 1-rank session only.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import numpy
import pytest
from helpers import run_job
from numpy.testing import assert_array_equal

from mpiflow.io import load, save

# The logical values, the same in every job: uneven sizes for 4 and 3 ranks.
PRELUDE = """
import numpy, os, sys
import mpiflow as flow
from mpiflow.layouts.shards import scatter_value
from mpiflow.io import load, save

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
ROWS = numpy.arange(13 * 7, dtype=numpy.float32).reshape(13, 7)
PART = ((numpy.arange(30, dtype=numpy.int64) - 3) * 5).reshape(10, 3)
MESH = (numpy.arange(9 * 5) % 11).astype(numpy.float16).reshape(9, 5)

def shard(full, placement, sbp):
    return flow.Tensor(scatter_value(full, placement, sbp, RANK), placement, sbp, full.shape)
"""

SAVE = PRELUDE + """
everyone = flow.placement("cpu", list(range(SIZE)))
mesh = flow.placement("cpu", [[0, 1], [2, 3]]) if SIZE == 4 else everyone
mesh_sbp = (flow.sbp.split(0), flow.sbp.split(1)) if SIZE == 4 else (flow.sbp.split(1),)
save({"rows": shard(ROWS, everyone, (flow.sbp.split(0),)),
      "part": shard(PART, everyone, (flow.sbp.partial_sum,)),
      "mesh": shard(MESH, mesh, mesh_sbp), "step": 42}, sys.argv[1])
"""

LOAD = PRELUDE + """
path = sys.argv[1]
everyone = flow.placement("cpu", list(range(SIZE)))
cols = load(path, everyone, flow.sbp.split(1))
def layout(name):
    return flow.sbp.split(0) if name == "part" else flow.sbp.split(1)
chosen = load(path, everyone, layout)
for state in (cols, chosen):
    assert state["step"] == 42, state["step"]
    for name, full in (("rows", ROWS), ("part", PART), ("mesh", MESH)):
        t = state[name]
        assert t.dtype.numpy == full.dtype and tuple(t.shape) == full.shape, name
        numpy.testing.assert_array_equal(t.to_local().numpy(),
                                         scatter_value(full, everyone, t.sbp, RANK))
        numpy.testing.assert_array_equal(t.numpy(), full)
whole = load(path)
for name, full in (("rows", ROWS), ("part", PART), ("mesh", MESH)):
    numpy.testing.assert_array_equal(whole[name].numpy(), full)
if SIZE == 4:
    mesh = flow.placement("cpu", [[0, 1], [2, 3]])
    m = load(path, mesh, (flow.sbp.split(1), flow.sbp.partial_sum))["mesh"]
    numpy.testing.assert_array_equal(m.numpy(), MESH)
print(f"loaded on {SIZE}", flush=True)
"""


def run(ranks: int, code: str, path: Path, timeout: float = 60) -> str:
    job = run_job(ranks, code.replace("sys.argv[1]", repr(str(path))), timeout=timeout)
    assert job.returncode == 0, f"{ranks} ranks failed:\n{job.stdout}\n{job.stderr}"
    return job.stdout


def expect_values(path: Path) -> None:
    """Read the files with plain numpy, outside any MPI job."""
    assert_array_equal(numpy.load(path / "rows.npy"),
                       numpy.arange(13 * 7, dtype=numpy.float32).reshape(13, 7))
    assert_array_equal(numpy.load(path / "part.npy"), ((numpy.arange(30) - 3) * 5).reshape(10, 3))
    assert numpy.load(path / "mesh.npy").dtype == numpy.float16


@pytest.mark.parametrize(("saved", "loaded"), [(4, (3, 1)), (1, (4, 2))])
def test_save_on_n_ranks_load_on_m(tmp_path: Path, saved: int, loaded: tuple[int, ...]) -> None:
    path = tmp_path / "ckpt"
    run(saved, SAVE, path)
    expect_values(path)
    for ranks in loaded:
        assert f"loaded on {ranks}" in run(ranks, LOAD, path)
    state = load(path)  # and in this (1-rank) process
    assert state["step"] == 42 and state["rows"].shape == (13, 7)


CRASH = PRELUDE + """
from mpiflow.io import mpiio
path = sys.argv[1]
everyone = flow.placement("cpu", list(range(SIZE)))
save({"rows": shard(ROWS, everyone, (flow.sbp.split(0),)), "step": 1}, path)
real = mpiio.prepare_buffer
def dying(local, dtype, box):
    if RANK == 1:
        os._exit(3)  # a hard crash: no exception, no clean-up
    return real(local, dtype, box)
mpiio.prepare_buffer = dying
save({"rows": shard(ROWS * 0, everyone, (flow.sbp.split(0),)), "step": 2}, path)
"""


def test_a_rank_dying_in_the_middle_of_a_save_leaves_the_old_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "ckpt"
    job = run_job(2, CRASH.replace("sys.argv[1]", repr(str(path))), timeout=60)
    assert job.returncode != 0
    state = load(path)
    assert state["step"] == 1
    assert_array_equal(state["rows"].numpy(),
                       numpy.arange(13 * 7, dtype=numpy.float32).reshape(13, 7))
    # the partial new checkpoint stays in its temporary directory, never at `path`
    assert any(".ckpt.tmp-" in name for name in os.listdir(tmp_path))
    save({"step": 3}, str(path))  # the next save of the path removes it
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]
    assert load(path) == {"step": 3}


def test_checkpoint_bench_reports_bandwidths(tmp_path: Path) -> None:
    code = textwrap.dedent(f"""
        import json
        from mpiflow.bench.checkpoint import run_checkpoint_bench
        import mpiflow
        result = run_checkpoint_bench(1 << 20, {str(tmp_path)!r}, repeat=1)
        if mpiflow.env.get_rank() == 0:
            print(json.dumps(result))
    """)
    out = run(2, code, tmp_path)
    result = json.loads(out.strip().splitlines()[-1])
    assert result["ranks"] == 2 and result["bytes"] == 1 << 20
    assert set(result["GBps"]) == {"parallel_save", "gather_save", "parallel_load",
                                   "load_scatter"}
    assert all(v > 0 for v in result["GBps"].values())
    assert os.listdir(tmp_path) == []  # it cleans up after itself
