"""Checkpoints (mpiflow.io): save and load of global tensors in every layout, at any rank count.

Every rank runs every test in a directory that is the same on every rank (made by rank 0).
Failures (a rank that raises while saving, a damaged checkpoint) must raise on *every* rank;
a rank left waiting would be ended by the suite's timeout.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_array_equal

import mpiflow as flow
from mpiflow.communication.mpi.group import world_comm
from mpiflow.distributed import barrier
from mpiflow.io import CheckpointError, files, load, mpiio, save
from mpiflow.io import checkpoint as checkpoint_module
from mpiflow.io.format import file_names
from mpiflow.io.npy import header_bytes
from mpiflow.io.tree import check_node, flatten, unflatten
from mpiflow.layouts.shards import scatter_value

pytestmark = pytest.mark.mpi

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
ALL = flow.placement("cpu", list(range(SIZE)))
S0, S1, B, P = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.broadcast, flow.sbp.partial_sum
ROWS = 3 * SIZE + 1


def value(shape: tuple[int, ...], dtype: Any = numpy.float64, seed: int = 0) -> numpy.ndarray:
    """The same deterministic array on every rank."""
    raw = numpy.random.default_rng(seed).integers(-9, 9, size=shape)
    dt = numpy.dtype(dtype)
    if dt.kind == "b":
        return raw > 0
    if dt.kind == "c":
        return (raw + 1j * (raw % 3)).astype(dt)
    if dt.kind == "u":
        return numpy.abs(raw).astype(dt)
    return raw.astype(dt)


def make_global(full: numpy.ndarray, placement: flow.placement, sbp: Any) -> flow.Tensor:
    """A global tensor of logical value ``full`` (for P: rank 0 of each P axis holds it)."""
    sbp = (sbp,) if isinstance(sbp, flow.sbp.sbp) else tuple(sbp)
    shard = scatter_value(full, placement, sbp, RANK)
    return flow.Tensor(shard, placement, sbp, full.shape)


def expected_shard(full: numpy.ndarray, placement: flow.placement, sbp: Any) -> numpy.ndarray:
    sbp = (sbp,) if isinstance(sbp, flow.sbp.sbp) else tuple(sbp)
    return scatter_value(full, placement, sbp, RANK)


@pytest.fixture
def ckpt_dir(mpi_tmp_path: Path) -> str:
    """A fresh directory, the same path on every rank (pytest-mpi's ``mpi_tmp_path``)."""
    return str(mpi_tmp_path)


def leftovers(directory: str) -> list[str]:
    return sorted(n for n in os.listdir(directory) if ".tmp-" in n or ".old-" in n)


def read_json(checkpoint: str) -> Any:
    with open(os.path.join(checkpoint, "metadata.json"), encoding="utf-8") as f:
        return json.load(f)


def write_file(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def rank0(action: Any) -> None:
    """Run ``action`` on rank 0 only, then wait for it everywhere."""
    if RANK == 0:
        action()
    barrier()


# -- round trips ---------------------------------------------------------------------------

LAYOUTS = [S0, S1, B, P]


@pytest.mark.parametrize("sbp", LAYOUTS, ids=str)
def test_global_tensor_becomes_one_plain_npy_file_of_its_logical_value(ckpt_dir: str,
                                                                       sbp: Any) -> None:
    full = value((ROWS, SIZE + 2))
    path = os.path.join(ckpt_dir, "ckpt")
    save({"w": make_global(full, ALL, sbp)}, path)
    if RANK == 0:
        assert_array_equal(numpy.load(os.path.join(path, "w.npy")), full)
        meta = read_json(path)
        assert meta["version"] == 1 and meta["world_size"] == SIZE
        assert meta["arrays"][0]["sbp"] == [str(sbp)]
        assert meta["arrays"][0]["shape"] == [ROWS, SIZE + 2]
    assert leftovers(ckpt_dir) == []


@pytest.mark.parametrize("src", LAYOUTS, ids=str)
@pytest.mark.parametrize("dst", LAYOUTS, ids=str)
def test_load_in_any_layout_reads_each_ranks_shard(ckpt_dir: str, src: Any, dst: Any) -> None:
    full = value((ROWS, 2 * SIZE - 1), seed=1)
    path = os.path.join(ckpt_dir, "ckpt")
    save({"w": make_global(full, ALL, src)}, path)
    got = load(path, ALL, dst)["w"]
    assert got.is_global and got.sbp == (dst,) and got.shape == full.shape
    assert_array_equal(got.to_local().numpy(), expected_shard(full, ALL, dst))
    assert_array_equal(got.numpy(), full)


def test_without_placement_tensors_come_back_local_and_whole(ckpt_dir: str) -> None:
    full = value((ROWS, 3))
    path = os.path.join(ckpt_dir, "ckpt")
    save([make_global(full, ALL, S0), make_global(full, ALL, P)], path)
    got = load(path)
    assert isinstance(got, list) and len(got) == 2
    for t in got:
        assert isinstance(t, flow.Tensor) and t.is_local
        assert_array_equal(t.numpy(), full)


DTYPES = [numpy.float16, numpy.float32, numpy.float64, numpy.int8, numpy.int32, numpy.int64,
          numpy.uint8, numpy.bool_, numpy.complex64, numpy.complex128]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: numpy.dtype(d).name)
def test_dtypes_round_trip_exactly(ckpt_dir: str, dtype: Any) -> None:
    full = value((ROWS, 3), dtype, seed=2)
    path = os.path.join(ckpt_dir, "ckpt")
    save({"g": make_global(full, ALL, S0), "l": flow.tensor(full), "a": full}, path)
    got = load(path, ALL, S1)
    assert got["g"].dtype.numpy == full.dtype and got["l"].dtype.numpy == full.dtype
    assert_array_equal(got["g"].numpy(), full)
    assert_array_equal(got["l"].to_local().numpy(), expected_shard(full, ALL, S1))
    assert isinstance(got["a"], numpy.ndarray) and got["a"].dtype == full.dtype
    assert_array_equal(got["a"], full)
    if RANK == 0:
        for name in ("g", "l", "a"):
            on_disk = numpy.load(os.path.join(path, f"{name}.npy"))
            assert on_disk.dtype == full.dtype
            assert_array_equal(on_disk, full)


@pytest.mark.parametrize("shape", [(0, 3), (ROWS, 0), (1, 3), (SIZE - 1, 2), (), (5,)],
                         ids=str)
@pytest.mark.parametrize("sbp", [S0, B, P], ids=str)
def test_zero_size_empty_shards_and_scalars(ckpt_dir: str, shape: tuple[int, ...],
                                            sbp: Any) -> None:
    if not shape and isinstance(sbp, flow.sbp.Split):
        pytest.skip("a 0-d tensor cannot be split")
    full = value(shape, seed=3)
    path = os.path.join(ckpt_dir, "ckpt")
    save({"t": make_global(full, ALL, sbp)}, path)
    if RANK == 0:
        on_disk = numpy.load(os.path.join(path, "t.npy"))
        assert on_disk.shape == shape
        assert_array_equal(on_disk, full)
    for dst in ([S0] if shape else []) + [B, P]:
        got = load(path, ALL, dst)["t"]
        assert got.shape == shape
        assert_array_equal(got.to_local().numpy(), expected_shard(full, ALL, dst))
    local = load(path)["t"]
    assert local.shape == shape
    assert_array_equal(local.numpy(), full)


MESH_LAYOUTS = [(S0, S1), (S1, S1), (B, S0), (P, S1), (S0, P), (B, B)]


@pytest.mark.mpi(min_size=4)
@pytest.mark.parametrize("src", MESH_LAYOUTS, ids=str)
def test_two_by_two_mesh_layouts(ckpt_dir: str, src: tuple[Any, Any]) -> None:
    mesh = flow.placement("cpu", [[0, 1], [2, 3]])
    full = value((7, 5), numpy.float32, seed=4)
    path = os.path.join(ckpt_dir, "ckpt")
    save({"m": make_global(full, mesh, src)}, path)
    if RANK == 0:
        assert_array_equal(numpy.load(os.path.join(path, "m.npy")), full)
    for dst in [(S1, S0), (S0, S0), (P, B), (S0,)]:
        target = mesh if len(dst) == 2 else ALL
        got = load(path, target, dst)["m"]
        assert_array_equal(got.to_local().numpy(), expected_shard(full, target, dst))
        assert_array_equal(got.numpy(), full)


def test_placements_on_some_ranks_only(ckpt_dir: str) -> None:
    last = flow.placement("cpu", [SIZE - 1])
    tail = flow.placement("cpu", list(range(1, SIZE)) or [0])
    full = value((ROWS, 2), seed=5)
    path = os.path.join(ckpt_dir, "ckpt")
    save({"a": make_global(full, last, B), "b": make_global(full, tail, S0)}, path)
    got = load(path, flow.placement("cpu", [0]), S0)
    for name in ("a", "b"):
        assert_array_equal(got[name].to_local().numpy(), full if RANK == 0 else numpy.empty(0))
        assert_array_equal(got[name].numpy(), full)


def test_python_values_and_structure_come_back(ckpt_dir: str) -> None:
    full = value((ROWS, 2), seed=6)
    w = make_global(full, ALL, S0)
    w.requires_grad = True
    state = collections.OrderedDict(
        model={"layer": {"weight": w, "bias": flow.tensor([1.0, 2.0])}},
        optim={"state": {0: {"exp_avg": make_global(full, ALL, P), "step": 7}},
               "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "name": None}]},
        step=100, done=False, tags={"a", "b"}, weird=float("nan"), scale=numpy.float32(2.5),
        mask=numpy.array([True, False]), pair={(1, "x"): "tuple key"})
    path = os.path.join(ckpt_dir, "ckpt")
    save(state, path)
    got = load(path)
    assert type(got) is dict and list(got) == list(state)
    assert got["model"]["layer"]["weight"].requires_grad
    assert_array_equal(got["model"]["layer"]["weight"].numpy(), full)
    assert_array_equal(got["model"]["layer"]["bias"].numpy(), [1.0, 2.0])
    assert list(got["optim"]["state"]) == [0]
    assert got["optim"]["state"][0]["step"] == 7
    assert_array_equal(got["optim"]["state"][0]["exp_avg"].numpy(), full)
    assert got["optim"]["param_groups"] == [{"lr": 0.1, "betas": (0.9, 0.999), "name": None}]
    assert got["step"] == 100 and got["done"] is False and got["tags"] == {"a", "b"}
    assert numpy.isnan(got["weird"]) and got["scale"] == numpy.float32(2.5)
    assert type(got["scale"]) is numpy.float32
    assert_array_equal(got["mask"], [True, False])
    assert got["pair"] == {(1, "x"): "tuple key"}
    if RANK == 0:
        names = {a["name"]: a["file"] for a in read_json(path)["arrays"]}
        assert names["model.layer.weight"] == "model.layer.weight.npy"
        assert names["optim.state.0.exp_avg"] == "optim.state.0.exp_avg.npy"


def test_sbp_function_chooses_per_tensor_and_none_means_local(ckpt_dir: str) -> None:
    full = value((ROWS, 3), seed=7)
    path = os.path.join(ckpt_dir, "ckpt")
    save({"w": make_global(full, ALL, S0), "b": flow.tensor(full[0]), "n": flow.tensor(2.0)},
         path)
    seen: list[str] = []

    def choose(name: str) -> Any:
        seen.append(name)
        return {"w": S1, "b": B, "n": None}[name]

    got = load(path, ALL, choose)
    assert seen == ["w", "b", "n"]
    assert got["w"].sbp == (S1,) and got["b"].sbp == (B,) and got["n"].is_local
    assert_array_equal(got["w"].to_local().numpy(), expected_shard(full, ALL, S1))
    assert got["n"].item() == 2.0


def test_leaf_names_become_distinct_safe_file_names(ckpt_dir: str) -> None:
    path = os.path.join(ckpt_dir, "ckpt")
    tree = {"a/b": numpy.zeros(1), "a_b": numpy.ones(1), "A_B": numpy.full(1, 2.0),
            "..": numpy.full(1, 3.0)}
    save(tree, path)
    got = load(path)
    for k, v in tree.items():
        assert_array_equal(got[k], v)
    if RANK == 0:
        assert sorted(os.listdir(path)) == sorted(
            ["a_b.npy", "a_b~1.npy", "A_B~2.npy", "array.npy", "metadata.json"])


def test_saving_again_replaces_the_old_checkpoint(ckpt_dir: str) -> None:
    path = os.path.join(ckpt_dir, "sub", "dir", "ckpt")  # parents are created
    save({"x": flow.tensor([1.0]), "old_only": 1}, path)
    save({"x": make_global(value((ROWS,)), ALL, S0)}, path + "/")
    got = load(path)
    assert list(got) == ["x"]
    assert_array_equal(got["x"].numpy(), value((ROWS,)))
    assert leftovers(os.path.dirname(path)) == []
    if RANK == 0:
        assert sorted(os.listdir(path)) == ["metadata.json", "x.npy"]


def test_replacing_without_an_atomic_exchange_renames_the_old_one_aside(
        ckpt_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "_exchange", lambda a, b: False)  # as on macOS
    path = os.path.join(ckpt_dir, "ckpt")
    save({"v": 1}, path)
    save({"v": 2}, path)
    assert load(path) == {"v": 2}
    assert leftovers(ckpt_dir) == []


def test_a_directory_that_is_not_a_checkpoint_is_never_replaced(ckpt_dir: str) -> None:
    rank0(lambda: write_file(os.path.join(ckpt_dir, "precious.txt"), b"keep"))
    with pytest.raises(CheckpointError, match="not an mpiflow checkpoint"):
        save({"x": flow.tensor([1.0])}, ckpt_dir)
    with open(os.path.join(ckpt_dir, "precious.txt"), "rb") as f:
        assert f.read() == b"keep"
    assert leftovers(os.path.dirname(ckpt_dir)) == []


@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5)
    | st.builds(numpy.zeros, st.integers(0, 3)),
    lambda inner: (st.lists(inner, max_size=3) | st.tuples(inner, inner)
                   | st.dictionaries(st.text(max_size=3) | st.integers(), inner, max_size=3)),
    max_leaves=8))
