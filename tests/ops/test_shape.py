"""Shape ops (mpiflow/ops/shape.py): values against numpy, local and global, and the layouts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy
import pytest
from global_helpers import ALL, RANK, S0, S1, S2, SIZE, B, N, P, full, make
from numpy.testing import assert_array_equal

import mpiflow as flow
from mpiflow.communication import count_collectives
from mpiflow.ops.shape import reshape_split_map

# -- local -------------------------------------------------------------------------------------
LOCAL_CASES: list[tuple[str, Callable[[Any], Any], Callable[[numpy.ndarray], Any]]] = [
    ("reshape", lambda x: x.reshape(4, -1), lambda a: a.reshape(4, -1)),
    ("reshape_tuple", lambda x: flow.reshape(x, (2, 2, 6)), lambda a: a.reshape(2, 2, 6)),
    ("view", lambda x: x.view([-1]), lambda a: a.reshape(-1)),
    ("flatten", lambda x: x.reshape(2, 2, 6).flatten(1), lambda a: a.reshape(2, 12)),
    ("flatten_mid", lambda x: x.reshape(2, 2, 3, 2).flatten(1, -2),
     lambda a: a.reshape(2, 6, 2)),
    ("transpose", lambda x: x.transpose(0, -1), lambda a: a.T),
    ("swapaxes", lambda x: flow.swapaxes(x, 1, 0), lambda a: a.T),
    ("permute", lambda x: x.reshape(2, 3, 4).permute(2, 0, 1),
     lambda a: a.reshape(2, 3, 4).transpose(2, 0, 1)),
    ("t", lambda x: x.t(), lambda a: a.T),
    ("T", lambda x: x.reshape(2, 3, 4).T, lambda a: a.reshape(2, 3, 4).T),
    ("squeeze_all", lambda x: x.reshape(1, 4, 1, 6).squeeze(), lambda a: a),
    ("squeeze_dim", lambda x: x.reshape(1, 4, 1, 6).squeeze(-2),
     lambda a: a.reshape(1, 4, 6)),
    ("squeeze_keep", lambda x: x.squeeze(0), lambda a: a),
    ("squeeze_tuple", lambda x: x.reshape(1, 4, 1, 6).squeeze((0, 2)), lambda a: a),
    ("unsqueeze", lambda x: x.unsqueeze(-1), lambda a: a[:, :, None]),
    ("unsqueeze0", lambda x: flow.unsqueeze(x, 0), lambda a: a[None]),
    ("cat", lambda x: flow.cat([x, x[:1]]), lambda a: numpy.concatenate([a, a[:1]])),
    ("concat1", lambda x: flow.concat([x, x], dim=-1), lambda a: numpy.concatenate([a, a], 1)),
    ("stack", lambda x: flow.stack([x, x + 1], dim=1), lambda a: numpy.stack([a, a + 1], 1)),
    ("stack_last", lambda x: flow.stack([x, x], -1), lambda a: numpy.stack([a, a], -1)),
    ("flip", lambda x: x.flip(0), lambda a: a[::-1]),
    ("flip_both", lambda x: flow.flip(x, (0, -1)), lambda a: a[::-1, ::-1]),
]


@pytest.mark.parametrize(("name", "op", "ref"), LOCAL_CASES, ids=[c[0] for c in LOCAL_CASES])
def test_local_ops_match_numpy(name: str, op: Any, ref: Any) -> None:
    a = full((4, 6))
    out = op(flow.tensor(a))
    assert out.is_local and out.dtype == flow.float64
    assert_array_equal(out.numpy(), ref(a))


def test_split_and_chunk_follow_pytorch() -> None:
    a = full((5, 7))
    x = flow.tensor(a)
    assert [p.numpy().tolist() for p in x.split(2)] == [a[0:2].tolist(), a[2:4].tolist(),
                                                        a[4:].tolist()]
    assert [tuple(p.shape) for p in flow.split(x, [1, 4, 2], dim=1)] == [(5, 1), (5, 4), (5, 2)]
    assert [p.shape[1] for p in x.chunk(3, dim=-1)] == [3, 3, 1]
    assert [p.shape[0] for p in x.chunk(4)] == [2, 2, 1]      # fewer pieces than asked
    assert [p.shape[0] for p in x.chunk(9)] == [1] * 5
    assert [tuple(p.shape) for p in flow.zeros(0, 2).chunk(2)] == [(0, 2), (0, 2)]
    with pytest.raises(ValueError, match="sum"):
        x.split([1, 1])
    with pytest.raises(ValueError):
        x.chunk(0)


def test_views_share_memory_and_copies_do_not() -> None:
    a = numpy.arange(12.0).reshape(3, 4)
    x = flow.from_numpy(a)
    for v in (x.view(12), x.reshape(4, 3), x.t(), x.unsqueeze(0), x.split(2)[1], x.flatten()):
        assert numpy.shares_memory(v.numpy(), a)
    for c in (x.flip(0), flow.cat([x, x]), flow.stack([x])):
        assert not numpy.shares_memory(c.numpy(), a)
    assert x.contiguous() is x


def test_zero_dim_and_empty_tensors() -> None:
    s = flow.tensor(3.0)
    assert s.flatten().shape == (1,) and s.reshape(1, 1).shape == (1, 1)
    assert s.t() is s and s.T is s and s.unsqueeze(0).shape == (1,)
    assert s.squeeze(0).shape == ()
    e = flow.zeros(0, 3)
    assert e.reshape(3, -1).shape == (3, 0) and e.t().shape == (3, 0)


def test_errors_name_the_shapes() -> None:
    x = flow.zeros(4, 6)
    with pytest.raises(RuntimeError, match="invalid for input of size 24"):
        x.reshape(5, -1)
    with pytest.raises(RuntimeError, match="only one dimension"):
        x.reshape(-1, -1)
    with pytest.raises(RuntimeError, match="not a permutation"):
        x.permute(0, 0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.transpose(0, 2)
    with pytest.raises(RuntimeError, match="except in dimension 0"):
        flow.cat([x, flow.zeros(4, 5)])
    with pytest.raises(RuntimeError, match="equal size"):
        flow.stack([x, flow.zeros(4, 5)])
    with pytest.raises(RuntimeError, match="<= 2"):
        flow.zeros(2, 2, 2).t()


def test_cat_promotes_dtypes() -> None:
    out = flow.cat([flow.tensor([1, 2], dtype=flow.int32), flow.tensor([0.5], dtype=flow.float64)])
    assert out.dtype == flow.float64 and out.tolist() == [1.0, 2.0, 0.5]


# -- reshape split map (pure) ------------------------------------------------------------------
def test_reshape_split_map_is_exact() -> None:
    assert reshape_split_map((6, 4), (24,), (3,)) == {0: 0}
    assert reshape_split_map((5, 4), (20,), (2,)) == {}
    assert reshape_split_map((6, 4), (24,), (2, 2)) == {}         # nested 3|3 -> 2|1 breaks
    assert reshape_split_map((8, 4), (32,), (2, 2)) == {0: 0}
    assert reshape_split_map((4, 6), (4, 2, 3), (2,)) == {0: 0, 1: 1}
    assert reshape_split_map((4, 6), (4, 2, 3), (3,)) == {0: 0}    # 2|2|2 vs 3|3|0
    assert reshape_split_map((4, 6), (2, 2, 6), (2,)) == {0: 0, 1: 2}
    assert reshape_split_map((4, 6), (2, 2, 6), (4,)) == {1: 2}   # dim 0 into 2 rows: no
    assert reshape_split_map((2, 3), (6,), (2,)) == {0: 0}        # dim 1: strided, never


# -- global, 1-D placement ---------------------------------------------------------------------
GLOBAL_CASES: list[tuple[str, Callable[[Any], Any], Callable[[numpy.ndarray], Any]]] = [
    ("reshape", lambda x: x.reshape(-1), lambda a: a.reshape(-1)),
    ("reshape_split", lambda x: x.reshape(N, 2, 2), lambda a: a.reshape(N, 2, 2)),
    ("flatten_unsqueeze", lambda x: x.unsqueeze(1).flatten(1), lambda a: a),
    ("transpose", lambda x: x.transpose(1, 0), lambda a: a.T),
    ("T", lambda x: x.T, lambda a: a.T),
    ("permute3", lambda x: x.reshape(N, 2, 2).permute(2, 0, 1),
     lambda a: a.reshape(N, 2, 2).transpose(2, 0, 1)),
    ("squeeze", lambda x: x.unsqueeze(0).unsqueeze(-1).squeeze(), lambda a: a),
    ("cat0", lambda x: flow.cat([x, x * 2], 0), lambda a: numpy.concatenate([a, a * 2], 0)),
    ("cat1", lambda x: flow.cat([x, x], -1), lambda a: numpy.concatenate([a, a], 1)),
    ("stack", lambda x: flow.stack([x, x * 3], 1), lambda a: numpy.stack([a, a * 3], 1)),
    ("split0", lambda x: x.split(2)[-1], lambda a: a[(N - 1) // 2 * 2:]),
    ("chunk1", lambda x: x.chunk(3, 1)[1], lambda a: a[:, 2:4]),
    ("flip0", lambda x: x.flip(0), lambda a: a[::-1]),
    ("flip1", lambda x: x.flip(-1), lambda a: a[:, ::-1]),
]


@pytest.mark.mpi
@pytest.mark.parametrize("sbp", [S0, S1, B, P], ids=str)
@pytest.mark.parametrize(("name", "op", "ref"), GLOBAL_CASES, ids=[c[0] for c in GLOBAL_CASES])
def test_global_ops_match_numpy(name: str, op: Any, ref: Any, sbp: Any) -> None:
    a = full((N, 4))
    out = op(make(a, sbp))
    assert out.is_global and out.placement == ALL
    assert_array_equal(out.numpy(), ref(a))


@pytest.mark.mpi
@pytest.mark.parametrize("sbp", [S0, S1, P], ids=str)
def test_global_ops_with_empty_shards(sbp: Any) -> None:
    a = full((max(SIZE - 1, 1), 2))  # fewer rows than ranks
    x = make(a, sbp)
    assert_array_equal(x.t().numpy(), a.T)
    assert_array_equal(x.reshape(-1).numpy(), a.reshape(-1))
    assert_array_equal(flow.cat([x, x], 1).numpy(), numpy.concatenate([a, a], 1))
    assert_array_equal(x[..., None].squeeze(-1).flip(1).numpy(), a[:, ::-1])


@pytest.mark.mpi
def test_splits_stay_splits_without_communication() -> None:
    a = full((N, 2 * N))
    x0, x1, xp = make(a, S0), make(a, S1), make(a, P)
    with count_collectives() as calls:
        results = {
            "t": (x0.t(), S1), "permute": (x1.permute(1, 0), S0), "P": (xp.t(), P),
            "unsqueeze": (x1.unsqueeze(0), S2), "squeeze": (x1.unsqueeze(0).squeeze(0), S1),
            "stack": (flow.stack([x0, x0], 0), S1), "cat": (flow.cat([x1, x1], 0), S1),
            "split": (x0.split(3, dim=1)[0], S0), "flip": (x1.flip(0), S1),
            "reshape": (x0.reshape(N, 2, N), S0), "reshape_P": (xp.reshape(-1), P),
        }
    assert sum(calls.values()) == 0, calls
    for name, (out, sbp) in results.items():
        assert out.sbp == (sbp,), name
    assert_array_equal(results["reshape"][0].numpy(), a.reshape(N, 2, N))


@pytest.mark.mpi
def test_reshape_keeps_a_split_only_where_shards_coincide() -> None:
    a = full((2 * SIZE, 4))
    y = make(a, S0).reshape(-1)            # rows of 4 split evenly: boundaries coincide
    assert y.sbp == (S0,)
    assert_array_equal(y.numpy(), a.reshape(-1))
    b = full((2 * SIZE + 1, 4))
    with count_collectives() as calls:
        z = make(b, S0).reshape(-1)        # uneven rows: re-chunked (one fetch), not gathered
    assert_array_equal(z.numpy(), b.reshape(-1))
    assert z.sbp == (S0,)
    assert dict(calls) == ({"all_to_all_v": 1} if SIZE > 1 else {})
    assert z.to_local().shape[0] == len(numpy.array_split(b.reshape(-1), SIZE)[RANK])
    w = make(b, S1).reshape(2 * SIZE + 1, 2, 2)  # a split inner dim: its own output dim
    assert_array_equal(w.numpy(), b.reshape(-1, 2, 2))


@pytest.mark.mpi
def test_split_of_a_split_dim_gathers_once() -> None:
    a = full((N, 3))
    with count_collectives() as calls:
        pieces = make(a, S0).chunk(3)
    assert sum(calls.values()) <= 1, calls
    wants = numpy.array_split(a, range(-(-N // 3), N, -(-N // 3)))
    assert len(pieces) == len(wants)
    for got, want in zip(pieces, wants, strict=True):
        assert_array_equal(got.numpy(), want)


@pytest.mark.mpi
def test_global_errors_are_raised_everywhere() -> None:
    x = make(full((N, 2)), S0)
    with pytest.raises(RuntimeError, match="invalid"):
        x.reshape(3, -1)  # 2 * N = 6 * SIZE + 2 elements
    with pytest.raises(RuntimeError, match="global"):
        flow.cat([x, flow.zeros(N, 2)])


# -- global, 2x2 mesh ----------------------------------------------------------------------------
MESH_LAYOUTS = [(S0, S1), (S1, S0), (S0, S0), (B, S1), (P, S0), (S1, P)]


@pytest.mark.mpi(min_size=4)
@pytest.mark.parametrize("sbp", MESH_LAYOUTS, ids=lambda s: "".join(map(str, s)))
def test_two_dimensional_mesh(sbp: tuple[Any, ...]) -> None:
    mesh = flow.placement("cpu", [[0, 1], [2, 3]])
    for shape in ((8, 4), (6, 5)):
        a = full(shape)
        if P in sbp:
            x = flow.tensor(a, placement=mesh, sbp=tuple(B if s == P else s for s in sbp))
            x = x.to_global(sbp=sbp)
        else:
            x = flow.tensor(a, placement=mesh, sbp=sbp)
        assert_array_equal(x.t().numpy(), a.T)
        assert_array_equal(x.reshape(-1).numpy(), a.reshape(-1))
        assert_array_equal(x.reshape(shape[0], 1, -1).numpy(), a.reshape(shape[0], 1, -1))
        assert_array_equal(flow.cat([x, x], 1).numpy(), numpy.concatenate([a, a], 1))
        assert_array_equal(flow.stack([x, x]).numpy(), numpy.stack([a, a]))
        assert_array_equal(x.flip(0).split(3, 1)[0].numpy(), a[::-1, :3])
    x = flow.tensor(full((8, 4)), placement=mesh, sbp=(S0, S0))
    assert x.reshape(-1).sbp == (S0, S0)                    # nested: 4|4 -> 2|2 in each
    assert flow.tensor(full((8, 4)), placement=mesh, sbp=(S0, S1)).t().sbp == (S1, S0)
