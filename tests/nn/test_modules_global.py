"""Modules on global tensors: ``Module.to_global``, data- and model-parallel MLPs that compute the
same loss and gradients as one process, and state dicts across layouts."""

from __future__ import annotations

import copy

import numpy
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import mpiflow as flow
import mpiflow.nn as nn
from mpiflow.autograd import no_grad

pytestmark = pytest.mark.mpi

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
ALL = flow.placement("cpu", list(range(SIZE)))
S0, S1, B = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.broadcast
HIDDEN = 2 * SIZE + 1  # uneven splits of the hidden features


def data(*shape: int, seed: int = 0) -> numpy.ndarray:
    return numpy.random.default_rng(seed).standard_normal(shape).astype(numpy.float32)


def labels(n: int, classes: int, seed: int = 1) -> numpy.ndarray:
    return numpy.random.default_rng(seed).integers(0, classes, n)


def mlp(dropout: float = 0.0) -> nn.Sequential:
    flow.manual_seed(0)
    return nn.Sequential(nn.Linear(6, HIDDEN), nn.GELU(), nn.Dropout(dropout),
                         nn.Linear(HIDDEN, 3))


def reference(net: nn.Module, x: numpy.ndarray, y: numpy.ndarray, seed: int = 5
              ) -> tuple[float, list[numpy.ndarray]]:
    """Loss and gradients of a local copy on the whole batch (every rank computes it)."""
    local = copy.deepcopy(net)
    flow.manual_seed(seed)
    loss = nn.CrossEntropyLoss()(local(flow.tensor(x)), flow.tensor(y))
    loss.backward()
    return loss.item(), [p.grad.numpy() for p in local.parameters()]


def test_to_global_keeps_parameters_as_the_same_leaves() -> None:
    net = mlp()
    params = list(net.parameters())
    values = [p.numpy().copy() for p in params]
    assert net.to_global(ALL, B) is net
    for p, value in zip(net.parameters(), values):
        assert isinstance(p, nn.Parameter) and p.is_leaf and p.requires_grad
        assert p.is_global and p.placement == ALL and p.sbp == (B,)
        assert_array_equal(p.numpy(), value)
    assert [id(p) for p in net.parameters()] == [id(p) for p in params]
    net.to_global(sbp=lambda name, t: S0 if name == "0.weight" else None)
    assert net[0].weight.sbp == (S0,) and net[0].bias.sbp == (B,)
    assert_array_equal(net[0].weight.numpy(), values[0])
    with pytest.raises(ValueError, match="needs a placement and an sbp"):
        mlp().to_global(sbp=B)


def test_to_global_takes_local_tensors_as_tensor_to_global_does() -> None:
    layer = nn.Linear(2, 3)
    with no_grad():
        layer.weight.fill_(float(RANK))  # ranks disagree
        layer.bias.fill_(float(RANK))
    layer(flow.ones(1, 2)).sum().backward()
    loss = nn.CrossEntropyLoss(weight=flow.tensor([1.0, 2.0, 3.0]))
    layer.to_global(ALL, lambda name, t: S0 if name == "weight" else B)
    loss.to_global(ALL, B)
    # S(0): each rank's tensor is its shard; B: rank 0's value wins
    assert layer.weight.shape == (3 * SIZE, 2)
    assert_array_equal(layer.weight.numpy(), numpy.repeat(numpy.arange(SIZE), 3)[:, None]
                       * numpy.ones((1, 2)))
    assert_array_equal(layer.bias.numpy(), numpy.zeros(3))
    assert layer.weight.grad is not None and layer.weight.grad.sbp == (S0,)
    assert_array_equal(layer.weight.grad.numpy(), numpy.ones((3 * SIZE, 2)))
    assert loss.weight.is_global and loss.weight.tolist() == [1.0, 2.0, 3.0]


def test_data_parallel_mlp_matches_one_process() -> None:
    n = 3 * SIZE + 1
    x, y = data(n, 6), labels(n, 3)
    net = mlp(dropout=0.25)
    want_loss, want_grads = reference(net, x, y)
    net.to_global(ALL, B)
    flow.manual_seed(5)  # the same dropout mask: the counter-based generator ignores layouts
    loss = nn.CrossEntropyLoss()(net(flow.tensor(x, placement=ALL, sbp=S0)),
                                 flow.tensor(y, placement=ALL, sbp=S0))
    assert loss.is_global and loss.shape == ()
    loss.backward()
    assert_allclose(loss.item(), want_loss, rtol=1e-5)
    for p, want in zip(net.parameters(), want_grads):
        assert p.grad.sbp == (B,)  # partial sums of the batch, all-reduced
        assert_allclose(p.grad.numpy(), want, rtol=1e-4, atol=1e-6)


MODEL_PARALLEL = {"0.weight": S0, "0.bias": S0, "3.weight": S1, "3.bias": B}