@settings(max_examples=60, deadline=None, derandomize=True, database=None)
def test_tree_round_trips_through_json(tree: Any) -> None:
    flat = flatten(tree, lambda v: isinstance(v, numpy.ndarray))
    node = json.loads(json.dumps(flat.node, allow_nan=False))
    check_node(node, len(flat.arrays), len(flat.objects))
    back = unflatten(node, [a for _, a in flat.arrays], [o for _, o in flat.objects])
    assert repr(back) == repr(tree)  # types too: tuples stay tuples, int keys stay ints


def test_file_names_are_distinct_and_safe() -> None:
    assert file_names(["model.w", "model/w", "Model.W", "", "x" * 300]) == [
        "model.w.npy", "model_w.npy", "Model.W~1.npy", "array.npy", "x" * 120 + ".npy"]


# -- failures ------------------------------------------------------------------------------

def old_checkpoint(ckpt_dir: str) -> tuple[str, numpy.ndarray]:
    full = value((ROWS, 3), seed=8)
    path = os.path.join(ckpt_dir, "ckpt")
    save({"w": make_global(full, ALL, S0), "step": 1}, path)
    return path, full


def assert_intact(path: str, full: numpy.ndarray) -> None:
    got = load(path, ALL, S1)
    assert got["step"] == 1
    assert_array_equal(got["w"].numpy(), full)
    assert leftovers(os.path.dirname(path)) == []


