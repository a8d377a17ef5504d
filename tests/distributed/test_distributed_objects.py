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


# -- large objects: pkl5 sends the arrays' data out of band --------------------------------------

BIG = 8 * 2**20 // 8  # float64 elements in 8 MB: well above pkl5's 256 KiB out-of-band threshold


def big_payload(r: int, scale: int = 1) -> dict:
    """Three 8 MB arrays (times ``scale``) whose contents differ by rank, plus small parts."""
    n = BIG * scale
    return {
        "rank": r,
        "f64": numpy.arange(n, dtype=numpy.float64) * (r + 1),
        "i32": (numpy.arange(2 * n, dtype=numpy.int32) + r) % 65521,
        "c64": (numpy.arange(n, dtype=numpy.float32) + 1j * r).astype(numpy.complex64),
        "small": numpy.full(3, r, dtype=numpy.int8),  # in band
    }


def assert_big(obj: object, r: int, scale: int = 1) -> None:
    expected = big_payload(r, scale)
    assert isinstance(obj, dict) and obj.keys() == expected.keys()
    assert obj["rank"] == r
    for key in ("f64", "i32", "c64", "small"):
        got, want = obj[key], expected[key]
        assert got.dtype == want.dtype and got.shape == want.shape, key
        numpy.testing.assert_array_equal(got, want, err_msg=key)
        assert got.flags.writeable, key  # received arrays are usable as the old ones were
    obj["f64"][0] = -1.0  # and writing one touches no other entry


def test_large_objects_round_trip_exactly_in_every_collective():
    out = [None] * WORLD
    dist.all_gather_object(out, big_payload(RANK))
    for r, obj in enumerate(out):
        assert_big(obj, r)
    del out

    for src in range(WORLD):
        objs = [big_payload(RANK), "tail"]
        dist.broadcast_object_list(objs, src=src)
        assert_big(objs[0], src)
        assert objs[1] == "tail"

    dst = WORLD - 1
    gathered = [None] * WORLD if RANK == dst else None
    dist.gather_object(big_payload(RANK), gathered, dst=dst)
    if RANK == dst:
        assert gathered is not None
        for r, obj in enumerate(gathered):
            assert_big(obj, r)
    else:
        assert gathered is None
    del gathered

    mine = [None]
    dist.scatter_object_list(mine, [big_payload(r) for r in range(WORLD)] if RANK == 0 else None,
                             src=0)
    assert_big(mine[0], RANK)


