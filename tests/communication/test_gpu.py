"""On a GPU: 'cuda' tensors, and every device transport compared with numpy.

Every test is marked ``gpu`` and skips, saying why, where CuPy or a CUDA device is missing.
``scripts/test-gpu`` runs them on a GPU machine at 1..N ranks (N = the number of GPUs); the
same code paths run without a GPU, on numpy arrays, in test_gpu_transport.py.
"""

from __future__ import annotations

from typing import Any

import numpy
import pytest
from collective_helpers import ODD, RANK, WORLD, all_data, assert_same, reduce_expected
from helpers import rank_data

import mpiflow as flow
import mpiflow.distributed as dist
from mpiflow import cuda
from mpiflow.communication import ReduceOp, Work
from mpiflow.communication.gpu.maker import (
    build_device_communicator,
    device_communicator,
    transport_of,
)
from mpiflow.communication.gpu.transport import (
    Transport,
    TransportChoice,
    cuda_aware_mpi,
    current_transport,
    nccl_status,
)
from mpiflow.communication.mpi.group import world_comm

REASON = cuda.unavailable_reason()
pytestmark = [
    pytest.mark.mpi,
    pytest.mark.gpu,
    pytest.mark.skipif(REASON is not None, reason=REASON or ""),
    pytest.mark.filterwarnings("ignore:mpiflow.*noted once:RuntimeWarning"),
]


@pytest.fixture(scope="module")
def cp() -> Any:
    """CuPy, with this rank's device selected."""
    return cuda.require()


def _missing(transport: Transport) -> str | None:
    """Why ``transport`` cannot run here, or None."""
    if transport is Transport.NCCL:
        from mpiflow.communication.gpu.transport import _ranks_per_gpu

        available, detail = nccl_status()
        if not available:
            return f"NCCL is not available ({detail})"
        if _ranks_per_gpu() > 1:
            return "more ranks than GPUs on a node: NCCL needs one GPU per rank"
    if transport is Transport.CUDA_AWARE_MPI and cuda_aware_mpi() != "yes":
        return "the MPI library is not known to be CUDA-aware (MPIFLOW_CUDA_AWARE=1 asserts it)"
    return None


@pytest.fixture(scope="module", params=[t.value for t in Transport])
def device_comm(request: pytest.FixtureRequest, cp: Any) -> Any:
    """A device communicator over the world for each transport this machine has."""
    from mpiflow.communication.gpu.array_ops import CupyOps

    transport = Transport(request.param)
    why = _missing(transport)
    if why is not None:
        pytest.skip(why)
    mpi = (Transport.CUDA_AWARE_MPI if cuda_aware_mpi() == "yes" else Transport.STAGED_MPI)
    fallback = mpi if transport is Transport.NCCL else transport
    return build_device_communicator(world_comm, CupyOps(cp),
                                     TransportChoice(transport, fallback, "test"))


def _expect(actual: Any, expected: numpy.ndarray) -> None:
    host = actual.get() if hasattr(actual, "get") else numpy.asarray(actual)
    if host.dtype.kind in "fc":
        assert host.dtype == expected.dtype
        numpy.testing.assert_allclose(host, expected, rtol=1e-5)
    else:
        assert_same(host, expected)


# -- the device --------------------------------------------------------------------------------
def test_each_rank_uses_local_rank_modulo_device_count(cp: Any) -> None:
    expected = flow.env.get_local_rank() % cuda.device_count()
    assert cuda.current_device() == expected
    assert cp.cuda.Device().id == expected
    assert cp.zeros(1).device.id == expected


# -- 'cuda' tensors --------------------------------------------------------------------------------
def test_cuda_tensors_hold_cupy_arrays_and_compute_like_numpy(cp: Any) -> None:
    a = numpy.arange(12, dtype=numpy.float32).reshape(3, 4) / 10
    x = flow.tensor(a, device="cuda")
    assert isinstance(x._data, cp.ndarray) and x.device == "cuda" and x.is_cuda
    y = ((x * 2 + 1).exp() - x).sum(dim=1)
    _expect(y._data, (numpy.exp(a * 2 + 1) - a).sum(axis=1))
    z = x @ x.T
    _expect(z._data, a @ a.T)
    back = z.cpu()
    assert isinstance(back._data, numpy.ndarray) and back.device == "cpu"
    numpy.testing.assert_allclose(back.numpy(), a @ a.T, rtol=1e-5)
    assert x.cuda() is x and x.to("cuda") is x


