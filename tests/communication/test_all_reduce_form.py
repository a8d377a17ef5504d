"""The all-reduce's form (mpiflow.communication.form): whole or in pieces, in place or out of
place from a copy.

Every path that all-reduces (the fast paths of numpy arrays and torch tensors, the general
path's staged, averaged and user-defined reductions) must give the same values, bit for bit,
in either form; each test forces the form (and a size threshold between its sizes) on every
rank alike and compares with numpy on the full logical value. In pieces, every path must cut
the same pieces (a call may take a fast path on one rank and the general path on another) and
give the bits of raw MPI calls on those pieces.
"""

from __future__ import annotations

from typing import Any

import numpy
import pytest
from helpers import shared_memory_nodes
from mpi4py import MPI
from numpy.testing import assert_array_equal

import mpiflow.distributed as dist
from mpiflow.communication import MPICommunicator, ReduceOp, fast
from mpiflow.communication.form import (
    library_version,
    out_of_place_from,
    pieces,
    set_form,
    set_pieces,
)
from mpiflow.communication.mpi.group import world_comm
from mpiflow.core import all_reduce_form as table

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
    set_pieces(None)


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


def test_set_form_changes_the_fast_paths_form(comm):
    set_form("in_place")
    assert out_of_place_from() is None
    path, at = comm.fast.all_reduce, comm.fast.all_reduce_at
    assert comm.fast.limits.oop == 1 << 62
    set_form("out_of_place")
    assert out_of_place_from() == 0
    # The numpy path reads the form per call (the public face's function stays one
    # function); the path of an address is remade.
    assert comm.fast.all_reduce is comm.fast.paths["all_reduce"] is path
    assert comm.fast.limits.oop == 0 and comm.fast.limits.whole == -1
    assert comm.fast.all_reduce_at is comm.fast.paths["all_reduce_at"] is not at
    with fast.paused():
        set_form(THRESHOLD)  # paused: the paths stay off, and come back in the new form
        assert comm.fast.all_reduce is fast.never and comm.fast.limits.off
        assert not dist.all_reduce(numpy.ones(2))  # the public function declines too
    assert out_of_place_from() == THRESHOLD
    assert comm.fast.all_reduce is comm.fast.paths["all_reduce"] is path
    assert not comm.fast.limits.off and comm.fast.limits.oop == THRESHOLD
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


@pytest.fixture
def tdist() -> Any:
    """torch.distributed with a "mpiflow" process group (made here unless one exists)."""
    pytest.importorskip("torch")
    tdist = pytest.importorskip("torch.distributed")
    import mpiflow.torch  # noqa: F401 - registers the backend

    made = not tdist.is_initialized()
    if made:
        tdist.init_process_group("mpiflow")
    yield tdist
    if made:
        tdist.destroy_process_group()


@pytest.mark.parametrize("form", FORMS)
def test_torch_backend_in_every_form(tdist, form):
    import torch

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


PIECE = 1024  # bytes: LARGE float32 elements go in 17 pieces, the last of 3 elements


def raw_in_pieces(x: numpy.ndarray, piece: int = PIECE) -> numpy.ndarray:
    """``x`` all-reduced by raw MPI calls on the pieces mpiflow cuts: the bits to expect."""
    out = numpy.ascontiguousarray(x).copy()
    flat = out.reshape(-1)
    step = max(1, piece // out.itemsize)
    for start in range(0, flat.size, step):
        MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, flat[start:start + step], MPI.SUM)
    return out


def test_set_pieces_changes_the_fast_paths_form_and_refuses_nonsense(comm):
    set_pieces("off")
    assert pieces() is None
    path, at = comm.fast.all_reduce, comm.fast.all_reduce_at
    set_pieces(PIECE)
    assert pieces() == (PIECE, PIECE)
    assert comm.fast.all_reduce is comm.fast.paths["all_reduce"] is path
    assert (comm.fast.limits.above, comm.fast.limits.piece) == (PIECE, PIECE)
    assert comm.fast.all_reduce_at is comm.fast.paths["all_reduce_at"] is not at
    for bad in (0, "on"):
        with pytest.raises(ValueError, match=r"at least 1 byte|auto, off or a size in bytes"):
            set_pieces(bad)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("shape", [(LARGE,), (LARGE, 3), (SMALL,)])