def test_model_parallel_mlp_matches_one_process() -> None:
    n = 2 * SIZE + 3
    x, y = data(n, 6, seed=2), labels(n, 3, seed=3)
    net = mlp()
    want_loss, want_grads = reference(net, x, y)
    net.to_global(ALL, B).to_global(sbp=lambda name, t: MODEL_PARALLEL[name])
    assert net[0].weight.sbp == (S0,) and net[3].weight.sbp == (S1,)
    loss = nn.CrossEntropyLoss()(net(flow.tensor(x, placement=ALL, sbp=B)),
                                 flow.tensor(y, placement=ALL, sbp=B))
    loss.backward()
    assert_allclose(loss.item(), want_loss, rtol=1e-5)
    for (name, p), want in zip(net.named_parameters(), want_grads):
        assert p.grad.sbp == (MODEL_PARALLEL[name],), name
        assert_allclose(p.grad.numpy(), want, rtol=1e-4, atol=1e-6, err_msg=name)


@pytest.mark.mpi(min_size=4)
def test_two_dimensional_mesh_data_and_model_parallel() -> None:
    mesh = flow.placement("cpu", [[0, 1], [2, 3]])
    x, y = data(6, 6, seed=4), labels(6, 3, seed=5)
    net = mlp()
    want_loss, want_grads = reference(net, x, y)
    layouts = {"0.weight": (B, S0), "0.bias": (B, S0), "3.weight": (B, S1), "3.bias": (B, B)}
    net.to_global(mesh, (B, B)).to_global(sbp=lambda name, t: layouts[name])
    loss = nn.CrossEntropyLoss()(net(flow.tensor(x, placement=mesh, sbp=(S0, B))),
                                 flow.tensor(y, placement=mesh, sbp=(S0, B)))
    loss.backward()
    assert_allclose(loss.item(), want_loss, rtol=1e-5)
    for (name, p), want in zip(net.named_parameters(), want_grads):
        assert p.grad.sbp == layouts[name]
        assert_allclose(p.grad.numpy(), want, rtol=1e-4, atol=1e-6, err_msg=name)


def test_state_dicts_across_layouts() -> None:
    full = {k: v.numpy().copy() for k, v in mlp().state_dict().items()}
    full = {k: v + 1.0 for k, v in full.items()}
    split = mlp().to_global(ALL, B).to_global(sbp=lambda name, t: MODEL_PARALLEL[name])
    split.load_state_dict(full)  # local values: the whole value, each rank keeps its shard
    for key, value in split.state_dict().items():
        assert value.is_global
        assert_array_equal(value.numpy(), full[key], err_msg=key)
    rows = split[0].weight.to_local().numpy()
    start = sum(min(1, i < HIDDEN % SIZE) + HIDDEN // SIZE for i in range(RANK))
    assert_array_equal(rows, full["0.weight"][start:start + rows.shape[0]])
    broadcast = mlp().to_global(ALL, B)
    broadcast.load_state_dict(split.state_dict())  # global values: redistributed
    assert broadcast[0].weight.sbp == (B,)
    assert_array_equal(broadcast[0].weight.to_local().numpy(), full["0.weight"])
    local = mlp()
    local.load_state_dict(split.state_dict())  # global values into a local module: gathered
    assert local[3].weight.is_local
    assert_array_equal(local[3].weight.numpy(), full["3.weight"])
    bad = dict(split.state_dict())
    bad["3.bias"] = flow.zeros(4, placement=ALL, sbp=B)
    with pytest.raises(RuntimeError, match=r"size mismatch for 3\.bias"):
        split.load_state_dict(bad)


@pytest.mark.parametrize("table", [B, S1])
def test_embedding_keeps_a_split_batch_split_and_matches_one_process(table: object) -> None:
    n = 2 * SIZE + 1
    rng = numpy.random.default_rng(6)
    idx, y = rng.integers(0, 7, (n, 2)), labels(n, 3, seed=7)
    idx[0] = [3, 3]  # repeated indices accumulate
    idx[1, 0] = 0  # the padding row gets no gradient
    flow.manual_seed(1)
    net = nn.Sequential(nn.Embedding(7, HIDDEN, padding_idx=0), nn.Flatten(),
                        nn.Linear(2 * HIDDEN, 3))
    want_loss, want_grads = reference(net, idx, y)
    assert (want_grads[0][0] == 0).all()
    net.to_global(ALL, B).to_global(sbp=lambda name, t: table if name == "0.weight" else B)
    xg = flow.tensor(idx, placement=ALL, sbp=B if table == S1 else S0)
    rows = net[0](xg)
    assert rows.sbp == ((S0,) if table == B else (flow.sbp.split(2),))  # no gather
    loss = nn.CrossEntropyLoss()(net(xg), flow.tensor(y, placement=ALL, sbp=S0))
    loss.backward()
    assert_allclose(loss.item(), want_loss, rtol=1e-5)
    assert net[0].weight.grad.sbp == (table,)
    for p, want in zip(net.parameters(), want_grads):
        assert_allclose(p.grad.numpy(), want, rtol=1e-4, atol=1e-6)
