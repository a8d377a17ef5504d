"""OneFlow's boxing-in-graph tests (python/oneflow/test/graph): test_comb1to2d.py, test_comb2d.py,
test_gbc1to2d.py, test_gbc2d.py, test_gbc2to1d.py and test_gbc2to2d.py, on mpiflow.

Each redistribution runs inside an ``nn.Graph``'s ``build()`` (traced on the first call, then
replayed from the plan on a second call), with OneFlow's inputs and assertions: the graph's
output has the input's logical value, as the eager conversion's does. OneFlow's comb tests
assert nothing beyond running; here the graph's result is also compared with the input and with
the same chain run eagerly. OneFlow's environment switches (``ONEFLOW_BOXING_*``, NCCL streams)
choose among its compiled boxing algorithms and have no meaning here.
"""

from __future__ import annotations

from typing import Any

import numpy
import pytest
from oneflow_case import exactly

import mpiflow as flow
from mpiflow import nn

pytestmark = pytest.mark.mpi

B, P = flow.sbp.broadcast, flow.sbp.partial_sum
SBP_1D = [B, P, flow.sbp.split(0), flow.sbp.split(1), flow.sbp.split(2)]
GBC_1D = [P, B, flow.sbp.split(0), flow.sbp.split(1)]
GBC_2D = [[a, b] for a in GBC_1D for b in GBC_1D]
MESH = [[0, 1], [2, 3]]


class _Graph(nn.Graph):
    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def build(self, x: flow.Tensor) -> flow.Tensor:
        return self.model(x)


def _run_twice(model: nn.Module, x: flow.Tensor) -> flow.Tensor:
    """The graph's output; its second call (a replay of the plan) must give the same."""
    graph = _Graph(model)
    first = graph(x)
    second = graph(x)
    assert graph.plans and all(plan is not None for plan in graph.plans)  # replayed, not eager
    numpy.testing.assert_array_equal(first.numpy(), second.numpy())
    assert (first.placement, first.sbp) == (second.placement, second.sbp)
    return first


# -- test_comb1to2d.py ---------------------------------------------------------------------------
class _DiffHierarchy(nn.Module):
    def forward(self, x: flow.Tensor) -> flow.Tensor:
        for sbp1 in SBP_1D:
            for sbp2 in SBP_1D:
                for sbp3 in SBP_1D:
                    x = x.to_global(placement=flow.placement("cpu", ranks=numpy.arange(4)),
                                    sbp=[sbp1])                                   # (2, 2) -> 4
                    x = x.to_global(placement=flow.placement(          # 4 -> (2, 2)
                        "cpu", ranks=numpy.arange(4).reshape(2, 2)), sbp=[sbp2, sbp3])
        return x


class _DiffPlacement(nn.Module):
    def forward(self, x: flow.Tensor) -> flow.Tensor:
        for sbp1 in SBP_1D:
            for sbp2 in SBP_1D:
                for sbp3 in SBP_1D:
                    # (2, 2) -> 3 (4 is not divisible by 3), 3 -> (2, 2)
                    x = x.to_global(placement=flow.placement("cpu", ranks=numpy.arange(3)),
                                    sbp=[sbp1])
                    x = x.to_global(placement=flow.placement(
                        "cpu", ranks=numpy.arange(4).reshape(2, 2)), sbp=[sbp2, sbp3])
        return x


@exactly(4)
@pytest.mark.parametrize("model", [_DiffHierarchy, _DiffPlacement], ids=["hierarchy", "placement"])
def test_lazy_boxing_1d_to_2d_all_combinations(model: type[nn.Module]) -> None:
    x = flow.ones(4, 12, 4, sbp=[B, B], placement=flow.placement("cpu", ranks=MESH))
    y = _run_twice(model(), x)
    eager = model()(x)
    assert (y.placement, y.sbp) == (eager.placement, eager.sbp)
    numpy.testing.assert_array_equal(y.numpy(), numpy.ones((4, 12, 4)))
    numpy.testing.assert_array_equal(y.to_local().numpy(), eager.to_local().numpy())


