"""Indexing (mpiflow/ops/indexing.py): getitem and setitem against numpy, local and global."""

from __future__ import annotations

from typing import Any

import numpy
import pytest
from global_helpers import ALL, S0, S1, S2, SIZE, B, N, P, full, make
from numpy.testing import assert_array_equal

import mpiflow as flow
from mpiflow.communication import count_collectives

BASIC = [
    0, -1, 2, slice(None), slice(1, None), slice(None, None, 2), slice(None, None, -1),
    slice(-2, 0, -2), slice(5, 1, -1), slice(100, None), (Ellipsis, 1), (None, 0),
    (slice(None), -2), (1, None, slice(2, None)), (Ellipsis, None), (slice(None), None, 3),
    (slice(1, -1), slice(None, None, -3)), (None, Ellipsis, None), (-1, -1), Ellipsis, (),
]


def advanced(rows: int) -> list[Any]:
    """Advanced indices of a tensor of ``rows`` x 5 (``rows`` >= 4)."""
    return [[0, 2], [[1, 0], [-1, 2]], (slice(None), [3, 1, 3]), ([0, 1], [2, 3]),
            (numpy.arange(rows) % 3 != 1,), (Ellipsis, [0, 0]), (slice(1, 3), None, [1])]


def name(index: Any) -> str:
    return repr(index).replace(" ", "")


# -- local -------------------------------------------------------------------------------------
@pytest.mark.parametrize("index", BASIC + advanced(7), ids=name)
def test_local_getitem_matches_numpy(index: Any) -> None:
    a = full((7, 5))
    out = flow.tensor(a)[index]
    assert out.is_local
    assert_array_equal(out.numpy(), a[index])


def test_local_index_tensors_and_views() -> None:
    a = numpy.arange(24.0).reshape(4, 6)
    x = flow.from_numpy(a)
    assert_array_equal(x[x > 10].numpy(), a[a > 10])
    assert_array_equal(x[flow.tensor([3, 0])].numpy(), a[[3, 0]])
    assert_array_equal(x[:, flow.tensor([True, False] * 3)].numpy(), a[:, [True, False] * 3])
    assert x[flow.tensor(2), 1].item() == a[2, 1]           # a 0-d index tensor is an int
    for view in (x[1], x[:, ::2], x[None, ..., 3], x[1, 2]):
        assert numpy.shares_memory(view.numpy(), a)
    assert x[1, 2].shape == ()
    assert [row.tolist() for row in x] == a.tolist()       # iteration uses getitem
    with pytest.raises(IndexError, match="out of bounds"):
        x[4]
    with pytest.raises(IndexError, match="too many"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., ...]


SETS: list[tuple[Any, Any]] = [
    (0, 5.0), ((slice(None), 1), numpy.arange(7.0)), (slice(1, None, 2), [[1.0], [2.0], [3.0]]),
    ((Ellipsis, slice(None, None, -2)), numpy.arange(3.0)), ((None, 2), -1.0),
    ((slice(5, 0, -2), slice(1, 4)), numpy.ones((1, 1, 3))), ((-1, -1), 7),
    ([0, 3], 9.0), (([1, 2], [4, 0]), numpy.array([10.0, 20.0])),
    (numpy.array([True, False, True, False, False, True, True]), 0.5),
]


@pytest.mark.parametrize(("index", "value"), SETS, ids=[name(i) for i, _ in SETS])
def test_local_setitem_matches_numpy_in_place(index: Any, value: Any) -> None:
    a = full((7, 5))
    x = flow.tensor(a)
    data, version = x._data, x._version
    x[index] = value
    want = a.copy()
    want[index] = value
    assert_array_equal(x.numpy(), want)
    assert x._data is data and x._version == version + 1


def test_local_setitem_with_tensors_and_casts() -> None:
    x = flow.zeros(3, 4, dtype=flow.int64)
    x[1] = flow.tensor([1.7, 2.2, 3.9, -4.5])     # cast as numpy (and PyTorch) do
    x[:, 0] = flow.tensor([[5]])
    x[x == 2] = 8
    assert x.tolist() == [[5, 0, 0, 0], [5, 8, 3, -4], [5, 0, 0, 0]]
    with pytest.raises(ValueError):
        x[0] = numpy.ones(3)


