"""sync_initial_weights / sync_gradients on dicts and lists of arrays, and the packing."""

from __future__ import annotations

import numpy
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import mpiflow.distributed as dist
from mpiflow.communication import count_collectives
from mpiflow.parallel.packing import make_buckets

pytestmark = pytest.mark.mpi

RANK, SIZE = dist.get_rank(), dist.get_world_size()


def model_arrays(rank: int) -> dict[str, numpy.ndarray]:
    rng = numpy.random.default_rng(rank)
    return {
        "w1": rng.standard_normal((5, 3)),
        "b1": rng.standard_normal(5).astype(numpy.float32),
        "w2": rng.standard_normal((3 * SIZE + 1, 5)),
        "count": numpy.array([rank], dtype=numpy.int64),
        "empty": numpy.zeros((0, 4)),
    }


def test_initial_weights_come_from_src_in_one_collective_per_dtype() -> None:
    src = SIZE - 1
    arrays = model_arrays(RANK)
    with count_collectives() as counts:
        dist.sync_initial_weights(arrays, src=src, check=False)
    expected = model_arrays(src)
    for key in arrays:
        assert_array_equal(arrays[key], expected[key], err_msg=key)
    assert counts["broadcast"] == 3  # float64, float32, int64


def test_gradients_are_averaged_or_summed() -> None:
    grads = [model_arrays(RANK)["w1"], model_arrays(RANK)["b1"]]
    dist.sync_gradients(grads)
    every = [model_arrays(r) for r in range(SIZE)]
    assert_allclose(grads[0], sum(e["w1"] for e in every) / SIZE, rtol=1e-12)
    assert_allclose(grads[1], sum(e["b1"] for e in every) / SIZE, rtol=1e-5)
    summed = [numpy.full(3, float(RANK))]
    dist.sync_gradients(summed, average=False)
    assert_array_equal(summed[0], SIZE * (SIZE - 1) / 2)


def test_a_hundred_tensors_take_a_few_collectives() -> None:
    grads = [numpy.full(10 + i, float(RANK), dtype=numpy.float32) for i in range(100)]
    with count_collectives() as counts:
        dist.sync_gradients(grads)
    assert counts["all_reduce"] == 1
    for g in grads:
        assert_allclose(g, (SIZE - 1) / 2)


def test_claims_and_mismatched_models_raise() -> None:
    with pytest.raises(ValueError, match="world_size"):
        dist.sync_gradients([numpy.ones(2)], world_size=SIZE + 1)
    with pytest.raises(ValueError, match="rank"):
        dist.sync_initial_weights([numpy.ones(2)], rank=RANK + 1)
    if SIZE > 1:
        mine = [numpy.ones(2 + (RANK == 1))]
        with pytest.raises(ValueError, match="different tensors"):
            dist.sync_initial_weights(mine)
    with pytest.raises(TypeError, match="Module"):
        dist.sync_gradients(42)


def test_buckets_respect_dtype_size_and_first_bucket_limit() -> None:
    shapes = [((300,), "f4")] * 10 + [((7,), "f8")]
    buckets = make_buckets(shapes, limit_bytes=4000, first_limit_bytes=1300)
    assert [b.members for b in buckets] == [[0], [1, 2, 3], [4, 5, 6], [7, 8, 9], [10]]
    arrays = [numpy.full(s[0], i, dtype=s[1]) for i, s in enumerate(shapes)]
    flat = buckets[1].pack(arrays)
    assert_array_equal(flat, numpy.repeat([1, 2, 3], 300))
    flat[:] = 9
    buckets[1].unpack(arrays, scale=0.5)
    assert_array_equal(arrays[2], 4.5)


def test_large_gradients_are_reduced_in_place_and_small_ones_packed() -> None:
    big = numpy.full(100_000, float(RANK), dtype=numpy.float32)  # 400 KB: reduced where it is
    small = [numpy.full(10, float(RANK)) for _ in range(5)]
    with count_collectives() as counts:
        dist.sync_gradients([big, *small])
    assert counts["all_reduce"] == 2
    assert_allclose(big, (SIZE - 1) / 2)
    for s in small:
        assert_allclose(s, (SIZE - 1) / 2)
