"""Conv2d, MaxPool2d, AvgPool2d, BatchNorm2d, Dropout2d and their functional forms against
PyTorch: local, and global with a batch split over the ranks (``S(0)``, ``3 * size + 1``
samples) and broadcast parameters, where batch norm's statistics are those of the whole batch
(as ``SyncBatchNorm``)."""

from __future__ import annotations

from typing import Any

import numpy
import pytest
from numpy.testing import assert_allclose

import mpiflow as flow
import mpiflow.nn as nn
import mpiflow.nn.functional as F
from mpiflow.sbp import broadcast, split

torch = pytest.importorskip("torch")

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
ALL = flow.placement("cpu", list(range(SIZE)))
N = 3 * SIZE + 1


def values(*shape: int, seed: int) -> numpy.ndarray:
    return numpy.random.default_rng(seed).standard_normal(shape)


def copy_parameters(ours: nn.Module, theirs: Any) -> None:
    """Give the torch module our module's parameter values (float64)."""
    mine = dict(ours.named_parameters())
    with torch.no_grad():
        for name, p in theirs.named_parameters():
            p.copy_(torch.tensor(mine[name].numpy()))


def run_both(ours: nn.Module, theirs: Any, x: numpy.ndarray, global_: bool) -> None:
    """Forward and backward of both on ``x`` (with one cotangent); compare output, input and
    parameter gradients."""
    xt = torch.tensor(x, requires_grad=True)
    if global_:
        ours.to_global(ALL, broadcast)
        xm = flow.tensor(x, placement=ALL, sbp=split(0)).requires_grad_()
    else:
        xm = flow.tensor(x, requires_grad=True)
    out, want = ours(xm), theirs(xt)
    assert_allclose(out.numpy(), want.detach().numpy(), rtol=1e-9, atol=1e-9)
    cot = values(*want.shape, seed=9)
    out.backward(flow.tensor(cot, placement=ALL, sbp=split(0)) if global_ else flow.tensor(cot))
    want.backward(torch.tensor(cot))
    assert_allclose(xm.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-9)
    grads = {name: p.grad for name, p in theirs.named_parameters()}
    for name, p in ours.named_parameters():
        assert_allclose(p.grad.numpy(), grads[name].numpy(), rtol=1e-9, atol=1e-9,
                        err_msg=name)


def lenet() -> tuple[nn.Module, Any]:
    ours = nn.Sequential(nn.Conv2d(1, 4, 5, padding="same"), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(4, 6, 3, stride=2, dilation=1),
                         nn.AvgPool2d(2, ceil_mode=True), nn.Flatten(), nn.Linear(6, 3))
    tn = torch.nn
    theirs = tn.Sequential(tn.Conv2d(1, 4, 5, padding="same"), tn.BatchNorm2d(4), tn.ReLU(),
                           tn.MaxPool2d(2), tn.Conv2d(4, 6, 3, stride=2),
                           tn.AvgPool2d(2, ceil_mode=True), tn.Flatten(), tn.Linear(6, 3))
    ours.double()
    theirs.double()
    copy_parameters(ours, theirs)
    return ours, theirs


def test_a_small_convolutional_net_matches_torch() -> None:
    ours, theirs = lenet()
    run_both(ours, theirs, values(5, 1, 12, 12, seed=1), global_=False)
    assert_allclose(ours[1].running_var.numpy(), theirs[1].running_var.numpy(), rtol=1e-9)


@pytest.mark.mpi
def test_a_small_convolutional_net_on_a_split_batch_matches_torch_on_the_whole_batch() -> None:
    ours, theirs = lenet()
    run_both(ours, theirs, values(N, 1, 12, 12, seed=1), global_=True)
    bn = ours[1]
    assert bn.running_mean.sbp == (broadcast,)
    assert_allclose(bn.running_mean.numpy(), theirs[1].running_mean.numpy(), rtol=1e-9)
    assert_allclose(bn.running_var.numpy(), theirs[1].running_var.numpy(), rtol=1e-9)
    assert bn.num_batches_tracked.item() == 1