# -- global getitem ----------------------------------------------------------------------------
@pytest.mark.mpi
@pytest.mark.parametrize("sbp", [S0, S1, B, P], ids=str)
def test_global_getitem_matches_numpy(sbp: Any) -> None:
    a = full((N, 5))
    x = make(a, sbp)
    for index in BASIC + advanced(N):
        out = x[index]
        assert out.is_global and out.placement == ALL
        assert_array_equal(out.numpy(), a[index], err_msg=f"{sbp} {index!r}")


@pytest.mark.mpi
def test_global_getitem_with_empty_shards() -> None:
    a = full((max(SIZE - 1, 1), 3, 2))
    for sbp in (S0, S1, S2):
        x = make(a, sbp)
        for index in ((Ellipsis, 0), (0, None), (slice(None), slice(None, None, -1)), -1):
            assert_array_equal(x[index].numpy(), a[index])


@pytest.mark.mpi
def test_full_slices_keep_the_split_without_communication() -> None:
    a = full((N, N, 3))
    x0, x1, xp = make(a, S0), make(a, S1), make(a, P)
    with count_collectives() as calls:
        cases = [(x1[0], S0), (x0[:, 1], S0), (x0[None, :, 2:], S1), (x1[..., -1], S1),
                 (x1[-1, :, None, 1:], S0), (x0[::1, ::-1], S0), (xp[1, ::2], P),
                 (xp[[0, 2]], P)]
    assert sum(calls.values()) == 0, calls
    for i, (out, sbp) in enumerate(cases):
        assert out.sbp == (sbp,), i
    assert_array_equal(cases[4][0].numpy(), a[-1, :, None, 1:])


@pytest.mark.mpi
def test_split_dims_indexed_otherwise_are_gathered() -> None:
    a = full((N, 4))
    x = make(a, S0)
    assert_array_equal(x[1:-1:2].numpy(), a[1:-1:2])
    assert_array_equal(x[-1].numpy(), a[-1])


def _gathers(calls: Any) -> int:
    return calls.get("all_gather", 0) + calls.get("all_gather_v", 0)


@pytest.mark.mpi
def test_masks_and_integer_indices_of_a_split_dim_gather_nothing() -> None:
    a = full((N, 4))
    x = make(a, S0)
    index = flow.tensor([0, N - 1, -2, 1], placement=ALL, sbp=B)  # a global index tensor
    with count_collectives() as calls:
        g = x[index]                       # rows fetched from their owners, split like x
    assert _gathers(calls) == 0, calls
    assert g.sbp == (S0,) or SIZE == 1  # (at one rank every layout is free: any may win)
    assert_array_equal(g.numpy(), a[[0, N - 1, -2, 1]])
    split_index = flow.tensor(numpy.arange(N)[::-1].copy(), placement=ALL, sbp=S0)
    assert_array_equal(x[split_index].numpy(), a[::-1])
    assert x[split_index].sbp == (S0,)
    assert_array_equal(make(a, S1)[..., [3, 0]].numpy(), a[..., [3, 0]])
    mask = x > 0
    with count_collectives() as calls:
        m = x[mask]                        # each rank's own selection, counted, rebalanced
    assert m.sbp == (S0,) and _gathers(calls) <= 1, calls   # (the counts' all-gather)
    assert set(calls) <= {"all_reduce", "all_gather", "all_to_all_v"}, calls
    assert_array_equal(m.numpy(), a[a > 0])
    assert_array_equal(x[make(a, S1) > 0].numpy(), a[a > 0])   # the mask converted to S(0)
    rows = a[:, 0] > 0
    assert_array_equal(x[flow.tensor(rows, placement=ALL, sbp=S0)].numpy(), a[rows])
    with pytest.raises(IndexError, match="out of bounds"):
        x[flow.tensor([0, N], placement=ALL, sbp=S0)]         # raised on every rank
    with pytest.raises(IndexError, match="shape of the mask"):
        x[flow.tensor(numpy.ones(N + 1, bool), placement=ALL, sbp=B)]