# -- test_comb2d.py ------------------------------------------------------------------------------
class _Comb2d(nn.Module):
    def forward(self, x: flow.Tensor) -> flow.Tensor:
        for sbp1 in SBP_1D:
            for sbp2 in SBP_1D:
                for sbp3 in SBP_1D:
                    if sbp1 == sbp3:  # OneFlow: intra-group boxing, tested elsewhere
                        continue
                    for sbp4 in SBP_1D:
                        x = x.to_global(sbp=[sbp1, sbp2])                    # (2, 2) -> (2, 2)
                        x = x.to_global(sbp=[sbp3, sbp4])
        return x


@exactly(4)
def test_lazy_boxing_2d_all_combinations() -> None:
    x = flow.ones(4, 4, 4, sbp=[B, B], placement=flow.placement("cpu", ranks=MESH))
    y = _run_twice(_Comb2d(), x)
    numpy.testing.assert_array_equal(y.numpy(), numpy.ones((4, 4, 4)))
    numpy.testing.assert_array_equal(y.to_local().numpy(), _Comb2d()(x).to_local().numpy())


# -- test_gbc*.py: general basic communication, eager and in a graph -----------------------------
class _ToGlobal(nn.Module):
    def __init__(self, sbp: Any, placement: flow.placement) -> None:
        super().__init__()
        self.sbp, self.placement = sbp, placement

    def forward(self, x: flow.Tensor) -> flow.Tensor:
        return x.to_global(sbp=self.sbp, placement=self.placement)


def _check_general_basic_communication(local: numpy.ndarray, src: Any, placement_x: Any,
                                       dst: Any, placement_y: Any) -> None:
    x = flow.tensor(local, sbp=src, placement=placement_x)
    eager_out = x.to_global(sbp=dst, placement=placement_y)
    numpy.testing.assert_array_equal(eager_out.numpy(), x.numpy())
    y = _run_twice(_ToGlobal(dst, placement_y), x)
    numpy.testing.assert_array_equal(y.numpy(), x.numpy())
    assert y.placement == placement_y


def _gbc2d_skipped(src: list[Any], dst: list[Any]) -> bool:
    """OneFlow's test_gbc2d.py skips: P in the target, equal layouts, and the cases its
    intra- and inter-group boxing handle (tested by test_comb2d.py)."""
    return (P in dst or src == dst or src[0] == dst[0]
            or (src[1] == dst[1] and src[0] != src[1] and dst[0] != dst[1]))


@exactly(4)
@pytest.mark.parametrize("src", GBC_2D, ids=str)
def test_general_basic_communication_same_placement(src: list[Any]) -> None:
    placement = flow.placement("cpu", ranks=MESH)
    for dst in GBC_2D:
        if not _gbc2d_skipped(src, dst):
            _check_general_basic_communication(numpy.arange(4 * 5).reshape(4, 5), src,
                                               placement, dst, placement)


@exactly(4)
@pytest.mark.parametrize("src", GBC_1D, ids=str)
def test_general_basic_communication_1d_to_2d(src: Any) -> None:
    for dst in GBC_2D:
        if P not in dst:
            _check_general_basic_communication(
                numpy.arange(4 * 14).reshape(4, 14), src, flow.placement("cpu", ranks=[0, 1, 2]),
                dst, flow.placement("cpu", ranks=[[3, 0], [1, 2]]))


@exactly(8)
@pytest.mark.parametrize("src", GBC_2D, ids=str)
def test_general_basic_communication_2d_to_1d(src: list[Any]) -> None:
    for dst in GBC_1D:
        if dst != P:
            _check_general_basic_communication(
                numpy.arange(13 * 5).reshape(13, 5), src, flow.placement("cpu", ranks=MESH),
                dst, flow.placement("cpu", ranks=[0, 3, 4]))


@exactly(8)
@pytest.mark.parametrize("src", GBC_2D, ids=str)
def test_general_basic_communication_2d_to_2d(src: list[Any]) -> None:
    for dst in GBC_2D:
        if P in dst or (dst[0] == dst[1] and src[0] == src[1]):
            continue
        _check_general_basic_communication(
            numpy.arange(12 * 12).reshape(12, 12), src, flow.placement("cpu", ranks=MESH), dst,
            flow.placement("cpu", ranks=[[0, 3, 4], [2, 5, 6]]))