def test_moving_to_cuda_is_differentiable(cp: Any) -> None:
    x = flow.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.cuda()
    assert isinstance(y._data, cp.ndarray)
    (y * y).sum().backward()
    assert x.grad is not None and x.grad.device == "cpu"
    assert x.grad.tolist() == [2.0, 4.0, 6.0]


def test_creation_functions_on_cuda(cp: Any) -> None:
    for t in (flow.zeros(2, 3, device="cuda"), flow.ones(4, device="cuda"),
              flow.full((2,), 7.0, device="cuda"), flow.arange(5, device="cuda"),
              flow.empty(3, device="cuda"), flow.tensor([1, 2], device="cuda:0"),
              flow.zeros_like(flow.ones(2, device="cuda"))):
        assert isinstance(t._data, cp.ndarray), t
    assert flow.arange(5, device="cuda").tolist() == [0, 1, 2, 3, 4]
    on_gpu = flow.randn(5, 3, generator=flow.Generator().manual_seed(3), device="cuda")
    on_cpu = flow.randn(5, 3, generator=flow.Generator().manual_seed(3))
    assert isinstance(on_gpu._data, cp.ndarray)
    numpy.testing.assert_allclose(on_gpu.numpy(), on_cpu.numpy(), rtol=1e-5, atol=1e-6)
    shared = flow.from_dlpack(cp.arange(3.0))
    assert isinstance(shared._data, cp.ndarray)
    kept = flow.tensor(cp.arange(3.0))           # CuPy data stays on the GPU
    assert kept.device == "cuda" and kept.tolist() == [0.0, 1.0, 2.0]
    assert flow.tensor(cp.arange(3.0), device="cpu").device == "cpu"


# -- every transport, compared with numpy ---------------------------------------------------------
PAIRS = [
    ("float32", ReduceOp.SUM), ("float32", ReduceOp.AVG), ("float64", ReduceOp.MAX),
    ("float16", ReduceOp.SUM), ("int32", ReduceOp.MIN), ("int64", ReduceOp.PRODUCT),
    ("bool", ReduceOp.SUM), ("bool", ReduceOp.PRODUCT), ("complex64", ReduceOp.SUM),
    ("int16", ReduceOp.SUM), ("int32", ReduceOp.BXOR), ("bool", ReduceOp.BXOR),
]


@pytest.mark.parametrize(("dtype", "op"), PAIRS, ids=[f"{d}-{o.name}" for d, o in PAIRS])
def test_all_reduce(device_comm: Any, cp: Any, dtype: str, op: ReduceOp) -> None:
    x = cp.asarray(rank_data((ODD,), dtype, RANK))
    device_comm.all_reduce(x, op)
    _expect(x, reduce_expected(op, all_data((ODD,), dtype)))


def test_zero_dimensional_device_arrays(device_comm: Any, cp: Any) -> None:
    # A 0-d array is one element with shape (): staging must keep the shape (CuPy's set()
    # refuses a (1,) source for a () target), as the sum of a global tensor needs.
    x = cp.asarray(numpy.float32(RANK + 1))
    device_comm.all_reduce(x, ReduceOp.SUM)
    assert x.shape == ()
    assert float(x) == WORLD * (WORLD + 1) / 2
    y = cp.asarray(numpy.int64(RANK))
    device_comm.broadcast(y, WORLD - 1)
    assert y.shape == () and int(y) == WORLD - 1
    out = cp.zeros(WORLD, dtype=cp.float32)
    device_comm.all_gather(cp.asarray(numpy.float32(RANK)).reshape(1), out)
    _expect(out, numpy.arange(WORLD, dtype=numpy.float32))
    z = cp.asarray(numpy.float64(RANK))
    work = device_comm.all_reduce(z, ReduceOp.MAX, async_op=True)
    assert work is not None
    work.wait()
    assert z.shape == () and float(z) == WORLD - 1


