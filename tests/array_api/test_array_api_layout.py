"""The array API namespace (mpiflow/array_api): where creation puts arrays (default placement
and layout, ``device=``, the default's context manager), ``copy=``, the array object's
additions, and bad input raising the same error on every rank before any communication."""

from __future__ import annotations

import math

import numpy
import pytest
from numpy.testing import assert_array_equal

import mpiflow as flow
from mpiflow import array_api as xp
from mpiflow.communication import count_collectives
from mpiflow.layouts.sbp import Broadcast, Split

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
ALL = flow.placement("cpu", list(range(SIZE)))
FIRST = flow.placement("cpu", [0])
S0, B = Split(0), Broadcast()


def balanced(n: int) -> list[int]:
    return [n // SIZE + (r < n % SIZE) for r in range(SIZE)]


@pytest.mark.mpi
def test_creation_gives_arrays_split_over_every_rank() -> None:
    with count_collectives() as calls:
        made = [xp.asarray(numpy.arange(7.0)), xp.zeros((7, 2)), xp.ones(7), xp.empty(7),
                xp.full((7, 3), 2), xp.arange(7), xp.linspace(0, 1, 7), xp.eye(7),
                xp.asarray([[1, 2]] * 7), xp.zeros_like(xp.zeros(7))]
    assert not calls, f"creation communicated: {dict(calls)}"  # each rank builds its part
    for x in made:
        assert x.placement == ALL and x.sbp == (S0,), (x.shape, x.sbp)
        assert x.to_local().shape[0] == balanced(x.shape[0])[RANK]
    assert xp.asarray(2.5).sbp == (B,) and xp.zeros(()).sbp == (B,)


@pytest.mark.mpi
def test_default_dtypes_follow_the_standard() -> None:
    assert xp.asarray(1.5).dtype is xp.float64 and xp.asarray(1).dtype is xp.int64
    assert xp.asarray(1j).dtype is xp.complex128 and xp.asarray(True).dtype is xp.bool
    assert xp.asarray([1, 2.5]).dtype is xp.float64 and xp.zeros(2).dtype is xp.float64
    assert xp.arange(3).dtype is xp.int64 and xp.arange(0.5, 2).dtype is xp.float64


@pytest.mark.mpi
def test_device_takes_a_placement_an_arrays_device_or_a_kind() -> None:
    x = xp.ones(5, device=FIRST)
    assert x.placement == FIRST and x.sbp == (S0,)
    y = xp.zeros(3, device=x.device)  # where x is
    assert y.placement == FIRST and y.device == x.device and y.device == "cpu"
    assert xp.zeros(3, device="cpu").placement == ALL
    local = flow.tensor([1.0, 2.0])
    z = xp.zeros(2, device=local.device)  # a local array's device: local arrays
    assert z.is_local and z.device == local.device
    assert xp.asarray([1, 2], device=FIRST).placement == FIRST


@pytest.mark.mpi
def test_default_layout_context_and_setter() -> None:
    with xp.default_layout(FIRST, flow.sbp.broadcast):
        x = xp.arange(4)
        assert x.placement == FIRST and x.sbp == (B,)
        with xp.default_layout(None):
            assert xp.ones(2).is_local
        assert xp.ones(2).placement == FIRST
    assert xp.arange(4).placement == ALL and xp.arange(4).sbp == (S0,)
    xp.set_default_layout(ALL, flow.sbp.split(1))
    try:
        assert xp.zeros((2, 3)).sbp == (Split(1),)
        assert xp.zeros(3).sbp == (B,)  # a split of a dim the array lacks: broadcast
    finally:
        xp.set_default_layout(ALL)
    assert xp.zeros((2, 3)).sbp == (S0,)


@pytest.mark.mpi
def test_copy_semantics() -> None:
    a = numpy.arange(SIZE * 4.0)
    x = xp.asarray(a, copy=False)  # each rank's part is a view of its rows of `a`
    assert numpy.shares_memory(x.to_local().numpy(), a)
    assert not numpy.shares_memory(xp.asarray(a, copy=True).to_local().numpy(), a)
    with pytest.raises(ValueError, match="copy=False"):
        xp.asarray([1, 2], copy=False)
    with pytest.raises(ValueError, match="copy=False"):
        xp.asarray(x, dtype=xp.float32, copy=False)
    assert xp.asarray(x) is x and xp.asarray(x, copy=True) is not x
    assert xp.astype(x, xp.float64, copy=False) is x
    assert xp.astype(x, xp.float64) is not x
    assert_array_equal(xp.asarray(x, copy=True).numpy(), a)


@pytest.mark.mpi
def test_array_object_additions() -> None:
    x = xp.reshape(xp.arange(6.0), (2, 3))
    assert x.__array_namespace__() is xp and flow.tensor([1]).__array_namespace__() is xp
    assert x.__array_namespace__(api_version="2023.12") is xp
    with pytest.raises(ValueError, match=r"2024\.12"):
        x.__array_namespace__(api_version="2099.12")
    assert x.mT.shape == (3, 2) and complex(xp.asarray(2.0)) == 2 + 0j
    assert x.to_device(x.device) is x and x.to_device("cpu") is x
    whole = x.to_device(flow.tensor([0]).device)  # to a local array: the whole value
    assert whole.is_local and whole.tolist() == [[0, 1, 2], [3, 4, 5]]
    moved = x.to_device(FIRST)
    assert moved.placement == FIRST and moved.tolist() == whole.tolist()
    assert x.device == flow.device("cpu") and str(x.device) == "cpu"
    assert x.device != flow.tensor([1.0]).device  # another placement (local)
    assert numpy.from_dlpack(flow.tensor([1.0, 2.0])).tolist() == [1.0, 2.0]
    assert x.__dlpack_device__()[0] == 1
    assert x.size() == (2, 3) and math.prod(x.shape) == 6  # size stays PyTorch's method


def test_inspection_namespace() -> None:
    info = xp.__array_namespace_info__()
    assert info.default_device() in info.devices()
    assert info.default_dtypes()["indexing"] is xp.int64
    assert set(info.dtypes(kind="integral")) == {"int8", "int16", "int32", "int64", "uint8",
                                                 "uint16", "uint32", "uint64"}
    assert xp.__array_api_version__ == "2024.12"


@pytest.mark.mpi
@pytest.mark.parametrize("call, error", [
    (lambda x: xp.reshape(x, (5,)), RuntimeError),
    (lambda x: xp.squeeze(x, axis=0), ValueError),
    (lambda x: xp.sum(x, axis=3), IndexError),
    (lambda x: xp.asarray([1.0], dtype="float64"), TypeError),
    (lambda x: xp.matmul(x, x), ValueError),
    (lambda x: xp.concat([x, xp.zeros(3)]), ValueError),
    (lambda x: xp.zeros(3, device="tpu"), ValueError),
    (lambda x: xp.mean(xp.arange(3)), TypeError),
    (lambda x: xp.add(1, 2), TypeError),
], ids=["reshape", "squeeze", "axis", "dtype", "matmul", "concat", "device", "mean", "add"])
def test_bad_input_raises_the_same_error_on_every_rank(call, error) -> None:
    x = xp.ones((SIZE + 1, SIZE + 2))
    with count_collectives() as calls, pytest.raises(error):
        call(x)
    assert not calls  # found before any communication: no rank left waiting
