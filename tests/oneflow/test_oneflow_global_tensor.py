"""OneFlow's tensor/test_global_tensor.py, run on mpiflow (1-rank checks on rank 0's
placement, so they run at every world size; the 2- and 4-rank ones at those sizes).

Covers the legacy ``flow.Tensor`` constructor making global tensors, ``x.data = y``,
autograd on global tensors with ``retain_grad``, 2-D sbp parameter init and ``copy_`` across
placements and from numpy.
"""

from __future__ import annotations

import numpy
import pytest
from oneflow_case import exactly

import mpiflow as flow

pytestmark = pytest.mark.mpi

PLACEMENT = flow.placement("cpu", [0])


def test_creating_global_tensor() -> None:
    sbp = flow.sbp.broadcast
    shape = (2, 3)
    x = flow.Tensor(*shape, placement=PLACEMENT, sbp=sbp)
    assert x.is_global and x.size() == shape
    size = flow.Size((2, 3))
    x = flow.Tensor(size, placement=PLACEMENT, sbp=sbp)
    assert x.is_global and x.size() == size
    x = flow.Tensor(*size, device="cpu")  # local -> global
    assert x.is_local
    y = flow.Tensor(x, placement=PLACEMENT, sbp=sbp)
    assert y.is_global
    z = flow.Tensor(y, placement=PLACEMENT, sbp=sbp)  # global -> global
    assert z.is_global


def test_construct_local_from_global_tensor() -> None:
    x = flow.Tensor(2, 3, placement=PLACEMENT, sbp=flow.sbp.broadcast)
    assert x.is_global
    assert flow.Tensor(x, device="cpu").is_local


def test_global_set_data() -> None:
    x = flow.ones(2, 3, placement=PLACEMENT, sbp=flow.sbp.broadcast)
    y = flow.ones(4, 5, placement=PLACEMENT, sbp=flow.sbp.split(0))
    old_id = id(x)
    x.data = y
    assert id(x) == old_id
    assert x.shape == (4, 5) and x.placement == PLACEMENT and x.sbp[0] == flow.sbp.split(0)


def test_global_tensor_autograd_related_methods() -> None:
    sbp = flow.sbp.split(0)
    shape = (2, 3, 4, 5)
    l_x = flow.Tensor(*shape)
    assert not l_x.requires_grad and l_x.is_leaf
    l_y = flow.Tensor(*shape)
    l_y.requires_grad = True
    assert l_y.requires_grad and l_y.is_leaf
    x = l_x.to_global(placement=PLACEMENT, sbp=sbp)
    assert x.is_leaf
    y = l_y.to_global(placement=PLACEMENT, sbp=sbp)
    assert not y.is_leaf
    z = x + y
    assert z.requires_grad and not z.is_leaf
    with flow.no_grad():
        m = x + y
    assert m.is_leaf and not m.requires_grad
    l_v = flow.Tensor(*shape)
    l_v.requires_grad = True
    v = l_v.to_global(placement=PLACEMENT, sbp=sbp)
    z.retain_grad()
    w = v + z
    grad = flow.ones(*shape).to_global(placement=PLACEMENT, sbp=sbp)
    w.backward(gradient=grad)
    if flow.env.get_rank() == 0:
        numpy.testing.assert_allclose(l_v.grad.numpy(), numpy.ones(shape), atol=1e-4)
        numpy.testing.assert_allclose(l_y.grad.numpy(), numpy.ones(shape), atol=1e-4)
    numpy.testing.assert_allclose(z.grad.to_global(sbp=flow.sbp.broadcast).numpy(),
                                  numpy.ones(shape), atol=1e-4)
    assert l_x.grad is None


@exactly(4)
def test_global_tensor_2d_sbp_init() -> None:
    mesh = flow.placement("cpu", [[0, 1], [2, 3]])
    wte = flow.nn.Parameter(flow.empty((10, 4), dtype=flow.float32, placement=mesh,
                                       sbp=[flow.sbp.broadcast, flow.sbp.split(0)]))
    wpe = flow.nn.Parameter(flow.empty((6, 4), dtype=flow.float32, placement=mesh,
                                       sbp=[flow.sbp.broadcast, flow.sbp.broadcast]))
    flow.nn.init.normal_(wte, std=0.02)
    flow.nn.init.normal_(wpe, std=0.02)
    assert abs(float(wte.numpy().std()) - 0.02) < 0.015


@exactly(2)
def test_copy() -> None:
    x, y = flow.zeros(2, 3), flow.ones(2, 3)
    x.copy_(y)
    numpy.testing.assert_array_equal(x.numpy(), y.numpy())
    both, first = flow.placement("cpu", [0, 1]), flow.placement("cpu", [0])
    B, S0 = flow.sbp.broadcast, flow.sbp.split(0)
    for x_layout, y_layout in [((both, B), (first, B)), ((both, S0), (both, B)),
                               ((both, B), (both, B))]:
        x = flow.zeros(4, 6, placement=x_layout[0], sbp=x_layout[1])
        y = flow.ones(4, 6, placement=y_layout[0], sbp=y_layout[1])
        x.copy_(y)
        numpy.testing.assert_array_equal(x.numpy(), y.numpy())
    x = flow.zeros(4, 6, placement=both, sbp=B)
    ones = numpy.ones((4, 6), dtype=numpy.float32)
    x.copy_(ones)
    numpy.testing.assert_array_equal(x.numpy(), ones)
