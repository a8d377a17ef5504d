"""conv2d, max_pool2d and avg_pool2d against PyTorch: values and gradients, local and global.

Global runs lay out a batch of ``3 * size + 1`` samples split over the ranks (``S(0)``, uneven
shards) with broadcast weights, as data parallelism does: the forward must not communicate,
and the gradients (the weight's a partial sum reduced into ``B``) must equal PyTorch's on the
whole batch.
"""

from __future__ import annotations

from typing import Any

import numpy
import pytest
from numpy.testing import assert_allclose

import mpiflow as flow
from mpiflow.communication import count_collectives
from mpiflow.sbp import broadcast, split

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
ALL = flow.placement("cpu", list(range(SIZE)))
N = 3 * SIZE + 1

CONV_CASES: list[dict[str, Any]] = [
    {},
    {"stride": (2, 3), "padding": (1, 2), "dilation": (2, 1)},
    {"padding": "same", "dilation": (2, 1)},
    {"padding": "valid", "stride": 2},
]
MAX_CASES: list[dict[str, Any]] = [
    {"kernel_size": 2},
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
    {"kernel_size": (3, 2), "stride": (2, 1), "padding": 1, "dilation": (1, 2)},
]
AVG_CASES: list[dict[str, Any]] = [
    {"kernel_size": 2},
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
    {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
    {"kernel_size": 2, "padding": 1, "divisor_override": 3},
]


def values(*shape: int, seed: int) -> numpy.ndarray:
    return numpy.random.default_rng(seed).standard_normal(shape)


def compare(fn: Any, torch_fn: Any, arrays: list[numpy.ndarray], kwargs: dict[str, Any],
            sbps: list[Any] | None = None) -> None:
    """``fn`` on tensors of ``arrays`` (global ones laid out by ``sbps``) against ``torch_fn``:
    the value and every input's gradient for one random cotangent."""
    if sbps is None:
        xs = [flow.tensor(a, requires_grad=True) for a in arrays]
    else:
        xs = [flow.tensor(a, placement=ALL, sbp=s).requires_grad_() for a, s in zip(arrays, sbps)]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    with count_collectives() as calls:
        out = fn(*xs, **kwargs)
    want = torch_fn(*ts, **kwargs)
    if sbps is not None:
        assert out.sbp == (split(0),) and not calls, (out.sbp, dict(calls))
    assert_allclose(out.numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-10)
    cot = values(*want.shape, seed=99)
    g = flow.tensor(cot) if sbps is None else flow.tensor(cot, placement=ALL, sbp=split(0))
    out.backward(g)
    want.backward(torch.tensor(cot))
    for i, (x, t) in enumerate(zip(xs, ts)):
        assert x.grad is not None and (sbps is None or x.grad.sbp == x.sbp)
        assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-9,
                        err_msg=f"gradient of input {i}")


@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_conv2d_matches_torch(case: int) -> None:
    x, w, b = values(2, 4, 9, 8, seed=1), values(6, 4, 3, 2, seed=2), values(6, seed=3)
    compare(flow.conv2d, TF.conv2d, [x, w, b], CONV_CASES[case])
    compare(flow.conv2d, TF.conv2d, [x, w], CONV_CASES[case])


