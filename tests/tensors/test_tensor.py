"""Local tensors: creation, dtypes, conversions, operators, in-place ops, repr."""

from __future__ import annotations

import numpy
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import mpiflow as flow


@pytest.mark.parametrize(
    ("data", "dtype"),
    [
        (1.0, flow.float32),
        (1, flow.int64),
        (True, flow.bool),
        ([1, 2.0], flow.float32),
        ([[1, 2], [3, 4]], flow.int64),
        (numpy.arange(3, dtype=numpy.float64), flow.float64),
        (numpy.arange(3, dtype=numpy.int16), flow.int16),
        (numpy.zeros(2, dtype=numpy.float16), flow.float16),
        (1 + 2j, flow.complex64),
    ],
)
def test_dtype_inference_follows_pytorch(data: object, dtype: flow.DType) -> None:
    assert flow.tensor(data).dtype is dtype


def test_dtypes_have_readable_names_and_convert() -> None:
    assert repr(flow.float32) == "mpiflow.float32"
    assert flow.float is flow.float32 and flow.long is flow.int64 and flow.half is flow.float16
    assert flow.tensor([1, 2], dtype=flow.float64).dtype is flow.float64
    assert flow.tensor([1, 2], dtype="int8").dtype is flow.int8
    with pytest.raises(TypeError, match=r"not a dtype|no dtype"):
        flow.tensor([1], dtype="not-a-dtype")


def test_shape_size_and_basic_attributes() -> None:
    x = flow.tensor(numpy.arange(6.0).reshape(2, 3))
    assert isinstance(x.shape, flow.Size) and isinstance(x.shape, tuple)
    assert x.shape == (2, 3) and repr(x.shape) == "mpiflow.Size([2, 3])"
    assert x.ndim == 2 and x.dim() == 2 and x.numel() == 6 and x.size(1) == 3
    assert x.is_local and not x.is_global
    assert len(x) == 2
    assert x.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert flow.tensor(3.5).item() == 3.5
    with pytest.raises(ValueError, match="one element"):
        x.item()
    with pytest.raises(RuntimeError, match="Expected global tensor"):
        x.to_local()


def test_from_numpy_shares_memory_and_tensor_copies() -> None:
    a = numpy.zeros(3, dtype=numpy.float32)
    shared, copied = flow.from_numpy(a), flow.tensor(a)
    a[0] = 5
    assert shared.numpy()[0] == 5 and copied.numpy()[0] == 0
    shared.add_(1)
    assert_array_equal(a, [6, 1, 1])
    assert numpy.shares_memory(numpy.asarray(shared), a)


def test_dlpack_round_trip_shares_memory() -> None:
    a = numpy.arange(4.0)
    t = flow.from_numpy(a)
    b = numpy.from_dlpack(t)
    assert numpy.shares_memory(a, b)
    back = flow.from_dlpack(a)
    assert back.shape == (4,)


def test_clone_detach_and_to() -> None:
    x = flow.tensor([1.0, 2.0])
    c, d = x.clone(), x.detach()
    x.mul_(10)
    assert c.tolist() == [1.0, 2.0]
    assert d.tolist() == [10.0, 20.0]
    assert x.to(flow.int32).dtype is flow.int32
    assert x.to("cpu") is x
    assert x.double().dtype is flow.float64 and x.long().tolist() == [10, 20]
    with pytest.raises(RuntimeError, match="cuda"):
        x.to("cuda")


def test_arithmetic_matches_numpy_with_broadcasting_and_scalars() -> None:
    a = numpy.arange(12, dtype=numpy.float32).reshape(3, 4) + 1
    b = numpy.arange(4, dtype=numpy.float32) + 2
    x, y = flow.tensor(a), flow.tensor(b)
    assert_allclose((x + y).numpy(), a + b)
    assert_allclose((x - y).numpy(), a - b)
    assert_allclose((x * y).numpy(), a * b)
    assert_allclose((x / y).numpy(), a / b, rtol=1e-6)
    assert_allclose((2 - x).numpy(), 2 - a)
    assert_allclose((1 / x).numpy(), 1 / a, rtol=1e-6)
    assert_allclose((x ** 2).numpy(), a**2)
    assert_allclose((2 ** y).numpy(), 2**b)
    assert_allclose((-x).numpy(), -a)
    assert_allclose(abs(-x).numpy(), a)
    assert_allclose((x // 3).numpy(), a // 3)
    assert_allclose((x % 3).numpy(), a % 3)
    assert (x + y).dtype is flow.float32


def test_dtype_promotion_follows_pytorch() -> None:
    i = flow.tensor([1, 2, 3])
    assert (i + 1).dtype is flow.int64
    assert (i + 2.5).dtype is flow.float32
    assert (i / 2).dtype is flow.float32
    assert_allclose((i / 2).numpy(), [0.5, 1.0, 1.5])
    assert (i * flow.tensor([1.0, 2.0, 3.0], dtype=flow.float64)).dtype is flow.float64
    assert (flow.tensor([True, False]) + 1).dtype is flow.int64


def test_comparisons_and_logic_give_bool() -> None:
    x = flow.tensor([1, 5, 3])
    assert (x > 2).dtype is flow.bool
    assert (x > 2).tolist() == [False, True, True]
    assert (x == 3).tolist() == [False, False, True]
    assert (x != 3).tolist() == [True, True, False]
    assert ((x > 1) & (x < 5)).tolist() == [False, False, True]
    assert (~(x > 2)).tolist() == [True, False, False]
    assert flow.where(x > 2, x, flow.zeros(3, dtype=flow.int64)).tolist() == [0, 5, 3]


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "abs", "tanh", "sigmoid", "relu", "neg",
                                  "sin", "cos", "floor", "ceil", "round", "square", "rsqrt"])
