"""The pure planner: plan contents, validity, costs, reprs and the general exchange's schedule.

Nothing here communicates; placements may name up to 16 ranks (the ``fake_world`` fixture),
so every rank count runs the same tests.
"""

from __future__ import annotations

import itertools
import os
import pickle
import subprocess
import sys
import textwrap
from typing import Any

import numpy
import pytest
from boxing_helpers import fake_world  # noqa: F401 - a fixture
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpiflow.boxing import (
    AllGather,
    AllReduce,
    AllToAll,
    Layout,
    LocalSlice,
    ReduceScatter,
    ToPartial,
    Transfer,
    conversion_cost,
    plan_redistribution,
    transfer_cost,
)
from mpiflow.boxing.transfer import transfer_schedule
from mpiflow.communication import ReduceOp
from mpiflow.layouts.plan import axis_step
from mpiflow.layouts.shards import layout_boxes, volume
from mpiflow.layouts.steps import AxisStep
from mpiflow.placement import Placement
from mpiflow.sbp import Partial, Split, broadcast, partial_max, partial_min, partial_sum, split

S0, S1, B, P, PM = split(0), split(1), broadcast, partial_sum, partial_max
SUM, MAX = ReduceOp.SUM, ReduceOp.MAX
pytestmark = pytest.mark.usefixtures("fake_world")


def line(n: int = 4) -> Placement:
    return Placement("cpu", list(range(n)))


def square() -> Placement:
    return Placement("cpu", [[0, 1], [2, 3]])


def plan(shape: tuple[int, ...], src: Layout, dst: Layout) -> tuple[Any, ...]:
    return plan_redistribution(shape, 8, src, dst)


# -- costs -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("src", "dst", "expected"), [
    (S0, S0, 0), (B, B, 0), (P, P, 0), (B, S0, 0), (B, S1, 0),
    (S0, B, 192), (S1, B, 192),               # (k-1)/k * 256
    (P, B, 384), (PM, B, 384),                # 2 (k-1)/k * 256
    (P, S0, 192), (PM, S1, 192),              # (k-1)/k * 256
    (S0, S1, 48), (S1, S0, 48),               # (k-1)/k^2 * 256
    (B, P, 256), (S0, P, 256), (B, PM, 256),  # the penalty for making a partial value
    (P, PM, 192 + 256),                       # reduce-scatter, then the penalty
], ids=lambda v: str(v))
def test_conversion_cost_table(src: Any, dst: Any, expected: float) -> None:
    assert conversion_cost((4, 8), 8, src, dst, 4) == expected


def test_conversion_cost_of_one_rank_and_of_scalars() -> None:
    assert conversion_cost((4, 8), 8, S0, B, 1) == 0
    assert conversion_cost((), 8, P, PM, 2) == 2 * 4 + 8  # via B: all-reduce, then penalty
    with pytest.raises(ValueError, match="group_size"):
        conversion_cost((4,), 8, S0, B, 0)


# -- 1-D plans -------------------------------------------------------------------------------

ONE_D = {
    (S0, S1): (AllToAll(0, 0, 1),), (S1, S0): (AllToAll(0, 1, 0),),
    (S0, B): (AllGather(0, 0),), (S1, B): (AllGather(0, 1),),
    (B, S0): (LocalSlice(0, 0),), (B, S1): (LocalSlice(0, 1),),
    (P, B): (AllReduce(0, SUM),), (PM, B): (AllReduce(0, MAX),),
    (P, S0): (ReduceScatter(0, 0, SUM),), (PM, S1): (ReduceScatter(0, 1, MAX),),
    (B, P): (ToPartial(0, SUM),), (S1, PM): (ToPartial(0, MAX),),
    (P, PM): (ReduceScatter(0, 0, SUM), ToPartial(0, MAX)),
    (PM, P): (ReduceScatter(0, 0, MAX), ToPartial(0, SUM)),
    (S0, S0): (), (B, B): (), (P, P): (),
}


