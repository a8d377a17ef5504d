"""The rest of OneFlow's global-tensor API (issue #25, item 5), as OneFlow's programs use it.

- errors OneFlow raises as ``RuntimeError`` are :class:`mpiflow.GlobalTensorError`, both a
  ``RuntimeError`` and a ``ValueError`` (OneFlow's tests catch ``RuntimeError``);
- ``Tensor.new_zeros/new_ones/new_empty/new_full`` with ``placement=`` and ``sbp=``;
- ``flow.add(x, y, alpha=)`` of a global tensor with a number or a global scalar;
- a retained gradient of a global non-leaf has the tensor's own layout;
- ``ONEFLOW_ENABLE_GLOBAL_INPUTS_WITH_INCONSISTENT_PLACEMENT`` (OneFlow's test_auto_to_global.py).
"""

from __future__ import annotations

import numpy
import pytest
from oneflow_case import RANK, SIZE, exactly

import mpiflow as flow
from mpiflow.ops.engine import MOVE_ENV

pytestmark = pytest.mark.mpi

ALL = flow.env.all_device_placement("cpu")
B, S, P = flow.sbp.broadcast, flow.sbp.split, flow.sbp.partial_sum


# -- one error class for OneFlow's RuntimeError and Python's ValueError -------------------------
@pytest.mark.parametrize("make", [
    lambda: flow.sbp.split(-1),
    lambda: flow.placement("xpu", ranks=[0]),
    lambda: flow.placement("cpu", ranks=[]),
    lambda: flow.placement("cpu", ranks=[1000]),
    lambda: flow.device("xpu"),
    lambda: flow.tensor([1, 2, 3, 4]).to_global(placement=ALL, sbp=flow.sbp.split(1)),
    lambda: flow.tensor([1, 2], placement=ALL, sbp=B).to_global(sbp=flow.sbp.split(1)),
    lambda: flow.zeros(2, sbp=B),
    lambda: flow.zeros(2, placement=ALL),
    lambda: flow.randn(2, placement=ALL, sbp=P),
    lambda: flow.zeros(2) + flow.zeros(2, placement=ALL, sbp=B),
], ids=["split_axis", "placement_type", "no_ranks", "rank_outside", "device", "local_split",
        "global_split", "sbp_without_placement", "placement_without_sbp", "random_partial",
        "local_and_global"])
def test_global_errors_are_runtime_and_value_errors(make) -> None:
    for kind in (RuntimeError, ValueError):
        with pytest.raises(kind) as info:
            make()
        assert isinstance(info.value, flow.GlobalTensorError)


@exactly(2)
def test_ranks_disagreeing_in_to_global_is_a_runtime_error() -> None:
    x = flow.Tensor(2, 4) if RANK == 0 else flow.Tensor(4, 4)
    with pytest.raises(RuntimeError, match=r"Sizes of tensors must match except in dimension 1\. "
                                           r"Expected size 2 but got size 4 for tensor on rank 1!"):
        x.to_global(placement=ALL, sbp=flow.sbp.split(1))


# -- new_zeros / new_ones / new_empty / new_full with placement= and sbp= -------------------------
@pytest.mark.parametrize("sbp", [B, S(0), S(1)], ids=str)
def test_new_tensors_take_placement_and_sbp(sbp) -> None:
    x = flow.ones(5, 3, placement=ALL, sbp=S(0))
    local = flow.tensor([1.0, 2.0], dtype=flow.float64)
    for src in (x, local):
        for made, value in ((src.new_zeros((4, 3), placement=ALL, sbp=sbp), 0.0),
                            (src.new_ones(4, 3, placement=ALL, sbp=sbp), 1.0),
                            (src.new_full((4, 3), 2.5, placement=ALL, sbp=sbp), 2.5)):
            assert made.placement == ALL and made.sbp == (sbp,)
            assert made.dtype == src.dtype and made.shape == (4, 3)
            numpy.testing.assert_array_equal(made.numpy(), numpy.full((4, 3), value))
        empty = src.new_empty((4, 3), placement=ALL, sbp=sbp)
        assert empty.placement == ALL and empty.sbp == (sbp,) and empty.shape == (4, 3)


