"""``torch.Tensor``s in every function of ``mpiflow.distributed`` and ``mpiflow.comm``.

Each case starts one operation on tensors built from :func:`helpers.rank_data`, then checks the
result against torch's own computation on every rank's data, and that outputs were written in
place (the same memory, ``data_ptr`` unchanged; for a strided view, the rest of its base left
alone). Every ReduceOp on every dtype, and bfloat16's rounding: test_torch_tensor_reductions.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy
import pytest
from collective_helpers import ODD, RANK, WORLD, needs_two
from helpers import rank_data, run_job
from torch_tensor_helpers import (
    DTYPES,
    LAST,
    NEXT,
    PREV,
    SHAPE,
    SUM,
    TOut,
    every,
    layout_of,
    name,
    reduce_expected,
    same,
    tdata,
    torch,
)

import mpiflow
import mpiflow.comm as comm
import mpiflow.distributed as dist
from mpiflow.core.buffers import as_buffer
from mpiflow.distributed import ReduceOp, Work

pytestmark = pytest.mark.mpi


# -- the cases: each builds its tensors and returns (start, check) ------------------------------
# start(api, async_op) runs the operation through ``api`` (dist or comm: their positional
# signatures agree), check() verifies the results.
Start = Callable[[Any, bool], Any]
Case = tuple[Start, Callable[[], None]]


def _kw(async_op: bool) -> dict[str, Any]:
    return {"async_op": True} if async_op else {}


def _all_reduce(dtype: Any, layout: str) -> Case:
    out = TOut(SHAPE, dtype, layout)
    out.view.copy_(tdata(SHAPE, dtype, RANK))
    return ((lambda api, a: api.all_reduce(out.view, **_kw(a))),
            lambda: out.check(reduce_expected(SUM, every(SHAPE, dtype))))


def _reduce(dtype: Any, layout: str) -> Case:
    out = TOut(SHAPE, dtype, layout)
    out.view.copy_(tdata(SHAPE, dtype, RANK))
    expected = (reduce_expected(SUM, every(SHAPE, dtype)) if RANK == LAST
                else tdata(SHAPE, dtype, RANK))
    return (lambda api, a: api.reduce(out.view, LAST, **_kw(a))), lambda: out.check(expected)


def _broadcast(dtype: Any, layout: str) -> Case:
    out = TOut(SHAPE, dtype, layout)
    out.view.copy_(tdata(SHAPE, dtype, RANK))
    return ((lambda api, a: api.broadcast(out.view, LAST, **_kw(a))),
            lambda: out.check(tdata(SHAPE, dtype, LAST)))


def _all_gather(dtype: Any, layout: str) -> Case:
    outs = [TOut(SHAPE, dtype, layout) for _ in range(WORLD)]
    inp = layout_of(tdata(SHAPE, dtype, RANK), layout)

    def check() -> None:
        for out, expected in zip(outs, every(SHAPE, dtype)):
            out.check(expected)

    return (lambda api, a: api.all_gather([o.view for o in outs], inp, **_kw(a))), check


def _all_gather_into_tensor(dtype: Any, layout: str) -> Case:
    out = TOut((WORLD * 3, ODD), dtype, layout)
    inp = layout_of(tdata(SHAPE, dtype, RANK), layout)
    return ((lambda api, a: api.all_gather_into_tensor(out.view, inp, **_kw(a))),
            lambda: out.check(torch.cat(every(SHAPE, dtype))))


def _gather(dtype: Any, layout: str) -> Case:
    outs = [TOut(SHAPE, dtype, layout) for _ in range(WORLD)]
    inp = layout_of(tdata(SHAPE, dtype, RANK), layout)

    def check() -> None:
        for out, expected in zip(outs, every(SHAPE, dtype)):
            out.check(expected if RANK == LAST else torch.full(SHAPE, 7, dtype=dtype))

    return ((lambda api, a: api.gather(inp, [o.view for o in outs] if RANK == LAST else None,
                                       LAST, **_kw(a))), check)


def _scatter(dtype: Any, layout: str) -> Case:
    out = TOut(SHAPE, dtype, layout)
    pieces = [layout_of(tdata(SHAPE, dtype, LAST, salt=i), layout) for i in range(WORLD)]
    return ((lambda api, a: api.scatter(out.view, pieces if RANK == LAST else None, LAST,
                                        **_kw(a))),
            lambda: out.check(tdata(SHAPE, dtype, LAST, salt=RANK)))


def _reduce_scatter(dtype: Any, layout: str) -> Case:
    out = TOut(SHAPE, dtype, layout)
    inputs = [layout_of(tdata(SHAPE, dtype, RANK, salt=i), layout) for i in range(WORLD)]
    return ((lambda api, a: api.reduce_scatter(out.view, inputs, **_kw(a))),
            lambda: out.check(reduce_expected(SUM, every(SHAPE, dtype, salt=RANK))))


def _reduce_scatter_tensor(dtype: Any, layout: str) -> Case:
    out = TOut(SHAPE, dtype, layout)
    inp = layout_of(tdata((WORLD * 3, ODD), dtype, RANK), layout)
    full = reduce_expected(SUM, every((WORLD * 3, ODD), dtype))
    return ((lambda api, a: api.reduce_scatter_tensor(out.view, inp, **_kw(a))),
            lambda: out.check(full[3 * RANK:3 * RANK + 3]))


def _all_to_all(dtype: Any, layout: str) -> Case:
    # entry sizes differ by destination: rank i gets entries of 1 + i columns
    inputs = [layout_of(tdata((2, 1 + i), dtype, RANK, salt=i), layout) for i in range(WORLD)]
    outs = [TOut((2, 1 + RANK), dtype, layout) for _ in range(WORLD)]

    def check() -> None:
        for j, out in enumerate(outs):
            out.check(tdata((2, 1 + RANK), dtype, j, salt=RANK))

    return (lambda api, a: api.all_to_all([o.view for o in outs], inputs, **_kw(a))), check


def _all_to_all_single(dtype: Any, layout: str) -> Case:
    inp = layout_of(tdata((2 * WORLD, 3), dtype, RANK), layout)
    out = TOut((2 * WORLD, 3), dtype, layout)
    expected = torch.cat([t[2 * RANK:2 * RANK + 2] for t in every((2 * WORLD, 3), dtype)])
    return ((lambda api, a: api.all_to_all_single(out.view, inp, **_kw(a))),
            lambda: out.check(expected))


def _all_to_all_single_split(dtype: Any, layout: str) -> Case:
    # rank r sends 1 + (r + i) % 2 rows to rank i: uneven pieces, symmetric counts
    def rows(r: int, i: int) -> int:
        return 1 + (r + i) % 2

    splits = [rows(RANK, i) for i in range(WORLD)]
    inp = layout_of(tdata((sum(splits), 3), dtype, RANK), layout)
    out = TOut((sum(splits), 3), dtype, layout)
    pieces = []
    for j in range(WORLD):
        theirs = [rows(j, i) for i in range(WORLD)]
        start = sum(theirs[:RANK])
        pieces.append(tdata((sum(theirs), 3), dtype, j)[start:start + theirs[RANK]])
    return ((lambda api, a: api.all_to_all_single(out.view, inp, splits, splits, **_kw(a))),
            lambda: out.check(torch.cat(pieces)))


def _send_recv(dtype: Any, layout: str) -> Case:
    # a ring: even ranks send first (blocking) so that no rank count deadlocks
    inp = layout_of(tdata(SHAPE, dtype, RANK), layout)
    out = TOut(SHAPE, dtype, layout)

    def start(api: Any, async_op: bool) -> Any:
        if WORLD == 1:
            return None
        if async_op:
            works = [dist.isend(inp, NEXT), dist.irecv(out.view, PREV)]
            for w in works:
                assert isinstance(w, Work) and w.wait() is True
            return None
        receive = ((lambda: api.recv(out.view, PREV)) if api is dist
                   else (lambda: api.recv(PREV, out=out.view)))
        for step in ((lambda: api.send(inp, NEXT)), receive)[::1 if RANK % 2 == 0 else -1]:
            step()
        return None

    def check() -> None:
        out.check(tdata(SHAPE, dtype, PREV) if WORLD > 1 else torch.full(SHAPE, 7, dtype=dtype))

    return start, check


def _sync_initial_weights(dtype: Any, layout: str) -> Case:
    weights = [layout_of(tdata(SHAPE, dtype, RANK, salt=i), layout) for i in range(3)]
    ptrs = [w.data_ptr() for w in weights]

    def check() -> None:
        for i, w in enumerate(weights):
            same(w, tdata(SHAPE, dtype, LAST, salt=i))
            assert w.data_ptr() == ptrs[i]

    return (lambda api, a: dist.sync_initial_weights(weights, src=LAST)), check


def _sync_gradients(dtype: Any, layout: str) -> Case:
    grads = [layout_of(tdata(SHAPE, dtype, RANK, salt=i), layout) for i in range(3)]
    ptrs = [g.data_ptr() for g in grads]
    average = dtype.is_floating_point or dtype.is_complex
    op = ReduceOp.AVG if average else SUM

    def check() -> None:
        for i, g in enumerate(grads):
            same(g, reduce_expected(op, every(SHAPE, dtype, salt=i)), exact=not dtype.is_complex)
            assert g.data_ptr() == ptrs[i]

    return (lambda api, a: dist.sync_gradients(grads, average=average)), check


CASES: dict[str, Callable[[Any, str], Case]] = {
    "all_reduce": _all_reduce, "reduce": _reduce, "broadcast": _broadcast,
    "all_gather": _all_gather, "all_gather_into_tensor": _all_gather_into_tensor,
    "gather": _gather, "scatter": _scatter, "reduce_scatter": _reduce_scatter,
    "reduce_scatter_tensor": _reduce_scatter_tensor, "all_to_all": _all_to_all,
    "all_to_all_single": _all_to_all_single, "all_to_all_single_split": _all_to_all_single_split,
    "send_recv": _send_recv,
}
SYNC_CASES = {"sync_initial_weights": _sync_initial_weights, "sync_gradients": _sync_gradients}
COMM_CASES = [c for c in CASES if not c.startswith("all_to_all_single")]  # comm has no such op


@pytest.mark.parametrize("dtype", DTYPES, ids=name)
@pytest.mark.parametrize("case", [*CASES, *SYNC_CASES])
def test_distributed(case: str, dtype: Any) -> None:
    start, check = {**CASES, **SYNC_CASES}[case](dtype, "C")
    assert start(dist, False) is None
    check()


@pytest.mark.parametrize("dtype", DTYPES, ids=name)
@pytest.mark.parametrize("case", COMM_CASES)
def test_comm(case: str, dtype: Any) -> None:
    start, check = CASES[case](dtype, "C")
    assert start(comm, False) is None
    check()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=name)
@pytest.mark.parametrize("layout", ["strided", "T"])
@pytest.mark.parametrize("async_op", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("case", list(CASES))
def test_layouts_and_async(case: str, async_op: bool, layout: str, dtype: Any) -> None:
    # Non-contiguous inputs and outputs (received in place), blocking and with async_op=True:
    # a bfloat16 reduction's float32 copy is rounded back only when the Work completes.
    start, check = CASES[case](dtype, layout)
    work = start(dist, async_op)
    if async_op and case != "send_recv":
        assert isinstance(work, Work), work
        assert work.wait() is True and work.is_completed()
    else:
        assert work is None
    check()


@pytest.mark.parametrize("layout", ["strided", "T"])
@pytest.mark.parametrize("case", list(SYNC_CASES))
def test_sync_non_contiguous(case: str, layout: str) -> None:
    start, check = SYNC_CASES[case](torch.bfloat16, layout)
    start(dist, False)
    check()


@pytest.mark.parametrize("case", COMM_CASES)
def test_comm_non_contiguous(case: str) -> None:
    start, check = CASES[case](torch.bfloat16, "strided")
    start(comm, False)
    check()


# -- groups, requires_grad, views, objects, errors ---------------------------------------------


@pytest.mark.parametrize("async_op", [False, True], ids=["sync", "async"])
def test_group_subset(async_op: bool) -> None:
    ranks = [r for r in range(WORLD) if r % 2 == 0]
    member = RANK in ranks
    g = dist.new_group(ranks)
    try:
        dt = torch.bfloat16
        x = tdata(SHAPE, dt, RANK)
        gathered = torch.zeros((len(ranks) * 3, ODD), dtype=dt)
        part = torch.zeros((1, ODD), dtype=dt)
        works = [
            dist.all_reduce(x, group=g, async_op=async_op),
            dist.all_gather_into_tensor(gathered, tdata(SHAPE, dt, RANK), group=g,
                                        async_op=async_op),
            dist.reduce_scatter_tensor(part, tdata((len(ranks), ODD), dt, RANK), group=g,
                                       async_op=async_op),
        ]
        for w in works:
            if async_op:
                assert isinstance(w, Work) and w.wait()
            else:
                assert w is None
        if member:
            same(x, reduce_expected(SUM, every(SHAPE, dt, ranks=ranks)))
            same(gathered, torch.cat(every(SHAPE, dt, ranks=ranks)))
            i = ranks.index(RANK)
            same(part, reduce_expected(SUM, every((len(ranks), ODD), dt, ranks=ranks))[i:i + 1])
        else:  # outside the group every call does nothing
            same(x, tdata(SHAPE, dt, RANK))
            same(gathered, torch.zeros((len(ranks) * 3, ODD), dtype=dt))
            same(part, torch.zeros((1, ODD), dtype=dt))
        y = tdata(SHAPE, dt, RANK)
        dist.broadcast(y, src=ranks[-1], group=g)
        same(y, tdata(SHAPE, dt, ranks[-1] if member else RANK))
    finally:
        dist.destroy_process_group(g)


def test_leaf_requiring_grad_is_written_in_place() -> None:
    # As torch.distributed (checked with gloo): a collective writes into a leaf that requires
    # grad, or into ``param.grad.data``, without complaint; requires_grad and grad stay.
    w = torch.full((3,), float(RANK + 1), requires_grad=True)
    w.grad = torch.full((3,), float(RANK))
    ptr = w.data_ptr()
    dist.all_reduce(w)
    dist.all_reduce(w.grad.data, op=dist.reduce_op.SUM)
    assert w.requires_grad and w.is_leaf and w.data_ptr() == ptr
    same(w.detach(), torch.full((3,), WORLD * (WORLD + 1) / 2))
    same(w.grad, torch.full((3,), WORLD * (WORLD - 1) / 2))
    b = torch.zeros(3, dtype=torch.bfloat16, requires_grad=True)
    dist.broadcast(b, src=LAST)
    assert b.requires_grad


def test_torch_module_sync_bfloat16_and_float32() -> None:
    nn = torch.nn
    torch.manual_seed(RANK)
    model = nn.Sequential(nn.Linear(5, 2 * WORLD + 1), nn.BatchNorm1d(2 * WORLD + 1),
                          nn.Linear(2 * WORLD + 1, 3).to(torch.bfloat16))
    dist.sync_initial_weights(model, src=LAST)
    torch.manual_seed(LAST)
    reference = nn.Sequential(nn.Linear(5, 2 * WORLD + 1), nn.BatchNorm1d(2 * WORLD + 1),
                              nn.Linear(2 * WORLD + 1, 3).to(torch.bfloat16))
    for mine, theirs in zip(model.state_dict().values(), reference.state_dict().values()):
        same(mine, theirs)
    grads = [[tdata(tuple(p.shape), p.dtype, r, salt=i) for i, p in enumerate(model.parameters())]
             for r in range(WORLD)]
    for p, g in zip(model.parameters(), grads[RANK]):
        p.grad = g.clone()
    dist.sync_gradients(model)
    for i, p in enumerate(model.parameters()):
        same(p.grad, reduce_expected(ReduceOp.AVG, [grads[r][i] for r in range(WORLD)]))


def test_objects_holding_tensors() -> None:
    got: list[Any] = [None] * WORLD
    dist.all_gather_object(got, {"t": tdata((2,), torch.bfloat16, RANK)})
    for r, obj in enumerate(got):
        same(obj["t"], tdata((2,), torch.bfloat16, r))
    objs = [tdata((3,), torch.int64, RANK)]
    dist.broadcast_object_list(objs, src=LAST)
    same(objs[0], tdata((3,), torch.int64, LAST))


@needs_two
def test_comm_recv_without_out() -> None:
    got: list[Any] = []

    def send(dst: int) -> None:
        comm.send(tdata((2, 3), torch.bfloat16, RANK), dst)
        comm.send(tdata((2, 3), torch.float32, RANK), dst)
        comm.send(tdata((4,), torch.bfloat16, RANK), dst, send_meta=False)
        comm.send(tdata((4,), torch.int32, RANK), dst, send_meta=False)

    def recv(src: int) -> None:
        got.append(comm.recv(src))
        got.append(comm.recv(src))
        got.append(comm.recv(src, (4,), torch.bfloat16))
        got.append(comm.recv(src, 4, torch.int32))

    for step in ((send, NEXT), (recv, PREV))[::1 if RANK % 2 == 0 else -1]:
        step[0](step[1])
    # a dtype numpy lacks arrives as a torch tensor; the others as mpiflow tensors (OneFlow's
    # comm.recv returns a tensor)
    same(got[0], tdata((2, 3), torch.bfloat16, PREV))
    numpy.testing.assert_array_equal(got[1].numpy(), tdata((2, 3), torch.float32, PREV).numpy())
    assert isinstance(got[1], mpiflow.Tensor) and got[1].numpy().dtype == numpy.float32
    same(got[2], tdata((4,), torch.bfloat16, PREV))
    numpy.testing.assert_array_equal(got[3], rank_data((4,), numpy.int32, PREV))


@needs_two
def test_comm_recv_into_out_of_another_dtype() -> None:
    # bfloat16 and int16 travel as the same bits: the receiver still tells them apart
    errors = []

    def recv(src: int) -> None:
        out = torch.zeros(3, dtype=torch.int16)
        with pytest.raises(ValueError, match="received a bfloat16 array"):
            comm.recv(src, out=out)
        errors.append(out)

    for step in (lambda: comm.send(torch.ones(3, dtype=torch.bfloat16), NEXT),
                 lambda: recv(PREV))[::1 if RANK % 2 == 0 else -1]:
        step()
    same(errors[0], torch.zeros(3, dtype=torch.int16))


def test_errors() -> None:
    bf = torch.ones(2, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match=r"bfloat16 tensor \(reduced as float32\): "
                                        r"ReduceOp.BAND needs an integer"):
        dist.all_reduce(bf, op=ReduceOp.BAND)
    with pytest.raises(TypeError, match="AVG is undefined for bool"):
        dist.reduce_scatter_tensor(torch.ones(1, dtype=torch.bool),
                                   torch.ones(WORLD, dtype=torch.bool), op=ReduceOp.AVG)
    with pytest.raises(TypeError, match="need one dtype"):
        dist.all_gather([torch.zeros(2, dtype=torch.int16) for _ in range(WORLD)], bf)
    with pytest.raises(TypeError, match="need one dtype"):
        dist.all_gather_into_tensor(torch.zeros(2 * WORLD, dtype=torch.int16), bf)
    with pytest.raises(TypeError, match="conjugated view"):
        dist.all_reduce(torch.ones(2, dtype=torch.complex64).conj())
    with pytest.raises(TypeError, match="CPU and CUDA tensors only"):
        dist.all_reduce(torch.ones(2, device="meta"))
    with pytest.raises(TypeError, match="tensor must be a numpy array, an mpiflow tensor"):
        dist.all_reduce([1.0, 2.0])
    check = torch.ones(1)
    dist.all_reduce(check)  # nothing above was sent: the ranks still agree
    same(check, torch.full((1,), float(WORLD)))


def test_as_buffer_is_zero_copy() -> None:
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    a = as_buffer(t)
    assert isinstance(a, numpy.ndarray) and a.dtype == numpy.float32
    a[0, 0] = 42
    assert t[0, 0] == 42
    strided = as_buffer(t[:, ::2])
    assert strided.shape == (2, 2) and numpy.shares_memory(strided, a)
    bits = as_buffer(torch.ones(2, dtype=torch.bfloat16))
    assert bits.dtype == numpy.int16 and bits.tolist() == [0x3F80, 0x3F80]
    with pytest.raises(TypeError, match="torch tensor, got list"):
        as_buffer([1])


@pytest.mark.single_process
def test_import_does_not_import_torch() -> None:
    code = ("import sys, numpy, mpiflow, mpiflow.comm, mpiflow.distributed as dist\n"
            "x = numpy.ones(2)\n"
            "dist.all_reduce(x); dist.broadcast(x, 0); mpiflow.comm.all_reduce(x)\n"
            "dist.sync_gradients([x])\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\n"
            "print('torch not imported')\n")
    job = run_job(1, code, timeout=120, launcher=[])
    assert job.returncode == 0, job.stderr
    assert "torch not imported" in job.stdout


# -- CUDA tensors (a GPU is needed; the paths are in mpiflow.core.torch_arrays) -----------------

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device: CUDA tensors are staged through CuPy or "
                                       "pinned host memory, which needs a GPU to run")


@needs_cuda
@pytest.mark.gpu
@pytest.mark.parametrize("through", ["cupy", "pinned"])
def test_cuda_tensors(through: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from mpiflow.core import torch_arrays as _torch_arrays

    if through == "cupy":
        pytest.importorskip("cupy", reason="CuPy is not installed")
    else:
        monkeypatch.setattr(_torch_arrays, "_cupy", lambda: None)
    dev = torch.device("cuda", torch.cuda.current_device())
    x = tdata(SHAPE, torch.bfloat16, RANK).to(dev)
    ptr = x.data_ptr()
    dist.all_reduce(x)
    assert x.data_ptr() == ptr
    same(x.cpu(), reduce_expected(SUM, every(SHAPE, torch.bfloat16)))
    y = tdata(SHAPE, torch.float32, RANK).to(dev)[:, ::2]
    work = dist.broadcast(y, src=LAST, async_op=True)
    assert work is not None and work.wait()
    same(y.cpu(), tdata(SHAPE, torch.float32, LAST)[:, ::2])
    out = torch.zeros((WORLD * 3, ODD), device=dev)
    dist.all_gather_into_tensor(out, tdata(SHAPE, torch.float32, RANK).to(dev))
    same(out.cpu(), torch.cat(every(SHAPE, torch.float32)))


def test_torch_tensors_and_numpy_arrays_mix() -> None:
    out = [numpy.zeros(3, dtype=numpy.float32) for _ in range(WORLD)]
    dist.all_gather(out, torch.full((3,), float(RANK)))
    for r, o in enumerate(out):
        numpy.testing.assert_array_equal(o, numpy.full(3, r, dtype=numpy.float32))