def test_every_collective(device_comm: Any, cp: Any) -> None:
    root = WORLD - 1
    data = rank_data((WORLD, ODD), numpy.float32, RANK)
    every = all_data((WORLD, ODD), numpy.float32)

    buf = cp.asarray(data)
    device_comm.broadcast(buf, root)
    _expect(buf, every[root])

    buf = cp.asarray(data)
    device_comm.reduce(buf, ReduceOp.SUM, root)
    _expect(buf, reduce_expected(ReduceOp.SUM, every) if RANK == root else data)

    recv = cp.zeros((WORLD, WORLD, ODD), numpy.float32)
    device_comm.all_gather(cp.asarray(data), recv)
    _expect(recv, numpy.stack(every))

    counts = [r % 3 for r in range(WORLD)]
    recv = cp.zeros(sum(counts), numpy.float32)
    device_comm.all_gather_v(cp.asarray(data.reshape(-1)[:counts[RANK]]), recv, counts)
    _expect(recv, numpy.concatenate([e.reshape(-1)[:c] for e, c in zip(every, counts)]))

    recv = cp.zeros(ODD, numpy.float32)
    device_comm.reduce_scatter(cp.asarray(data), recv, ReduceOp.SUM)
    _expect(recv, reduce_expected(ReduceOp.SUM, every)[RANK])

    total = reduce_expected(ReduceOp.SUM, every).reshape(-1)
    counts = [(r + 1) % 3 for r in range(WORLD)]
    recv = cp.zeros(counts[RANK], numpy.float32)
    device_comm.reduce_scatter_v(cp.asarray(data.reshape(-1)[:sum(counts)]), recv, counts)
    start = sum(counts[:RANK])
    _expect(recv, total[start:start + counts[RANK]])

    recv = cp.zeros((WORLD, ODD), numpy.float32)
    device_comm.all_to_all(cp.asarray(data), recv)
    _expect(recv, numpy.stack([e[RANK] for e in every]))

    scounts = [(RANK + j) % 3 for j in range(WORLD)]
    rcounts = [(i + RANK) % 3 for i in range(WORLD)]
    send = numpy.concatenate([numpy.full(c, 10 * RANK + j, numpy.float32)
                              for j, c in enumerate(scounts)])
    recv = cp.zeros(sum(rcounts), numpy.float32)
    device_comm.all_to_all_v(cp.asarray(send), scounts, recv, rcounts)
    _expect(recv, numpy.concatenate([numpy.full(c, 10 * i + RANK, numpy.float32)
                                     for i, c in enumerate(rcounts)]))

    out = cp.zeros((WORLD, WORLD, ODD), numpy.float32) if RANK == root else None
    device_comm.gather(cp.asarray(data), out, root)
    if out is not None:
        _expect(out, numpy.stack(every))

    recv = cp.zeros(ODD, numpy.float32)
    device_comm.scatter(cp.asarray(every[root]) if RANK == root else None, recv, root)
    _expect(recv, every[root][RANK])
    device_comm.barrier()


def test_strided_device_buffers_and_async(device_comm: Any, cp: Any) -> None:
    base = cp.full((3, ODD, 2), 9.0, dtype=cp.float64)
    view = base[..., 0]
    view[...] = cp.asarray(rank_data((3, ODD), numpy.float64, RANK))
    work = device_comm.all_reduce(view, ReduceOp.SUM, async_op=True)
    assert isinstance(work, Work) and work.wait()
    _expect(view, reduce_expected(ReduceOp.SUM, all_data((3, ODD), numpy.float64)))
    assert bool((base[..., 1] == 9).all())


def test_send_and_recv_between_partners(device_comm: Any, cp: Any) -> None:
    partner = RANK ^ 1
    if WORLD < 2 or partner >= WORLD:
        pytest.skip("this rank has no partner")
    mine, got = cp.full(ODD, float(RANK)), cp.zeros(ODD)
    if RANK < partner:
        device_comm.send(mine, partner)
        assert device_comm.recv(got, partner) == partner
    else:
        assert device_comm.recv(got, partner) == partner
        device_comm.send(mine, partner)
    _expect(got, numpy.full(ODD, float(partner)))
    # asynchronous: the lower rank sends without blocking, the higher one receives into a Work
    work = (device_comm.send(mine * 2, partner, async_op=True) if RANK < partner
            else device_comm.irecv(got, partner))
    assert work is not None and work.wait()
    if RANK > partner:
        _expect(got, numpy.full(ODD, 2.0 * partner))


# -- through mpiflow's own faces ------------------------------------------------------------------
@pytest.mark.mpi(min_size=2)
def test_oneflow_send_and_recv_of_cuda_tensors(cp: Any) -> None:
    if RANK == 0:
        flow.comm.send(flow.arange(4.0, device="cuda"), dst=1)
    elif RANK == 1:
        got = flow.comm.recv(0, device="cuda")
        assert isinstance(got, flow.Tensor) and got.device == "cuda"
        assert isinstance(got._data, cp.ndarray)
        _expect(got._data, numpy.arange(4.0, dtype=numpy.float32))



