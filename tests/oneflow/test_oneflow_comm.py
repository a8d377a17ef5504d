"""OneFlow's ``flow.comm`` tests, run on mpiflow (``import mpiflow as flow``).

Ports the checks of test_comm.py (send/recv with and without metadata), test_comm_ops.py (the
collectives), test_allreduce.py and test_reduce.py from OneFlow's python/oneflow/test/modules:
the same inputs, expected values and rank counts, ``cuda`` read as ``cpu``.
"""

from __future__ import annotations

import numpy
import pytest
from oneflow_case import FOUR_RANK_DATA, RANK, on_every_rank

import mpiflow as flow

pytestmark = pytest.mark.mpi


# -- test_comm.py: send/recv ----------------------------------------------------------------
def _send_recv(x0: flow.Tensor, src: int, dst: int) -> None:
    def body() -> None:
        if RANK == src:
            flow.comm.send(x0, dst)
            flow.comm.send(x0, dst)
        elif RANK == dst:
            x1 = flow.comm.recv(src)
            assert isinstance(x1, flow.Tensor)
            numpy.testing.assert_array_equal(x1.numpy(), x0.numpy())
            assert x1.dtype == x0.dtype and x1.device == x0.device
            x2 = flow.zeros_like(x0)
            assert flow.comm.recv(src, out=x2) is None
            numpy.testing.assert_array_equal(x2.numpy(), x0.numpy())
            assert x2.device == x0.device

    on_every_rank(body)


def _send_recv_without_meta(x0: flow.Tensor, src: int, dst: int) -> None:
    def body() -> None:
        if RANK == src:
            flow.comm.send(x0, dst, send_meta=False)
            flow.comm.send(x0, dst, send_meta=False)
        elif RANK == dst:
            # OneFlow passes its own dtype and device objects: x0.dtype is flow.int64
            x1 = flow.comm.recv(src, shape=x0.shape, dtype=x0.dtype, device=x0.device)
            numpy.testing.assert_array_equal(x1.numpy(), x0.numpy())
            assert x1.dtype == flow.int64
            x2 = flow.zeros_like(x0)
            flow.comm.recv(src, shape=x0.shape, dtype=x0.dtype, device=x0.device, out=x2)
            numpy.testing.assert_array_equal(x2.numpy(), x0.numpy())

    on_every_rank(body)


@pytest.mark.parametrize("src, dst", [(0, 1), (1, 0)])
@pytest.mark.mpi(min_size=2)
def test_send_recv_2_devices(src: int, dst: int) -> None:
    _send_recv(flow.tensor([[1, 2]]), src, dst)


@pytest.mark.parametrize("src, dst", [(3, 1), (0, 3)])
@pytest.mark.mpi(min_size=4)
def test_send_recv_4_devices(src: int, dst: int) -> None:
    _send_recv(flow.tensor([[1, 2]]), src, dst)


@pytest.mark.parametrize("src, dst", [(1, 0), (0, 1)])
@pytest.mark.mpi(min_size=2)
def test_send_recv_without_sending_meta_2_devices(src: int, dst: int) -> None:
    _send_recv_without_meta(flow.tensor([[1, 2]]), src, dst)


@pytest.mark.parametrize("src, dst", [(2, 3), (3, 1)])
@pytest.mark.mpi(min_size=4)
def test_send_recv_without_sending_meta_4_devices(src: int, dst: int) -> None:
    _send_recv_without_meta(flow.tensor([[1, 2]]), src, dst)


@pytest.mark.mpi(min_size=2)
def test_a_failing_receiver_fails_every_rank() -> None:
    """The model case: a wrong expectation on the receiver is an error on all ranks, and the
    next collective call runs normally (no rank is left waiting)."""
    def body() -> None:
        if RANK == 0:
            flow.comm.send(flow.tensor([1, 2]), 1)
        elif RANK == 1:
            got = flow.comm.recv(0)
            assert got.numpy().tolist() == [9, 9], "expected mismatch"

    with pytest.raises(AssertionError):
        on_every_rank(body)
    x = flow.tensor([1.0])
    flow.comm.all_reduce(x)
    assert x.item() == flow.env.get_world_size()


