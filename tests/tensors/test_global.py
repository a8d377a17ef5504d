"""Global tensors: to_global / to_local / numpy, creation with a placement, elementwise layouts."""

from __future__ import annotations

import itertools

import numpy
import pytest
from numpy.testing import assert_array_equal

import mpiflow as flow
from mpiflow.communication import count_collectives
from mpiflow.sbp import balanced_sizes

pytestmark = pytest.mark.mpi

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
ALL = flow.placement("cpu", list(range(SIZE)))
S0, S1, B, P = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.broadcast, flow.sbp.partial_sum


def full(shape: tuple[int, ...], seed: int = 0) -> numpy.ndarray:
    return numpy.random.default_rng(seed).integers(-9, 9, size=shape).astype(numpy.float64)


def test_local_split_shards_concatenate_by_the_balanced_rule() -> None:
    rows = balanced_sizes(3 * SIZE + 1, SIZE)
    start = sum(rows[:RANK])
    value = full((3 * SIZE + 1, 2))
    local = flow.tensor(value[start:start + rows[RANK]])
    g = local.to_global(ALL, S0)
    assert g.is_global and g.shape == (3 * SIZE + 1, 2) and g.sbp == (S0,)
    assert g.placement == ALL
    assert_array_equal(g.to_local().numpy(), value[start:start + rows[RANK]])
    assert_array_equal(g.numpy(), value)


@pytest.mark.mpi(min_size=2)
def test_shards_that_break_the_balanced_rule_raise_on_every_rank() -> None:
    local = flow.zeros(2 if RANK == 0 else 4, 3)  # rank 0 holds fewer rows than the rule says
    with pytest.raises(ValueError, match=r"rank 0: \(2, 3\)"):
        local.to_global(ALL, S0)
    mixed = flow.zeros(2, 3 if RANK == 0 else 4)
    with pytest.raises(ValueError, match="rank 1"):
        mixed.to_global(ALL, S0)
    dtyped = flow.zeros(2, dtype=flow.float32 if RANK == 0 else flow.float64)
    with pytest.raises(ValueError, match="dtype"):
        dtyped.to_global(ALL, S0)


def test_broadcast_takes_the_first_ranks_data_and_partial_sums() -> None:
    local = flow.tensor([float(RANK + 1)] * 3)
    b = local.to_global(ALL, B)
    assert_array_equal(b.to_local().numpy(), [1.0, 1.0, 1.0])
    p = local.to_global(ALL, P)
    assert_array_equal(p.to_local().numpy(), [RANK + 1.0] * 3)  # no communication
    assert_array_equal(p.numpy(), [SIZE * (SIZE + 1) / 2] * 3)


def test_to_global_on_a_global_tensor_redistributes_and_keeps_missing_args() -> None:
    value = full((5, SIZE + 2))
    x = flow.tensor(value, placement=ALL, sbp=S0)
    assert x.to_global() is x
    assert x.to_global(sbp=S0) is x
    y = x.to_global(sbp=S1)
    assert y.sbp == (S1,) and y.placement == ALL
    assert_array_equal(y.numpy(), value)
    with count_collectives() as counts:
        z = x.to_global(sbp=B)
    assert counts["all_gather_v"] + counts["all_gather"] == 1
    assert_array_equal(z.to_local().numpy(), value)


def test_to_local_outside_the_placement_is_empty() -> None:
    last = flow.placement("cpu", [SIZE - 1])
    x = flow.tensor(full((3, 2)), placement=last, sbp=B)
    local = x.to_local()
    if RANK == SIZE - 1:
        assert local.shape == (3, 2)
    else:
        assert local.numel() == 0
    assert_array_equal(x.numpy(), full((3, 2)))  # every rank gets the whole value


def test_repr_of_a_global_tensor_never_communicates() -> None:
    x = flow.tensor(full((4, 3)), placement=ALL, sbp=S0)
    if RANK == 0:  # a collective here would hang the job: repr must be local
        text = repr(x)
        assert "local shard" in text and "sbp=(mpiflow.sbp.split(dim=0),)" in text
        assert "mpiflow.Size([4, 3])" in text
    flow.comm.barrier()


def test_creation_with_placement_builds_only_the_shard() -> None:
    ones_p = flow.ones(2, 3, placement=ALL, sbp=P)
    expected_local = numpy.ones((2, 3)) if RANK == 0 else numpy.zeros((2, 3))
    assert_array_equal(ones_p.to_local().numpy(), expected_local)
    assert_array_equal(ones_p.numpy(), numpy.ones((2, 3)))
    ar = flow.arange(3 * SIZE + 1, placement=ALL, sbp=S0)
    assert_array_equal(ar.numpy(), numpy.arange(3 * SIZE + 1))
    rows = balanced_sizes(3 * SIZE + 1, SIZE)
    assert ar.to_local().shape == (rows[RANK],)
    z = flow.zeros(SIZE - 1 if SIZE > 1 else 0, 2, placement=ALL, sbp=S0)  # some shards empty
    assert_array_equal(z.numpy(), numpy.zeros((max(SIZE - 1, 0), 2)))
    f = flow.full((2, 2), 3.0, placement=ALL, sbp=B)
    assert_array_equal(f.to_local().numpy(), numpy.full((2, 2), 3.0))