def uneven(r: int) -> list:
    """Sizes that differ by rank: empty, below and above the out-of-band threshold, larger."""
    sizes = [0, 1000, 40_000, BIG // 2, BIG * 2]
    return [numpy.arange(sizes[(r + i) % len(sizes)], dtype=numpy.float64) + r
            for i in range(1 + r % 3)]


def assert_uneven(got: object, r: int) -> None:
    want = uneven(r)
    assert isinstance(got, list) and len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype
        numpy.testing.assert_array_equal(g, w)


def test_uneven_sizes_across_ranks():
    out = [None] * WORLD
    dist.all_gather_object(out, uneven(RANK))
    for r, got in enumerate(out):
        assert_uneven(got, r)
    gathered = [None] * WORLD if RANK == 0 else None
    dist.gather_object(uneven(RANK), gathered, dst=0)
    if RANK == 0:
        assert gathered is not None
        for r, got in enumerate(gathered):
            assert_uneven(got, r)
    mine = [None]
    dist.scatter_object_list(mine, [uneven(r) for r in range(WORLD)], src=WORLD - 1)
    assert_uneven(mine[0], RANK)
    for src in range(WORLD):
        objs = [uneven(RANK)]
        dist.broadcast_object_list(objs, src=src)
        assert_uneven(objs[0], src)


def layouts(r: int) -> dict:
    """Arrays of several layouts and dtypes, above and below the out-of-band threshold."""
    base = numpy.arange(6 * 70_000, dtype=numpy.float64).reshape(6, 70_000) + r
    structured = numpy.zeros(40_000, dtype=[("a", "i4"), ("b", "f8")])
    structured["a"], structured["b"] = r, numpy.arange(40_000) / 7
    return {
        "fortran": numpy.asfortranarray(base),
        "strided": base[:, ::3],
        "bool": base > 100,
        "longdouble": base[:2].astype(numpy.longdouble),
        "structured": structured,
        "0-d": numpy.float32(r),
    }


def test_arrays_of_any_layout_and_dtype_inside_objects():
    out = [None] * WORLD
    dist.all_gather_object(out, layouts(RANK))
    for r, got in enumerate(out):
        for key, value in layouts(r).items():
            assert got[key].dtype == value.dtype, key
            numpy.testing.assert_array_equal(got[key], value, err_msg=key)
        assert got["fortran"].flags.f_contiguous


def test_the_source_keeps_its_own_objects_and_the_others_get_copies():
    arr = numpy.arange(BIG // 4, dtype=numpy.float64)
    objs = [arr]
    dist.broadcast_object_list(objs, src=0)
    if RANK == 0:
        assert objs[0] is arr
    out = [None] * WORLD
    dist.all_gather_object(out, arr)
    assert out[RANK] is not arr and not numpy.shares_memory(out[RANK], arr)
    numpy.testing.assert_array_equal(out[RANK], arr)


def test_large_torch_tensors_inside_objects():
    torch = pytest.importorskip("torch")
    t = torch.arange(BIG // 2, dtype=torch.float32) + RANK
    out = [None] * WORLD
    dist.all_gather_object(out, {"t": t, "bf16": t[:1000].to(torch.bfloat16)})
    for r, got in enumerate(out):
        want = torch.arange(BIG // 2, dtype=torch.float32) + r
        assert torch.equal(got["t"], want)
        assert got["bf16"].dtype == torch.bfloat16
        assert torch.equal(got["bf16"], want[:1000].to(torch.bfloat16))


# -- MPIFLOW_DEBUG=1 --------------------------------------------------------------------------


@pytest.fixture
def checked_world():
    """A group of the whole world over a debug-mode communicator (as MPIFLOW_DEBUG=1 makes)."""
    from mpi4py import MPI

    from mpiflow.communication.debug.mode import DebugMPICommunicator
    from mpiflow.communication.mpi.group import ProcessGroup

    mpi_comm = MPI.COMM_WORLD.Dup()
    yield ProcessGroup(range(WORLD), DebugMPICommunicator(mpi_comm))
    mpi_comm.Free()


def test_debug_mode_checks_the_object_collectives(checked_world):
    from mpiflow.communication.debug.mode import CollectiveMismatchError

    g = checked_world
    out = [None] * WORLD
    dist.all_gather_object(out, RANK, group=g)
    assert out == list(range(WORLD))
    objs = [RANK]
    dist.broadcast_object_list(objs, src=WORLD - 1, group=g)
    assert objs == [WORLD - 1]
    if WORLD == 1:
        return
    # every rank names a different source: every rank raises, and nothing is sent
    with pytest.raises(CollectiveMismatchError, match=r"(?s)mismatched object collectives on "
                       r"the world.*rank 0: broadcast_object_list\(src=0\).*rank 1: "
                       r"broadcast_object_list\(src=1\)"):
        dist.broadcast_object_list([RANK], src=RANK, group=g)
    # different object collectives
    with pytest.raises(CollectiveMismatchError, match=r"(?s)all_gather_object.*gather_object"
                       r"\(dst=0\)"):
        if RANK == 0:
            dist.all_gather_object([None] * WORLD, RANK, group=g)
        else:
            dist.gather_object(RANK, None, dst=0, group=g)
    dist.all_gather_object(out, -RANK, group=g)  # the group still works
    assert out == [-r for r in range(WORLD)]