def test_new_tensors_keep_or_replace_part_of_the_layout() -> None:
    x = flow.ones(4, 2, placement=ALL, sbp=S(0))
    kept = x.new_zeros(6)
    assert kept.placement == ALL and kept.sbp == (S(0),)
    assert x.new_ones(6, sbp=B).sbp == (B,)                       # the placement is x's
    first = flow.placement("cpu", ranks=[0])
    moved = x.new_zeros(2, placement=first)                      # the sbp is x's
    assert moved.placement == first and moved.sbp == (S(0),)
    assert x.new_zeros(2, placement=first, sbp=B).sbp == (B,)
    with pytest.raises(RuntimeError, match="needs an sbp"):      # a local tensor has no sbp
        flow.ones(2).new_zeros(2, placement=first)
    with pytest.raises(ValueError, match="without a placement"):
        flow.ones(2).new_zeros(2, sbp=B)
    assert not flow.ones(2).new_zeros(2).is_global


# -- flow.add with alpha --------------------------------------------------------------------------
@pytest.mark.parametrize("sbp", [B, S(0), P], ids=str)
def test_add_alpha_of_global_tensors_and_scalars(sbp) -> None:
    value = numpy.arange(12, dtype=numpy.float32).reshape(4, 3)
    x = flow.tensor(value, placement=ALL, sbp=B).to_global(sbp=sbp)
    scalar = flow.tensor(2.0, placement=ALL, sbp=B)
    for got, want in ((flow.add(x, 2.0, alpha=3), value + 6),
                      (flow.add(x, scalar, alpha=3), value + 6),
                      (flow.add(scalar, x, alpha=3), 2 + 3 * value),
                      (x.add(2, alpha=-1), value - 2),
                      (flow.sub(x, 2.0, alpha=3), value - 6),
                      (flow.add(x, x, alpha=0.5), value * 1.5)):
        assert got.is_global and got.placement == ALL
        numpy.testing.assert_allclose(got.numpy(), want)


# -- retain_grad of a global non-leaf keeps the tensor's layout -----------------------------------
@pytest.mark.parametrize("sbp", [B, S(0), S(1)], ids=str)
def test_retained_grad_of_global_non_leaf_has_its_layout(sbp) -> None:
    value = numpy.arange(16, dtype=numpy.float32).reshape(4, 4) / 7
    x = flow.tensor(value, placement=ALL, sbp=B, requires_grad=True)
    w = flow.tensor(value.T.copy(), placement=ALL, sbp=B)
    y = (x * 2).to_global(sbp=sbp)
    y.retain_grad()
    z = flow.matmul(y, w)       # matmul's layout rule may move y: its gradient arrives moved back
    (z * z).sum().backward()
    assert y.grad.placement == ALL and y.grad.sbp == (sbp,)
    numpy.testing.assert_allclose(y.grad.numpy(), 2 * (2 * value @ value.T) @ value, rtol=1e-5)


def test_retained_grad_of_partial_non_leaf_is_partial() -> None:
    x = flow.ones(3, placement=ALL, sbp=B, requires_grad=True)
    y = (x * 1).to_global(sbp=P)
    y.retain_grad()
    (y.to_global(sbp=B) * 3).sum().backward()
    assert y.grad.sbp == (P,)
    numpy.testing.assert_allclose(y.grad.numpy(), [3.0] * 3)


# -- ONEFLOW_ENABLE_GLOBAL_INPUTS_WITH_INCONSISTENT_PLACEMENT (test_auto_to_global.py) -----------
@exactly(4)
def test_auto_to_global(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MOVE_ENV, "true")
    x = flow.ones((2, 2), sbp=[B, B], placement=flow.placement("cpu", ranks=[[0], [1]]))
    y = flow.zeros((2, 2), sbp=[B, B], placement=flow.placement("cpu", ranks=[[2], [3]]))
    z = x + y
    numpy.testing.assert_array_equal(x.numpy(), z.numpy())
    assert y.placement == z.placement


