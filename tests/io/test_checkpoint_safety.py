"""Checkpoints that are safe to load: no code runs from objects.pkl by default, every metadata
field is checked (naming it), and the temporary directories of interrupted saves are removed by
the next save and never taken for a checkpoint. Every failure raises on every rank.
"""

from __future__ import annotations

import collections
import fractions
import json
import os
import pickle
from pathlib import Path
from typing import Any

import numpy
import pytest
from numpy.testing import assert_array_equal

import mpiflow as flow
from mpiflow.distributed import barrier
from mpiflow.io import CheckpointError, load, save
from mpiflow.io.unpickle import loads

pytestmark = pytest.mark.mpi

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
ALL = flow.placement("cpu", list(range(SIZE)))
S0 = flow.sbp.split(0)


@pytest.fixture
def ckpt_dir(mpi_tmp_path: Path) -> str:
    """A fresh directory, the same path on every rank (pytest-mpi's ``mpi_tmp_path``)."""
    return str(mpi_tmp_path)


def rank0(action: Any) -> None:
    """Run ``action`` on rank 0 only, then wait for it everywhere."""
    if RANK == 0:
        action()
    barrier()


def save_small(path: str, **extra: Any) -> numpy.ndarray:
    full = numpy.arange((3 * SIZE + 1) * 2, dtype=numpy.float32).reshape(-1, 2)
    w = flow.tensor(full).to_global(placement=ALL, sbp=flow.sbp.broadcast).to_global(sbp=S0)
    save({"w": w, "tags": {"a"}, **extra}, path)
    return full


def expect_everywhere(path: str, message: str, **kwargs: Any) -> None:
    """Every way of loading ``path`` raises ``message`` on every rank."""
    for args in ((), (ALL, S0)):
        with pytest.raises(CheckpointError, match=message):
            load(path, *args, **kwargs)


# -- 1. objects.pkl runs no code -----------------------------------------------------------

