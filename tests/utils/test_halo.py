"""mpiflow.halo: ghost rows of split tensors, against numpy, at every rank count.

Every rank runs every test (collectively); the expected extended shard is computed from the
whole array with numpy, so the tests hold for any world size, uneven and empty shards included.
"""

from __future__ import annotations

import numpy
import pytest

import mpiflow as flow
from mpiflow.halo import ghost_sources, halo_exchange
from mpiflow.sbp import balanced_bounds

pytestmark = pytest.mark.mpi

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
WORLD = flow.placement("cpu", list(range(SIZE)))


def expected_extended(full: numpy.ndarray, dim: int, ranks: list[int], width: int,
                      periodic: bool, fill: float = 0) -> numpy.ndarray:
    """This rank's shard of ``full`` (split along ``dim`` over ``ranks``) with its ghosts."""
    moved = numpy.moveaxis(full, dim, 0)
    n = moved.shape[0]
    start, stop = balanced_bounds(n, len(ranks), ranks.index(RANK))
    rows = []
    for g in range(start - width, stop + width):
        if periodic and n:
            rows.append(moved[g % n])
        elif 0 <= g < n:
            rows.append(moved[g])
        else:
            rows.append(numpy.full(moved.shape[1:], fill, dtype=full.dtype))
    out = numpy.stack(rows) if rows else numpy.empty((0, *moved.shape[1:]), full.dtype)
    return numpy.moveaxis(out, 0, dim)


@pytest.mark.parametrize(("n", "parts", "part", "width", "periodic", "want"), [
    (5, 2, 0, 1, False, (-1, 3)),
    (5, 2, 1, 2, False, (1, 2, -1, -1)),
    (5, 2, 1, 2, True, (1, 2, 0, 1)),
    (3, 4, 3, 1, False, (2, -1)),          # an empty shard at the end: rows around its place
    (3, 4, 3, 2, True, (1, 2, 0, 1)),
    (2, 1, 0, 3, True, (1, 0, 1, 0, 1, 0)),  # wider than the tensor: rows repeat
    (0, 2, 1, 1, True, (-1, -1)),
    (6, 3, 1, 0, False, ()),
])
def test_ghost_sources(n: int, parts: int, part: int, width: int, periodic: bool,
                       want: tuple[int, ...]) -> None:
    assert ghost_sources(n, parts, part, width, periodic) == want


@pytest.mark.parametrize("rows", [3 * SIZE + 1, SIZE, max(SIZE - 1, 1), 1, 0, 17])
@pytest.mark.parametrize("width", [0, 1, 2, 5])
@pytest.mark.parametrize("periodic", [False, True])
def test_rows_match_numpy(rows: int, width: int, periodic: bool) -> None:
    full = numpy.arange(rows * 3, dtype=numpy.float64).reshape(rows, 3) + 1
    t = flow.tensor(full, placement=WORLD, sbp=flow.sbp.split(0))
    got = halo_exchange(t, width, periodic=periodic)
    assert got.is_local
    want = expected_extended(full, 0, list(range(SIZE)), width, periodic)
    numpy.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("width", [1, 3])
@pytest.mark.parametrize("periodic", [False, True])
def test_split_along_a_later_dim(width: int, periodic: bool) -> None:
    full = numpy.arange(2 * (2 * SIZE + 1) * 3, dtype=numpy.int32).reshape(2, 2 * SIZE + 1, 3)
    t = flow.tensor(full, placement=WORLD, sbp=flow.sbp.split(1))
    got = halo_exchange(t, width, periodic=periodic)
    want = expected_extended(full, 1, list(range(SIZE)), width, periodic)
    assert got.numpy().dtype == numpy.int32
    numpy.testing.assert_array_equal(got.numpy(), want)


