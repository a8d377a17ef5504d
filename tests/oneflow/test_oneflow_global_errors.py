"""OneFlow's exception tests for placements, sbp and local/global conversion, run on mpiflow.

Ports test_local_global_convert_error.py, test_placement.py,
test_multi_input_with_diff_device_or_placement.py and test_to_global_error.py (OneFlow's
python/oneflow/test/exceptions) and test_check_meta_consistency.py (modules), plus what OneFlow
checks with ``check_meta`` and mpiflow must too (issues #14, #18): ranks that pass different
placements, sbp, local shapes or dtypes to ``to_global`` get a clear error on every rank.

Where OneFlow raises ``RuntimeError``, mpiflow raises :class:`mpiflow.GlobalTensorError`, both a
``RuntimeError`` (what OneFlow's tests catch, and these ports too) and a ``ValueError`` (what
Python code checks for a bad value). The messages keep OneFlow's words where its tests look.
"""

from __future__ import annotations

import pytest
from oneflow_case import RANK, SIZE, exactly, on_every_rank

import mpiflow as flow
import mpiflow.tensors.conversion as layout_module

pytestmark = pytest.mark.mpi

ALL = flow.env.all_device_placement("cpu")


# -- test_local_global_convert_error.py --------------------------------------------------------
def test_get_sbp_with_invalid_axis() -> None:
    with pytest.raises(RuntimeError, match="split dim must be a non-negative int, got -1"):
        flow.sbp.split(-1)
    # expected difference: OneFlow caps split axes at 6; mpiflow has no such limit
    assert flow.sbp.split(7).dim == 7


def test_local_to_global_with_invalid_split_axis() -> None:
    x = flow.tensor([1, 2, 3, 4])
    with pytest.raises(RuntimeError, match=r"S\(1\) needs tensors with more than 1 dimensions"):
        x.to_global(placement=ALL, sbp=flow.sbp.split(1))


def test_global_to_global_with_invalid_split_axis() -> None:
    x = flow.tensor([1, 2, 3, 4], placement=ALL, sbp=flow.sbp.broadcast)
    with pytest.raises(RuntimeError, match="split"):
        x.to_global(sbp=flow.sbp.split(1))


def test_call_to_local_for_local_tensor() -> None:
    # expected difference: RuntimeError (OneFlow: AssertionError), the same message
    with pytest.raises(RuntimeError, match="Expected global tensor for to_local but got local "
                                           "tensor!"):
        flow.tensor([1, 2, 3, 4]).to_local()


@exactly(2)
def test_local_to_global_with_invalid_size() -> None:
    x = flow.Tensor(2, 4) if RANK == 0 else flow.Tensor(4, 4)
    with pytest.raises(RuntimeError, match="Sizes of tensors in dimension 0 must be same or match "
                                           "balanced split distribution"):
        x.to_global(placement=ALL, sbp=flow.sbp.split(0))
    with pytest.raises(RuntimeError, match=r"Sizes of tensors must match except in dimension 1\. "
                                           r"Expected size 2 but got size 4 for tensor on rank 1!"):
        x.to_global(placement=ALL, sbp=flow.sbp.split(1))


# -- test_placement.py ---------------------------------------------------------------------------
def test_placement_type() -> None:
    with pytest.raises(RuntimeError, match=r"placement type must be one of .* got 'xpu'"):
        flow.placement(type="xpu", ranks=[0])
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda device type at start of "
                                           "device string: xpu"):
        flow.device("xpu")


def test_placement_rank() -> None:
    with pytest.raises(RuntimeError, match="at least one rank"):
        flow.placement(type="cpu", ranks=[])
    # OneFlow raises when a tensor is made on it; mpiflow already when the placement is
    with pytest.raises(RuntimeError, match="not all ranks of the world"):
        placement = flow.placement(type="cpu", ranks=[1000])
        flow.empty(2, 3, placement=placement, sbp=flow.sbp.broadcast)


# -- test_multi_input_with_diff_device_or_placement.py --------------------------------------------
@exactly(2)
def test_multi_input_with_diff_placement() -> None:
    x = flow.tensor([1, 2, 3, 4], placement=flow.placement("cpu", [0]), sbp=flow.sbp.broadcast)
    y = flow.tensor([2, 4, 6, 8], placement=flow.placement("cpu", [1]), sbp=flow.sbp.broadcast)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same placement"):
        flow.add(x, y)


def test_multi_input_with_local_and_global() -> None:
    x = flow.tensor([1, 2, 3, 4])
    y = flow.tensor([2, 4, 6, 8], placement=ALL, sbp=flow.sbp.broadcast)
    with pytest.raises((ValueError, RuntimeError, TypeError)):
        flow.add(x, y)


