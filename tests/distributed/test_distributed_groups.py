"""Groups and the process-group functions of ``mpiflow.distributed``.

``src``/``dst`` are *world* ranks; on a rank outside the group every collective is a no-op
that returns None (a completed Work with ``async_op=True``) and leaves its arrays alone.
"""

from __future__ import annotations

import numpy
import pytest
from collective_helpers import (
    RANK,
    WORLD,
    all_data,
    assert_same,
    needs_three,
    reduce_expected,
)
from helpers import rank_data

import mpiflow.distributed as dist
from mpiflow.distributed import ProcessGroup, ReduceOp, Work

pytestmark = pytest.mark.mpi

GROUPS = {
    "evens": [r for r in range(WORLD) if r % 2 == 0],
    "first": [0],
    "last": [WORLD - 1],
    "tail": list(range(1, WORLD)) or [0],
    "reversed": list(reversed(range(WORLD))),  # every rank, given unsorted
}


@pytest.fixture(params=list(GROUPS))
def grp(request):
    """(group, its world ranks in group order, whether this rank is a member)."""
    ranks = GROUPS[request.param]
    g = dist.new_group(ranks)
    yield g, sorted(ranks), RANK in ranks
    dist.destroy_process_group(g)


def test_group_queries(grp):
    g, ranks, member = grp
    assert isinstance(g, ProcessGroup)
    assert dist.get_process_group_ranks(g) == ranks
    assert [dist.get_global_rank(g, i) for i in range(len(ranks))] == ranks
    assert dist.get_rank(g) == (ranks.index(RANK) if member else -1)
    assert dist.get_world_size(g) == (len(ranks) if member else -1)
    assert dist.get_backend(g) in ("mpi", "nccl", "gloo")
    with pytest.raises(ValueError, match=r"group_rank=\d+ is not a rank of"):
        dist.get_global_rank(g, len(ranks))


def test_world_queries():
    assert dist.get_rank() == RANK and dist.get_world_size() == WORLD
    assert dist.get_rank(dist.group.WORLD) == RANK
    assert dist.get_world_size(dist.group.WORLD) == WORLD
    assert dist.get_process_group_ranks(dist.group.WORLD) == list(range(WORLD))
    assert dist.get_global_rank(dist.group.WORLD, WORLD - 1) == WORLD - 1
    assert 0 <= RANK < WORLD


def test_new_group_none_is_world():
    g = dist.new_group()
    assert dist.get_process_group_ranks(g) == list(range(WORLD))
    x = numpy.ones(2)
    dist.all_reduce(x, group=g)
    assert_same(x, numpy.full(2, float(WORLD)))
    dist.destroy_process_group(g)


def test_group_world_is_usable():
    x = numpy.full(3, RANK, dtype=numpy.int32)
    dist.all_reduce(x, op=ReduceOp.MAX, group=dist.group.WORLD)
    assert_same(x, numpy.full(3, WORLD - 1, dtype=numpy.int32))


@pytest.mark.parametrize("async_op", [False, True], ids=["sync", "async"])
def test_all_reduce_in_group(grp, async_op):
    g, ranks, member = grp
    x = rank_data((5,), numpy.int64, RANK)
    ret = dist.all_reduce(x, op=ReduceOp.SUM, group=g, async_op=async_op)
    if async_op:
        assert isinstance(ret, Work) and ret.wait() is True
    else:
        assert ret is None
    expected = (reduce_expected(ReduceOp.SUM, all_data((5,), numpy.int64, ranks=ranks))
                if member else rank_data((5,), numpy.int64, RANK))
    assert_same(x, expected)


def test_broadcast_in_group_every_src(grp):
    g, ranks, member = grp
    for src in ranks:
        x = rank_data((4,), numpy.float32, RANK)
        assert dist.broadcast(x, src=src, group=g) is None
        assert_same(x, rank_data((4,), numpy.float32, src if member else RANK))


def test_reduce_in_group_every_dst(grp):
    g, ranks, _ = grp
    for dst in ranks:
        x = rank_data((4,), numpy.int16, RANK)
        dist.reduce(x, dst=dst, op=ReduceOp.MAX, group=g)
        expected = (reduce_expected(ReduceOp.MAX, all_data((4,), numpy.int16, ranks=ranks))
                    if RANK == dst else rank_data((4,), numpy.int16, RANK))
        assert_same(x, expected)


def test_all_gather_in_group(grp):
    g, ranks, member = grp
    out = [numpy.zeros(3) for _ in ranks]
    dist.all_gather(out, rank_data((3,), numpy.float64, RANK), group=g)
    for i, o in enumerate(out):
        assert_same(o, rank_data((3,), numpy.float64, ranks[i]) if member else numpy.zeros(3))


def test_all_gather_into_tensor_in_group(grp):
    g, ranks, member = grp
    out = numpy.zeros((len(ranks) * 2, 3))
    dist.all_gather_into_tensor(out, rank_data((2, 3), numpy.float64, RANK), group=g)
    expected = (numpy.concatenate(all_data((2, 3), numpy.float64, ranks=ranks)) if member
                else numpy.zeros_like(out))
    assert_same(out, expected)


