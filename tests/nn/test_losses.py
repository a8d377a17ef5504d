"""mpiflow.nn losses and their functional forms against numpy formulas (every reduction,
ignore_index, class weights, label smoothing, pos_weight), their gradients, and global batches."""

from __future__ import annotations

import numpy
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import mpiflow as flow
import mpiflow.nn as nn
import mpiflow.nn.functional as F

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
ALL = flow.placement("cpu", list(range(SIZE)))
S0, B = flow.sbp.split(0), flow.sbp.broadcast
REDUCTIONS = ("none", "mean", "sum")


def data(*shape: int, seed: int = 0) -> numpy.ndarray:
    return numpy.random.default_rng(seed).standard_normal(shape)


def reduce(loss: numpy.ndarray, reduction: str) -> numpy.ndarray:
    return {"none": loss, "mean": loss.mean(), "sum": loss.sum()}[reduction]


def np_log_softmax(x: numpy.ndarray) -> numpy.ndarray:
    shifted = x - x.max(1, keepdims=True)
    return shifted - numpy.log(numpy.exp(shifted).sum(1, keepdims=True))


def np_nll(logp: numpy.ndarray, target: numpy.ndarray, weight: numpy.ndarray | None,
           ignore: int, reduction: str, smoothing: float = 0.0) -> numpy.ndarray:
    """PyTorch's nll_loss / cross_entropy formulas, with a loop over elements."""
    classes = logp.shape[1]
    w = numpy.ones(classes) if weight is None else weight
    moved = numpy.moveaxis(logp, 1, -1)  # (N, d..., C)
    loss = numpy.zeros(target.shape)
    chosen = numpy.zeros(target.shape)
    smooth = numpy.zeros(target.shape)
    for pos in numpy.ndindex(target.shape):
        t = target[pos]
        if t == ignore:
            continue
        loss[pos] = -w[t] * moved[pos][t]
        chosen[pos] = w[t]
        smooth[pos] = -(moved[pos] * w).sum()
    loss = (1 - smoothing) * loss + smoothing / classes * smooth
    if reduction == "mean":
        return loss.sum() / chosen.sum()
    return loss.sum() if reduction == "sum" else loss


def test_mse_and_l1_losses() -> None:
    x, y = data(4, 3), data(4, 3, seed=1)
    for reduction in REDUCTIONS:
        got = nn.MSELoss(reduction=reduction)(flow.tensor(x), flow.tensor(y))
        assert_allclose(got.numpy(), reduce((x - y) ** 2, reduction), rtol=1e-6)
        got = F.l1_loss(flow.tensor(x), flow.tensor(y), reduction=reduction)
        assert_allclose(got.numpy(), reduce(numpy.abs(x - y), reduction), rtol=1e-6)
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        nn.MSELoss(reduction="avg")
    xt = flow.tensor(x, requires_grad=True)
    F.mse_loss(xt, flow.tensor(y)).backward()
    assert_allclose(xt.grad.numpy(), 2 * (x - y) / x.size, rtol=1e-6)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_and_nll_with_weights_and_ignore_index(reduction: str) -> None:
    x = data(7, 4)
    target = numpy.array([0, 3, -100, 1, 3, 2, -100])
    weight = numpy.array([0.5, 1.0, 2.0, 1.5])
    logp = np_log_softmax(x)
    for w in (None, weight):
        wt = None if w is None else flow.tensor(w)
        got = nn.CrossEntropyLoss(weight=wt, reduction=reduction)(flow.tensor(x),
                                                                  flow.tensor(target))
        assert_allclose(got.numpy(), np_nll(logp, target, w, -100, reduction), rtol=1e-10)
        got = F.nll_loss(flow.tensor(logp), flow.tensor(target), wt, reduction=reduction)
        assert_allclose(got.numpy(), np_nll(logp, target, w, -100, reduction), rtol=1e-10)
    inside = numpy.array([0, 3, 1, 1, 3, 2, 1])  # an ignore_index that is a class
    got = nn.NLLLoss(weight=flow.tensor(weight), ignore_index=1,
                     reduction=reduction)(flow.tensor(logp), flow.tensor(inside))
    assert_allclose(got.numpy(), np_nll(logp, inside, weight, 1, reduction), rtol=1e-10)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_label_smoothing_and_spatial_inputs(reduction: str) -> None:
    x = data(3, 5, 2, 2, seed=2)
    target = numpy.random.default_rng(3).integers(0, 5, (3, 2, 2))
    target[0, 1, 0] = -100
    weight = numpy.linspace(0.5, 1.5, 5)
    logp = np_log_softmax(x)
    for w in (None, weight):
        got = F.cross_entropy(flow.tensor(x), flow.tensor(target),
                              None if w is None else flow.tensor(w), reduction=reduction,
                              label_smoothing=0.2)
        assert_allclose(got.numpy(), np_nll(logp, target, w, -100, reduction, 0.2),
                        rtol=1e-10)
    one = F.cross_entropy(flow.tensor([1.0, 2.0, 3.0]), flow.tensor(0), label_smoothing=0.1)
    assert_allclose(one.item(), 2.3076, atol=1e-4)  # an unbatched input, PyTorch's value
    assert F.cross_entropy(flow.zeros(4), flow.tensor(1), reduction="none").shape == ()


