"""Object collectives of ``mpiflow.distributed``: broadcast_object_list, all_gather_object,
gather_object, scatter_object_list, over the world and over groups."""

from __future__ import annotations

import fractions

import numpy
import pytest
from collective_helpers import RANK, WORLD

import mpiflow.distributed as dist

pytestmark = pytest.mark.mpi


def payload(r: int) -> dict:
    """A picklable object that differs by rank, of a size that differs by rank too."""
    return {
        "rank": r,
        "name": f"rank-{r}" * (r + 1),
        "array": numpy.arange(r + 2, dtype=numpy.float32),
        "nested": [(r, None), {r: fractions.Fraction(1, r + 1)}],
        "empty": b"",
    }


def assert_payload(obj: object, r: int) -> None:
    expected = payload(r)
    assert isinstance(obj, dict) and obj.keys() == expected.keys()
    numpy.testing.assert_array_equal(obj["array"], expected["array"])
    assert obj["array"].dtype == numpy.float32
    for key in ("rank", "name", "nested", "empty"):
        assert obj[key] == expected[key]


def test_broadcast_object_list_every_src():
    results = []
    for src in range(WORLD):
        objs = [payload(RANK), "x" * RANK, None]
        assert dist.broadcast_object_list(objs, src=src) is None
        results.append(objs)
    for src, objs in enumerate(results):
        assert len(objs) == 3
        assert_payload(objs[0], src)
        assert objs[1:] == ["x" * src, None]


def test_broadcast_object_list_keeps_list_identity():
    objs = [RANK] * 4
    same = objs
    dist.broadcast_object_list(objs, src=WORLD - 1)
    assert same is objs and objs == [WORLD - 1] * 4


def test_broadcast_object_list_empty_list():
    objs: list = []
    dist.broadcast_object_list(objs, src=0)
    assert objs == []


def test_broadcast_object_list_length_mismatch():
    # the source's list has 2 entries, every other rank's 3: they raise, after the broadcast
    objs = [1, 2] if RANK == 0 else [None, None, None]
    if RANK == 0:
        dist.broadcast_object_list(objs, src=0)
        assert objs == [1, 2]
    else:
        with pytest.raises(ValueError, match="object_list has 3 entries here but 2 on the "
                                             "source rank 0"):
            dist.broadcast_object_list(objs, src=0)


def test_all_gather_object():
    out = [None] * WORLD
    assert dist.all_gather_object(out, payload(RANK)) is None
    for r, obj in enumerate(out):
        assert_payload(obj, r)


def test_all_gather_object_scalars_and_none():
    out = ["stale"] * WORLD
    dist.all_gather_object(out, None if RANK % 2 else RANK)
    assert out == [None if r % 2 else r for r in range(WORLD)]


def test_gather_object_every_dst():
    results = []
    for dst in range(WORLD):
        out = [None] * WORLD if RANK == dst else None
        assert dist.gather_object(payload(RANK), out, dst=dst) is None
        results.append(out)
    for dst, out in enumerate(results):
        if RANK == dst:
            for r, obj in enumerate(out):
                assert_payload(obj, r)
        else:
            assert out is None


def test_scatter_object_list_every_src():
    results = []
    for src in range(WORLD):
        inputs = [payload(i) for i in range(WORLD)] if RANK == src else None
        out = [None]
        assert dist.scatter_object_list(out, inputs, src=src) is None
        results.append(out)
    for out in results:
        assert_payload(out[0], RANK)


def test_scatter_object_list_longer_output_list():
    out = ["a", "b"]
    dist.scatter_object_list(out, [f"to-{i}" for i in range(WORLD)], src=0)
    assert out == [f"to-{RANK}", "b"]


@pytest.fixture(params=["evens", "last"])
def grp(request):
    ranks = ([r for r in range(WORLD) if r % 2 == 0] if request.param == "evens"
             else [WORLD - 1])
    g = dist.new_group(ranks)
    yield g, ranks, RANK in ranks
    dist.destroy_process_group(g)


def test_objects_in_group(grp):
    g, ranks, member = grp
    k = len(ranks)
    for root in ranks:
        objs = [payload(RANK)]
        dist.broadcast_object_list(objs, src=root, group=g)
        assert_payload(objs[0], root if member else RANK)

        gathered = [None] * k
        dist.all_gather_object(gathered, RANK * 10, group=g)
        assert gathered == ([r * 10 for r in ranks] if member else [None] * k)

        out = [None] * k
        dist.gather_object(f"from-{RANK}", out, dst=root, group=g)
        assert out == ([f"from-{r}" for r in ranks] if RANK == root else [None] * k)

        mine = ["untouched"]
        dist.scatter_object_list(mine, [f"{root}->{r}" for r in ranks], src=root, group=g)
        assert mine == ([f"{root}->{RANK}"] if member else ["untouched"])


def test_objects_in_group_src_outside(grp):
    g, ranks, member = grp
    outside = WORLD if len(ranks) == WORLD else next(r for r in range(WORLD) if r not in ranks)
    if member:
        with pytest.raises(ValueError, match=f"src={outside} is not a rank of"):
            dist.broadcast_object_list([1], src=outside, group=g)
        with pytest.raises(ValueError, match=f"dst={outside} is not a rank of"):
            dist.gather_object(1, [None] * len(ranks), dst=outside, group=g)
    else:
        assert dist.broadcast_object_list([1], src=outside, group=g) is None


def test_object_collectives_then_tensor_collectives():
    # the objects' point-to-point messages must not be confused with user messages or
    # collectives that follow
    out = [None]
    dist.scatter_object_list(out, list(range(WORLD)), src=WORLD - 1)
    gathered = [None] * WORLD
    dist.gather_object(out[0], gathered if RANK == 0 else None, dst=0)
    x = numpy.full(2, float(out[0]))
    dist.all_reduce(x)
    numpy.testing.assert_array_equal(x, numpy.full(2, WORLD * (WORLD - 1) / 2))
    if RANK == 0:
        assert gathered == list(range(WORLD))