FAILING_RANK = 1 if SIZE > 1 else 0


def test_a_rank_failing_to_write_raises_everywhere_and_keeps_the_old_checkpoint(
        ckpt_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path, full = old_checkpoint(ckpt_dir)
    real = mpiio.prepare_buffer
    calls = []

    def failing(local: Any, dtype: Any, box: Any) -> Any:
        calls.append(box)
        if RANK == FAILING_RANK and len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(local, dtype, box)

    monkeypatch.setattr(mpiio, "prepare_buffer", failing)
    new = {"w": make_global(value((ROWS, 3), seed=9), ALL, S1), "v": flow.tensor([1.0]),
           "step": 2}
    with pytest.raises(CheckpointError, match=f"on rank {FAILING_RANK}.*No space left") as info:
        save(new, path)
    assert info.value.rank == FAILING_RANK
    monkeypatch.undo()
    assert_intact(path, full)


def test_a_disk_error_on_rank_0_raises_everywhere(ckpt_dir: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path, full = old_checkpoint(ckpt_dir)

    def broken(fh: Any, header: bytes) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(mpiio, "_write_header", broken)
    with pytest.raises(CheckpointError, match=r"header.*on rank 0.*Input/output error"):
        save({"w": make_global(value((ROWS, 3)), ALL, S0)}, path)
    monkeypatch.undo()
    assert_intact(path, full)


def test_an_unpicklable_value_fails_on_every_rank(ckpt_dir: str) -> None:
    path, full = old_checkpoint(ckpt_dir)
    with pytest.raises(CheckpointError, match=r"'fn'.*picklable"):
        save({"w": make_global(full, ALL, S0), "fn": lambda: 0}, path)
    assert_intact(path, full)


def test_a_failure_while_moving_into_place_keeps_the_old_checkpoint(
        ckpt_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path, full = old_checkpoint(ckpt_dir)

    def broken(tmp: str, target: str) -> None:
        raise PermissionError(13, "Permission denied", target)

    monkeypatch.setattr(checkpoint_module, "replace_directory", broken)
    with pytest.raises(CheckpointError, match=r"moving the checkpoint into place.*Permission"):
        save({"w": make_global(value((ROWS, 3)), ALL, S0)}, path)
    monkeypatch.undo()
    assert_intact(path, full)


@pytest.mark.mpi(min_size=2)
def test_ranks_passing_different_structures_fail_on_every_rank(ckpt_dir: str) -> None:
    path, full = old_checkpoint(ckpt_dir)
    tree: dict[str, Any] = {"w": make_global(full, ALL, S0)}
    if RANK == 1:
        tree["extra"] = flow.tensor([1.0])
    with pytest.raises(CheckpointError, match=r"different structures.*rank 1"):
        save(tree, path)
    assert_intact(path, full)


@pytest.mark.mpi(min_size=2)
def test_ranks_passing_different_paths_fail_on_every_rank_before_writing(ckpt_dir: str) -> None:
    # torch.save(state, f"ckpt_{rank}.pt") habits: before, rank 0's path alone was written
    # and every rank returned as if its own had been
    path, full = old_checkpoint(ckpt_dir)
    mine = os.path.join(ckpt_dir, f"ck_r{RANK}")
    with pytest.raises(CheckpointError, match=r"^saving .*ck_r0: the ranks passed different "
                       r"arguments .*: path is '.*ck_r0' on rank 0 but '.*ck_r1' on rank 1"
                       ) as info:
        save({"w": make_global(full, ALL, S0)}, mine)
    assert info.value.ranks == tuple(range(1, SIZE))
    # a path under a regular file on one rank only: the same error, nothing written either
    blocker = os.path.join(ckpt_dir, "file")
    if RANK == 0:
        Path(blocker).write_text("not a directory")
    with pytest.raises(CheckpointError, match=r"path is '.*ckpt' on rank 0 but '.*file/ckpt' "
                       f"on rank {SIZE - 1}$"):
        save({"w": make_global(full * 2, ALL, S0), "step": 2},
             os.path.join(blocker, "ckpt") if RANK == SIZE - 1 else path)
    assert sorted(os.listdir(ckpt_dir)) == ["ckpt", "file"]
    assert_intact(path, full)
    with pytest.raises(CheckpointError, match=r"^loading .*ckpt: the ranks passed different "
                       r"arguments .*: path is '.*ckpt' on rank 0 but '.*ck_r1' on rank 1"):
        load(path if RANK == 0 else mine)


def test_unsupported_leaves_fail_on_every_rank(ckpt_dir: str) -> None:
    with pytest.raises(CheckpointError, match="cannot be a dict key"):
        save({(numpy.zeros(1).tobytes(), 1): 1, "k": {flow.tensor([1.0]): 2}},
             os.path.join(ckpt_dir, "c"))


# -- damaged checkpoints --------------------------------------------------------------------

def damage(path: str, action: Any) -> None:
    rank0(lambda: action(path))


def truncate(path: str) -> None:
    with open(os.path.join(path, "w.npy"), "r+b") as f:
        f.truncate(os.path.getsize(os.path.join(path, "w.npy")) - 8)


def write_json(path: str, text: str) -> None:
    write_file(os.path.join(path, "metadata.json"), text.encode())


def set_version(path: str) -> None:
    meta = read_json(path)
    meta["version"] = 99
    write_json(path, json.dumps(meta))


def reshape_file(path: str) -> None:
    numpy.save(os.path.join(path, "w.npy"), numpy.zeros((2, 2), numpy.float32))


DAMAGE = {
    "truncated": (truncate, "truncated"),
    "bad_json": (lambda p: write_json(p, '{"format": "mpiflow-checkpoint", "vers'),
                 "not valid JSON"),
    "unknown_version": (set_version, "unknown checkpoint format version 99"),
    "not_a_checkpoint": (lambda p: write_json(p, '{"hello": 1}'), "not an mpiflow checkpoint"),
    "missing_metadata": (lambda p: os.remove(os.path.join(p, "metadata.json")),
                         "has no metadata.json"),
    "missing_file": (lambda p: os.remove(os.path.join(p, "w.npy")), "No such file"),
    "wrong_shape": (reshape_file, "does not match the metadata"),
    "garbage_npy": (lambda p: write_file(os.path.join(p, "w.npy"), b"garbage" * 20),
                    "w.npy"),
    "missing_objects": (lambda p: os.remove(os.path.join(p, "objects.pkl")), "objects.pkl"),
    "missing_dir": (lambda p: shutil.rmtree(p), "no checkpoint at"),
}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_a_damaged_checkpoint_raises_a_clear_error_on_every_rank(ckpt_dir: str,
                                                                 kind: str) -> None:
    path = os.path.join(ckpt_dir, "ckpt")
    save({"w": make_global(value((ROWS, 3), numpy.float32), ALL, S0), "s": {1, 2}}, path)
    action, message = DAMAGE[kind]
    damage(path, action)
    for args in ((), (ALL, S0)):
        with pytest.raises(CheckpointError, match=message) as info:
            load(path, *args)
        assert info.value.rank == 0


def test_a_truncated_file_is_caught_by_the_collective_read_too(ckpt_dir: str) -> None:
    path = os.path.join(ckpt_dir, "t.npy")
    full = value((ROWS, 4), numpy.float32)
    header = header_bytes(full.dtype, full.shape)
    rank0(lambda: write_file(path, header + full.tobytes()[:-16]))
    box = ((0, ROWS), (0, 4))
    with pytest.raises(CheckpointError, match="truncated"):
        mpiio.read_array(world_comm.mpi_comm, path, len(header), full.dtype, full.shape, box)


def test_a_truncated_file_fails_every_rank_also_those_whose_region_is_whole(
        ckpt_dir: str) -> None:
    """Only the last rank's rows are cut off; every rank raises (ROMIO and OMPIO alike)."""
    path = os.path.join(ckpt_dir, "t.npy")
    full = value((ROWS, 4), numpy.float32)
    header = header_bytes(full.dtype, full.shape)
    rank0(lambda: write_file(path, header + full.tobytes()[:-4]))
    box = ((RANK, RANK + 1), (0, 4))  # one row each: rank 0's is intact
    with pytest.raises(CheckpointError, match=r"truncated: it holds \d+ bytes"):
        mpiio.read_array(world_comm.mpi_comm, path, len(header), full.dtype, full.shape, box)


def test_bad_arguments(ckpt_dir: str) -> None:
    path = os.path.join(ckpt_dir, "ckpt")
    save({"v": flow.tensor([1.0, 2.0]), "n": flow.tensor(1.0)}, path)
    with pytest.raises(ValueError, match="together"):
        load(path, ALL)
    with pytest.raises(ValueError, match="together"):
        load(path, sbp=S0)
    with pytest.raises(TypeError, match="placement"):
        load(path, [0], S0)  # type: ignore[arg-type]
    with pytest.raises(CheckpointError, match=r"'n'.*splits dim 0.*function of the name"):
        load(path, ALL, S0)
    with pytest.raises(CheckpointError, match=r"'v'.*mesh dimension"):
        load(path, ALL, (S0, S0))
    with pytest.raises(CheckpointError, match=r"dtype object cannot be saved|dtype"):
        save({"o": flow.Tensor(numpy.array([None, 1], dtype=object))}, path)