@pytest.mark.parametrize(("src", "dst"), list(ONE_D), ids=lambda v: str(v))
@pytest.mark.parametrize("n", [1, 4, 7])
def test_1d_plans_use_one_collective(src: Any, dst: Any, n: int) -> None:
    p = line(n)
    expected = ONE_D[(src, dst)]
    if n == 1 and isinstance(dst, Partial) and isinstance(src, Partial) and src != dst:
        expected = (AllReduce(0, src.op), expected[1])  # on one rank both cost nothing
    assert plan((3 * n + 1, 5), Layout(p, src), Layout(p, dst)) == expected


def test_scalar_partial_to_other_partial_goes_through_broadcast() -> None:
    p = line()
    assert plan((), Layout(p, P), Layout(p, PM)) == (AllReduce(0, SUM), ToPartial(0, MAX))


# -- 2-D plans -------------------------------------------------------------------------------

@pytest.mark.parametrize(("shape", "src", "dst", "expected"), [
    ((4, 4), (S0, S0), (S0, B), (AllGather(1, 0),)),
    ((4, 4), (S0, S0), (B, B), (AllGather(1, 0), AllGather(0, 0))),  # inner axis first
    ((4, 4), (B, B), (S0, S0), (LocalSlice(0, 0), LocalSlice(1, 0))),  # outer axis first
    ((4, 4), (P, S1), (B, S1), (AllReduce(0, SUM),)),
    ((4, 4), (S1, P), (S1, S0), (ReduceScatter(1, 0, SUM),)),
    ((4, 4), (P, P), (B, B), (AllReduce(0, SUM), AllReduce(1, SUM))),
    ((4, 4), (S0, B), (P, S0), (ToPartial(0, SUM), LocalSlice(1, 0))),
    # mixed partial ops: the inner one is reduced first
    ((4, 4), (PM, P), (B, B), (AllReduce(1, SUM), AllReduce(0, MAX))),
    # a large tensor: reduce-scatter, all-reduce of a quarter, all-gather (fewer bytes)
    ((256, 256), (P, P), (B, B), (ReduceScatter(0, 0, SUM), AllReduce(1, SUM),
                                  AllGather(0, 0))),
], ids=lambda v: str(v))
def test_2d_plans_convert_one_axis_at_a_time(shape: tuple[int, ...], src: Any, dst: Any,
                                              expected: Any) -> None:
    m = square()
    assert plan(shape, Layout(m, src), Layout(m, dst)) == expected


@pytest.mark.parametrize(("src", "dst"), [((S0, S1), (S1, S0)), ((B, S0), (S0, S0)),
                                          ((S0, S0), (B, S0))])
def test_nested_splits_that_no_collective_can_fix_use_a_transfer(src: Any, dst: Any) -> None:
    m = square()
    assert plan((4, 4), Layout(m, src), Layout(m, dst)) == (Transfer(Layout(m, src),
                                                                      Layout(m, dst)),)


def test_different_placements_reduce_partial_first_and_make_partial_last() -> None:
    a, b = Placement("cpu", [0, 1]), Placement("cpu", [[2, 3], [4, 5]])
    assert plan((8, 6), Layout(a, S0), Layout(b, (S1, B))) == (
        Transfer(Layout(a, S0), Layout(b, (S1, B))),)
    steps = plan((8, 6), Layout(a, P), Layout(b, (PM, S1)))
    assert isinstance(steps[0], (AllReduce, ReduceScatter))
    assert isinstance(steps[1], Transfer) and not steps[1].src.is_partial
    assert steps[1].dst == Layout(b, (B, S1)) and steps[2:] == (ToPartial(0, MAX),)


def test_plans_are_cached_and_validated() -> None:
    p = line()
    first = plan_redistribution([13, 5], 8, Layout(p, S0), Layout(p, S1))
    assert plan_redistribution((13, 5), 8, Layout(p, S0), Layout(p, S1)) is first
    assert plan_redistribution((13, 5), 8, Layout(p, S0), Layout(p, S0)) == ()
    with pytest.raises(ValueError, match=r"splits dim 2, but the tensor of shape \(13, 5\)"):
        plan_redistribution((13, 5), 8, Layout(p, Split(2)), Layout(p, B))
    with pytest.raises(ValueError, match="non-negative"):
        plan_redistribution((-1,), 8, Layout(p, B), Layout(p, S0))


