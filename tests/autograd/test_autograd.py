"""The autograd graph of mpiflow.autograd.graph: recording, grad mode, backward, hooks, in place.

The values are small and exact; every rank runs every test (the global ones collectively).
"""

from __future__ import annotations

import numpy
import pytest
from numpy.testing import assert_allclose

import mpiflow as flow

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
ALL = flow.placement("cpu", list(range(SIZE)))
S0, B = flow.sbp.split(0), flow.sbp.broadcast
ODD = 3 * SIZE + 1


def leaf(*values: float) -> flow.Tensor:
    return flow.tensor(list(values), requires_grad=True)


# -- recording -------------------------------------------------------------------------------
def test_requires_grad_propagates() -> None:
    x, c = leaf(1.0, 2.0), flow.tensor([3.0, 4.0])
    assert x.is_leaf and x.grad_fn is None
    y = x * c
    assert y.requires_grad and not y.is_leaf and repr(y.grad_fn) == "<MulBackward>"
    assert not (c * c).requires_grad
    assert (c + y).requires_grad
    assert "grad_fn=<AddBackward>" in repr(c + y)


def test_detach_shares_data_and_stops_gradients() -> None:
    x = leaf(1.0, 2.0)
    d = (x * 2).detach()
    assert not d.requires_grad and d.grad_fn is None
    y = x * 3
    z = y.detach()
    z._data[0] = 100.0  # the same memory
    assert y.tolist()[0] == 100.0
    (x * d).sum().backward()  # d is a constant
    assert x.grad.tolist() == [2.0, 4.0]


def test_requires_grad_off_only_on_leaves() -> None:
    x = leaf(1.0)
    with pytest.raises(RuntimeError, match="leaf"):
        (x * 2).requires_grad_(False)
    assert not x.requires_grad_(False).requires_grad


# -- backward ----------------------------------------------------------------------------------
def test_used_twice_and_diamond() -> None:
    x = leaf(1.0, 2.0, 3.0)
    y = x * 2
    (y + y * y).sum().backward()  # d/dx (2x + 4x^2) = 2 + 8x
    assert x.grad.tolist() == [10.0, 18.0, 26.0]


