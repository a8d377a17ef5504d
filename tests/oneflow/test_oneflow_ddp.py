"""OneFlow's DDP tests, run on mpiflow: test_ddp.py and test_ddp_multi_outputs.py (modules).

The same models, inputs and expected gradients/outputs, at OneFlow's 2 ranks; ``ddp(m)``
returns the module itself, as OneFlow's does. The keyword variants OneFlow accepts
(``bucket_size=``, ``use_bucket=False``) run the same checks.
"""

from __future__ import annotations

from typing import Any

import numpy
import pytest
from oneflow_case import RANK, exactly

import mpiflow as flow
from mpiflow.nn.parallel import DistributedDataParallel as ddp

pytestmark = pytest.mark.mpi

DDP_VARIANTS = [{}, {"bucket_size": 1}, {"bucket_size": 2}, {"use_bucket": False}]
VARIANT_IDS = ["default", "bucket_size=1", "bucket_size=2", "use_bucket=False"]


def _close(actual: Any, expected: Any) -> None:
    """OneFlow's np_allclose_with_shape: same shape, close values."""
    actual, expected = numpy.asarray(actual), numpy.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    numpy.testing.assert_allclose(actual, expected)


@exactly(2)
@pytest.mark.parametrize("kwargs", DDP_VARIANTS, ids=VARIANT_IDS)
def test_ddp_basic(kwargs: dict[str, Any]) -> None:
    class Mul(flow.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = flow.nn.Parameter(flow.Tensor([1, 1]))

        def forward(self, x: flow.Tensor) -> flow.Tensor:
            return x * self.w

    x = flow.Tensor([1, 1] if RANK == 0 else [2, 2]).to("cpu")
    m = ddp(Mul().to("cpu"), **kwargs)
    m(x).sum().backward()
    _close(m.w.grad.numpy(), [1.5, 1.5])


@exactly(2)
@pytest.mark.parametrize("kwargs", DDP_VARIANTS, ids=VARIANT_IDS)
def test_ddp_with_unused_param(kwargs: dict[str, Any]) -> None:
    class Model(flow.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = flow.nn.Parameter(flow.Tensor([1]))
            self.used_only_in_rank0 = flow.nn.Parameter(flow.Tensor([2]))
            self.unused_in_all_ranks = flow.nn.Parameter(flow.Tensor([3]))

        def forward(self, x: flow.Tensor) -> flow.Tensor:
            x = x * self.w
            if flow.env.get_rank() == 0:
                x = x * self.used_only_in_rank0
            return x

    x = flow.Tensor([1] if RANK == 0 else [2]).to("cpu")
    m = ddp(Model().to("cpu"), **kwargs)
    m(x).backward()
    _close(m.w.grad.numpy(), [2])
    _close(m.used_only_in_rank0.grad.numpy(), [0.5])
    _close(m.unused_in_all_ranks.grad.numpy(), [0])


@exactly(2)
@pytest.mark.parametrize("kwargs", DDP_VARIANTS, ids=VARIANT_IDS)
def test_out_of_order_execution(kwargs: dict[str, Any]) -> None:
    class Model(flow.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w1 = flow.nn.Parameter(flow.Tensor([1]))
            self.w2 = flow.nn.Parameter(flow.Tensor([2]))
            self.w3 = flow.nn.Parameter(flow.Tensor([3]))

        def forward(self, x: flow.Tensor) -> flow.Tensor:
            if flow.env.get_rank() == 0:
                x *= self.w1
                x *= self.w2
                x *= self.w3
            else:
                x *= self.w3
                x *= self.w2
                x *= self.w1
            return x

    x = flow.Tensor([1] if RANK == 0 else [2]).to("cpu")
    m = ddp(Model().to("cpu"), **kwargs)
    m(x).backward()
    _close(m.w1.grad.numpy(), [9])
    _close(m.w2.grad.numpy(), [4.5])
    _close(m.w3.grad.numpy(), [3])


@exactly(2)
def test_broadcast_buffer() -> None:
    class CustomModule(flow.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("buf", flow.tensor([1, 2]) * (RANK + 1))

        def forward(self, x: flow.Tensor) -> flow.Tensor:
            res = self.buf + x
            self.buf.copy_(x)
            return res

    x = (flow.tensor([2, 3]) * (RANK + 1)).to("cpu")
    m = ddp(CustomModule().to("cpu"))
    y1, y2 = m(x), m(x)
    m = ddp(CustomModule().to("cpu"), broadcast_buffers=False)
    y3, y4 = m(x), m(x)
    expected = ([[3, 5], [4, 6], [3, 5], [4, 6]] if RANK == 0
                else [[5, 8], [6, 9], [6, 10], [8, 12]])
    for y, e in zip((y1, y2, y3, y4), expected):
        _close(y.numpy(), e)


# -- test_ddp_multi_outputs.py ---------------------------------------------------------------
TRAIN_X = [[[1, 2], [2, 3]], [[4, 6], [3, 1]]]
TRAIN_FLOAT32 = [[[1, 2], [2, 3]], [[4, 6], [3, 1]]]
TRAIN_INT32 = [[[8], [13]], [[26], [9]]]


class _TwoOutputs(flow.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lr = 0.01
        self.iter_count = 10
        self.w1 = flow.nn.Parameter(flow.tensor([[0], [0]], dtype=flow.float32))
        self.w2 = flow.nn.Parameter(flow.tensor([[0], [0]], dtype=flow.float32))

    def forward(self, x: flow.Tensor, label: flow.Tensor) -> tuple[flow.Tensor, flow.Tensor]:
        return flow.matmul(x, self.w1), label


def _train(output: list[Any], dtype: Any, requires_grad: bool) -> _TwoOutputs:
    m = ddp(_TwoOutputs().to("cpu"))
    loss = flow.nn.MSELoss(reduction="sum")
    optimizer = flow.optim.SGD(m.parameters(), m.lr)
    for _ in range(m.iter_count):
        x = flow.tensor(TRAIN_X[RANK], dtype=flow.float32).clone().to("cpu")
        y = flow.tensor(output[RANK], dtype=dtype).clone().to("cpu")
        y.requires_grad = requires_grad
        y_pred, y2 = m(x, y)
        assert y2.requires_grad == y.requires_grad
        loss(y_pred, y).backward()
        optimizer.step()
        optimizer.zero_grad()
    return m


def _reference(output: list[Any]) -> numpy.ndarray:
    """The same SGD on numpy: the gradient of the sum-of-squares loss averaged over ranks (a
    (2, 2) label broadcasts the (2, 1) prediction, as MSELoss does)."""
    w = numpy.zeros((2, 1))
    for _ in range(10):
        grads = [2 * numpy.array(x).T @ (numpy.array(x) @ w - numpy.array(y)).sum(
            axis=1, keepdims=True) for x, y in zip(TRAIN_X, output)]
        w -= 0.01 * sum(grads) / 2
    return w


@exactly(2)
@pytest.mark.parametrize("requires_grad", [True, False])
def test_outputs_float32(requires_grad: bool) -> None:
    m = _train(TRAIN_FLOAT32, flow.float32, requires_grad)
    numpy.testing.assert_allclose(m.w1.numpy(), _reference(TRAIN_FLOAT32), rtol=1e-5)
    _close(m.w2.numpy(), [[0], [0]])  # unused: zero gradients, never moved


@exactly(2)
def test_outputs_int32() -> None:
    m = _train(TRAIN_INT32, flow.int32, False)
    numpy.testing.assert_allclose(m.w1.numpy(), _reference(TRAIN_INT32), rtol=1e-5)
