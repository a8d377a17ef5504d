"""Point-to-point of ``mpiflow.distributed``: send/recv/isend/irecv in a ring of every rank.

Every rank sends to the next rank and receives from the previous one, so each test makes the
same calls on every rank. Errors (send to self, bad ranks) are in test_distributed_errors.py.
"""

from __future__ import annotations

import numpy
import pytest
from collective_helpers import (
    DTYPES,
    ODD,
    RANK,
    SHAPES,
    WORLD,
    Out,
    as_layout,
    assert_same,
    ids,
    needs_three,
    needs_two,
    ring,
    wait_completed,
)
from helpers import rank_data

import mpiflow.distributed as dist
from mpiflow.distributed import Work

pytestmark = needs_two
NEXT, PREV = (RANK + 1) % WORLD, (RANK - 1) % WORLD


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_send_recv_ring(dtype):
    got = numpy.zeros(ODD, dtype=dtype)
    senders = []

    def send(dst):
        assert dist.send(rank_data((ODD,), dtype, RANK), dst=dst) is None

    def recv(src):
        senders.append(dist.recv(got, src=src))

    ring(send, recv)
    assert senders == [PREV]
    assert_same(got, rank_data((ODD,), dtype, PREV))


@pytest.mark.parametrize("shape", SHAPES, ids=ids(SHAPES))
def test_send_recv_shapes(shape):
    got = numpy.zeros(shape, dtype=numpy.float64)
    ring(lambda dst: dist.send(rank_data(shape, numpy.float64, RANK), dst),
         lambda src: dist.recv(got, src))
    assert_same(got, rank_data(shape, numpy.float64, PREV))


def test_recv_any_source_returns_sender():
    got = numpy.zeros(4, dtype=numpy.int32)
    senders = []
    ring(lambda dst: dist.send(numpy.full(4, RANK, dtype=numpy.int32), dst),
         lambda src: senders.append(dist.recv(got)))
    assert senders == [PREV]
    assert_same(got, numpy.full(4, PREV, dtype=numpy.int32))


@pytest.mark.parametrize("dtype", [numpy.dtype("bool"), numpy.dtype("float16"),
                                   numpy.dtype("complex128")], ids=str)
def test_isend_irecv_ring(dtype):
    got = numpy.zeros((2, ODD), dtype=dtype)
    rwork = dist.irecv(got, src=PREV)
    swork = dist.isend(rank_data((2, ODD), dtype, RANK), dst=NEXT)
    assert isinstance(rwork, Work) and isinstance(swork, Work)
    assert swork.wait() is True
    assert rwork.wait() is True
    assert_same(got, rank_data((2, ODD), dtype, PREV))


def test_irecv_any_source_is_completed():
    got = numpy.zeros(3)
    rwork = dist.irecv(got)
    swork = dist.isend(numpy.full(3, float(RANK)), NEXT)
    wait_completed(rwork)
    wait_completed(swork)
    assert_same(got, numpy.full(3, float(PREV)))


def test_irecv_strided_written_back_by_is_completed():
    out = Out((ODD,), numpy.uint32, "strided")
    rwork = dist.irecv(out.view, PREV)
    swork = dist.isend(rank_data((ODD,), numpy.uint32, RANK), NEXT)
    wait_completed(rwork)
    assert_same(out.view, rank_data((ODD,), numpy.uint32, PREV))
    out.check_untouched()
    swork.wait()


@pytest.mark.parametrize("layout", ["strided", "F"])
@pytest.mark.parametrize("blocking", [True, False], ids=["recv", "irecv"])
def test_non_contiguous_send_and_recv(layout, blocking):
    shape = (3, ODD)
    out = Out(shape, numpy.int16, layout)
    data = as_layout(rank_data(shape, numpy.int16, RANK), layout)
    if blocking:
        ring(lambda dst: dist.send(data, dst), lambda src: dist.recv(out.view, src))
    else:
        rwork = dist.irecv(out.view, PREV)
        dist.isend(data, NEXT).wait()
        rwork.wait()
    assert_same(out.view, rank_data(shape, numpy.int16, PREV))
    out.check_untouched()


def test_tags_select_messages():
    # two messages to the same rank, received in the opposite order by tag
    a, b = numpy.zeros(2), numpy.zeros(2)
    sends = [dist.isend(numpy.full(2, 10.0 * RANK + tag), NEXT, tag=tag) for tag in (1, 2)]
    dist.recv(b, PREV, tag=2)
    dist.recv(a, PREV, tag=1)
    for w in sends:
        w.wait()
    assert_same(a, numpy.full(2, 10.0 * PREV + 1))
    assert_same(b, numpy.full(2, 10.0 * PREV + 2))


def test_messages_arrive_in_order():
    sends = [dist.isend(numpy.full(1, i + 100 * RANK), NEXT) for i in range(5)]
    got = []
    for _ in range(5):
        x = numpy.zeros(1, dtype=numpy.int64)
        dist.recv(x, PREV)
        got.append(int(x[0]))
    for w in sends:
        w.wait()
    assert got == [i + 100 * PREV for i in range(5)]


@needs_three
def test_send_recv_in_group_uses_world_ranks():
    # ring over world ranks 1..W-1; rank 0 is outside and every call there is a no-op
    members = list(range(1, WORLD))
    g = dist.new_group(members)
    got = numpy.full(2, -1.0)
    if RANK == 0:
        assert dist.send(numpy.ones(2), dst=1, group=g) is None
        assert dist.recv(got, src=1, group=g) == -1
        assert dist.isend(numpy.ones(2), dst=1, group=g).is_completed()
        assert dist.irecv(got, src=1, group=g).wait() is True
        assert_same(got, numpy.full(2, -1.0))
    else:
        i = members.index(RANK)
        nxt, prv = members[(i + 1) % len(members)], members[(i - 1) % len(members)]
        rwork = dist.irecv(got, src=prv, group=g)
        dist.send(numpy.full(2, float(RANK)), dst=nxt, group=g)
        rwork.wait()
        assert_same(got, numpy.full(2, float(prv)))
        # recv with no src reports the sender's *world* rank
        swork = dist.isend(numpy.full(2, float(RANK)), dst=nxt, group=g)
        assert dist.recv(got, group=g) == prv
        swork.wait()
    dist.destroy_process_group(g)