def test_reprs_are_readable() -> None:
    assert repr(AllGather(axis=0, dim=1)) == "AllGather(axis=0, dim=1)"
    assert repr(AllReduce(axis=0, op=SUM)) == "AllReduce(axis=0, op=SUM)"
    assert repr(ReduceScatter(1, 0, SUM)) == "ReduceScatter(axis=1, dim=0, op=SUM)"
    assert repr(AllToAll(0, 0, 1)) == "AllToAll(axis=0, src_dim=0, dst_dim=1)"
    assert repr(LocalSlice(0, 1)) == "LocalSlice(axis=0, dim=1)"
    assert repr(ToPartial(1, MAX)) == "ToPartial(axis=1, op=MAX)"
    m = square()
    assert repr(Layout(m, (S0, P))) == "Layout(ranks=[[0, 1], [2, 3]], sbp=(S(0), P))"
    assert repr(Transfer(Layout(line(2), S0), Layout(line(2), B))) == (
        "Transfer(src=Layout(ranks=[0, 1], sbp=(S(0),)), dst=Layout(ranks=[0, 1], sbp=(B,)))")


def test_layout_checks_its_sbp() -> None:
    with pytest.raises(ValueError, match="2 mesh dimension"):
        Layout(square(), S0)
    with pytest.raises(TypeError, match="sbp entries"):
        Layout(line(), "S0")
    with pytest.raises(TypeError, match="Placement"):
        Layout([0, 1], S0)  # type: ignore[arg-type]
    assert Layout(line(), S0) == Layout(line(), (S0,))
    assert Layout(square(), (P, S1)).without_partial() == Layout(square(), (B, S1))


def test_a_layout_from_another_process_hashes_as_one_made_here() -> None:
    # A layout keeps its hash; one unpickled from a process with another hash seed (another
    # rank, a checkpoint) must hash as that process' own equal layouts, or dict lookups miss.
    made = Layout(square(), (PM, S1))
    program = textwrap.dedent("""
        import pickle, sys
        from mpiflow.layouts.layout import Layout
        from mpiflow.layouts.placement import Placement, set_world_size
        from mpiflow.layouts.sbp import partial_max, split
        set_world_size(4)
        theirs = Layout(Placement("cpu", [[0, 1], [2, 3]]), (partial_max, split(1)))
        ours = pickle.loads(sys.stdin.buffer.read())
        found = {theirs: "found"}.get(ours)
        sys.stdout.buffer.write(pickle.dumps((theirs, hash(theirs), hash(ours), found)))
    """)
    env = {**os.environ, "PYTHONHASHSEED": str(hash("seed") % 1000 + 1)}
    out = subprocess.run([sys.executable, "-c", program], input=pickle.dumps(made),
                         capture_output=True, check=True, env=env).stdout
    theirs, their_hash, our_hash_there, found = pickle.loads(out)
    assert their_hash != hash(made)  # the seeds differ, or the test would prove nothing
    assert our_hash_there == their_hash and found == "found"
    assert theirs == made and {made: "found"}.get(theirs) == "found"


# -- properties over random layouts ----------------------------------------------------------

MESHES = [[0, 1, 2, 3], [2, 3, 4], [[0, 1], [2, 3]], [[4, 5, 6], [7, 8, 9]], [[1], [5]], [5]]


@st.composite
def cases(draw: st.DrawFn, partial: bool = True) -> tuple[tuple[int, ...], Layout, Layout]:
    ndim = draw(st.integers(0 if partial else 1, 3))
    shape = tuple(draw(st.lists(st.integers(0, 9), min_size=ndim, max_size=ndim)))
    options = [B, *(Split(d) for d in range(ndim))]
    options += [P, PM, partial_min] if partial else []
    layouts = []
    for _ in range(2):
        p = Placement("cpu", draw(st.sampled_from(MESHES)))
        layouts.append(Layout(p, tuple(draw(st.sampled_from(options)) for _ in p.mesh_shape)))
    return shape, layouts[0], layouts[1]


