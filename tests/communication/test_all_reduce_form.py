"""The all-reduce's form (mpiflow.communication.form): in place, or out of place from a copy.

Every path that all-reduces (the fast paths of numpy arrays and torch tensors, the general
path's staged, averaged and user-defined reductions) must give the same values, bit for bit,
in either form; each test forces the form (and a size threshold between its sizes) on every
rank alike and compares with numpy on the full logical value.
"""

from __future__ import annotations

from typing import Any

import numpy
import pytest
from mpi4py import MPI
from numpy.testing import assert_array_equal

import mpiflow.distributed as dist
from mpiflow.communication import MPICommunicator, ReduceOp, fast
from mpiflow.communication.form import out_of_place_from, set_form
from mpiflow.communication.mpi.group import world_comm

pytestmark = pytest.mark.mpi

RANK, SIZE = world_comm.rank, world_comm.size
SMALL, LARGE = 3 * SIZE + 1, 4099  # elements: either side of THRESHOLD in float32
THRESHOLD = 4096  # bytes
FORMS = ["in_place", "out_of_place", THRESHOLD]


@pytest.fixture(autouse=True)
def _form_restored() -> Any:
    """Every rank leaves the form and the world's sampled check schedule as it found them."""
    due = world_comm.check_due
    saved, due[0] = due[0], 1 << 62
    yield
    due[0] = saved
    set_form(None)


@pytest.fixture(scope="module")
def comm() -> Any:
    """A communicator of this module's own, whose scratch buffer the tests can watch."""
    mpi_comm = MPI.COMM_WORLD.Dup()
    yield MPICommunicator(mpi_comm)
    mpi_comm.Free()


def rows(n: int, dtype: str = "f4", salt: int = 0) -> numpy.ndarray:
    """Every rank's input (random, non-integer values), stacked: rank r's is row r."""
    rng = numpy.random.default_rng(1234 + salt)
    return rng.standard_normal((SIZE, n)).astype(dtype)


def test_set_form_remakes_the_fast_paths(comm):
    set_form("in_place")
    assert out_of_place_from() is None
    in_place = comm.fast.all_reduce
    set_form("out_of_place")
    assert out_of_place_from() == 0
    assert comm.fast.all_reduce is comm.fast.paths["all_reduce"] is not in_place
    with fast.paused():
        set_form(THRESHOLD)  # paused: the paths stay off, and come back remade
        assert comm.fast.all_reduce is fast.never
    assert out_of_place_from() == THRESHOLD
    assert comm.fast.all_reduce is comm.fast.paths["all_reduce"]
    with pytest.raises(ValueError, match="must be one of auto, in_place, out_of_place"):
        set_form("inplace")
    with pytest.raises(ValueError, match="at least 0 bytes, got -1"):
        set_form(-1)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("n", [SMALL, LARGE])
def test_fast_path_same_bits_in_every_form(form, n):
    data = rows(n, salt=n)
    set_form("in_place")
    want = data[RANK].copy()
    dist.all_reduce(want)
    set_form(form)
    got = data[RANK].copy()
    dist.all_reduce(got)
    assert_array_equal(got, want)  # bit for bit, whatever form ran
    numpy.testing.assert_allclose(got, data.sum(axis=0, dtype="f8"), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("form", FORMS)
def test_the_scratch_buffer_is_reused(comm, form):
    set_form(form)
    scratch = comm.fast.scratch
    before = scratch.buffer
    x = numpy.ones((LARGE, 2), "f8")
    comm.all_reduce(x)
    assert_array_equal(x, SIZE)
    if form == "in_place":
        assert scratch.buffer is before  # no copy, no scratch
        return
    assert scratch.buffer.nbytes >= x.nbytes
    grown = scratch.buffer
    for _ in range(2):
        y = numpy.full(LARGE, RANK, "i8")
        comm.all_reduce(y)
        assert_array_equal(y, SIZE * (SIZE - 1) // 2)
    assert scratch.buffer is grown  # the same memory, call after call


@pytest.mark.parametrize("form", FORMS)
def test_general_path_in_every_form(comm, form):
    set_form(form)
    data = rows(2 * LARGE, "f8", salt=7)
    strided = data[RANK].copy()[::2]  # a view: staged through a copy, written back
    comm.all_reduce(strided)
    numpy.testing.assert_allclose(strided, data.sum(axis=0)[::2], rtol=1e-12)
    average = data[RANK].copy()
    comm.all_reduce(average, ReduceOp.AVG)
    numpy.testing.assert_allclose(average, data.mean(axis=0), rtol=1e-12, atol=1e-15)
    small = numpy.full(LARGE, 100 + RANK, numpy.uint8)  # wraps as numpy does, on every MPI
    comm.all_reduce(small)
    assert_array_equal(small, sum(100 + r for r in range(SIZE)) % 256)
    started = data[RANK].copy()
    work = comm.all_reduce(started, async_op=True)  # non-blocking: in place in every form
    work.wait()
    numpy.testing.assert_allclose(started, data.sum(axis=0), rtol=1e-12)


@pytest.mark.parametrize("form", FORMS)
def test_torch_backend_in_every_form(form):
    torch = pytest.importorskip("torch")
    tdist = pytest.importorskip("torch.distributed")
    import mpiflow.torch  # noqa: F401 - registers the backend

    made = not tdist.is_initialized()
    if made:
        tdist.init_process_group("mpiflow")
    try:
        data = torch.from_numpy(rows(LARGE, salt=3))
        set_form("in_place")
        want = data[RANK].clone()
        tdist.all_reduce(want)  # the address fast path (all_reduce_at)
        set_form(form)
        got = data[RANK].clone()
        tdist.all_reduce(got)
        assert torch.equal(got, want)
        strided = data[RANK].clone()[::2]
        tdist.all_reduce(strided, op=tdist.ReduceOp.AVG)  # the general path
        torch.testing.assert_close(strided, data.mean(dim=0)[::2])
    finally:
        if made:
            tdist.destroy_process_group()