@pytest.mark.mpi
def test_masked_and_indexed_assignments_write_where_the_rows_lie() -> None:
    a = full((N, 4))
    for sbp in (S0, S1, P):
        x, want = make(a, sbp), a.copy()
        with count_collectives() as calls:
            x[x > 3] = -1.0
            x[[0, N - 1, 0]] = flow.tensor([[1.0, 2.0, 3.0, 4.0]] * 3)
        assert _gathers(calls) == 0 or sbp != S0, (sbp, calls)
        want[want > 3] = -1.0
        want[[0, N - 1, 0]] = [1.0, 2.0, 3.0, 4.0]
        x[:, [1]] = make(numpy.full((N, 1), 9.0), S0)   # a global value, made whole
        want[:, [1]] = 9.0
        x[numpy.arange(N) % 2 == 0] = numpy.arange(4.0)
        want[numpy.arange(N) % 2 == 0] = numpy.arange(4.0)
        assert x.sbp == (sbp,)
        assert_array_equal(x.numpy(), want, err_msg=str(sbp))


# -- global setitem ----------------------------------------------------------------------------
GLOBAL_SETS: list[tuple[Any, Any]] = [
    (0, 5.0), (-1, numpy.arange(4.0)), ((slice(None), 1), 3.0),
    ((slice(1, None, 2), slice(None, None, -1)), numpy.arange(4.0)),
    ((slice(None, None, -3), None, 2), -2.0), ((Ellipsis, slice(3, 0, -2)), [[1.0, 2.0]]),
    ((slice(-2, None), slice(1, 3)), numpy.ones((1, 2, 2))), ((), 4.0),
    ((slice(N, None),), 1.0),     # an empty region
]


@pytest.mark.mpi
@pytest.mark.parametrize("sbp", [S0, S1, B, P], ids=str)
def test_global_setitem_matches_numpy(sbp: Any) -> None:
    a = full((N, 4))
    x = make(a, sbp)
    want = a.copy()
    data = x._data
    for step, (index, value) in enumerate(GLOBAL_SETS):
        version = x._version
        x[index] = value
        want[index] = value
        assert x._data is data and x._version == version + 1
        assert x.sbp == (sbp,)
        assert_array_equal(x.numpy(), want, err_msg=f"{sbp} step {step}: {index!r}")


@pytest.mark.mpi
@pytest.mark.parametrize("sbp", [S0, S1, B, P], ids=str)
def test_global_setitem_with_tensor_values(sbp: Any) -> None:
    a = full((N, 5))
    x = make(a, sbp)
    want = a.copy()
    v = full((N,), seed=3)
    x[:, 2] = make(v, S0)                      # a global value
    want[:, 2] = v
    x[1:3] = flow.tensor(numpy.arange(5.0))    # a local value, the same on every rank
    want[1:3] = numpy.arange(5.0)
    x[x > 4] = 0.0                             # a mask: written where the rows lie
    want[want > 4] = 0.0
    x[[0, -1], 1] = make(numpy.array([7.0, 8.0]), P)
    want[[0, -1], 1] = [7.0, 8.0]
    assert x.sbp == (sbp,)
    assert_array_equal(x.numpy(), want)


@pytest.mark.mpi
def test_basic_setitem_communicates_only_for_a_global_value() -> None:
    a = full((N, 4))
    for sbp in (S0, S1, P):
        x = make(a, sbp)
        with count_collectives() as calls:
            x[1:, ::2] = 3.0
            x[0] = flow.tensor([1.0, 2.0, 3.0, 4.0])
        assert sum(calls.values()) == 0, (sbp, calls)