SETTINGS = settings(derandomize=True, max_examples=150, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


@SETTINGS
@given(cases())
def test_every_step_of_every_plan_is_valid(case: tuple[tuple[int, ...], Layout, Layout]) -> None:
    shape, src, dst = case
    layout = src
    for step in plan(shape, src, dst):
        if isinstance(step, AxisStep):
            assert layout.placement in (src.placement, dst.placement)
            new = step.apply(layout).sbp[step.axis]
            assert axis_step(layout.sbp, step.axis, new) == step
            if isinstance(step, ToPartial):
                assert layout.placement == dst.placement and dst.sbp[step.axis] == new
        else:
            assert isinstance(step, Transfer) and step.src == layout
            assert not step.src.is_partial and step.dst == dst.without_partial()
        layout = step.apply(layout)
    assert layout == dst


def _tiles(shape: tuple[int, ...], src: Layout, dst: Layout, world: int) -> list[str]:
    """What is wrong with the transfer schedules of all ``world`` ranks together."""
    problems = []
    schedules = {r: transfer_schedule(shape, src, dst, r) for r in range(world)}
    for r, s in schedules.items():
        cover = numpy.zeros(s.target_shape, dtype=int)
        for _, index in s.local:
            cover[index] += 1
        for _, index, _ in s.receives:
            cover[index] += 1
        if r in dst.placement and not (cover == 1).all():
            problems.append(f"rank {r} target covered {cover.tolist()}")
        for q, _, piece in s.receives:
            sent = [idx for other, idx in schedules[q].sends if other == r]
            size = [tuple(i.stop - i.start for i in idx) for idx in sent]
            if size != [piece]:
                problems.append(f"rank {q} sends {size} to {r}, which expects {piece}")
        sends = sum(len([1 for other, _ in t.sends if other == r]) for t in schedules.values())
        if sends != len(s.receives):
            problems.append(f"rank {r} receives {len(s.receives)} pieces, {sends} are sent")
    most_peers = max((len(s.receives) for r, s in schedules.items() if r in dst.placement),
                     default=0)
    if transfer_cost(shape, 1, src, dst)[1] != most_peers:
        problems.append(f"cost counts {transfer_cost(shape, 1, src, dst)[1]} peers, "
                        f"schedules {most_peers}")
    return problems


@SETTINGS
@given(cases(partial=False))
def test_transfer_schedules_tile_every_target(case: tuple[tuple[int, ...], Layout,
                                                          Layout]) -> None:
    shape, src, dst = case
    assert not _tiles(shape, src, dst, 10)


def test_transfer_prefers_local_data_and_spreads_replicated_sources() -> None:
    src, dst = Layout(line(2), B), Layout(line(4), S0)
    schedules = [transfer_schedule((8,), src, dst, r) for r in range(4)]
    assert schedules[0].local and schedules[1].local  # ranks 0 and 1 already hold all of it
    assert [s.receives[0][0] for s in schedules[2:]] == [0, 1]  # rank 2 from 0, rank 3 from 1
    assert transfer_cost((8,), 4, src, dst) == (8, 1)


def test_split_leaves_partition_each_dim() -> None:
    from mpiflow.layouts.shards import split_leaves

    m = square()
    assert split_leaves((5, 3), Layout(m, (S0, S0)), 0) == ((0, 2), (2, 3), (3, 4), (4, 5))
    assert split_leaves((5, 3), Layout(m, (S0, S0)), 1) == ((0, 3),)
    assert split_leaves((1, 3), Layout(m, (S0, S1)), 0) == ((0, 1),)
    boxes = {b for b in layout_boxes((5, 3), Layout(m, (S1, S0))) if volume(b)}
    assert len(boxes) == 4 and sum(volume(b) for b in boxes) == 15


def test_all_pairs_on_a_2x2_mesh_plan_quickly() -> None:
    m = square()
    sbps = list(itertools.product([S0, S1, B, P, PM], repeat=2))
    for a, b in itertools.product(sbps, sbps):
        steps = plan((5, 7), Layout(m, a), Layout(m, b))
        assert len(steps) <= 4 and (steps == ()) == (a == b)
        assert sum(isinstance(s, Transfer) for s in steps) <= 1
        assert not any(isinstance(s, ToPartial) and not isinstance(b[s.axis], Partial)
                       for s in steps)