def test_fill_value_and_a_1d_tensor() -> None:
    full = numpy.arange(2 * SIZE + 1, dtype=numpy.float32)
    t = flow.tensor(full, placement=WORLD, sbp=flow.sbp.split(0))
    got = halo_exchange(t, 2, fill=-7.5)
    numpy.testing.assert_array_equal(got.numpy(),
                                     expected_extended(full, 0, list(range(SIZE)), 2, False,
                                                       fill=-7.5))


@pytest.mark.parametrize("dtype", [numpy.complex128, numpy.bool_, numpy.int8])
def test_dtypes(dtype: type) -> None:
    full = (numpy.arange(4 * SIZE + 2) % 3).astype(dtype)
    t = flow.tensor(full, placement=WORLD, sbp=flow.sbp.split(0))
    got = halo_exchange(t, 1, periodic=True)
    numpy.testing.assert_array_equal(got.numpy(),
                                     expected_extended(full, 0, list(range(SIZE)), 1, True))


@pytest.mark.parametrize("members", ["last", "ends"])
def test_placement_on_some_ranks(members: str) -> None:
    ranks = [SIZE - 1] if members == "last" else sorted({0, SIZE - 1})
    placement = flow.placement("cpu", ranks)
    full = numpy.arange(10.0).reshape(5, 2)
    t = flow.tensor(full, placement=placement, sbp=flow.sbp.split(0))
    got = halo_exchange(t, 2, periodic=True)
    if RANK in ranks:
        want = expected_extended(full, 0, ranks, 2, True)
        numpy.testing.assert_array_equal(got.numpy(), want)
    else:
        assert got.numpy().size == 0


def test_a_1d_stencil_is_the_same_as_on_the_whole_array() -> None:
    full = numpy.sin(numpy.arange(3 * SIZE + 4) * 0.7)
    t = flow.tensor(full, placement=WORLD, sbp=flow.sbp.split(0))
    ext = halo_exchange(t, 1, periodic=True)
    mine = (ext[:-2] + ext[2:] - 2.0 * ext[1:-1]).to_global(WORLD, flow.sbp.split(0))
    whole = numpy.roll(full, 1) + numpy.roll(full, -1) - 2.0 * full
    numpy.testing.assert_array_equal(mine.numpy(), whole)


def test_repeated_exchanges_do_not_mix_up_messages() -> None:
    full = numpy.arange(4 * SIZE + 3, dtype=numpy.int64)
    t = flow.tensor(full, placement=WORLD, sbp=flow.sbp.split(0))
    results = [halo_exchange(t * k, 2).numpy() for k in (1, 10, 100)]
    base = expected_extended(full, 0, list(range(SIZE)), 2, False)
    for k, got in zip((1, 10, 100), results, strict=True):
        numpy.testing.assert_array_equal(got, base * k)


def test_a_local_tensor_is_refused() -> None:
    with pytest.raises(TypeError, match="local"):
        halo_exchange(flow.tensor([1.0, 2.0]), 1)


@pytest.mark.parametrize("layout", ["broadcast", "partial", "mesh"])
def test_layouts_other_than_one_split_are_refused(layout: str) -> None:
    full = numpy.zeros((4, 2))
    if layout == "broadcast":
        t = flow.tensor(full, placement=WORLD, sbp=flow.sbp.broadcast)
    elif layout == "partial":
        t = flow.tensor(full, placement=WORLD, sbp=flow.sbp.partial_sum)
    else:
        mesh = flow.placement("cpu", [list(range(SIZE))])
        t = flow.tensor(full, placement=mesh, sbp=[flow.sbp.broadcast, flow.sbp.split(0)])
    with pytest.raises(ValueError, match="split along one dimension"):
        halo_exchange(t, 1)


@pytest.mark.parametrize("width", [-1, 1.5, True])
def test_bad_widths_are_refused(width: object) -> None:
    t = flow.tensor(numpy.zeros(4), placement=WORLD, sbp=flow.sbp.split(0))
    with pytest.raises(ValueError, match="width"):
        halo_exchange(t, width)  # type: ignore[arg-type]
