"""DistributedDataParallel with gradient_as_bucket_view: gradients as views of the flat buckets.

Exact checks use gradients whose sums are exact in float32 (small integers), so that every
summation order gives the same bits: the view path, the copy path, one all-reduce per
parameter and numpy must then agree bitwise.
"""

from __future__ import annotations

import numpy
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import mpiflow as flow
import mpiflow.distributed as dist
from mpiflow import nn
from mpiflow.communication import ReduceOp, count_collectives
from mpiflow.nn.parallel import DistributedDataParallel as ddp
from mpiflow.parallel.bucket_view import FlatGradients

pytestmark = pytest.mark.mpi

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
SHAPES = [(3,), (4, 5), (1,), (7, 2, 3), (33,), (2, 2)]  # uneven sizes


class Weighted(nn.Module):
    """sum_i sum(x_i * p_i): the gradient of p_i is x_i exactly."""

    def __init__(self, shapes: list[tuple[int, ...]], dtypes: list[str] | None = None) -> None:
        super().__init__()
        dtypes = dtypes or ["float32"] * len(shapes)
        for i, (shape, dtype) in enumerate(zip(shapes, dtypes, strict=True)):
            self.register_parameter(f"p{i}", nn.Parameter(flow.ones(*shape, dtype=dtype)))

    def forward(self, xs: list[flow.Tensor]) -> flow.Tensor:
        total = None
        for p, x in zip(list(self.parameters())[:len(xs)], xs, strict=True):
            term = (x * p).sum().to(flow.float64)
            total = term if total is None else total + term
        assert total is not None
        return total


def inputs(shapes: list[tuple[int, ...]], rank: int, dtypes: list[str] | None = None,
           step: int = 0) -> list[numpy.ndarray]:
    """Small integers, different per rank, parameter and step: exact sums in any order."""
    rng = numpy.random.default_rng(1000 * step + rank)
    dtypes = dtypes or ["float32"] * len(shapes)
    return [rng.integers(-8, 9, size=shape).astype(dtype) for shape, dtype in zip(shapes, dtypes)]


def mean_over_ranks(shapes: list[tuple[int, ...]], dtypes: list[str] | None = None,
                    steps: tuple[int, ...] = (0,)) -> list[numpy.ndarray]:
    """numpy's reference: the float sum over ranks (exact), then divided by SIZE in the
    gradient's dtype, as an averaging all-reduce does."""
    per_rank = [[sum(inputs(shapes, r, dtypes, s)[i] for s in steps) for i in range(len(shapes))]
                for r in range(SIZE)]
    out = []
    for i in range(len(shapes)):
        total = sum(per_rank[r][i] for r in range(SIZE))
        out.append(total / total.dtype.type(SIZE))
    return out


def wrapped(as_view: bool, shapes: list[tuple[int, ...]] = SHAPES,
            dtypes: list[str] | None = None, bucket_size_mb: float = 25) -> Weighted:
    return ddp(Weighted(shapes, dtypes), gradient_as_bucket_view=as_view,
               bucket_size_mb=bucket_size_mb)


def step(m: Weighted, shapes: list[tuple[int, ...]] = SHAPES, dtypes: list[str] | None = None,
         step_index: int = 0) -> None:
    xs = [flow.tensor(a) for a in inputs(shapes, RANK, dtypes, step_index)]
    m(xs).backward()


def grads(m: nn.Module) -> list[numpy.ndarray]:
    return [p.grad.numpy().copy() for p in m.parameters()]


def assert_views(m: nn.Module) -> None:
    """Every gradient is the view of its own slice of its bucket's flat buffer."""
    flat: FlatGradients = m._flat_gradients
    for index, p in enumerate(flat.params):
        bucket = flat.buckets[flat.bucket_of[index]]
        assert p.grad is flat.views[index]
        assert numpy.shares_memory(p.grad.numpy(), bucket.flat)
        slot = bucket.members.index(index)
        offset, size = bucket.offsets[slot], bucket.sizes[slot]
        assert p.grad.numpy().__array_interface__["data"][0] == \
            bucket.flat[offset:].__array_interface__["data"][0]
        assert p.grad.numel() == size


# -- the views -------------------------------------------------------------------------------