def test_fast_path_in_pieces_gives_the_raw_pieces_bits(form, shape):
    data = rows(int(numpy.prod(shape)), salt=len(shape)).reshape(SIZE, *shape)
    set_form(form)
    set_pieces(PIECE)
    got = data[RANK].copy()
    dist.all_reduce(got)
    assert_array_equal(got, raw_in_pieces(data[RANK]))
    numpy.testing.assert_allclose(got, data.sum(axis=0, dtype="f8"), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("form", FORMS)
def test_general_path_in_pieces(comm, form):
    set_form(form)
    set_pieces(PIECE)
    data = rows(2 * LARGE, "f8", salt=11)
    strided = data[RANK].copy()[::2]  # staged through a copy, cut as the fast path cuts
    comm.all_reduce(strided)
    assert_array_equal(strided, raw_in_pieces(data[RANK][::2]))
    average = data[RANK].copy()
    comm.all_reduce(average, ReduceOp.AVG)
    numpy.testing.assert_allclose(average, data.mean(axis=0), rtol=1e-12, atol=1e-15)
    small = numpy.full(LARGE, 100 + RANK, numpy.uint8)  # mpiflow's own op where MPI's differs
    comm.all_reduce(small)
    assert_array_equal(small, sum(100 + r for r in range(SIZE)) % 256)
    started = data[RANK].copy()
    comm.all_reduce(started, async_op=True).wait()  # non-blocking: one call
    numpy.testing.assert_allclose(started, data.sum(axis=0), rtol=1e-12)


@pytest.mark.node_layout
def test_auto_pieces_are_the_tables_on_one_node_and_one_call_across_nodes():
    # The table's pieces were measured on one node; across nodes, one call. An explicit size
    # applies on any number of nodes.
    nodes, _ = shared_memory_nodes()
    set_pieces("auto")
    one_node = table.pieces(library_version(), {}, "auto", nodes=1)
    assert pieces() == (None if nodes > 1 else one_node)
    set_pieces(PIECE)
    assert pieces() == (PIECE, PIECE)
    data = rows(LARGE, salt=17)
    got = data[RANK].copy()
    dist.all_reduce(got)
    assert_array_equal(got, raw_in_pieces(data[RANK]))


def test_ranks_on_different_paths_cut_the_same_pieces():
    set_pieces(PIECE)
    data = rows(2 * LARGE, "f8", salt=13)
    # Even ranks pass a strided view (the general path), odd ones a contiguous copy of the
    # same values (the fast path): the calls must match piece by piece.
    mine = data[RANK][::2]
    x = mine.copy() if RANK % 2 else data[RANK].copy()[::2]
    dist.all_reduce(x)
    assert_array_equal(x, raw_in_pieces(mine))


def test_torch_backend_in_pieces(tdist):
    import torch

    set_pieces(PIECE)
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        data = torch.from_numpy(rows(LARGE, salt=5)).to(dtype)
        got = data[RANK].clone()
        tdist.all_reduce(got)  # the address fast path, in pieces of whole elements
        # Odd ranks again on the fast path, even ones on the general path (a strided
        # view of the same values): the calls must match piece by piece.
        mixed = data[RANK].clone() if RANK % 2 else \
            torch.stack([data[RANK], data[RANK]], dim=1)[:, 0]
        tdist.all_reduce(mixed)
        assert torch.equal(mixed, got)
        if dtype is not torch.bfloat16:
            want = raw_in_pieces(data[RANK].numpy())
            assert torch.equal(got, torch.from_numpy(want))
        torch.testing.assert_close(got, data.double().sum(dim=0).to(dtype))