class Payload:
    """Unpickling this creates the file ``marker``: what a malicious checkpoint would do."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return (os.mkdir, (self.marker,))


def plant(path: str, objects_pkl: bytes) -> None:
    rank0(lambda: Path(path, "objects.pkl").write_bytes(objects_pkl))


def test_a_malicious_object_does_not_run_on_load(ckpt_dir: str) -> None:
    path, marker = os.path.join(ckpt_dir, "ckpt"), os.path.join(ckpt_dir, "pwned")
    save_small(path)
    plant(path, pickle.dumps([pickle.dumps(Payload(marker))]))
    expect_everywhere(path, r"objects.pkl names posix.mkdir, which a weights_only load does "
                            r"not allow \(pass weights_only=False")
    assert not os.path.exists(marker)


def test_a_malicious_outer_pickle_does_not_run_even_with_weights_only_false(
        ckpt_dir: str) -> None:
    path, marker = os.path.join(ckpt_dir, "ckpt"), os.path.join(ckpt_dir, "pwned")
    save_small(path)
    plant(path, pickle.dumps(Payload(marker)))  # objects.pkl itself, read by rank 0
    expect_everywhere(path, "names posix.mkdir", weights_only=False)
    assert not os.path.exists(marker)


def test_weights_only_false_opts_in_to_any_pickled_value(ckpt_dir: str) -> None:
    path = os.path.join(ckpt_dir, "ckpt")
    save_small(path, ratio=fractions.Fraction(1, 3))
    expect_everywhere(path, "names fractions.Fraction")
    assert load(path, weights_only=False)["ratio"] == fractions.Fraction(1, 3)


def test_plain_python_values_still_load_by_default(ckpt_dir: str) -> None:
    path = os.path.join(ckpt_dir, "ckpt")
    objs = numpy.empty(2, dtype=object)  # a dict leaf is saved as a dict: wrap OrderedDict
    objs[:] = [{1}, collections.OrderedDict(b=1, a=2)]
    values = {"c": 1 + 2j, "nan": float("inf"), "raw": b"\x00\x01", "f": frozenset({3}),
              "s": numpy.float16(1.5), "arr": numpy.array(["x", "yz"]), "objs": objs,
              "sl": slice(1, None, 2), "r": range(4), "dt": numpy.dtype("<i2")}
    full = save_small(path, **values)
    got = load(path, ALL, S0)
    assert_array_equal(got["w"].numpy(), full)
    assert got["tags"] == {"a"}
    for key, v in values.items():
        if isinstance(v, numpy.ndarray):
            assert_array_equal(got[key], v)
            assert got[key].dtype == v.dtype
        else:
            assert got[key] == v and type(got[key]) is type(v), key
    assert type(got["objs"][1]) is collections.OrderedDict


def test_the_restricted_unpickler_refuses_what_can_run_code() -> None:
    for evil in (print, eval, os.system, getattr, numpy.load, pickle.loads):
        with pytest.raises(pickle.UnpicklingError, match="weights_only"):
            loads(pickle.dumps(evil))
    assert loads(pickle.dumps(print), weights_only=False) is print


# -- 2. every metadata field is checked, naming it -----------------------------------------

def edit(path: str, change: Any) -> None:
    def act() -> None:
        meta_path = os.path.join(path, "metadata.json")
        meta = json.loads(Path(meta_path).read_text())
        change(meta)
        Path(meta_path).write_text(json.dumps(meta))
    rank0(act)


def set_array(key: str, v: Any) -> Any:
    return lambda m: m["arrays"][0].__setitem__(key, v)


BAD_FIELDS = {
    "requires_grad_string": (set_array("requires_grad", "no"),
                             r'"arrays"\[0\] \(\'w\'\)\["requires_grad"\] must be true or false, '
                             r'got "no"'),
    "name_list": (set_array("name", ["w"]), r'"arrays"\[0\]\["name"\] must be a string'),
    "kind": (set_array("kind", "remote"), r'\["kind"\] must be one of global'),
    "shape_strings": (set_array("shape", ["7", 2]), r'\["shape"\] must be a list of non-neg'),
    "dtype_object": (set_array("dtype", "|O"), r'\["dtype"\] is not a supported dtype'),
    "dtype_number": (set_array("dtype", 4), r'\["dtype"\] must be a numpy dtype descriptor'),
    "file_path": (set_array("file", "../w.npy"), r'\["file"\] must be a plain .npy file'),
    "missing_file": (lambda m: m["arrays"][0].pop("file"), r'\(\'w\'\) has no "file"'),
    "placement_ranks": (lambda m: m["arrays"][0]["placement"].__setitem__("ranks", "all"),
                        r'\["placement"\]\["ranks"\] must be a list of ranks'),
    "placement_negative": (lambda m: m["arrays"][0]["placement"].__setitem__("ranks", [-1]),
                           r'\["placement"\]\["ranks"\] must be a non-empty'),
    "sbp": (set_array("sbp", ["split"]), r'\["sbp"\] must be a non-empty list of "S\(dim\)"'),
    "arrays_object": (lambda m: m.__setitem__("arrays", {"w": 1}),
                      r'the top level\["arrays"\] must be a list'),
    "objects_negative": (lambda m: m.__setitem__("objects", -1), r'"objects" must be a count'),
    "objects_bool": (lambda m: m.__setitem__("objects", True), r'\["objects"\] must be a count'),
    "world_size": (lambda m: m.__setitem__("world_size", "4"), r'\["world_size"\] must be a pos'),
    "version_string": (lambda m: m.__setitem__("version", "1"), "unknown checkpoint format"),
    "list_as_dict_key": (lambda m: m.__setitem__(
        "tree", {"items": [[{"list": [{"value": 1}]}, {"array": 0}],
                           [{"value": "tags"}, {"object": 0}]]}),
        r'"tree": \["items"\]\[0\]\[0\] is a list, which cannot be a dict key'),
    "tree_index": (lambda m: m["tree"]["dict"].__setitem__("w", {"array": 5}),
                   r'"tree": \["dict"\]\["w"\]\["array"\] is an index outside 0..0'),
}


@pytest.mark.parametrize("case", list(BAD_FIELDS))
def test_a_malformed_metadata_field_is_named_on_every_rank(ckpt_dir: str, case: str) -> None:
    path = os.path.join(ckpt_dir, "ckpt")
    save_small(path)
    change, message = BAD_FIELDS[case]
    edit(path, change)
    expect_everywhere(path, message)


def test_an_unhashable_object_as_a_dict_key_fails_on_every_rank(ckpt_dir: str) -> None:
    path = os.path.join(ckpt_dir, "ckpt")
    save_small(path)
    edit(path, lambda m: m.__setitem__(
        "tree", {"items": [[{"object": 0}, {"array": 0}]]}))  # the set {"a"} as a key
    expect_everywhere(path, "rebuilding its structure failed on rank 0.*TypeError: unhashable")


# -- 3. interrupted saves ------------------------------------------------------------------

def test_a_leftover_temporary_directory_is_removed_and_never_loaded(ckpt_dir: str) -> None:
    path = os.path.join(ckpt_dir, "ckpt")
    stale = os.path.join(ckpt_dir, ".ckpt.tmp-0123456789ab")
    other = os.path.join(ckpt_dir, ".ckpt2.tmp-0123456789ab")  # another path's: kept

    def interrupted_save() -> None:  # as a save killed after writing its metadata leaves it
        for d in (stale, other):
            os.makedirs(d)
            Path(d, "metadata.json").write_text('{"format": "mpiflow-checkpoint"}')
    rank0(interrupted_save)
    expect_everywhere(stale, "is not a checkpoint: it is the temporary directory of a save")
    expect_everywhere(path, r"no checkpoint at .*ckpt \(an interrupted save left "
                            r"\.ckpt\.tmp-0123456789ab, which the next save of this path")
    full = save_small(path)
    assert not os.path.exists(stale) and os.path.isdir(other)
    assert sorted(os.listdir(ckpt_dir)) == [".ckpt2.tmp-0123456789ab", "ckpt"]
    assert_array_equal(load(path)["w"].numpy(), full)