@pytest.mark.mpi
def test_a_split_value_spanning_the_split_dim_is_written_where_it_lies() -> None:
    a, v = full((N, 7)), full((N, 3), seed=2)
    for sbp in (S0, S1, P):
        x, want = make(a, S0), a.copy()
        value = make(v, sbp)
        with count_collectives() as calls:
            x[:, 1:4] = value                      # the value's rows lie with the target's
            x[:, None, 4:7] = value[:, None]       # a new dim and a leading size-1 dim
            x[:, 0] = value[:, 2]
        want[:, 1:4] = want[:, 4:7] = v
        want[:, 0] = v[:, 2]
        assert_array_equal(x.numpy(), want)
        gathers = calls["all_gather"] + calls["all_gather_v"]
        assert gathers == 0 or sbp != S0, calls     # a split value moves nothing
    x, want = make(a, S0), a.copy()
    x[1:, 0] = make(v[1:, 0], S0)                  # not the whole dim: made whole first
    x[:, 1:4] = make(v[:1], S0)                    # broadcast along the split dim
    want[1:, 0], want[:, 1:4] = v[1:, 0], v[:1]
    assert_array_equal(x.numpy(), want)
    y, want3 = make(numpy.zeros((2, N, 4)), S1), numpy.zeros((2, N, 4))
    y[1, :, 1:3] = make(v[:, :2], S0)
    want3[1, :, 1:3] = v[:, :2]
    assert_array_equal(y.numpy(), want3)


@pytest.mark.mpi
def test_global_setitem_on_a_subset_placement_and_errors() -> None:
    first = flow.placement("cpu", [0])
    x = flow.tensor(full((3, 2)), placement=first, sbp=S0)
    x[1] = 9.0
    assert x.numpy().tolist()[1] == [9.0, 9.0]
    with pytest.raises(ValueError, match=r"shape \(5,\)"):   # on ranks outside it too
        x[0] = numpy.ones(5)
    with pytest.raises(ValueError, match="cannot assign"):
        x[x > 100] = numpy.ones(2)
    with pytest.raises(ValueError, match="cannot assign"):
        make(full((N, 4)), S0)[0] = numpy.ones(3)
    with pytest.raises(TypeError, match="global"):
        flow.zeros(2)[0] = make(numpy.ones(1), B)[0]


# -- 2x2 mesh ----------------------------------------------------------------------------------
@pytest.mark.mpi(min_size=4)
@pytest.mark.parametrize("sbp", [(S0, S1), (S0, S0), (S1, B), (P, S0), (S1, P)],
                         ids=lambda s: "".join(map(str, s)))
def test_two_dimensional_mesh(sbp: tuple[Any, ...]) -> None:
    mesh = flow.placement("cpu", [[0, 1], [2, 3]])
    a = full((7, 5))
    x = flow.tensor(a, placement=mesh, sbp=tuple(B if s == P else s for s in sbp))
    x = x.to_global(sbp=sbp)
    for index in ((slice(None), 1), 2, (slice(None, None, -2), None), (Ellipsis, [0, 4])):
        assert_array_equal(x[index].numpy(), a[index])
    want = a.copy()
    for index, value in ((1, 3.0), ((slice(None), slice(4, 0, -3)), numpy.arange(2.0)),
                         ((slice(2, 6), None, -1), -1.0), (numpy.eye(7, 5) > 0, 0.0)):
        x[index] = value
        want[index] = value
    x[:, 1:3] = flow.tensor(a[:, :2] + 1, placement=mesh, sbp=(B, B)).to_global(sbp=sbp)
    want[:, 1:3] = a[:, :2] + 1                      # a value laid out as the target
    assert x.sbp == sbp
    assert_array_equal(x.numpy(), want)


@pytest.mark.mpi
def test_gradients_through_masked_and_indexed_assignments_of_split_tensors() -> None:
    import torch

    a = full((N, 3))
    for sbp in (S0, S1):
        x = make(a, sbp).requires_grad_()
        v = make(numpy.array([1.0, 2.0, 3.0]), B).requires_grad_()
        y = x * 2
        y[y[:, 0] > 0] = v
        y[[0, -1]] = v * 3
        (y * make(a, sbp)).sum().backward()
        t = torch.tensor(a, requires_grad=True)
        tv = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
        ty = t * 2
        ty[ty[:, 0] > 0] = tv
        ty[[0, -1]] = tv * 3
        (ty * torch.tensor(a)).sum().backward()
        assert_array_equal(y.numpy(), ty.detach().numpy())
        assert_array_equal(x.grad.numpy(), t.grad.numpy())
        assert_array_equal(v.grad.numpy(), tv.grad.numpy())