def test_accumulates_over_two_backward_calls() -> None:
    x = leaf(1.0, 2.0)
    (x * x).sum().backward()
    (x * 3).sum().backward()
    assert x.grad.tolist() == [5.0, 7.0]
    x.grad = None
    (x * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_retain_graph_and_second_backward_error() -> None:
    x = leaf(1.0, 2.0)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [4.0, 8.0]
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_explicit_gradient() -> None:
    x = leaf(1.0, 2.0, 3.0)
    (x * 2).backward(flow.tensor([1.0, 0.5, -1.0]))
    assert x.grad.tolist() == [2.0, 1.0, -2.0]


def test_backward_errors() -> None:
    x = leaf(1.0, 2.0)
    with pytest.raises(RuntimeError, match="only for scalar outputs"):
        (x * 2).backward()
    with pytest.raises(RuntimeError, match="gradient has shape"):
        (x * 2).backward(flow.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(RuntimeError, match="does not require grad"):
        flow.tensor([1.0]).sum().backward()


def test_backward_on_a_leaf() -> None:
    x = flow.tensor(2.0, requires_grad=True)
    x.backward()
    assert x.grad.item() == 1.0


@pytest.mark.mpi
def test_global_explicit_gradient_and_accumulation() -> None:
    full = numpy.arange(ODD * 2, dtype=numpy.float64).reshape(ODD, 2)
    x = flow.tensor(full, placement=ALL, sbp=S0, requires_grad=True)
    gradient = flow.tensor(numpy.ones((ODD, 2)), placement=ALL, sbp=B)
    (x * 3).backward(gradient)
    (x * x).sum().backward()
    assert x.grad.placement == ALL and x.grad.sbp == (S0,)
    assert_allclose(x.grad.numpy(), 3.0 + 2 * full)


# -- grad mode -------------------------------------------------------------------------------
def test_no_grad_and_enable_grad_as_context_managers() -> None:
    x = leaf(1.0)
    with flow.no_grad():
        assert not flow.is_grad_enabled()
        assert not (x * 2).requires_grad
        with flow.enable_grad():
            assert (x * 2).requires_grad
        assert not (x * 2).requires_grad
    assert flow.is_grad_enabled()
    with pytest.raises(ValueError), flow.no_grad():
        raise ValueError("left by an exception")
    assert flow.is_grad_enabled()


def test_grad_mode_decorators() -> None:
    x = leaf(1.0)

    @flow.no_grad()
    def frozen(t: flow.Tensor) -> flow.Tensor:
        return t * 2

    @flow.enable_grad()
    def recorded(t: flow.Tensor) -> flow.Tensor:
        return t * 2

    @flow.set_grad_enabled(False)
    def off(t: flow.Tensor) -> flow.Tensor:
        return t * 2

    assert flow.is_grad_enabled()  # decorating changes nothing yet
    assert not frozen(x).requires_grad and not off(x).requires_grad
    with flow.no_grad():
        assert recorded(x).requires_grad
    assert frozen.__name__ == "frozen"


def test_set_grad_enabled() -> None:
    x = leaf(1.0)
    with flow.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert (x * 2).requires_grad
    flow.set_grad_enabled(False)  # as a call it switches the mode
    try:
        assert not flow.is_grad_enabled()
    finally:
        flow.set_grad_enabled(True)
    assert flow.is_grad_enabled()


# -- hooks -----------------------------------------------------------------------------------
def test_register_hook_replaces_the_gradient() -> None:
    x = leaf(1.0, 2.0)
    seen = []
    handle = x.register_hook(lambda g: g * 10)
    x.register_hook(lambda g: seen.append(g.tolist()))  # returns None: keeps the gradient
    (x * 3).sum().backward()
    assert x.grad.tolist() == [30.0, 30.0] and seen == [[30.0, 30.0]]
    handle.remove()
    x.grad = None
    (x * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_hook_on_a_non_leaf_changes_what_flows_on() -> None:
    x = leaf(1.0, 2.0)
    y = x * 2
    y.register_hook(lambda g: g + 1)
    (y * 3).sum().backward()  # dL/dy = 3 -> 4; dL/dx = 4 * 2
    assert x.grad.tolist() == [8.0, 8.0]
    with pytest.raises(RuntimeError, match="doesn't require grad"):
        flow.tensor([1.0]).register_hook(lambda g: g)


def test_post_accumulate_grad_hooks_run_after_accumulation_in_order() -> None:
    x = leaf(1.0, 2.0)
    events: list[object] = []
    x.register_hook(lambda g: events.append(("hook", x.grad)))
    x.register_post_accumulate_grad_hook(lambda t: events.append(("post1", t.grad.tolist())))
    x.register_post_accumulate_grad_hook(lambda t: events.append(("post2", t.grad.tolist())))
    (x * x).sum().backward()  # x is used twice: one accumulation of the summed gradient
    assert events == [("hook", None), ("post1", [2.0, 4.0]), ("post2", [2.0, 4.0])]
    with pytest.raises(RuntimeError, match="leaves"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)


# -- in place ------------------------------------------------------------------------------
def test_in_place_on_a_leaf_that_requires_grad() -> None:
    x = leaf(1.0, 2.0)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        x += 1
    with pytest.raises(RuntimeError, match="leaf Variable"):
        x.zero_()
    with flow.no_grad():
        x += 1
    assert x.tolist() == [2.0, 3.0] and x.is_leaf


def test_in_place_on_a_non_leaf() -> None:
    a, y = leaf(1.0, 2.0), leaf(5.0, 7.0)
    w = flow.tensor([1.0, 3.0])
    x = a * 2
    x += y
    assert x.tolist() == [7.0, 11.0] and repr(x.grad_fn) == "<AddBackward>"
    x *= x  # the old x (a snapshot) on both sides
    (x * w).sum().backward()
    # x = (2a + y)^2: d/da = 4(2a + y) w, d/dy = 2(2a + y) w
    assert a.grad.tolist() == [28.0, 132.0]
    assert y.grad.tolist() == [14.0, 66.0]


def test_in_place_on_a_constant_with_a_tracked_value() -> None:
    c = flow.zeros(2)
    y = leaf(1.0, 2.0)
    c += y * y
    assert c.requires_grad
    c.sum().backward()
    assert y.grad.tolist() == [2.0, 4.0]


def test_version_mismatch_when_a_saved_input_is_modified() -> None:
    a = leaf(1.0, 2.0)
    y = a * 1
    z = y * y  # saves y
    y += 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()
    c = flow.tensor([1.0, 2.0])
    z = a * c
    c.add_(1)  # a constant that a gradient needs
    with pytest.raises(RuntimeError, match="expected version 0"):
        z.sum().backward()


def test_views_share_the_version_counter_of_their_base() -> None:
    a = flow.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x = a * 1
    z = (x * x).sum()
    view = x.reshape(3)
    assert view._version == x._version
    with pytest.raises(RuntimeError, match="view"):
        view += 10  # would silently corrupt x's gradient otherwise
    with flow.no_grad():
        x.reshape(3).add_(10)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()


def test_in_place_on_an_output_keeps_the_value_its_rule_needs() -> None:
    a = flow.tensor([0.5, 1.0], requires_grad=True)
    y = a.exp()
    y += 1  # exp's gradient uses exp's output: it must not see the +1
    y.sum().backward()
    numpy.testing.assert_allclose(a.grad.numpy(), numpy.exp([0.5, 1.0]), rtol=1e-6)