def test_gather_in_group_every_dst(grp):
    g, ranks, _ = grp
    for dst in ranks:
        out = [numpy.zeros(2, dtype=numpy.uint8) for _ in ranks]
        dist.gather(rank_data((2,), numpy.uint8, RANK, salt=dst), out, dst=dst, group=g)
        for i, o in enumerate(out):
            expected = (rank_data((2,), numpy.uint8, ranks[i], salt=dst) if RANK == dst
                        else numpy.zeros(2, dtype=numpy.uint8))
            assert_same(o, expected)


def test_scatter_in_group_every_src(grp):
    g, ranks, member = grp
    for src in ranks:
        pieces = [numpy.full(2, 10 * src + i) for i in range(len(ranks))]
        x = numpy.full(2, -1)
        dist.scatter(x, pieces if RANK == src else None, src=src, group=g)
        expected = numpy.full(2, 10 * src + ranks.index(RANK)) if member else numpy.full(2, -1)
        assert_same(x, expected)


def test_reduce_scatter_in_group(grp):
    g, ranks, member = grp
    k = len(ranks)
    inputs = [rank_data((3,), numpy.float32, RANK, salt=i) for i in range(k)]
    out = numpy.zeros(3, dtype=numpy.float32)
    dist.reduce_scatter(out, inputs, op=ReduceOp.AVG, group=g)
    expected = (reduce_expected(ReduceOp.AVG, all_data((3,), numpy.float32,
                                                       salt=ranks.index(RANK), ranks=ranks))
                if member else numpy.zeros(3, dtype=numpy.float32))
    assert_same(out, expected)


def test_reduce_scatter_tensor_in_group(grp):
    g, ranks, member = grp
    k = len(ranks)
    out = numpy.zeros(2, dtype=numpy.int32)
    dist.reduce_scatter_tensor(out, rank_data((2 * k,), numpy.int32, RANK), group=g)
    if member:
        i = ranks.index(RANK)
        full = reduce_expected(ReduceOp.SUM, all_data((2 * k,), numpy.int32, ranks=ranks))
        assert_same(out, full[2 * i:2 * i + 2])
    else:
        assert_same(out, numpy.zeros(2, dtype=numpy.int32))


def test_all_to_all_in_group(grp):
    g, ranks, member = grp
    # entry sizes differ per pair of group ranks
    inputs = [numpy.full(1 + i, 100 * RANK + r) for i, r in enumerate(ranks)]
    out = [numpy.full(1 + ranks.index(RANK) if member else 1, -1) for _ in ranks]
    dist.all_to_all(out, inputs, group=g)
    for i, o in enumerate(out):
        if member:
            assert_same(o, numpy.full(1 + ranks.index(RANK), 100 * ranks[i] + RANK))
        else:
            assert_same(o, numpy.full(1, -1))


def test_all_to_all_single_in_group(grp):
    g, ranks, member = grp
    k = len(ranks)
    inp = numpy.array([100 * RANK + r for r in ranks], dtype=numpy.int64)
    out = numpy.full(k, -1, dtype=numpy.int64)
    dist.all_to_all_single(out, inp, group=g)
    expected = (numpy.array([100 * r + RANK for r in ranks]) if member
                else numpy.full(k, -1, dtype=numpy.int64))
    assert_same(out, expected)


def test_barrier_in_group(grp):
    g, _, _ = grp
    assert dist.barrier(group=g) is None
    work = dist.barrier(group=g, async_op=True)
    assert isinstance(work, Work) and work.wait() is True


def test_non_member_returns_completed_work(grp):
    g, ranks, member = grp
    if member:
        return  # (members are covered above; nothing here communicates)
    x = numpy.full(3, 5.0)
    calls = [
        lambda a: dist.all_reduce(x, group=g, async_op=a),
        lambda a: dist.broadcast(x, src=ranks[0], group=g, async_op=a),
        lambda a: dist.reduce(x, dst=ranks[0], group=g, async_op=a),
        lambda a: dist.all_gather([x], x, group=g, async_op=a),
        lambda a: dist.all_gather_into_tensor(x, x, group=g, async_op=a),
        lambda a: dist.gather(x, [x], dst=ranks[0], group=g, async_op=a),
        lambda a: dist.scatter(x, None, src=ranks[0], group=g, async_op=a),
        lambda a: dist.reduce_scatter(x, [x], group=g, async_op=a),
        lambda a: dist.reduce_scatter_tensor(x, x, group=g, async_op=a),
        lambda a: dist.all_to_all([x], [x], group=g, async_op=a),
        lambda a: dist.all_to_all_single(x, x, group=g, async_op=a),
        lambda a: dist.barrier(group=g, async_op=a),
    ]
    for call in calls:
        assert call(False) is None
        work = call(True)
        assert isinstance(work, Work) and work.is_completed() and work.wait() is True
    assert dist.isend(x, ranks[0], group=g).is_completed()
    assert dist.irecv(x, ranks[0], group=g).is_completed()
    assert dist.send(x, ranks[0], group=g) is None
    assert dist.recv(x, ranks[0], group=g) == -1
    assert_same(x, numpy.full(3, 5.0))