@pytest.mark.parametrize("groups", [2, 4])
def test_grouped_conv2d_matches_torch(groups: int) -> None:
    x, w = values(2, 4, 7, 6, seed=1), values(8, 4 // groups, 3, 3, seed=2)
    compare(flow.conv2d, TF.conv2d, [x, w, values(8, seed=3)], {"groups": groups, "padding": 1})


def test_unbatched_conv2d_and_pooling_match_torch() -> None:
    x = values(4, 9, 8, seed=1)
    compare(flow.conv2d, TF.conv2d, [x, values(6, 4, 3, 3, seed=2)], {"padding": 1})
    compare(flow.max_pool2d, TF.max_pool2d, [x], {"kernel_size": 2})
    compare(flow.avg_pool2d, TF.avg_pool2d, [x], {"kernel_size": 2})


@pytest.mark.parametrize("case", range(len(MAX_CASES)))
def test_max_pool2d_matches_torch(case: int) -> None:
    compare(flow.max_pool2d, TF.max_pool2d, [values(2, 3, 9, 8, seed=4)], MAX_CASES[case])


@pytest.mark.parametrize("case", range(len(AVG_CASES)))
def test_avg_pool2d_matches_torch(case: int) -> None:
    compare(flow.avg_pool2d, TF.avg_pool2d, [values(2, 3, 9, 8, seed=5)], AVG_CASES[case])


def test_max_pool2d_gives_a_tied_window_s_gradient_to_its_first_maximum() -> None:
    x = numpy.ones((1, 1, 2, 2))
    compare(flow.max_pool2d, TF.max_pool2d, [x], {"kernel_size": 2})


@pytest.mark.mpi
@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_conv2d_on_a_split_batch_matches_torch(case: int) -> None:
    x, w, b = values(N, 3, 8, 7, seed=1), values(5, 3, 3, 2, seed=2), values(5, seed=3)
    compare(flow.conv2d, TF.conv2d, [x, w, b], CONV_CASES[case],
            [split(0), broadcast, broadcast])


@pytest.mark.mpi
def test_grouped_conv2d_on_a_split_batch_matches_torch() -> None:
    x, w = values(N, 4, 6, 6, seed=1), values(6, 2, 3, 3, seed=2)
    compare(flow.conv2d, TF.conv2d, [x, w], {"groups": 2, "stride": 2},
            [split(0), broadcast])


@pytest.mark.mpi
@pytest.mark.parametrize("case", range(len(MAX_CASES)))
def test_max_pool2d_on_a_split_batch_matches_torch(case: int) -> None:
    compare(flow.max_pool2d, TF.max_pool2d, [values(N, 2, 9, 8, seed=4)], MAX_CASES[case],
            [split(0)])


@pytest.mark.mpi
@pytest.mark.parametrize("case", range(len(AVG_CASES)))
def test_avg_pool2d_on_a_split_batch_matches_torch(case: int) -> None:
    compare(flow.avg_pool2d, TF.avg_pool2d, [values(N, 2, 9, 8, seed=5)], AVG_CASES[case],
            [split(0)])


@pytest.mark.mpi
def test_conv2d_with_split_output_channels_needs_no_communication() -> None:
    x, w, b = values(2, 3, 6, 6, seed=1), values(3 * SIZE + 1, 3, 3, 3, seed=2), values(
        3 * SIZE + 1, seed=3)
    gx = flow.tensor(x, placement=ALL, sbp=broadcast)
    gw = flow.tensor(w, placement=ALL, sbp=split(0))
    gb = flow.tensor(b, placement=ALL, sbp=split(0))
    with count_collectives() as calls:
        out = flow.conv2d(gx, gw, gb, padding=1)
    assert out.sbp == (split(1),) and not calls
    want = TF.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), padding=1)
    assert_allclose(out.numpy(), want.numpy(), rtol=1e-10, atol=1e-10)


def test_conv2d_float32_stays_float32() -> None:
    x = flow.tensor(values(2, 3, 5, 5, seed=1), dtype=flow.float32)
    w = flow.tensor(values(4, 3, 3, 3, seed=2), dtype=flow.float32)
    assert flow.conv2d(x, w).dtype == flow.float32
    assert flow.max_pool2d(x, 2).dtype == flow.float32


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda x, w: flow.conv2d(x[0, 0], w), RuntimeError, "3D .unbatched. or 4D"),
    (lambda x, w: flow.conv2d(x, w[:, :2]), RuntimeError, "expected input.* to have 2 channels"),
    (lambda x, w: flow.conv2d(x, w, groups=4), RuntimeError, "groups"),
    (lambda x, w: flow.conv2d(x, w, stride=2, padding="same"), ValueError, "strided"),
    (lambda x, w: flow.conv2d(x, w, padding="full"), ValueError, "Invalid padding string"),
    (lambda x, w: flow.conv2d(x, w, stride=0), ValueError, "positive"),
    (lambda x, w: flow.conv2d(x, flow.ones(4, 3, 9, 9)), RuntimeError, "smaller than"),
    (lambda x, w: flow.conv2d(x, w, flow.ones(5)), RuntimeError, "bias of size"),
    (lambda x, w: flow.conv2d(x.long(), w), TypeError, "floating point"),
    (lambda x, w: flow.max_pool2d(x, 2, padding=2), RuntimeError, "at most half"),
    (lambda x, w: flow.max_pool2d(x, 2, return_indices=True), ValueError, "return_indices"),
    (lambda x, w: flow.avg_pool2d(x, 9), RuntimeError, "too small"),
    (lambda x, w: flow.avg_pool2d(x, 2, divisor_override=0), ValueError, "divisor"),
])
def test_bad_arguments_raise_clear_errors(call: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        call(flow.ones(2, 3, 5, 5), flow.ones(4, 3, 3, 3))