# -- test_comm_ops.py -----------------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 4])
def test_all_reduce(n: int) -> None:
    if flow.env.get_world_size() != n:
        pytest.skip(f"written for {n} ranks")
    np_arr = numpy.array([[1, 2], [3, 4]])
    tensor = flow.tensor(np_arr, device="cpu")
    flow.comm.all_reduce(tensor)
    numpy.testing.assert_array_equal(tensor.numpy(), np_arr * n)


def test_all_gather_into_tensor_1n2d() -> None:
    _skip_unless(2)
    tensor_in = flow.tensor([[1, 2, 3], [4, 5, 6]], dtype=flow.int64, device="cpu") + RANK * 6
    tensor_out = flow.zeros(4, 3, dtype=flow.int64, device="cpu")
    flow.comm.all_gather_into_tensor(tensor_out, tensor_in)
    numpy.testing.assert_array_equal(tensor_out.numpy(), numpy.arange(1, 13).reshape(4, 3))
    tensor_out2 = flow.zeros(2, 3, 2, dtype=flow.int64, device="cpu")
    flow.comm.all_gather_into_tensor(tensor_out2, tensor_in)
    numpy.testing.assert_array_equal(tensor_out2.numpy(), numpy.arange(1, 13).reshape(2, 3, 2))


def _skip_unless(n: int) -> None:
    if flow.env.get_world_size() != n:
        pytest.skip(f"OneFlow's test is for exactly {n} ranks")


def test_all_gather_1n2d() -> None:
    _skip_unless(2)
    np_arr = numpy.array([[2, 3], [4, 5]]) if RANK == 0 else numpy.array([[1, 2], [3, 4]])
    input = flow.tensor(np_arr, device="cpu", dtype=flow.int32)
    tensor_list = [flow.zeros(np_arr.shape, dtype=flow.int32) for _ in range(2)]
    flow.comm.all_gather(tensor_list, input)
    numpy.testing.assert_array_equal(tensor_list[0].numpy(), [[2, 3], [4, 5]])
    numpy.testing.assert_array_equal(tensor_list[1].numpy(), [[1, 2], [3, 4]])


def test_broadcast_1n2d() -> None:
    _skip_unless(2)
    np_arr = numpy.array([[1, 2], [3, 4]]) if RANK == 0 else numpy.array([[4, 5], [6, 7]])
    tensor = flow.tensor(np_arr, device="cpu", dtype=flow.int32)
    flow.comm.broadcast(tensor, 1)
    numpy.testing.assert_array_equal(tensor.numpy(), [[4, 5], [6, 7]])
    tensor = flow.tensor(np_arr, device="cpu", dtype=flow.int32)
    flow.comm.broadcast(tensor, 0)
    numpy.testing.assert_array_equal(tensor.numpy(), [[1, 2], [3, 4]])


def test_scatter_1n4d() -> None:
    _skip_unless(4)
    output = flow.tensor([[1, 2], [3, 4]], device="cpu")
    if RANK == 1:
        tensor_list = [flow.tensor([[5, 6], [7, 8]], device="cpu") + i for i in range(4)]
        flow.comm.scatter(output, tensor_list, src=1)
        numpy.testing.assert_array_equal(output.numpy(), [[6, 7], [8, 9]])
    else:
        flow.comm.scatter(output, src=1)
        numpy.testing.assert_array_equal(output.numpy(), numpy.array([[5, 6], [7, 8]]) + RANK)


def test_gather_1n4d() -> None:
    _skip_unless(4)
    np_arr = numpy.array([[1, 2], [3, 4]])
    input = flow.tensor(np_arr + RANK, device="cpu", dtype=flow.int32)
    if RANK == 1:
        tensor_list = [flow.zeros(np_arr.shape, dtype=flow.int32) for _ in range(4)]
        flow.comm.gather(input, gather_list=tensor_list, dst=1)
        for i in range(4):
            numpy.testing.assert_array_equal(tensor_list[i].numpy(), np_arr + i)
    else:
        flow.comm.gather(input, dst=1)


def test_reduce_1n2d() -> None:
    _skip_unless(2)
    np_arr = numpy.array([[1, 2], [3, 4]]) if RANK == 0 else numpy.array([[4, 5], [6, 7]])
    tensor = flow.tensor(np_arr, device="cpu", dtype=flow.int32)
    flow.comm.reduce(tensor, 0)
    numpy.testing.assert_array_equal(tensor.numpy(), [[5, 7], [9, 11]] if RANK == 0 else np_arr)


