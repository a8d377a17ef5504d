"""OneFlow's test_global_cast.py (modules): ``flow.to_global``/``flow.to_local`` of tensors and
of whole structures (lists, tuples, dicts, state dicts), for each of its three sbp, on
placement [0, 1]; and its ``nn.Graph`` half: a graph's ``state_dict()`` of a local model made
global, and of a global model made local."""

from __future__ import annotations

from typing import Any

import pytest

import mpiflow as flow
from mpiflow import nn

pytestmark = pytest.mark.mpi(min_size=2)

SBPS = [(flow.sbp.broadcast,), (flow.sbp.split(0),), (flow.sbp.partial_sum,)]


def _placement() -> Any:
    return flow.placement("cpu", ranks=[0, 1])


def _tensors(value: Any) -> list[flow.Tensor]:
    if isinstance(value, flow.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _all_global(value: Any, placement: Any, sbp: Any) -> None:
    for t in _tensors(value):
        assert t.is_global
        assert t.placement.type == placement.type
        assert list(t.placement.ranks) == list(placement.ranks)
        assert t.sbp == sbp


def _all_local(value: Any) -> None:
    assert all(not t.is_global for t in _tensors(value))


@pytest.mark.parametrize("sbp", SBPS, ids=str)
def test_any_input(sbp: Any) -> None:
    p = _placement()
    tensor = flow.zeros((3, 4))
    tensor_list = [flow.tensor([1, 2, 3]), flow.randn((2, 3, 4))]
    tensor_tuple = (flow.zeros((2, 2)), flow.ones((2, 3)), flow.randn((3, 5)))
    tensor_dict = {"tensor": tensor, "tensor_lt": tensor_list}
    mixed = [None, 1, "test_str", tensor, tensor_list, tensor_tuple, tensor_dict]
    inputs = [None, 100, "test_str", tensor, tensor_list, tensor_tuple, tensor_dict, mixed]
    global_inputs = []
    for i in inputs:
        ret = flow.to_global(i, placement=p, sbp=sbp)
        _all_global(ret, p, sbp)
        global_inputs.append(ret)
    assert global_inputs[1] == 100 and global_inputs[2] == "test_str"
    for i in global_inputs:
        _all_local(flow.to_local(i))


@pytest.mark.parametrize("sbp", SBPS, ids=str)
def test_tensor_to_global(sbp: Any) -> None:
    p = _placement()
    local_tensor = flow.ones((3, 4))
    global_tensor = flow.to_global(local_tensor, placement=p, sbp=sbp)
    assert global_tensor.is_global
    global_tensor = flow.to_global(global_tensor, placement=p, sbp=sbp)
    assert global_tensor.is_global
    with pytest.raises(ValueError):
        flow.to_global(local_tensor, placement=None, sbp=None)
    with pytest.raises(TypeError):
        flow.to_global(local_tensor, placement=p, sbp=(sbp, 0))


@pytest.mark.parametrize("sbp", SBPS, ids=str)
def test_tensor_to_local(sbp: Any) -> None:
    global_tensor = flow.ones((3, 4), placement=_placement(), sbp=sbp)
    assert not flow.to_local(global_tensor).is_global


@pytest.mark.parametrize("sbp", SBPS, ids=str)
def test_eager_state_dict(sbp: Any) -> None:
    p = _placement()
    model = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 2))
    global_state_dict = flow.to_global(model.state_dict(), placement=p, sbp=sbp)
    _all_global(global_state_dict, p, sbp)
    global_state_dict = flow.to_global(global_state_dict, placement=p, sbp=sbp)
    _all_global(global_state_dict, p, sbp)
    global_model = model.to_global(placement=p, sbp=sbp)
    local_state_dict = flow.to_local(global_model.state_dict())
    _all_local(local_state_dict)
    with pytest.warns(UserWarning, match="already local"):
        flow.to_local(local_state_dict)


# -- the nn.Graph half: a graph's state dict, of a local and of a global model --------------------
class _GraphModel(nn.Graph):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def build(self, x: flow.Tensor) -> flow.Tensor:
        return self.model(x)


def _state_dict_to_global(local_state_dict: Any, p: Any, sbp: Any) -> None:
    global_state_dict = flow.to_global(local_state_dict, placement=p, sbp=sbp)
    _all_global(global_state_dict, p, sbp)
    global_state_dict = flow.to_global(global_state_dict, placement=p, sbp=sbp)
    _all_global(global_state_dict, p, sbp)


@pytest.mark.parametrize("sbp", SBPS, ids=str)
def test_graph_state_dict(sbp: Any) -> None:
    p = _placement()
    model = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 2))
    local_graph_model = _GraphModel(model)
    _state_dict_to_global(local_graph_model.state_dict(), p, sbp)
    assert len(_tensors(local_graph_model.state_dict())) == 4
    global_graph_model = _GraphModel(model.to_global(placement=p, sbp=sbp))
    global_state_dict = global_graph_model.state_dict()
    _all_global(global_state_dict, p, sbp)
    local_state_dict = flow.to_local(global_state_dict)
    _all_local(local_state_dict)
    assert len(_tensors(local_state_dict)) == 4
    with pytest.warns(UserWarning, match="already local"):
        flow.to_local(local_state_dict)
