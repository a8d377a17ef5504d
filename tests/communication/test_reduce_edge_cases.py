"""Issue #18's silent wrong results: MAX/MIN with NaN, and two threads on one group.

Runs at 1-4 ranks. MAX/MIN over floating dtypes must give every rank the same bits, NaN
propagating as numpy.maximum/minimum; two threads calling collectives on one group at once
must raise on a rank where they overlap, never exchange mixed data in silence.
"""

from __future__ import annotations

import itertools
import os
import threading
import time

import numpy
import pytest
from mpi4py import MPI

import mpiflow.distributed as dist
from mpiflow.communication.debug.mode import DebugMPICommunicator
from mpiflow.communication.fast import InUse
from mpiflow.communication.mpi.communicator import MPICommunicator
from mpiflow.communication.mpi.datatypes import _float_extremum, reduce_plan
from mpiflow.communication.mpi.group import world_comm
from mpiflow.distributed import ReduceOp

pytestmark = pytest.mark.mpi
RANK, SIZE = world_comm.rank, world_comm.size
FLOATS = [numpy.float16, numpy.float32, numpy.float64]
VALUES = [numpy.nan, numpy.inf, -numpy.inf, 0.0, -0.0, 1.5, -2.0]


def _bits(dtype) -> numpy.dtype:
    return numpy.dtype(f"u{numpy.dtype(dtype).itemsize}")