def test_all_to_all_1n4d() -> None:
    _skip_unless(4)
    input_list = [flow.tensor([0, 1], device="cpu") + i * 2 + RANK * 8 for i in range(4)]
    output_list = [flow.tensor([0, 1], device="cpu") for _ in range(4)]
    flow.comm.all_to_all(output_list, input_list)
    for i in range(4):
        numpy.testing.assert_array_equal(output_list[i].numpy(),
                                         input_list[i].numpy() + (i - RANK) * 6)


def test_reduce_scatter_1n4d() -> None:
    _skip_unless(4)
    output = flow.tensor([[0, 0], [0, 0]], device="cpu")
    tensor_list = [flow.tensor([[1, 2], [3, 4]], device="cpu") + RANK + i for i in range(4)]
    flow.comm.reduce_scatter(output, tensor_list)
    numpy.testing.assert_array_equal(output.numpy(), tensor_list[0].numpy() * 4 + 6)


def test_reduce_scatter_tensor_1n2d() -> None:
    _skip_unless(2)
    tensor_in = flow.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9], [10, 11, 12]], dtype=flow.int64,
                            device="cpu")
    expected = [[2, 4, 6], [8, 10, 12]] if RANK == 0 else [[14, 16, 18], [20, 22, 24]]
    tensor_out = flow.zeros(2, 3, dtype=flow.int64, device="cpu")
    flow.comm.reduce_scatter_tensor(tensor_out, tensor_in)
    numpy.testing.assert_array_equal(tensor_out.numpy(), expected)
    tensor_out2 = flow.zeros(2, 3, dtype=flow.int64, device="cpu")
    flow.comm.reduce_scatter_tensor(tensor_out2, tensor_in.reshape(2, 3, 2))
    numpy.testing.assert_array_equal(tensor_out2.numpy(), expected)


# -- test_allreduce.py (flow.F.all_reduce: OneFlow's private functional API; the public
# flow.comm.all_reduce sums the same way, in place) ------------------------------------------
def test_all_reduce_legacy_tensor_1n2d() -> None:
    _skip_unless(2)
    arr_rank1, arr_rank2 = numpy.array([1, 2]), numpy.array([3, 4])
    expected = arr_rank1 + arr_rank2  # before: flow.Tensor(ndarray) shares the array's memory
    x = flow.Tensor(arr_rank1 if RANK == 0 else arr_rank2).to("cpu")
    flow.comm.all_reduce(x)
    numpy.testing.assert_allclose(x.numpy(), expected)


@pytest.mark.mpi(min_size=2)
def test_expected_difference_legacy_tensor_of_an_ndarray_shares_its_memory() -> None:
    """Expected difference (docs/migration.md): OneFlow's ``flow.Tensor(ndarray)`` copies into a
    float32 tensor; mpiflow's wraps the array as it is (dtype kept, memory shared), which is
    how mpiflow's own code makes tensors without a copy. ``flow.tensor(ndarray)`` copies."""
    arr = numpy.array([1, 2])
    x = flow.Tensor(arr)
    flow.comm.all_reduce(x)
    assert x.dtype == flow.int64
    numpy.testing.assert_array_equal(arr, numpy.array([1, 2]) * flow.env.get_world_size())
    copied = numpy.array([1, 2])
    flow.comm.all_reduce(flow.tensor(copied))
    numpy.testing.assert_array_equal(copied, [1, 2])


def test_all_reduce_2nodes() -> None:
    _skip_unless(4)
    np_arr = numpy.array([1, 2])
    x = flow.Tensor(np_arr * (RANK + 1)).to("cpu")
    flow.comm.all_reduce(x)
    numpy.testing.assert_allclose(x.numpy(), np_arr * 10)


# -- test_reduce.py (flow._C.local_reduce: the public flow.comm.reduce) -----------------------
@pytest.mark.parametrize("dst", [0, 1, 2, 3])
def test_reduce_1n4d(dst: int) -> None:
    _skip_unless(4)
    x = flow.tensor(FOUR_RANK_DATA[RANK], device="cpu", dtype=flow.float32)
    flow.comm.reduce(x, dst=dst)
    if RANK == dst:
        numpy.testing.assert_allclose(x.numpy(), [[24, 26, 25, 43], [20, 28, 35, 10],
                                                  [15, 21, 27, 20], [21, 31, 30, 12]])