@pytest.mark.mpi(min_size=2)
def test_inconsistent_placements_move_to_the_highest_rank(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    low, high = flow.placement("cpu", ranks=[0]), flow.placement("cpu", ranks=[SIZE - 1])
    a = flow.tensor([1.0, 2.0, 3.0], placement=low, sbp=B, requires_grad=True)
    b = flow.tensor([10.0, 20.0, 30.0], placement=ALL, sbp=S(0))
    c = flow.tensor([5.0, 5.0, 5.0], placement=high, sbp=B)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same placement"):
        flow.mul(a, b)
    monkeypatch.setenv(MOVE_ENV, "1")
    prod = flow.mul(a, b)
    assert prod.placement == ALL                         # ALL ties with high on its top rank,
    assert flow.add(b, c).placement == high              # so the later operand's placement wins
    numpy.testing.assert_allclose(prod.numpy(), [10.0, 40.0, 90.0])
    prod.sum().backward()                                # the gradient goes back to a's placement
    assert a.grad.placement == low and a.grad.sbp == (B,)
    numpy.testing.assert_allclose(a.grad.numpy(), [10.0, 20.0, 30.0])
    monkeypatch.setenv(MOVE_ENV, "0")
    with pytest.raises(ValueError, match="same placement"):
        flow.mul(a, b)


# -- S(d) -> P across placements: OneFlow's layout (test_eager_boxing.py's literals at 4 ranks) --
@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("targets", [[0], [1], "upper", "even"], ids=str)
def test_split_to_partial_across_placements_keeps_slabs_in_place(dim: int, targets) -> None:
    if targets == "upper":
        targets = list(range(1, SIZE))
    elif targets == "even":
        targets = list(range(0, SIZE, 2))
    value = numpy.arange(1, 1 + (2 * SIZE + 1) * 3, dtype=numpy.float32).reshape(2 * SIZE + 1, 3)
    value = value if dim == 0 else value.T.copy()
    x = flow.tensor(value, placement=ALL, sbp=B).to_global(sbp=S(dim))
    dst = flow.placement("cpu", targets)
    y = x.to_global(dst, P)
    assert y.placement == dst and y.sbp == (P,)
    numpy.testing.assert_array_equal(y.numpy(), value)
    if RANK in targets:
        want = numpy.zeros_like(value)
        sizes = [value.shape[dim] // SIZE + (r < value.shape[dim] % SIZE) for r in range(SIZE)]
        for r in range(SIZE):  # rank r's slab: on r if it is a target, else on targets[r % n]
            owner = r if r in targets else targets[r % len(targets)]
            if owner == RANK:
                where = [slice(None)] * 2
                where[dim] = slice(sum(sizes[:r]), sum(sizes[:r + 1]))
                want[tuple(where)] = value[tuple(where)]
        numpy.testing.assert_array_equal(y.to_local().numpy(), want)


# -- random tensors: local ones differ between ranks until seeded, global ones never do ----------
def _all_ranks(t: flow.Tensor) -> numpy.ndarray:
    """Every rank's local ``t``, stacked (rank r's at index r)."""
    return t.unsqueeze(0).to_global(ALL, S(0)).numpy()


@pytest.mark.mpi(min_size=2)
def test_local_random_tensors_differ_between_ranks_until_seeded() -> None:
    g = flow.Generator()
    for draw in (lambda: flow.randn(6, generator=g), lambda: flow.rand(6, generator=g),
                 lambda: flow.zeros(6).normal_(generator=g)):
        every = _all_ranks(draw())
        assert len({row.tobytes() for row in every}) == SIZE, every
    # a global tensor drawn from the same unseeded generator is one logical value
    x = flow.randn(4 * SIZE, 3, generator=g, placement=ALL, sbp=S(0))
    assert numpy.array_equal(_all_ranks(x.to_global(sbp=B).to_local()),
                             numpy.stack([x.numpy()] * SIZE))
    g.manual_seed(7)
    every = _all_ranks(flow.randn(6, generator=g))
    assert all(numpy.array_equal(row, every[0]) for row in every)
    g.manual_seed(7)   # and the local value is the global one of the same seed and call
    numpy.testing.assert_array_equal(flow.randn(6, generator=g, placement=ALL, sbp=S(0)).numpy(),
                                     every[0])


# -- printing with OneFlow's precision (4 decimals, PyTorch's rules) -----------------------------
def test_tensors_print_with_oneflow_precision() -> None:
    assert repr(flow.tensor([1.123456789, 2.0])) == "tensor([1.1235, 2.0000])"
    assert repr(flow.tensor([1.0, 2.0, -3.0])) == "tensor([ 1.,  2., -3.])"
    assert repr(flow.tensor([[1e-5, 1.0], [3.0, 4.5]])) == (
        "tensor([[1.0000e-05, 1.0000e+00],\n        [3.0000e+00, 4.5000e+00]])")
    special = flow.tensor([0.5, float("nan"), float("inf")])
    assert repr(special) == "tensor([0.5000,    nan,    inf])"
    assert repr(flow.tensor([1, 2])) == "tensor([1, 2])"
    g = flow.tensor([[0.25, 1.0]] * SIZE, placement=ALL, sbp=S(0))
    assert repr(g).startswith("tensor(local shard [[0.2500, 1.0000]]")