@pytest.mark.parametrize("bucket_size_mb", [25, 1e-4])  # one bucket; one per ~100 bytes
def test_gradients_are_views_of_the_buckets_and_stay_so(bucket_size_mb: float) -> None:
    m = wrapped(True, bucket_size_mb=bucket_size_mb)
    step(m)
    assert_views(m)
    flat = m._flat_gradients
    buffers = [b.flat for b in flat.buckets]
    assert len(buffers) == (1 if bucket_size_mb == 25 else len(flat.buckets))
    for a in range(len(buffers)):  # one buffer per bucket, allocated apart
        for b in range(a + 1, len(buffers)):
            assert not numpy.shares_memory(buffers[a], buffers[b])
    views = list(flat.views)
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    step(m, step_index=1)
    assert_views(m)
    assert all(v is w for v, w in zip(flat.views, views))
    assert all(b.flat is a for b, a in zip(flat.buckets, buffers))  # allocated once


def test_default_is_the_view_and_the_flag_turns_it_off() -> None:
    on, off = ddp(Weighted(SHAPES)), wrapped(False)
    step(on)
    step(off)
    assert_views(on)
    assert not hasattr(off, "_flat_gradients")
    buffers = [b.flat for b in off._ddp_reducer.buckets]
    assert not any(numpy.shares_memory(p.grad.numpy(), f)
                   for p in off.parameters() for f in buffers)


# -- exact values ----------------------------------------------------------------------------

def test_bitwise_equal_to_numpy_the_copy_path_and_per_parameter_all_reduce() -> None:
    expected = mean_over_ranks(SHAPES)
    view, copy = wrapped(True, bucket_size_mb=1e-4), wrapped(False, bucket_size_mb=1e-4)
    step(view)
    step(copy)
    plain = Weighted(SHAPES)
    step(plain)
    for p in plain.parameters():
        dist.all_reduce(p.grad, ReduceOp.AVG)
    for got_view, got_copy, got_plain, want in zip(grads(view), grads(copy), grads(plain),
                                                   expected, strict=True):
        assert got_view.dtype == want.dtype
        assert_array_equal(got_view, want)
        assert_array_equal(got_copy, want)
        assert_array_equal(got_plain, want)


def test_random_gradients_bitwise_equal_to_the_copy_path() -> None:
    """Real floats: view and copy paths all-reduce the same buckets, so the same bits."""
    def run(as_view: bool) -> list[numpy.ndarray]:
        flow.manual_seed(3)
        net = ddp(nn.Sequential(nn.Linear(6, 17), nn.Tanh(), nn.Linear(17, 3)),
                  gradient_as_bucket_view=as_view, bucket_size_mb=1e-3)
        opt = flow.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        rng = numpy.random.default_rng(RANK)
        for _ in range(3):
            opt.zero_grad()
            x = flow.tensor(rng.standard_normal((5, 6), dtype=numpy.float32))
            (net(x) ** 2).mean().backward()
            opt.step()
        return [*grads(net), *(p.numpy() for p in net.parameters())]

    for a, b in zip(run(True), run(False), strict=True):
        assert_array_equal(a, b)


def test_mixed_dtypes_get_a_bucket_each() -> None:
    shapes = [(3,), (4,), (2, 3), (5,)]
    dtypes = ["float32", "float64", "float32", "float64"]
    m = wrapped(True, shapes, dtypes)
    step(m, shapes, dtypes)
    flat = m._flat_gradients
    assert sorted(str(b.dtype) for b in flat.buckets) == ["float32", "float64"]
    assert_views(m)
    for p, want in zip(m.parameters(), mean_over_ranks(shapes, dtypes), strict=True):
        assert p.grad.dtype == p.dtype
        assert_array_equal(p.grad.numpy(), want)


# -- zero_grad, assignment, accumulation -----------------------------------------------------

@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad_then_backward_gives_this_step_only(set_to_none: bool) -> None:
    m = wrapped(True, bucket_size_mb=1e-4)
    step(m)
    m.zero_grad(set_to_none=set_to_none)
    if set_to_none:
        assert all(p.grad is None for p in m.parameters())
    else:
        assert_views(m)
        assert all(not p.grad.numpy().any() for p in m.parameters())
    step(m, step_index=1)
    assert_views(m)
    for got, want in zip(grads(m), mean_over_ranks(SHAPES, steps=(1,)), strict=True):
        assert_array_equal(got, want)


def test_optimizer_zero_grad_and_step() -> None:
    m = wrapped(True)
    opt = flow.optim.SGD(m.parameters(), lr=1.0)
    step(m)
    before = [p.numpy().copy() for p in m.parameters()]
    opt.step()
    opt.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    for p, b, g in zip(m.parameters(), before, mean_over_ranks(SHAPES), strict=True):
        assert_array_equal(p.numpy(), b - g)


def test_no_zero_grad_accumulates_into_the_view() -> None:
    m = wrapped(True)
    step(m)
    step(m, step_index=1)  # each backward averages .grad as it stands: old mean + new
    want0, want1 = mean_over_ranks(SHAPES), mean_over_ranks(SHAPES, steps=(1,))
    assert_views(m)
    for got, a, b in zip(grads(m), want0, want1, strict=True):
        assert_allclose(got, a + b, rtol=1e-6, atol=1e-6)


