"""Layouts and async handles of every collective of ``mpiflow.distributed``.

Each case below starts one collective with non-contiguous inputs and outputs (every other
element of a bigger array, or a Fortran-order array) and checks the result in the view *and*
that the rest of the bigger array was left alone, blocking and with ``async_op=True``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy
import pytest
from collective_helpers import (
    LAYOUTS,
    RANK,
    WORLD,
    Out,
    all_data,
    as_layout,
    assert_same,
    finish,
    reduce_expected,
    wait_completed,
)
from helpers import rank_data

import mpiflow.distributed as dist
from mpiflow.distributed import ReduceOp, Work

pytestmark = pytest.mark.mpi

SHAPE = (3, 2 * WORLD + 1)  # odd sizes, 2-d so that "F" is really Fortran order
DT = numpy.dtype("float32")

if TYPE_CHECKING:
    from collections.abc import Callable

    # (start, check): start(async_op) launches the collective, check() verifies its result
    Case = tuple[Callable[[bool], Work | None], Callable[[], None]]


def _all_reduce(layout: str, op: ReduceOp = ReduceOp.SUM) -> Case:
    out = Out(SHAPE, DT, layout)
    out.view[...] = rank_data(SHAPE, DT, RANK)

    def check() -> None:
        assert_same(out.view, reduce_expected(op, all_data(SHAPE, DT)))
        out.check_untouched()

    return (lambda a: dist.all_reduce(out.view, op=op, async_op=a)), check


def _broadcast(layout: str) -> Case:
    out = Out(SHAPE, DT, layout)
    out.view[...] = rank_data(SHAPE, DT, RANK)
    src = WORLD - 1

    def check() -> None:
        assert_same(out.view, rank_data(SHAPE, DT, src))
        out.check_untouched()

    return (lambda a: dist.broadcast(out.view, src=src, async_op=a)), check


def _reduce(layout: str) -> Case:
    out = Out(SHAPE, DT, layout)
    out.view[...] = rank_data(SHAPE, DT, RANK)
    dst = WORLD // 2

    def check() -> None:
        expected = (reduce_expected(ReduceOp.MAX, all_data(SHAPE, DT)) if RANK == dst
                    else rank_data(SHAPE, DT, RANK))
        assert_same(out.view, expected)
        out.check_untouched()

    return (lambda a: dist.reduce(out.view, dst=dst, op=ReduceOp.MAX, async_op=a)), check


def _all_gather(layout: str) -> Case:
    outs = [Out(SHAPE, DT, layout) for _ in range(WORLD)]
    inp = as_layout(rank_data(SHAPE, DT, RANK), layout)

    def check() -> None:
        for r, o in enumerate(outs):
            assert_same(o.view, rank_data(SHAPE, DT, r))
            o.check_untouched()

    return (lambda a: dist.all_gather([o.view for o in outs], inp, async_op=a)), check


def _all_gather_into_tensor(layout: str) -> Case:
    out = Out((WORLD * SHAPE[0], SHAPE[1]), DT, layout)
    inp = as_layout(rank_data(SHAPE, DT, RANK), layout)

    def check() -> None:
        assert_same(out.view, numpy.concatenate(all_data(SHAPE, DT)))
        out.check_untouched()

    return (lambda a: dist.all_gather_into_tensor(out.view, inp, async_op=a)), check


def _gather(layout: str) -> Case:
    outs = [Out(SHAPE, DT, layout) for _ in range(WORLD)]
    inp = as_layout(rank_data(SHAPE, DT, RANK), layout)
    dst = WORLD - 1

    def check() -> None:
        for r, o in enumerate(outs):
            if RANK == dst:
                assert_same(o.view, rank_data(SHAPE, DT, r))
            else:
                assert_same(o.view, numpy.full(SHAPE, 7, DT))
            o.check_untouched()

    return (lambda a: dist.gather(inp, [o.view for o in outs], dst=dst, async_op=a)), check


def _scatter(layout: str) -> Case:
    out = Out(SHAPE, DT, layout)
    pieces = [as_layout(rank_data(SHAPE, DT, RANK, salt=i), layout) for i in range(WORLD)]

    def check() -> None:
        assert_same(out.view, rank_data(SHAPE, DT, 0, salt=RANK))
        out.check_untouched()

    return (lambda a: dist.scatter(out.view, pieces, src=0, async_op=a)), check


def _reduce_scatter(layout: str) -> Case:
    out = Out(SHAPE, DT, layout)
    inputs = [as_layout(rank_data(SHAPE, DT, RANK, salt=i), layout) for i in range(WORLD)]

    def check() -> None:
        assert_same(out.view, reduce_expected(ReduceOp.SUM, all_data(SHAPE, DT, salt=RANK)))
        out.check_untouched()

    return (lambda a: dist.reduce_scatter(out.view, inputs, async_op=a)), check


def _reduce_scatter_tensor(layout: str) -> Case:
    big = (WORLD * SHAPE[0], SHAPE[1])
    out = Out(SHAPE, DT, layout)
    inp = as_layout(rank_data(big, DT, RANK), layout)

    def check() -> None:
        full = reduce_expected(ReduceOp.AVG, all_data(big, DT))
        assert_same(out.view, full[RANK * SHAPE[0]:(RANK + 1) * SHAPE[0]])
        out.check_untouched()

    return (lambda a: dist.reduce_scatter_tensor(out.view, inp, op=ReduceOp.AVG,
                                                 async_op=a)), check


def _all_to_all(layout: str) -> Case:
    def shape(i: int, j: int) -> tuple[int, int]:
        return (1 + i * j, 2 + j)

    inputs = [as_layout(rank_data(shape(RANK, j), DT, RANK, salt=j), layout)
              for j in range(WORLD)]
    outs = [Out(shape(j, RANK), DT, layout) for j in range(WORLD)]

    def check() -> None:
        for j, o in enumerate(outs):
            assert_same(o.view, rank_data(shape(j, RANK), DT, j, salt=RANK))
            o.check_untouched()

    return (lambda a: dist.all_to_all([o.view for o in outs], inputs, async_op=a)), check


def _all_to_all_single(layout: str) -> Case:
    def rows(i: int, j: int) -> int:
        return (2 * i + j) % 3 + (i == j)

    def data(i: int) -> numpy.ndarray:
        return rank_data((sum(rows(i, j) for j in range(WORLD)), 3), DT, i)

    expected = numpy.concatenate([
        data(j)[sum(rows(j, k) for k in range(RANK)):][:rows(j, RANK)] for j in range(WORLD)])
    out = Out(expected.shape, DT, layout)
    inp = as_layout(data(RANK), layout)
    out_splits = [rows(j, RANK) for j in range(WORLD)]
    in_splits = [rows(RANK, j) for j in range(WORLD)]

    def check() -> None:
        assert_same(out.view, expected)
        out.check_untouched()

    return (lambda a: dist.all_to_all_single(out.view, inp, out_splits, in_splits,
                                             async_op=a)), check


def _all_to_all_single_even(layout: str) -> Case:
    shape = (2 * WORLD, 3)
    out = Out(shape, DT, layout)
    inp = as_layout(rank_data(shape, DT, RANK), layout)

    def check() -> None:
        assert_same(out.view, numpy.concatenate([d[2 * RANK:2 * RANK + 2]
                                                 for d in all_data(shape, DT)]))
        out.check_untouched()

    return (lambda a: dist.all_to_all_single(out.view, inp, async_op=a)), check


def _barrier(layout: str) -> Case:
    return (lambda a: dist.barrier(async_op=a)), (lambda: None)


CASES = {
    "all_reduce": _all_reduce,
    "all_reduce_avg": lambda layout: _all_reduce(layout, ReduceOp.AVG),
    "broadcast": _broadcast,
    "reduce": _reduce,
    "all_gather": _all_gather,
    "all_gather_into_tensor": _all_gather_into_tensor,
    "gather": _gather,
    "scatter": _scatter,
    "reduce_scatter": _reduce_scatter,
    "reduce_scatter_tensor": _reduce_scatter_tensor,
    "all_to_all": _all_to_all,
    "all_to_all_single": _all_to_all_single,
    "all_to_all_single_even": _all_to_all_single_even,
    "barrier": _barrier,
}


@pytest.mark.parametrize("layout", ["strided", "F"])
def test_layouts_are_not_contiguous(layout):
    assert not Out(SHAPE, DT, layout).view.flags.c_contiguous
    assert not as_layout(rank_data(SHAPE, DT, RANK), layout).flags.c_contiguous


@pytest.mark.parametrize("async_op", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", list(CASES))
def test_layouts(name, layout, async_op):
    start, check = CASES[name](layout)
    finish(start(async_op), async_op)
    check()


@pytest.mark.parametrize("name", list(CASES))
def test_is_completed_becomes_true(name):
    start, check = CASES[name]("strided")
    work = start(True)
    assert isinstance(work, Work)
    wait_completed(work)
    check()  # results are in place once is_completed() says so
    assert work.wait() is True  # waiting again is harmless


@pytest.mark.parametrize("name", list(CASES))
def test_wait_with_timeout(name):
    start, check = CASES[name]("C")
    work = start(True)
    assert work.wait(timeout=60) is True
    assert work.is_completed()
    check()


def test_many_outstanding():
    # one of every collective in flight at once, waited for in reverse order
    started = [CASES[name](layout) for name in CASES for layout in ("C", "strided")]
    works = [start(True) for start, _ in started]
    for work in reversed(works):
        assert work.wait() is True
    for _, check in started:
        check()


def test_many_outstanding_same_buffer_kind():
    xs = [rank_data((5,), numpy.int64, RANK, salt=i) for i in range(8)]
    works = [dist.all_reduce(x, op=ReduceOp.SUM, async_op=True) for x in xs]
    while not all(w.is_completed() for w in works):
        pass
    for i, x in enumerate(xs):
        assert_same(x, reduce_expected(ReduceOp.SUM, all_data((5,), numpy.int64, salt=i)))


def test_output_written_only_by_wait():
    # a strided output is staged: the view holds the old values until the Work completes
    out = Out(SHAPE, DT, "strided")
    out.view[...] = rank_data(SHAPE, DT, RANK)
    work = dist.all_reduce(out.view, async_op=True)
    work.wait()
    assert_same(out.view, reduce_expected(ReduceOp.SUM, all_data(SHAPE, DT)))
    out.check_untouched()


def test_work_repr():
    work = dist.barrier(async_op=True)
    work.wait()
    assert "completed" in repr(work)