def test_cross_entropy_with_class_probabilities() -> None:
    x = data(4, 3, seed=4)
    probs = numpy.random.default_rng(5).dirichlet(numpy.ones(3), 4)
    weight = numpy.array([1.0, 2.0, 0.5])
    logp = np_log_softmax(x)
    for reduction in REDUCTIONS:
        got = F.cross_entropy(flow.tensor(x), flow.tensor(probs), flow.tensor(weight),
                              reduction=reduction, label_smoothing=0.3)
        smoothed = probs * 0.7 + 0.1
        want = reduce(-(logp * smoothed * weight).sum(1), reduction)
        assert_allclose(got.numpy(), want, rtol=1e-10)


def test_cross_entropy_gradient_is_softmax_minus_one_hot() -> None:
    x = data(5, 4, seed=6)
    target = numpy.array([3, 0, 0, 2, 1])
    xt = flow.tensor(x, requires_grad=True)
    F.cross_entropy(xt, flow.tensor(target)).backward()
    soft = numpy.exp(np_log_softmax(x))
    assert_allclose(xt.grad.numpy(), (soft - numpy.eye(4)[target]) / 5, rtol=1e-8)


def test_class_index_errors() -> None:
    x = flow.zeros(3, 4)
    with pytest.raises(IndexError, match="Target 4 is out of bounds"):
        F.cross_entropy(x, flow.tensor([0, 4, 1]))
    with pytest.raises(ValueError, match="Expected target size"):
        F.nll_loss(x, flow.tensor([0, 1]))
    with pytest.raises(TypeError, match="integer"):
        F.nll_loss(x, flow.tensor([0.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="label_smoothing"):
        F.cross_entropy(x, flow.tensor([0, 1, 1]), label_smoothing=1.5)
    assert numpy.isnan(F.cross_entropy(x, flow.tensor([-100, -100, -100])).item())


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_with_logits_is_stable_and_weighted(reduction: str) -> None:
    x = data(4, 3, seed=7) * 4
    x[0, 0], x[1, 1] = 200.0, -200.0  # exp overflows in the naive formula
    y = numpy.random.default_rng(8).uniform(size=(4, 3))
    weight, pos_weight = numpy.array([1.0, 0.5, 2.0]), numpy.array([3.0, 1.0, 0.25])
    log_sig = -numpy.logaddexp(0, -x)  # log(sigmoid(x)), stably
    log_one_minus = -numpy.logaddexp(0, x)
    want = -(pos_weight * y * log_sig + (1 - y) * log_one_minus) * weight
    got = nn.BCEWithLogitsLoss(flow.tensor(weight), reduction, flow.tensor(pos_weight))(
        flow.tensor(x), flow.tensor(y))
    assert numpy.isfinite(got.numpy()).all()
    assert_allclose(got.numpy(), reduce(want, reduction), rtol=1e-10)
    plain = F.binary_cross_entropy_with_logits(flow.tensor(x), flow.tensor(y),
                                               reduction=reduction)
    want = -(y * log_sig + (1 - y) * log_one_minus)
    assert_allclose(plain.numpy(), reduce(want, reduction), rtol=1e-10)
    p = 1 / (1 + numpy.exp(-data(4, 3, seed=9)))
    got = nn.BCELoss(reduction=reduction)(flow.tensor(p), flow.tensor(y))
    want = -(y * numpy.log(p) + (1 - y) * numpy.log(1 - p))
    assert_allclose(got.numpy(), reduce(want, reduction), rtol=1e-10)
    saturated = F.binary_cross_entropy(flow.tensor([0.0, 1.0]), flow.tensor([1.0, 0.0]))
    assert saturated.item() == 100.0  # logs clamped at -100, as PyTorch


def test_bce_with_logits_gradient() -> None:
    x, y = data(6, seed=10), numpy.random.default_rng(11).uniform(size=6)
    xt = flow.tensor(x, requires_grad=True)
    F.binary_cross_entropy_with_logits(xt, flow.tensor(y), reduction="sum").backward()
    assert_allclose(xt.grad.numpy(), 1 / (1 + numpy.exp(-x)) - y, rtol=1e-8)


def test_one_hot_and_functional_layers() -> None:
    assert_array_equal(F.one_hot(flow.tensor([0, 2, 1])).numpy(), numpy.eye(3)[[0, 2, 1]])
    assert F.one_hot(flow.tensor([[1], [0]]), 4).shape == (2, 1, 4)
    assert F.one_hot(flow.tensor([1]), 3).dtype == flow.int64
    with pytest.raises(TypeError, match="index tensor"):
        F.one_hot(flow.zeros(2))
    x, w, b = data(3, 4), data(2, 4, seed=1), data(2, seed=2)
    assert_allclose(F.linear(flow.tensor(x), flow.tensor(w), flow.tensor(b)).numpy(),
                    x @ w.T + b, rtol=1e-10)
    emb = F.embedding(flow.tensor([[2, 0]]), flow.tensor(w.T.copy()))
    assert_allclose(emb.numpy(), w.T[[[2, 0]]])
    norm = F.layer_norm(flow.tensor(x), 4)
    assert_allclose(norm.numpy(), (x - x.mean(1, keepdims=True))
                    / numpy.sqrt(x.var(1, keepdims=True) + 1e-5), rtol=1e-8)


@pytest.mark.mpi
def test_losses_of_a_split_batch_are_global_scalars_equal_to_local() -> None:
    n = 3 * SIZE + 1
    x = data(n, 4, seed=12)
    target = numpy.random.default_rng(13).integers(0, 4, n)
    target[1] = -100
    weight = numpy.array([1.0, 2.0, 0.5, 1.5])
    xg = flow.tensor(x, placement=ALL, sbp=S0)
    tg = flow.tensor(target, placement=ALL, sbp=S0)
    for reduction in REDUCTIONS:
        got = F.cross_entropy(xg, tg, flow.tensor(weight), reduction=reduction,
                              label_smoothing=0.1)
        assert got.is_global
        want = np_nll(np_log_softmax(x), target, weight, -100, reduction, 0.1)
        assert_allclose(got.numpy(), want, rtol=1e-10)
    y = data(n, 4, seed=14)
    got = F.binary_cross_entropy_with_logits(xg, flow.tensor(y, placement=ALL, sbp=S0),
                                             pos_weight=flow.tensor(weight))
    want = (-(weight * y * -numpy.logaddexp(0, -x) + (1 - y) * -numpy.logaddexp(0, x))).mean()
    assert_allclose(got.item(), want, rtol=1e-10)
    assert_allclose(F.mse_loss(xg, flow.tensor(y, placement=ALL, sbp=S0)).item(),
                    ((x - y) ** 2).mean(), rtol=1e-10)