def test_an_assigned_gradient_is_copied_into_the_bucket() -> None:
    m = wrapped(True)
    step(m)
    m.zero_grad()
    p0 = next(iter(m.parameters()))
    mine = flow.full(tuple(p0.shape), 2.0)
    p0.grad = mine  # accumulated into by the next backward, like any existing .grad
    step(m, step_index=1)
    assert_views(m)
    assert p0.grad is not mine and mine.numpy().tolist() == numpy.full(p0.shape, 2.0).tolist()
    total = sum(inputs(SHAPES, r, step=1)[0] + numpy.float32(2) for r in range(SIZE))
    assert_array_equal(p0.grad.numpy(), total / numpy.float32(SIZE))


def test_a_gradient_of_another_shape_raises() -> None:
    w = nn.Parameter(flow.ones(2, 2))
    flat = FlatGradients([w], 1 << 20)
    w.grad = flow.ones(4)
    with pytest.raises(RuntimeError, match=r"shape \(4,\).*\(2, 2\)"):
        flat.attach(0)


def test_a_parameter_converted_after_wrapping_raises_on_every_rank() -> None:
    m = wrapped(True)
    m.to(flow.float64)
    xs = [flow.tensor(a.astype("float64")) for a in inputs(SHAPES, RANK)]
    with pytest.raises(RuntimeError, match=r"now float64 .* bucket float32.*after \.to\(\)"):
        m(xs).backward()


def test_a_user_hook_still_changes_the_gradient() -> None:
    m = wrapped(True)
    for p in m.parameters():
        p.register_hook(lambda g: g * 2)
    step(m)
    assert_views(m)
    for got, want in zip(grads(m), mean_over_ranks(SHAPES), strict=True):
        assert_array_equal(got, 2 * want)


def test_no_sync_accumulates_in_the_buckets_then_reduces_the_sum() -> None:
    view, copy = wrapped(True), wrapped(False)
    for m in (view, copy):
        with m.no_sync():
            step(m)
            step(m, step_index=1)
    assert_views(view)
    local = [a + b for a, b in zip(inputs(SHAPES, RANK), inputs(SHAPES, RANK, step=1))]
    for got, want in zip(grads(view), local, strict=True):
        assert_array_equal(got, want)  # local sums, nothing reduced
    for m in (view, copy):
        step(m, step_index=2)
    want = mean_over_ranks(SHAPES, steps=(0, 1, 2))
    for got_view, got_copy, w in zip(grads(view), grads(copy), want, strict=True):
        assert_array_equal(got_view, w)
        assert_array_equal(got_copy, w)


# -- unused parameters, collectives ------------------------------------------------------------

