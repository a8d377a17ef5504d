"""Redistribution between layouts, executed: every rank checks every rank's target shard.

Inputs are built from one full integer-valued array (the same on all ranks); partial sources
hold random parts that reduce to it. After redistributing, the shards are gathered and each
rank compares every shard (partial axes reduced) with the expected one, so all ranks reach the
same verdict and a failure never leaves a rank waiting.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy
import pytest
from boxing_helpers import SIZE, full_value, layout_id, my_shard, run_case, wrong_ranks
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpiflow.boxing import Layout, Transfer, plan_redistribution, redistribute
from mpiflow.communication import count_collectives
from mpiflow.communication.mpi.group import world_comm
from mpiflow.placement import Placement
from mpiflow.sbp import Split, broadcast, partial_max, partial_min, partial_sum, split

pytestmark = pytest.mark.mpi

S0, S1, B, P, PM = split(0), split(1), broadcast, partial_sum, partial_max
SBP1 = [S0, S1, B, P, PM]
SBP2 = list(itertools.product(SBP1, SBP1))
EVERYONE = list(range(SIZE))
ALL = Placement("cpu", EVERYONE)
# uneven sizes, a dim smaller than the rank count (zero-size at one rank), a zero-size dim
SHAPES = [(3 * SIZE + 1, 5), (SIZE - 1, 2 * SIZE + 1), (4, 0)]


def _scenarios() -> dict[str, tuple[list[int], list[int]]]:
    cases = {"all": (EVERYONE, EVERYONE)}
    if SIZE > 1:
        cases["subset"] = (EVERYONE[1:], EVERYONE[1:])
        cases["disjoint"] = (EVERYONE[:SIZE // 2], EVERYONE[SIZE // 2:])
        cases["one-to-all"] = ([0], EVERYONE)
    if SIZE > 2:
        cases["overlap"] = (EVERYONE[:-1], EVERYONE[1:])
    return cases


SCENARIOS = _scenarios()


def _meshes() -> dict[str, Placement]:
    meshes = {f"{SIZE}x1": Placement("cpu", [[r] for r in EVERYONE]),
              f"1x{SIZE}": Placement("cpu", [EVERYONE])}
    if SIZE == 4:
        meshes["2x2"] = Placement("cpu", [[0, 1], [2, 3]])
    return meshes


MESHES = _meshes()


def _check_all(cases: Sequence[tuple[tuple[int, ...], Layout, Layout]]) -> None:
    wrong = {}
    for shape, src, dst in cases:
        found = run_case(full_value(shape), src, dst)
        if found:
            wrong[f"{shape} {src} -> {dst}"] = found
    assert not wrong


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("dst_sbp", SBP1, ids=str)
@pytest.mark.parametrize("src_sbp", SBP1, ids=str)
def test_1d_every_pair(scenario: str, src_sbp: object, dst_sbp: object) -> None:
    src_ranks, dst_ranks = SCENARIOS[scenario]
    src = Layout(Placement("cpu", src_ranks), src_sbp)
    dst = Layout(Placement("cpu", dst_ranks), dst_sbp)
    _check_all([(shape, src, dst) for shape in SHAPES])


@pytest.mark.parametrize("mesh", list(MESHES))
@pytest.mark.parametrize("src_sbp", SBP2, ids=layout_id)
def test_2d_every_pair(mesh: str, src_sbp: tuple[object, object]) -> None:
    p = MESHES[mesh]
    shapes = [(5, 7), (1, 3), (0, 2)] if mesh == "2x2" else [(SIZE + 1, 2)]
    _check_all([(shape, Layout(p, src_sbp), Layout(p, dst_sbp))
                for dst_sbp in SBP2 for shape in shapes])


@pytest.mark.mpi(min_size=4)
@pytest.mark.parametrize("sbp1", SBP1, ids=str)
def test_between_1d_and_2d_meshes(sbp1: object) -> None:
    flat, square = Layout(ALL, sbp1), [Layout(MESHES["2x2"], s) for s in SBP2]
    cases = [((5, 6), flat, two) for two in square] + [((5, 6), two, flat) for two in square]
    _check_all(cases)


@pytest.mark.mpi(min_size=3)
def test_2d_submesh_to_and_from_other_ranks() -> None:
    column = Placement("cpu", [[1], [2]])
    others = Placement("cpu", [0, SIZE - 1])
    cases = [((7, 3), Layout(column, a), Layout(others, b)) for a in SBP2[:10] for b in SBP1]
    cases += [((7, 3), Layout(others, b), Layout(column, a)) for a in SBP2[10:] for b in SBP1]
    _check_all(cases)


@pytest.mark.mpi(min_size=4)
@pytest.mark.parametrize("sbp", [(S0, S0), (S0, S1), (B, S0), (P, S1), (S1, P), (P, PM)],
                         ids=layout_id)
def test_2d_large_tensor_uses_per_axis_collectives(sbp: tuple[object, object]) -> None:
    p = MESHES["2x2"]
    cases = [((66, 67), Layout(p, sbp), Layout(p, other)) for other in SBP2]
    _check_all(cases)


@pytest.mark.mpi(min_size=4)
def test_mixed_partial_ops_reduce_innermost_first() -> None:
    p = MESHES["2x2"]
    mixed = [(P, PM), (PM, P), (partial_min, P), (P, partial_min), (PM, partial_min)]
    cases = [((3, 5), Layout(p, a), Layout(p, b)) for a in mixed for b in [*mixed, (B, B)]]
    cases += [((3, 5), Layout(p, (B, B)), Layout(p, b)) for b in mixed]
    _check_all(cases)


def test_three_dim_tensor_on_every_mesh() -> None:
    sbps = [(S0, Split(2)), (Split(2), S1), (P, Split(2)), (Split(2), Split(2)), (B, PM)]
    cases = [((SIZE + 1, 3, 2 * SIZE + 1), Layout(p, a), Layout(p, b))
             for p in MESHES.values() for a in sbps for b in sbps]
    _check_all(cases)


@pytest.mark.parametrize("dtype", ["int64", "int32", "float32", "int8"])
def test_integer_and_single_precision_dtypes(dtype: str) -> None:
    sbps = [S0, S1, B, P, PM, partial_min]
    cases = [((2 * SIZE + 1, 3), Layout(ALL, a), Layout(ALL, b)) for a in sbps for b in sbps]
    wrong = {}
    for shape, src, dst in cases:
        found = run_case(full_value(shape, dtype=dtype), src, dst)
        if found:
            wrong[f"{src} -> {dst}"] = found
    assert not wrong


def test_zero_dim_tensor() -> None:
    others = Placement("cpu", [SIZE - 1])
    layouts = [Layout(ALL, s) for s in (B, P, PM, partial_min)] + [Layout(others, P)]
    _check_all([((), a, b) for a in layouts for b in layouts])


# -- the collectives each conversion issues --------------------------------------------------

COUNTED = [
    (B, S0, ""), (B, S1, ""), (S0, B, "all_gather"), (S1, B, "all_gather"),
    (P, B, "all_reduce"), (PM, B, "all_reduce"), (P, S0, "reduce_scatter"),
    (PM, S1, "reduce_scatter"), (S0, S1, "all_to_all"), (S1, S0, "all_to_all"),
    (S0, P, ""), (B, P, ""),
]


def _counted(src: Layout, dst: Layout, shape: tuple[int, ...]) -> dict[str, int]:
    """The calls every rank made, when all ranks made the same ones (else an error string)."""
    local = my_shard(full_value(shape), src)
    redistribute(local, shape, src, dst)  # makes the line communicators, if any
    with count_collectives() as calls:
        out = redistribute(local, shape, src, dst)
    wrong = wrong_ranks(out, full_value(shape), dst)
    everyone = world_comm.mpi_comm.allgather(dict(calls))
    assert not wrong
    assert all(c == everyone[0] for c in everyone), everyone
    return dict(everyone[0])


@pytest.mark.parametrize(("src_sbp", "dst_sbp", "name"), COUNTED,
                         ids=[f"{a}-{b}" for a, b, _ in COUNTED])
def test_one_collective_per_1d_conversion(src_sbp: object, dst_sbp: object, name: str) -> None:
    src, dst = Layout(ALL, src_sbp), Layout(ALL, dst_sbp)
    for shape in [(2 * SIZE, 4 * SIZE), (3 * SIZE + 1, 2 * SIZE + 1)]:
        even = SIZE == 1 or shape[0] % SIZE == 0
        expected = {} if not name else {name if even or name == "all_reduce" else name + "_v": 1}
        assert _counted(src, dst, shape) == expected, shape


@pytest.mark.parametrize(("src_sbp", "dst_sbp", "shape", "calls"), [
    (S0, S1, (SIZE - 1, 3 * SIZE), 1), (S1, S0, (3 * SIZE, SIZE - 1), 1),
    (S0, B, (SIZE - 1, 3), 1), (P, S0, (SIZE - 1, 3), 1),
    (S0, S1, (1, 1), 0),  # rank 0 holds all of it either way: nothing to send
])
def test_ranks_with_empty_shards_call_the_same_collective(
        src_sbp: object, dst_sbp: object, shape: tuple[int, ...], calls: int) -> None:
    # the last rank holds nothing: it must still choose the plain or the _v collective as the
    # others do (_counted checks that every rank made the same calls)
    counted = _counted(Layout(ALL, src_sbp), Layout(ALL, dst_sbp), shape)
    if 0 in shape:  # at 1 rank, SIZE - 1 == 0: an empty tensor, nothing to move
        calls = 0
    assert sum(counted.values()) == (calls if SIZE > 1 or shape != (1, 1) else 1)


@pytest.mark.parametrize(("src_sbp", "dst_sbp", "name"), COUNTED,
                         ids=[f"{a}-{b}" for a, b, _ in COUNTED])
def test_empty_tensors_move_nothing(src_sbp: object, dst_sbp: object, name: str) -> None:
    # Uneven splits of an empty tensor give shards of different shapes ((2, 0) and (1, 0)) but
    # no elements: no collective is needed, and a plain one with those shapes was a mismatch
    # that the argument checks (MPIFLOW_CHECK) refused.
    src, dst = Layout(ALL, src_sbp), Layout(ALL, dst_sbp)
    for shape in [(SIZE + 1, 0), (0, SIZE + 1), (0, 0)]:
        assert _counted(src, dst, shape) == {}, shape


def test_same_layout_returns_the_input_itself() -> None:
    local = my_shard(full_value((5, 2)), Layout(ALL, S0))
    assert redistribute(local, (5, 2), Layout(ALL, S0), Layout(ALL, S0)) is local


def test_local_conversions_copy_and_inputs_stay_unchanged() -> None:
    value = full_value((2 * SIZE, 3))
    for src_sbp, dst_sbp in [(B, S0), (B, S1), (B, P), (S0, P), (P, B), (S0, B)]:
        src, dst = Layout(ALL, src_sbp), Layout(ALL, dst_sbp)
        local = my_shard(value, src)
        before = local.copy()
        out = redistribute(local, value.shape, src, dst)
        assert not numpy.shares_memory(out, local)
        numpy.testing.assert_array_equal(local, before)


def test_wrong_local_shape_raises_before_communicating() -> None:
    with pytest.raises(ValueError, match=r"must have shape \(1, 2\)|must have shape \(0,\)"):
        redistribute(numpy.zeros((7, 2)), (SIZE, 2), Layout(ALL, S0), Layout(ALL, B))


@pytest.mark.mpi(min_size=4)
def test_nested_2d_conversions_count_collectives() -> None:
    p = MESHES["2x2"]
    # (5, 3) as (S0, S0): rows [2 | 1] on mesh row 0, [1 | 1] on row 1: even lines use the
    # plain collective; (6, 3) is uneven on both rows
    assert _counted(Layout(p, (S0, S0)), Layout(p, (S0, B)), (6, 3)) == {"all_gather_v": 1}
    assert _counted(Layout(p, (B, B)), Layout(p, (S0, S0)), (5, 3)) == {}
    assert _counted(Layout(p, (P, S1)), Layout(p, (B, S1)), (5, 3)) == {"all_reduce": 1}
    assert _counted(Layout(p, (S0, S1)), Layout(p, (S1, S0)), (5, 3)) == {"all_to_all_v": 1}
    plan = plan_redistribution((5, 3), 8, Layout(p, (B, S0)), Layout(p, (S0, S0)))
    assert plan == (Transfer(Layout(p, (B, S0)), Layout(p, (S0, S0))),)
    assert _counted(Layout(p, (B, S0)), Layout(p, (S0, S0)), (5, 3)) == {"all_to_all_v": 1}


@pytest.mark.mpi(min_size=2)
def test_transfer_between_placements_is_one_world_exchange() -> None:
    src_ranks, dst_ranks = SCENARIOS["disjoint"]
    src = Layout(Placement("cpu", src_ranks), S0)
    dst = Layout(Placement("cpu", dst_ranks), S1)
    assert _counted(src, dst, (3 * SIZE + 1, 4)) == {"all_to_all_v": 1}


# -- random layouts --------------------------------------------------------------------------

def _placement(draw: st.DrawFn) -> Placement:
    ranks = draw(st.lists(st.sampled_from(EVERYONE), min_size=1, max_size=SIZE, unique=True))
    if len(ranks) == 4 and draw(st.booleans()):
        return Placement("cpu", [ranks[:2], ranks[2:]])
    if draw(st.booleans()):
        return Placement("cpu", [ranks])  # a 1 x n mesh
    return Placement("cpu", ranks)


@st.composite
def _case(draw: st.DrawFn) -> tuple[tuple[int, ...], Layout, Layout]:
    ndim = draw(st.integers(0, 3))
    shape = tuple(draw(st.lists(st.integers(0, SIZE + 2), min_size=ndim, max_size=ndim)))
    options = [B, P, PM, partial_min, *(Split(d) for d in range(ndim))]
    layouts = []
    for _ in range(2):
        p = _placement(draw)
        layouts.append(Layout(p, tuple(draw(st.sampled_from(options)) for _ in p.mesh_shape)))
    return shape, layouts[0], layouts[1]


@settings(derandomize=True, max_examples=40, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(_case())
def test_random_layouts(case: tuple[tuple[int, ...], Layout, Layout]) -> None:
    shape, src, dst = case
    assert not run_case(full_value(shape), src, dst)