def inputs(rank: int, dtype, reps: int = 1) -> numpy.ndarray:
    """Rank ``rank``'s input: element i holds digit ``rank`` of i in base len(VALUES), so the
    elements cover every combination of VALUES over the ranks."""
    n = len(VALUES) ** SIZE
    digits = (numpy.arange(n) // len(VALUES) ** rank) % len(VALUES)
    return numpy.tile(numpy.array(VALUES, dtype=dtype)[digits], reps)


def expected(op: ReduceOp, dtype, reps: int = 1) -> numpy.ndarray:
    """numpy's reduction over the stacked inputs, with the sign of a zero result made
    order-free as IEEE 754-2019 maximum/minimum define it: -0.0 < +0.0."""
    stack = numpy.stack([inputs(r, dtype, reps) for r in range(SIZE)])
    is_max = op is ReduceOp.MAX
    out = (numpy.maximum if is_max else numpy.minimum).reduce(stack, axis=0)
    zero = out == 0
    positive_zero = ((stack == 0) & ~numpy.signbit(stack)).any(axis=0)
    negative_zero = ((stack == 0) & numpy.signbit(stack)).any(axis=0)
    sign = ~positive_zero if is_max else negative_zero
    out[zero] = numpy.where(sign[zero], -0.0, 0.0).astype(dtype)
    return out


def check(result: numpy.ndarray, want: numpy.ndarray, nan_bits: bool = True) -> None:
    """Same bits as ``want`` (any NaN for a NaN unless ``nan_bits``), and the same bits on
    every rank."""
    assert result.dtype == want.dtype
    bits = _bits(want.dtype)
    if nan_bits:
        numpy.testing.assert_array_equal(result.view(bits), want.view(bits))
    else:
        numpy.testing.assert_array_equal(numpy.isnan(result), numpy.isnan(want))
        keep = ~numpy.isnan(want)
        numpy.testing.assert_array_equal(result[keep].view(bits), want[keep].view(bits))
    every = MPI.COMM_WORLD.allgather(result.tobytes())
    assert all(b == every[0] for b in every), "ranks got different bits"


# -- the combine function itself (no MPI) -------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("is_max", [True, False])
def test_extremum_commutative_associative_bitwise(dtype, is_max):
    bits = _bits(dtype)
    nan_payload = (numpy.array([numpy.nan], dtype).view(bits) | 1).view(dtype)
    vals = numpy.concatenate([numpy.array([*VALUES, -numpy.nan], dtype), nan_payload])

    def f(x, y):
        a, b = numpy.array([x], dtype), numpy.array([y], dtype)
        _float_extremum(a, b, is_max, bits)
        return b.view(bits)[0]

    ufunc = numpy.maximum if is_max else numpy.minimum
    for x, y in itertools.product(vals, vals):
        assert f(x, y) == f(y, x), (x, y)
        got, ref = numpy.array([f(x, y)], bits).view(dtype)[0], ufunc(x, y)
        assert (numpy.isnan(ref) and numpy.isnan(got)) or got == ref, (x, y)
    for x, y, z in itertools.product(vals, vals, vals):
        xy = numpy.array([f(x, y)], bits).view(dtype)[0]
        yz = numpy.array([f(y, z)], bits).view(dtype)[0]
        assert f(xy, z) == f(x, yz), (x, y, z)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("is_max", [True, False])
def test_extremum_large_buffers_in_chunks(dtype, is_max):
    # past the small-buffer branch: scratch arrays reused chunk by chunk, specials anywhere
    rng = numpy.random.default_rng(18)
    n = 3 * (1 << 15) + 7
    vals = numpy.array(VALUES, dtype)
    a, b = vals[rng.integers(0, len(VALUES), n)], vals[rng.integers(0, len(VALUES), n)]
    got = b.copy()
    _float_extremum(a, got, is_max, _bits(dtype))
    for i in range(0, n, 997):  # element by element through the small branch
        one = b[i:i + 1].copy()
        _float_extremum(a[i:i + 1], one, is_max, _bits(dtype))
        assert got[i:i + 1].view(_bits(dtype)) == one.view(_bits(dtype))
    swapped = a.copy()
    _float_extremum(b, swapped, is_max, _bits(dtype))
    numpy.testing.assert_array_equal(got.view(_bits(dtype)), swapped.view(_bits(dtype)))


# -- the collectives ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", [ReduceOp.MAX, ReduceOp.MIN])
def test_all_reduce_nan(dtype, op):
    x = inputs(RANK, dtype)
    world_comm.all_reduce(x, op)
    check(x, expected(op, dtype))
    y = inputs(RANK, dtype)  # through the public face (its fast path first)
    dist.all_reduce(y, op=op)
    check(y, expected(op, dtype))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", [ReduceOp.MAX, ReduceOp.MIN])
def test_all_reduce_nan_large(dtype, op):
    # large enough for MPICH's reduce-scatter + all-gather algorithm at every size
    x = inputs(RANK, dtype, reps=(1 << 17) // len(VALUES) ** SIZE + 1)
    world_comm.all_reduce(x, op)
    check(x, expected(op, dtype, reps=(1 << 17) // len(VALUES) ** SIZE + 1))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", [ReduceOp.MAX, ReduceOp.MIN])
def test_reduce_nan(dtype, op):
    for root in {0, SIZE - 1}:
        x = inputs(RANK, dtype)
        world_comm.reduce(x, op, root)
        if RANK == root:
            numpy.testing.assert_array_equal(x.view(_bits(dtype)),
                                             expected(op, dtype).view(_bits(dtype)))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", [ReduceOp.MAX, ReduceOp.MIN])
def test_reduce_scatter_nan(dtype, op):
    n = len(VALUES) ** SIZE
    send = numpy.tile(inputs(RANK, dtype), SIZE)
    recv = numpy.empty(n, dtype)
    world_comm.reduce_scatter(send, recv, op)
    numpy.testing.assert_array_equal(recv.view(_bits(dtype)),
                                     expected(op, dtype).view(_bits(dtype)))
    gathered = MPI.COMM_WORLD.allgather(recv.tobytes())
    assert all(b == gathered[0] for b in gathered)


def test_fast_paths_decline_float_max_min():
    comm = MPICommunicator(MPI.COMM_WORLD.Dup())
    for dtype in FLOATS:
        for op in (ReduceOp.MAX, ReduceOp.MIN):
            assert reduce_plan(dtype, op).datatype is not None
            x = inputs(RANK, dtype)
            comm.all_reduce(x, op)  # the general path, which fills the fast paths' table
            assert numpy.dtype(dtype) not in comm._native[op]
            assert comm.fast.all_reduce(inputs(RANK, dtype), op) is False
            send, recv = numpy.tile(inputs(RANK, dtype), SIZE), numpy.empty(x.size, dtype)
            comm.reduce_scatter(send, recv, op)
            assert comm.fast.reduce_scatter(send, recv, op) is False
    # integers keep MPI's own MAX, and SUM of floats keeps its fast path
    assert reduce_plan(numpy.int32, ReduceOp.MAX).datatype is None
    assert reduce_plan(numpy.float32, ReduceOp.SUM).datatype is None
    x = numpy.ones(4, numpy.float32)
    comm.all_reduce(x)
    fast = comm.fast.all_reduce(x, ReduceOp.SUM)
    assert fast is not comm.checks_every_call  # debug mode has no fast paths
    numpy.testing.assert_array_equal(x, SIZE * SIZE if fast else SIZE)


def test_torch_tensors_nan():
    torch = pytest.importorskip("torch")
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        for op in (ReduceOp.MAX, ReduceOp.MIN):
            t = torch.from_numpy(inputs(RANK, numpy.float32)).to(dtype)
            dist.all_reduce(t, op=op)  # bfloat16 goes through float32
            assert t.dtype == dtype
            # torch's own casts give NaNs of other payloads (float16, bfloat16)
            check(t.to(torch.float32).numpy(), expected(op, numpy.float32), nan_bits=False)


# -- two threads on one group -------------------------------------------------------------------
def _other_thread_holds(comm) -> InUse:
    """Mark ``comm`` as in use by a (finished) other thread; the caller clears it."""
    other = threading.Thread(target=lambda: None)
    other.start()
    other.join()
    comm.fast.in_use.owner = other.ident
    return comm.fast.in_use


@pytest.mark.parametrize("debug", [False, True])
def test_concurrent_use_raises_before_mpi(debug):
    # Deterministic: every rank sees the mark set, so every rank raises and none waits.
    comm = (DebugMPICommunicator if debug else MPICommunicator)(MPI.COMM_WORLD.Dup())
    x = numpy.ones(3)
    comm.all_reduce(x)  # the fast path's table knows float64 SUM now
    in_use = _other_thread_holds(comm)
    try:
        with pytest.raises(RuntimeError, match=r"all_reduce on the world .* while thread"):
            comm.all_reduce(x)
        with pytest.raises(RuntimeError, match="broadcast on the world"):
            comm.broadcast(x, 0)
    finally:
        in_use.owner = None
    comm.all_reduce(x)  # usable again
    numpy.testing.assert_array_equal(x, SIZE ** 2)
    # The general path checks too, in debug mode or not: calls with no fast path (reduce, the
    # _v forms, barrier), strided views, a dtype's first reduction, non-blocking starts.
    strided = numpy.ones(6)[::2]
    calls = {
        "reduce": lambda: comm.reduce(x, ReduceOp.SUM, 0),
        "all_reduce": lambda: comm.all_reduce(strided),
        "all_gather_v": lambda: comm.all_gather_v(x, numpy.empty(3 * SIZE), [3] * SIZE),
        "barrier": lambda: comm.barrier(),
        "broadcast": lambda: comm.broadcast(x, 0, async_op=True),
        "gather": lambda: comm.gather(x, numpy.empty(3 * SIZE), 0),
    }
    for name, call in calls.items():
        in_use = _other_thread_holds(comm)
        try:
            with pytest.raises(RuntimeError, match=f"^{name} on the world .* while thread"):
                call()
        finally:
            in_use.owner = None
    x[...] = 1
    comm.reduce(x, ReduceOp.SUM, 0)  # none of them ran: the ranks are still in step
    numpy.testing.assert_array_equal(x, SIZE if RANK == 0 else 1)
    comm.mpi_comm.Barrier()


@pytest.mark.skipif(os.environ.get("MPIFLOW_STRESS") != "1",
                    reason="a nondeterministic stress test of deliberately broken use (two "
                           "threads on one group); run it with MPIFLOW_STRESS=1")
@pytest.mark.timeout(120)
def test_two_threads_never_silently_wrong():
    """Two threads, 200 all_reduces each on the world group: every wrong result comes with
    an error on the same rank. A rank whose thread raised skipped a call the other ranks
    made; the main threads then issue the missing calls themselves (what the watchdog would
    report as a hang), and results of calls released that way are not counted."""
    if MPI.Query_thread() != MPI.THREAD_MULTIPLE:
        pytest.skip("MPI is not initialized with MPI_THREAD_MULTIPLE")
    if world_comm.checks_every_call:  # a skipped call may wait in the shadow all-gather
        pytest.skip("the release of waiting calls below assumes the fast path (no debug mode)")
    ctl = MPI.COMM_WORLD.Dup()
    warm = numpy.zeros(4)
    dist.all_reduce(warm)  # float64 SUM on the fast path from here on
    lock = threading.Lock()
    started = [0]
    inflight: dict[int, int | None] = {0: None, 1: None}
    released: set[tuple[int, int]] = set()
    wrong, errors, right, messages = [0], [0], [0], []

    def worker(t: int) -> None:
        for i in range(200):
            value = (t + 1) * 1e6 + i * 1e3 + RANK
            x = numpy.full(4, value)
            with lock:
                started[0] += 1
                inflight[t] = i
            try:
                dist.all_reduce(x)
            except RuntimeError as exc:
                with lock:
                    started[0] -= 1
                    inflight[t] = None
                    errors[0] += 1
                    messages.append(str(exc))
                time.sleep(0.0002 * (i % 5))  # let the calls interleave in varied ways
                continue
            with lock:
                inflight[t] = None
                if (t, i) in released:
                    continue
                want = SIZE * ((t + 1) * 1e6 + i * 1e3) + SIZE * (SIZE - 1) / 2
                if (x == want).all():
                    right[0] += 1
                else:
                    wrong[0] += 1

    threads = [threading.Thread(target=worker, args=(t,), name=f"worker{t}") for t in range(2)]
    for thread in threads:
        thread.start()
    last = None
    while True:
        time.sleep(0.2)
        with lock:
            count, live = started[0], sum(th.is_alive() for th in threads)
        table = ctl.allgather((count, live))
        if all(lv == 0 for _, lv in table) and len({c for c, _ in table}) == 1:
            break
        if table != last:  # still moving
            last = table
            continue
        # Stable: every live thread waits in a call that some finished rank skipped.
        with lock:
            released.update((t, i) for t, i in inflight.items() if i is not None)
        ctl.Barrier()  # every rank marked its waiting calls before any is released
        live_counts = [c for c, lv in table if lv]
        target = min(live_counts) if live_counts else max(c for c, _ in table)
        if live == 0 and count < target:
            for _ in range(target - count):
                world_comm.mpi_comm.Allreduce(MPI.IN_PLACE, numpy.zeros(4), MPI.SUM)
            with lock:
                started[0] = target
        last = None
    for thread in threads:
        thread.join()
    summary = ctl.allgather((right[0], wrong[0], errors[0]))
    ctl.Barrier()
    ctl.Free()
    print(f"rank {RANK}: right, wrong, errors per rank: {summary}")
    assert wrong[0] == 0 or errors[0] > 0, f"rank {RANK}: {wrong[0]} wrong results, no error"
    for message in messages:
        assert "all_reduce on the world" in message and "worker" in message