def test_unary_ops_match_numpy(name: str) -> None:
    a = numpy.linspace(0.1, 3.0, 7, dtype=numpy.float32)
    ref = {
        "exp": numpy.exp, "log": numpy.log, "sqrt": numpy.sqrt, "abs": numpy.abs,
        "tanh": numpy.tanh, "sigmoid": lambda v: 1 / (1 + numpy.exp(-v)),
        "relu": lambda v: numpy.maximum(v, 0), "neg": numpy.negative, "sin": numpy.sin,
        "cos": numpy.cos, "floor": numpy.floor, "ceil": numpy.ceil, "round": numpy.round,
        "square": numpy.square, "rsqrt": lambda v: 1 / numpy.sqrt(v),
    }[name]
    out = getattr(flow, name)(flow.tensor(a))
    assert_allclose(out.numpy(), ref(a), rtol=1e-6, atol=1e-7)
    assert_allclose(getattr(flow.tensor(a), name)().numpy(), ref(a), rtol=1e-6, atol=1e-7)


def test_gelu_matches_the_erf_formula() -> None:
    import math

    a = numpy.linspace(-4, 4, 33)
    ref = numpy.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in a])
    # erf is computed to 1.5e-7 (Abramowitz-Stegun 7.1.26), well inside float32 precision
    assert_allclose(flow.gelu(flow.tensor(a)).numpy(), ref, atol=1e-6)


def test_clamp_and_maximum() -> None:
    x = flow.tensor([-2.0, 0.5, 3.0])
    assert flow.clamp(x, -1, 1).tolist() == [-1.0, 0.5, 1.0]
    assert flow.clamp(x, min=0).tolist() == [0.0, 0.5, 3.0]
    assert flow.maximum(x, flow.tensor([0.0, 0.0, 4.0])).tolist() == [0.0, 0.5, 4.0]
    with pytest.raises(ValueError):
        flow.clamp(x)


def test_in_place_ops_keep_the_same_memory() -> None:
    a = numpy.ones(3)
    x = flow.from_numpy(a)
    x += 1
    x -= flow.tensor([0.5, 0.5, 0.5], dtype=flow.float64)
    x *= 4
    x.div_(2)
    assert_array_equal(a, [3.0, 3.0, 3.0])
    x.zero_()
    assert_array_equal(a, 0)
    x.copy_(flow.tensor([1.0, 2.0, 3.0]))
    assert_array_equal(a, [1, 2, 3])
    x.fill_(7)
    assert_array_equal(a, 7)
    x.copy_(flow.tensor(2.0))  # broadcast
    assert_array_equal(a, 2)


def test_bad_operands_raise_clear_errors() -> None:
    x = flow.tensor([1.0, 2.0])
    with pytest.raises(TypeError, match="tensor or a number"):
        flow.add(x, "a")
    with pytest.raises(ValueError, match="cannot be broadcast"):
        x + flow.tensor([1.0, 2.0, 3.0])


def test_repr_shows_values_and_dtype() -> None:
    assert repr(flow.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert repr(flow.tensor([1, 2], dtype=flow.int8)) == "tensor([1, 2], dtype=mpiflow.int8)"


def test_creation_functions() -> None:
    assert flow.zeros(2, 3).shape == (2, 3) and flow.zeros(2, 3).dtype is flow.float32
    assert flow.ones((2,), dtype=flow.int32).tolist() == [1, 1]
    assert flow.full((2,), 7).dtype is flow.int64
    assert flow.full((2,), 7.5).tolist() == [7.5, 7.5]
    assert flow.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert flow.arange(1, 2, 0.25).tolist() == [1.0, 1.25, 1.5, 1.75]
    assert flow.arange(5).dtype is flow.int64 and flow.arange(0.0, 1.0, 0.5).dtype is flow.float32
    x = flow.ones(2, 2, dtype=flow.float64)
    assert flow.zeros_like(x).dtype is flow.float64
    assert flow.full_like(x, 3).tolist() == [[3, 3], [3, 3]]
    assert flow.empty(0, 3).shape == (0, 3)
    with pytest.raises(ValueError, match="non-negative"):
        flow.zeros(-1)