def test_the_world_communicator_routes_device_arrays(cp: Any) -> None:
    x = cp.full(4, RANK + 1.0)
    dist.all_reduce(x)
    _expect(x, numpy.full(4, WORLD * (WORLD + 1) / 2))
    t = flow.ones(3, device="cuda")
    flow.comm.all_reduce(t)
    _expect(t._data, numpy.full(3, float(WORLD), numpy.float32))
    chosen = transport_of(device_communicator(world_comm))
    assert chosen is current_transport().transport


def test_global_tensors_on_cuda_placements(cp: Any) -> None:
    ranks = list(range(WORLD))
    gpu, cpu = flow.placement("cuda", ranks), flow.placement("cpu", ranks)
    rows = 3 * WORLD + 1
    g = flow.randn(rows, 4, placement=gpu, sbp=flow.sbp.split(0),
                   generator=flow.Generator().manual_seed(5))
    c = flow.randn(rows, 4, placement=cpu, sbp=flow.sbp.split(0),
                   generator=flow.Generator().manual_seed(5))
    assert isinstance(g.to_local()._data, cp.ndarray)
    numpy.testing.assert_allclose(g.numpy(), c.numpy(), rtol=1e-5, atol=1e-6)
    w = flow.ones(4, 2, placement=gpu, sbp=flow.sbp.broadcast)
    y = (g @ w).sum()                         # S0 x B -> S0, then a partial sum
    numpy.testing.assert_allclose(y.numpy(), (c.numpy() @ numpy.ones((4, 2))).sum(),
                                  rtol=1e-4)
    b = g.to_global(sbp=flow.sbp.broadcast)   # an all-gather over the device transport
    assert isinstance(b.to_local()._data, cp.ndarray)
    s1 = g.to_global(sbp=flow.sbp.split(1))   # an all-to-all
    numpy.testing.assert_allclose(s1.numpy(), c.numpy(), rtol=1e-5, atol=1e-6)
    moved = c.to("cuda")
    assert moved.placement == gpu and moved.sbp == c.sbp
    assert isinstance(moved.to_local()._data, cp.ndarray)
    assert moved.to("cpu").placement == cpu
    numpy.testing.assert_allclose(moved.numpy(), c.numpy())


def test_a_training_step_on_cuda(cp: Any) -> None:
    optim = pytest.importorskip("mpiflow.optim")
    if not hasattr(flow.nn, "Linear"):
        pytest.skip("mpiflow.nn has no Linear yet")

    def train(device: str) -> list[float]:
        gen = flow.Generator().manual_seed(11)
        model = flow.nn.Linear(3, 1)
        with flow.no_grad():
            model.weight.copy_(flow.randn(1, 3, generator=gen))
            model.bias.fill_(0.0)
        model.to(device)
        opt = optim.SGD(model.parameters(), lr=0.1)
        x = flow.randn(8, 3, generator=gen).to(device)
        target = flow.ones(8, 1).to(device) * (RANK + 1)
        losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = ((model(x) - target) ** 2).mean()
            loss.backward()
            dist.sync_gradients(model)
            opt.step()
            losses.append(loss.item())
        assert all(isinstance(p._data, cp.ndarray) == (device == "cuda")
                   for p in model.parameters())
        return losses

    on_gpu, on_cpu = train("cuda"), train("cpu")
    numpy.testing.assert_allclose(on_gpu, on_cpu, rtol=1e-4)
    assert on_gpu[-1] < on_gpu[0]


def test_ddp_gradients_are_views_of_device_buckets(cp: Any) -> None:
    from mpiflow.nn.parallel import DistributedDataParallel

    model = flow.nn.Linear(3, 2)
    model.to("cuda")
    m = DistributedDataParallel(model)
    x = flow.full((4, 3), float(RANK + 1)).to("cuda")
    m(x).sum().backward()
    flat = m._flat_gradients
    for index, p in enumerate(flat.params):
        bucket = flat.buckets[flat.bucket_of[index]]
        assert isinstance(p.grad._data, cp.ndarray) and isinstance(bucket.flat, cp.ndarray)
        start = bucket.flat.data.ptr
        assert start <= p.grad._data.data.ptr < start + bucket.flat.nbytes
    mean = (WORLD + 1) / 2  # d(sum)/d(bias) = 4 rows; d/dW = 4 * (rank + 1), averaged
    numpy.testing.assert_allclose(cp.asnumpy(m.bias.grad._data), [4.0, 4.0])
    numpy.testing.assert_allclose(cp.asnumpy(m.weight.grad._data), numpy.full((2, 3), 4 * mean))