def test_src_outside_group_raises_on_members(grp):
    g, ranks, member = grp
    outside = [r for r in range(WORLD) if r not in ranks] + [WORLD]
    x = numpy.zeros(2)
    for bad in outside:
        if member:
            with pytest.raises(ValueError, match=f"src={bad} is not a rank of"):
                dist.broadcast(x, src=bad, group=g)
            with pytest.raises(ValueError, match=f"dst={bad} is not a rank of"):
                dist.reduce(x, dst=bad, group=g)
            with pytest.raises(ValueError, match=f"src={bad} is not a rank of"):
                dist.scatter(x, [x] * len(ranks), src=bad, group=g)
            with pytest.raises(ValueError, match=f"dst={bad} is not a rank of"):
                dist.gather(x, [x] * len(ranks), dst=bad, group=g)
        else:
            assert dist.broadcast(x, src=bad, group=g) is None


@needs_three
def test_broadcast_src_is_world_rank():
    g = dist.new_group([2, 1])
    x = numpy.full(3, float(RANK))
    dist.broadcast(x, src=2, group=g)
    assert_same(x, numpy.full(3, 2.0 if RANK in (1, 2) else float(RANK)))
    assert dist.get_rank(g) == {1: 0, 2: 1}.get(RANK, -1)
    assert dist.get_process_group_ranks(g) == [1, 2]
    if RANK in (1, 2):
        with pytest.raises(ValueError, match="src=0 is not a rank of the group"):
            dist.broadcast(x, src=0, group=g)
    dist.destroy_process_group(g)


def test_new_group_bad_ranks():
    with pytest.raises(ValueError, match="distinct"):
        dist.new_group([0, 0])
    with pytest.raises(ValueError, match="distinct and non-empty"):
        dist.new_group([])
    with pytest.raises(ValueError, match=f"{WORLD} is not a rank of the world"):
        dist.new_group([0, WORLD])
    with pytest.raises(ValueError, match="-1 is not a rank"):
        dist.new_group([-1])
    with pytest.raises(TypeError, match="list of ints"):
        dist.new_group("0")
    with pytest.raises(TypeError, match="list of ints"):
        dist.new_group(3)


def test_new_group_many_groups():
    # a group of every single rank: each rank is a member of exactly one
    groups = [dist.new_group([r]) for r in range(WORLD)]
    x = numpy.full(2, float(RANK))
    for g in groups:
        dist.all_reduce(x, group=g)
    assert_same(x, numpy.full(2, float(RANK)))
    assert [dist.get_rank(g) for g in groups] == [0 if r == RANK else -1 for r in range(WORLD)]
    for g in groups:
        dist.destroy_process_group(g)


def test_destroy_world_is_harmless():
    dist.destroy_process_group()
    dist.destroy_process_group(dist.group.WORLD)
    x = numpy.ones(1)
    dist.all_reduce(x)
    assert_same(x, numpy.full(1, float(WORLD)))


# -- init_process_group and friends ---------------------------------------------------------


@pytest.mark.parametrize("backend", ["mpi", "nccl", "gloo", None, "MPI", dist.Backend.GLOO])
def test_init_process_group_backends(backend):
    try:
        dist.init_process_group(backend=backend)
        assert dist.is_initialized()
        assert dist.get_backend() == ("mpi" if backend is None else backend.lower())
        dist.init_process_group(backend=backend)  # twice is fine
        dist.init_process_group(backend, world_size=WORLD, rank=RANK)
        dist.init_process_group(backend, init_method="env://", world_size=-1, rank=-1)
    finally:
        dist.init_process_group("mpi")
    assert dist.get_backend() == "mpi"


def test_init_process_group_wrong_world_size():
    with pytest.raises(ValueError, match=f"world_size={WORLD + 1} but the job was launched "
                                         f"with {WORLD} processes"):
        dist.init_process_group("mpi", world_size=WORLD + 1)
    with pytest.raises(ValueError, match="world_size=0"):
        dist.init_process_group("mpi", world_size=0)


def test_init_process_group_wrong_rank():
    with pytest.raises(ValueError, match=f"rank={RANK + 1} but MPI gave this process rank "
                                         f"{RANK}"):
        dist.init_process_group("mpi", rank=RANK + 1)


def test_init_process_group_unknown_backend():
    with pytest.raises(ValueError, match="unknown backend 'ucc'"):
        dist.init_process_group("ucc")
    assert dist.get_backend() == "mpi"


def test_availability():
    assert dist.is_available() and dist.is_mpi_available() and dist.is_initialized()
    assert isinstance(dist.is_nccl_available(), bool)
    assert (dist.Backend.MPI, dist.Backend.NCCL, dist.Backend.GLOO) == ("mpi", "nccl", "gloo")