@pytest.mark.mpi
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_statistics_are_the_whole_batch_s(training: bool) -> None:
    ours, theirs = nn.BatchNorm2d(3, momentum=None).double(), torch.nn.BatchNorm2d(
        3, momentum=None).double()
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor([0.5, 2.0, -1.0]))
        theirs.bias.copy_(torch.tensor([0.1, 0.0, 3.0]))
    with flow.no_grad():
        ours.weight.copy_(flow.tensor([0.5, 2.0, -1.0]))
        ours.bias.copy_(flow.tensor([0.1, 0.0, 3.0]))
    x = values(N, 3, 4, 5, seed=2) * 3 + 1
    for _ in range(2):  # running statistics move (a cumulative average with momentum=None)
        ours.train()
        theirs.train()
        ours(flow.tensor(x, placement=ALL, sbp=split(0)) if ours.weight.is_global else
             flow.tensor(x))
        theirs(torch.tensor(x))
        ours.to_global(ALL, broadcast)
    ours.train(training)
    theirs.train(training)
    run_both(ours, theirs, values(N, 3, 4, 5, seed=3), global_=True)
    assert_allclose(ours.running_var.numpy(), theirs.running_var.numpy(), rtol=1e-9)


def test_batch_norm_1d_matches_torch() -> None:
    ours, theirs = nn.BatchNorm1d(4).double(), torch.nn.BatchNorm1d(4).double()
    run_both(ours, theirs, values(6, 4, 3, seed=4), global_=False)
    ours.eval()
    theirs.eval()
    run_both(ours, theirs, values(6, 4, seed=5), global_=False)


def test_grouped_conv2d_module_matches_torch() -> None:
    ours = nn.Conv2d(4, 6, (3, 2), padding=1, groups=2, bias=False).double()
    theirs = torch.nn.Conv2d(4, 6, (3, 2), padding=1, groups=2, bias=False).double()
    copy_parameters(ours, theirs)
    run_both(ours, theirs, values(2, 4, 6, 5, seed=6), global_=False)


def test_conv2d_initialization_is_torch_s_distribution() -> None:
    w = nn.Conv2d(8, 16, 3).weight.numpy()
    bound = 1 / numpy.sqrt(8 * 9)
    assert numpy.abs(w).max() <= bound and numpy.abs(w).max() > 0.9 * bound


def test_dropout2d_drops_whole_channels_and_scales_the_rest() -> None:
    out = F.dropout2d(flow.ones(8, 16, 3, 3), p=0.5).numpy()
    per_channel = out.reshape(8, 16, 9)
    assert ((per_channel == 0).all(-1) | (per_channel == 2).all(-1)).all()
    assert 0 < (per_channel[..., 0] == 0).sum() < 8 * 16
    assert nn.Dropout2d(0.5).eval()(flow.ones(2, 3, 1, 1)).numpy().min() == 1.0


@pytest.mark.mpi
def test_dropout2d_on_a_split_batch_drops_whole_channels() -> None:
    x = flow.ones(N, 4, 2, 2, placement=ALL, sbp=split(0))
    out = F.dropout2d(x, p=0.5)
    assert out.sbp == (split(0),)
    whole = out.numpy().reshape(N, 4, 4)
    assert ((whole == 0).all(-1) | (whole == 2).all(-1)).all()


def test_functional_forms_are_the_ops() -> None:
    assert F.conv2d is flow.conv2d and F.max_pool2d is flow.max_pool2d
    assert F.avg_pool2d is flow.avg_pool2d


@pytest.mark.parametrize(("make", "match"), [
    (lambda: nn.Conv2d(3, 4, 3, groups=2), "divisible by groups"),
    (lambda: nn.Conv2d(3, 4, 3, padding_mode="reflect"), "padding_mode"),
    (lambda: nn.MaxPool2d(2, return_indices=True), "return_indices"),
    (lambda: nn.BatchNorm2d(3)(flow.ones(2, 3)), "expected 4D input"),
    (lambda: nn.BatchNorm2d(3)(flow.ones(1, 3, 1, 1)), "more than 1 value per channel"),
    (lambda: F.batch_norm(flow.ones(2, 3), None, None), "running_mean"),
    (lambda: F.dropout2d(flow.ones(2, 3), 0.5), "3-D or 4-D"),
    (lambda: F.dropout2d(flow.ones(2, 3, 1, 1), 1.5), "between 0 and 1"),
])
def test_bad_arguments_raise_clear_errors(make: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make()