# -- test_to_global_error.py: the removed consistent-era names are not there ----------------------
def test_removed_consistent_names() -> None:
    data = flow.rand(2, dtype=flow.float32)
    for name in ("to_consistent", "is_consistent"):
        with pytest.raises(AttributeError):
            getattr(data, name)
    with pytest.raises(AttributeError):
        flow.nn.Linear(1, 1).to_consistent  # noqa: B018


# -- test_check_meta_consistency.py ---------------------------------------------------------------
@pytest.mark.mpi(min_size=2)
def test_check_meta_consistency() -> None:
    # ranks outside the placement may hold anything
    x = (flow.ones((16, 16), dtype=flow.int32) if RANK == 0
         else flow.zeros((1,), dtype=flow.float32))
    placement = flow.placement("cpu", [0])
    y = x.to_global(placement=placement, sbp=(flow.sbp.broadcast,))
    y.check_meta_consistency()
    assert y.shape == (16, 16) and y.dtype == flow.int32
    y = y.to_global(sbp=flow.sbp.split(0))
    y.check_meta_consistency()


# -- what check_meta catches: ranks that disagree (issues #14, #18) -------------------------------
@pytest.mark.mpi(min_size=2)
def test_to_global_broadcast_with_different_local_shapes_is_an_error_on_every_rank() -> None:
    x = flow.zeros(2, 3) if RANK == 0 else flow.zeros(3, 3)
    with pytest.raises(ValueError, match=r"rank 1: \(3, 3\) \(expected \(2, 3\)\)"):
        x.to_global(ALL, flow.sbp.broadcast)


@pytest.mark.mpi(min_size=2)
def test_to_global_with_different_placements_is_an_error_on_every_rank() -> None:
    placement = flow.placement("cpu", [0]) if RANK == 0 else ALL
    with pytest.raises(ValueError, match="different placements"):
        flow.zeros(2).to_global(placement, flow.sbp.broadcast)


@pytest.mark.mpi(min_size=2)
def test_to_global_with_different_sbp_is_an_error_on_every_rank() -> None:
    sbp = flow.sbp.split(0) if RANK == 0 else flow.sbp.broadcast
    with pytest.raises(ValueError, match=r"different sbps(.|\n)*ranks \[0\]: .*sbp=\(S\(0\)\)"):
        flow.zeros(2).to_global(ALL, sbp)


@pytest.mark.mpi(min_size=2)
def test_to_global_with_different_dtypes_is_an_error_on_every_rank() -> None:
    x = flow.zeros(2, dtype=flow.float32 if RANK == 0 else flow.float64)
    with pytest.raises(ValueError, match="differ in dtype"):
        x.to_global(ALL, flow.sbp.split(0))


@pytest.mark.mpi(min_size=2)
def test_agreeing_ranks_after_an_error_still_work() -> None:
    with pytest.raises(ValueError):
        (flow.zeros(1) if RANK else flow.zeros(2)).to_global(ALL, flow.sbp.broadcast)
    g = flow.ones(2).to_global(ALL, flow.sbp.split(0))
    assert g.shape == (2 * SIZE,) and g.sum().item() == 2 * SIZE


@pytest.mark.mpi(min_size=2)
def test_debug_mode_checks_global_to_global(monkeypatch: pytest.MonkeyPatch) -> None:
    """MPIFLOW_DEBUG=1 (here switched on for this test on every rank): a redistribution with
    different targets is an error on every rank; by default it is not checked (it costs a
    collective on a path that may move no data: docs/troubleshooting.md)."""
    monkeypatch.setattr(layout_module, "_DEBUG", True)
    g = flow.zeros(4, placement=ALL, sbp=flow.sbp.broadcast)
    target = flow.sbp.split(0) if RANK == 0 else flow.sbp.broadcast
    with pytest.raises(ValueError, match="different sbps"):
        g.to_global(sbp=target)
    assert g.to_global(sbp=flow.sbp.split(0)).to_global(sbp=flow.sbp.broadcast).shape == (4,)
    # check_meta=False and a given shape are checked too in debug mode
    x = flow.zeros(1 if RANK else 2)
    with pytest.raises(ValueError):
        x.to_global(ALL, flow.sbp.broadcast, check_meta=False, shape=(2,))


@pytest.mark.mpi(min_size=2)
def test_mismatch_inside_on_every_rank_helper() -> None:
    """The ports' on_every_rank turns one rank's failure into every rank's."""
    def body() -> None:
        assert RANK != 1, "rank 1 fails"

    with pytest.raises(AssertionError):
        on_every_rank(body)