LAYOUTS = [S0, S1, B, P]


@pytest.mark.parametrize(("sa", "sb"), list(itertools.product(LAYOUTS, LAYOUTS)))
def test_add_and_mul_every_layout_pair(sa: flow.sbp.SbpParallel,
                                       sb: flow.sbp.SbpParallel) -> None:
    va, vb = full((3 * SIZE + 1, SIZE + 1), 1), full((3 * SIZE + 1, SIZE + 1), 2)
    a = flow.tensor(va, placement=ALL, sbp=sa)
    b = flow.tensor(vb, placement=ALL, sbp=sb)
    s, m = a + b, a * b
    assert_array_equal(s.numpy(), va + vb)
    assert_array_equal(m.numpy(), va * vb)
    assert s.placement == ALL
    if sa == sb and sa in (S0, S1):
        assert s.sbp == (sa,) and m.sbp == (sa,)
    if sa == sb == P:
        assert s.sbp == (P,)


def test_layout_results_follow_oneflow() -> None:
    v = full((4, 4))
    x0 = flow.tensor(v, placement=ALL, sbp=S0)
    xb = flow.tensor(v, placement=ALL, sbp=B)
    xp = flow.tensor(v, placement=ALL, sbp=P)
    assert (x0 + xb).sbp == (S0,)      # B -> S is a free local slice
    assert (xp * xb).sbp == (P,)       # a partial sum times a constant stays partial
    assert (xp * 2).sbp == (P,)
    assert (xp + 1).numpy().tolist() == (v + 1).tolist()   # adding a constant forces B
    assert flow.relu(xp).numpy().tolist() == numpy.maximum(v, 0).tolist()
    assert (-xp).sbp == (P,)


def test_ops_on_different_placements_or_local_and_global_raise() -> None:
    first = flow.placement("cpu", [0])
    a = flow.tensor(full((2,)), placement=ALL, sbp=B)
    b = flow.tensor(full((2,)), placement=first, sbp=B)
    if SIZE > 1:
        with pytest.raises(RuntimeError, match="same placement"):
            a + b
    with pytest.raises(RuntimeError, match="global"):
        a + flow.tensor(full((2,)))


def test_the_seed_example_runs_with_a_cpu_placement() -> None:
    placement = flow.placement(type="cpu", ranks=list(range(SIZE)))
    x = flow.ones(4, 4, placement=placement, sbp=flow.sbp.split(0))
    y = flow.ones(4, 4, placement=placement, sbp=flow.sbp.split(1))
    z = x + y
    assert z.shape == flow.Size([4, 4])
    assert_array_equal(z.numpy(), numpy.full((4, 4), 2.0))
    local = flow.ones(2, 5)
    g = local.to_global(placement=placement, sbp=flow.sbp.split(0))
    assert g.shape == (2 * SIZE, 5)
    assert g.to_local().is_local


@pytest.mark.mpi(min_size=4)
def test_two_dimensional_mesh() -> None:
    mesh = flow.placement("cpu", [[0, 1], [2, 3]])
    v = full((4, 6))
    x = flow.tensor(v, placement=mesh, sbp=(B, S0))
    rows = {0: (0, 2), 2: (0, 2), 1: (2, 4), 3: (2, 4)}[RANK]
    assert_array_equal(x.to_local().numpy(), v[rows[0]:rows[1]])
    nested = flow.tensor(v, placement=mesh, sbp=(S0, S0))
    assert_array_equal(nested.to_local().numpy(), v[RANK:RANK + 1])
    out = (x + nested) * 2
    assert_array_equal(out.numpy(), 4 * v)
    y = nested.to_global(sbp=(S1, P))
    assert_array_equal(y.numpy(), v)


def test_to_global_with_a_known_shape_needs_no_communication() -> None:
    n = 3 * SIZE + 1
    rows = balanced_sizes(n, SIZE)
    start = sum(rows[:RANK])
    value = full((n, 2))
    local = flow.tensor(value[start:start + rows[RANK]])
    with count_collectives() as counts:
        g = local.to_global(ALL, S0, check_meta=False, shape=(n, 2))
    assert sum(counts.values()) == 0
    assert g.shape == (n, 2)
    assert_array_equal(g.numpy(), value)
    checked = local.to_global(ALL, S0, shape=(n, 2))
    assert checked.shape == (n, 2)
    with pytest.raises(ValueError, match="given shape"):
        local.to_global(ALL, S0, shape=(n + 1, 2))