class Branches(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.shared = nn.Parameter(flow.ones(3))
        self.only_rank0 = nn.Parameter(flow.ones(5))
        self.never = nn.Parameter(flow.ones(2, 2))
        self.frozen = nn.Parameter(flow.ones(3), requires_grad=False)

    def forward(self, x: flow.Tensor) -> flow.Tensor:
        out = (x * self.shared + self.frozen).sum()
        if RANK == 0:
            out = out + self.only_rank0.sum() * float(SIZE)
        return out


@pytest.mark.parametrize("as_view", [True, False])
@pytest.mark.parametrize("bucket_size_mb", [25, 1e-5])  # one bucket; one per parameter
def test_unused_parameters(as_view: bool, bucket_size_mb: float) -> None:
    m = ddp(Branches(), gradient_as_bucket_view=as_view, bucket_size_mb=bucket_size_mb)
    for _ in range(2):
        m.zero_grad()
        m(flow.full((3,), float(RANK + 1))).backward()
        assert_allclose(m.shared.grad.numpy(), [(SIZE + 1) / 2] * 3)
        assert_array_equal(m.only_rank0.grad.numpy(), numpy.ones(5))
        assert_array_equal(m.never.grad.numpy(), numpy.zeros((2, 2)))
        assert m.frozen.grad is None
    if as_view:
        assert_views(m)


def test_one_collective_per_bucket() -> None:
    m = wrapped(True, bucket_size_mb=1e-4)
    buckets = len(m._flat_gradients.buckets)
    assert buckets > 2
    with count_collectives() as counts:
        step(m)
    assert counts["all_reduce"] == buckets and sum(counts.values()) == buckets
    with count_collectives() as counts:
        dist.sync_gradients(m)  # the buckets lie in one array: one all-reduce of it
    assert counts["all_reduce"] == 1 and sum(counts.values()) == 1


def test_the_buckets_of_a_dtype_lie_one_after_the_other_in_one_array() -> None:
    shapes = [(3,), (40,), (2, 3), (50,), (7,)]
    dtypes = ["float32", "float64", "float32", "float64", "float32"]
    m = wrapped(True, shapes, dtypes, bucket_size_mb=2e-5)  # 20 bytes: a bucket each
    flat = m._flat_gradients
    assert [a.dtype.name for a in flat.storage] == ["float32", "float64"]
    for storage in flat.storage:
        mine = [b for b in flat.buckets if b.dtype == storage.dtype]
        assert len(mine) >= 2 and sum(b.numel for b in mine) == storage.size
        start = storage.__array_interface__["data"][0]
        for b in mine:  # in bucket order, back to back
            assert b.flat.__array_interface__["data"][0] == start
            start += b.flat.nbytes
    step(m, shapes, dtypes)
    for p, want in zip(m.parameters(), mean_over_ranks(shapes, dtypes), strict=True):
        assert_array_equal(p.grad.numpy(), want)
    m.zero_grad()
    with count_collectives() as counts:
        dist.sync_gradients(m, average=False)
    assert counts["all_reduce"] == 2  # one per dtype


# -- sync_gradients on the flat buffers ---------------------------------------------------------

def test_sync_gradients_uses_the_flat_buffers() -> None:
    m = wrapped(True, bucket_size_mb=1e-4)
    with m.no_sync():
        step(m)
    assert_views(m)
    dist.sync_gradients(m)
    assert_views(m)
    for got, want in zip(grads(m), mean_over_ranks(SHAPES), strict=True):
        assert_array_equal(got, want)
    m.zero_grad()  # None gradients count as zeros, and come back as the views
    dist.sync_gradients(m, average=False)
    assert_views(m)
    assert all(not g.any() for g in grads(m))


def test_sync_gradients_sums_integers_and_parameters_outside_the_buckets() -> None:
    m = wrapped(True)
    extra = nn.Parameter(flow.ones(3, dtype="float64"))
    m.register_parameter("extra", extra)  # added after wrapping: not in the buckets
    with m.no_sync():
        step(m)
    extra.grad = flow.full((3,), float(RANK), dtype="float64")
    dist.sync_gradients(m, average=False)
    assert_array_equal(extra.grad.numpy(), numpy.full(3, SIZE * (SIZE - 1) / 2))
    want = [w * w.dtype.type(SIZE) for w in mean_over_ranks(SHAPES)]
    for got, w in zip(grads(m)[:len(SHAPES)], want, strict=True):
        assert_array_equal(got, w)


def test_training_matches_one_process_on_the_whole_batch() -> None:
    flow.manual_seed(7)
    ref = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 1))
    flow.manual_seed(7)
    net = ddp(nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 1)), bucket_size_mb=1e-4)
    opts = [flow.optim.Adam(m.parameters(), lr=0.01) for m in (ref, net)]
    rng = numpy.random.default_rng(11)
    for _ in range(3):
        x = flow.tensor(rng.standard_normal((4 * SIZE, 4), dtype=numpy.float32))
        y = flow.tensor(rng.standard_normal((4 * SIZE, 1), dtype=numpy.float32))
        mine = slice(4 * RANK, 4 * RANK + 4)
        for m, opt, (xs, ys) in zip((ref, net), opts, ((x, y), (x[mine], y[mine]))):
            opt.zero_grad(set_to_none=False)
            nn.functional.mse_loss(m(xs), ys).backward()
            opt.step()
    assert_views(net)
    for a, b in zip(ref.parameters(), net.parameters(), strict=True):
        assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6)


def test_a_subgroup_averages_over_its_own_ranks() -> None:
    evens, odds = list(range(0, SIZE, 2)), list(range(1, SIZE, 2)) or [0]
    groups = [dist.new_group(evens), dist.new_group(odds)]  # every rank makes both
    try:
        mine = evens if RANK % 2 == 0 else odds
        group = groups[RANK % 2]
        m = ddp(Weighted(SHAPES), process_group=group, bucket_size_mb=1e-4)
        step(m)
        assert_views(m)
        for i, got in enumerate(grads(m)):
            total = sum(inputs(SHAPES, r)[i] for r in mine)
            assert_array_equal(got, total / numpy.float32(len(mine)))
        m.zero_grad()
        with m.no_sync():
            step(m, step_index=1)
        dist.sync_gradients(m, average=False, group=group)
        for i, got in enumerate(grads(m)):
            assert_array_equal(got, sum(inputs(SHAPES, r, step=1)[i] for r in mine))
    finally:
        for g in groups:
            dist.destroy_process_group(g)
