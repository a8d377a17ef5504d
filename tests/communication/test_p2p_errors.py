"""Point-to-point and group errors that used to be silent or raw MPI (issue #18).

A message whose size differs from the receive buffer, a tag outside MPI's range, an
out-of-group rank, a destroyed group: each raises a clear Python error. Every test runs at any
rank count; the ones that need a second rank are marked.
"""

from __future__ import annotations

import numpy
import pytest
from helpers import run_job

import mpiflow as flow
import mpiflow.distributed as dist
from mpiflow.communication.mpi.communicator import TAG_UB
from mpiflow.communication.mpi.group import ProcessGroup, world_comm

pytestmark = pytest.mark.mpi

RANK, WORLD = world_comm.rank, world_comm.size
needs_two = pytest.mark.mpi(min_size=2)
needs_three = pytest.mark.mpi(min_size=3)


def _pair_then_check(send, receive):
    """Rank 0 runs ``send()``, rank 1 ``receive()``; then one good message must still arrive
    (the bad one was consumed), and every rank meets at a barrier."""
    got = numpy.zeros(2)
    try:
        if RANK == 0:
            send()
            dist.send(numpy.full(2, 7.0), 1, tag=9)
        elif RANK == 1:
            receive()
    finally:  # keep the ranks in step even when a check fails
        if RANK == 1:
            assert dist.recv(got, 0, tag=9) == 0
        dist.barrier()
    if RANK == 1:
        assert (got == 7.0).all()


# -- 1. the received size is checked -------------------------------------------------------------
# The world's fast path (.fast's FastPaths.recv: a contiguous numpy array from an int rank)
# passes MPI no status, so a smaller message goes unnoticed there until it does.


@needs_two
@pytest.mark.parametrize("layout", ["world_fast_path",
                                    "world_general", "strided", "group"])
def test_recv_of_a_smaller_message_raises(layout):
    buf = numpy.full(10, -1.0)
    target = buf[::2] if layout == "strided" else buf[:5]
    group = dist.new_group(range(WORLD)) if layout == "group" else None
    if layout == "world_general":  # e.g. what mpiflow.comm and the object collectives use
        def receive_call():
            world_comm.recv(target, 0, 0)
    else:
        def receive_call():
            dist.recv(target, 0, group=group)

    def receive():
        with pytest.raises(ValueError, match=r"recv from rank 0 .*expected 5 elements of "
                                             r"float64 \(40 bytes\), received 3 elements"):
            receive_call()

    _pair_then_check(lambda: dist.send(numpy.arange(3.0), 1, group=group), receive)
    if group is not None:
        dist.destroy_process_group(group)


@needs_two
def test_recv_of_a_larger_message_raises():
    def receive():
        with pytest.raises(ValueError, match=r"recv from rank 0 .*expected 5 elements .*"
                                             r"larger message"):
            dist.recv(numpy.zeros(5), 0)

    _pair_then_check(lambda: dist.send(numpy.arange(8.0), 1), receive)


@needs_two
@pytest.mark.parametrize("sent", [3, 8])
def test_irecv_of_a_wrong_size_raises_at_wait(sent):
    def receive():
        work = dist.irecv(numpy.zeros(5), 0)
        with pytest.raises(ValueError, match=r"expected 5 elements of float64"):
            work.wait()

    _pair_then_check(lambda: dist.send(numpy.arange(float(sent)), 1), receive)


@needs_two
def test_recv_from_any_source_names_the_sender():
    def receive():
        with pytest.raises(ValueError, match=r"recv from rank 0 .*received 3 elements"):
            dist.recv(numpy.zeros(4))

    _pair_then_check(lambda: dist.send(numpy.arange(3.0), 1), receive)


@needs_three
def test_recv_in_a_group_names_the_world_rank():
    g = dist.new_group([1, 2])
    try:
        if RANK == 2:
            dist.send(numpy.arange(3.0), 1, group=g)
            dist.send(numpy.arange(3.0), 1, group=g)
        elif RANK == 1:
            with pytest.raises(ValueError, match=r"recv from rank 2 of the group \[1, 2\]"):
                dist.recv(numpy.zeros(6), 2, group=g)
            work = dist.irecv(numpy.zeros(6), 2, group=g)
            with pytest.raises(ValueError, match=r"recv from rank 2 of the group \[1, 2\]"):
                work.wait()
    finally:
        dist.destroy_process_group(g)
        dist.barrier()


@needs_two
@pytest.mark.parametrize("case", ["shape", "dtype"])
def test_comm_recv_with_a_wrong_shape_or_dtype_raises(case):
    # OneFlow's signature: the receiver names shape and dtype; a mismatch used to return
    # uninitialised memory.
    shape, dtype = ((5,), numpy.float64) if case == "shape" else ((3,), numpy.float32)

    def receive():
        with pytest.raises(ValueError, match=r"recv from rank 0 .*received"):
            flow.comm.recv(0, shape, dtype)

    _pair_then_check(lambda: flow.comm.send(numpy.arange(3.0), 1, send_meta=False), receive)


# -- 2. tags are checked before anything is sent -------------------------------------------------
@pytest.mark.parametrize("tag", [-1, -5, TAG_UB + 1, 2 ** 31, 2 ** 64])  # past a C int too
def test_bad_tags_raise_before_sending(tag):
    peer = (RANK + 1) % WORLD
    x = numpy.zeros(3)
    match = rf"tag={tag} is out of range: tags are 0\.\.{TAG_UB}"
    for call in (lambda: dist.send(x, peer, tag=tag), lambda: dist.recv(x, peer, tag=tag),
                 lambda: dist.isend(x, peer, tag=tag), lambda: dist.irecv(x, peer, tag=tag),
                 lambda: world_comm.send(x, peer, tag=tag),
                 lambda: world_comm.recv(x, peer, tag=tag),
                 lambda: world_comm.irecv(x, peer, tag=tag)):
        with pytest.raises(ValueError, match=match):
            call()
    # nothing was sent: the next messages match as usual
    if WORLD > 1:
        got = numpy.zeros(3)
        work = dist.irecv(got, (RANK - 1) % WORLD, tag=4)
        dist.send(numpy.full(3, float(RANK)), peer, tag=4)
        work.wait()
        assert (got == float((RANK - 1) % WORLD)).all()
    dist.barrier()


def test_the_largest_tag_is_accepted():
    if WORLD > 1:
        got = numpy.zeros(1)
        work = dist.irecv(got, (RANK - 1) % WORLD, tag=TAG_UB)
        dist.send(numpy.ones(1), (RANK + 1) % WORLD, tag=TAG_UB)
        work.wait()
        assert got[0] == 1.0


# -- 3. out-of-group ranks name the group ------------------------------------------------------
@needs_two
def test_a_group_of_the_first_ranks_is_not_called_the_world():
    g = ProcessGroup(range(WORLD - 1), None)
    assert g.describe() == f"the group {list(range(WORLD - 1))}"
    assert ProcessGroup(range(WORLD), None).describe() == f"the world (ranks 0..{WORLD - 1})"


@needs_three
def test_out_of_group_peer_names_the_group():
    g = dist.new_group([0, 1])
    try:
        if RANK in (0, 1):
            with pytest.raises(ValueError, match=r"dst=2 is not a rank of the group \[0, 1\]"):
                dist.send(numpy.zeros(2), 2, group=g)
            with pytest.raises(ValueError, match=r"src=2 is not a rank of the group \[0, 1\]"):
                dist.recv(numpy.zeros(2), 2, group=g)
    finally:
        dist.destroy_process_group(g)


# -- 4. a destroyed group raises ---------------------------------------------------------------
@pytest.mark.parametrize("members", ["all", "first"])
def test_calls_on_a_destroyed_group_raise_on_every_rank(members):
    g = dist.new_group(None if members == "all" else [0])
    dist.destroy_process_group(g)
    dist.destroy_process_group(g)  # again: harmless
    x = numpy.ones(2)
    peer = (RANK + 1) % WORLD
    calls = [lambda: dist.all_reduce(x, group=g), lambda: dist.broadcast(x, 0, group=g),
             lambda: dist.barrier(group=g), lambda: dist.all_gather([x] * WORLD, x, group=g),
             lambda: dist.all_gather_into_tensor(numpy.ones(2 * WORLD), x, group=g),
             lambda: dist.send(x, peer, group=g), lambda: dist.recv(x, peer, group=g),
             lambda: dist.isend(x, peer, group=g), lambda: dist.irecv(x, peer, group=g),
             lambda: dist.get_rank(g), lambda: dist.get_world_size(g)]
    for call in calls:
        with pytest.raises(RuntimeError, match="was destroyed by destroy_process_group"):
            call()
    # the world is unaffected, also by destroy_process_group() itself
    dist.destroy_process_group()
    assert dist.is_initialized()
    dist.all_reduce(x)
    assert (x == WORLD).all()


# -- 5. after MPI_Finalize ---------------------------------------------------------------------
@pytest.mark.single_process
def test_calls_after_finalize_raise_runtime_error():
    # MPICH aborts the process on any call after MPI_Finalize, with its own message.
    calls = ["dist.all_reduce(x)", "dist.all_reduce(x, group=g)", "dist.broadcast(x, 0)",
             "dist.recv(x)", "dist.irecv(x)", "flow.comm.barrier()", "flow.comm.all_reduce(x)"]
    code = ("import numpy, mpiflow as flow, mpiflow.distributed as dist\n"
            "from mpi4py import MPI\n"
            "g = dist.new_group([0])\n"
            "x = numpy.ones(2)\n"
            "dist.all_reduce(x)\n"
            "MPI.Finalize()\n"
            f"for call in {calls!r}:\n"
            "    try:\n"
            "        eval(call)\n"
            "    except RuntimeError as exc:\n"
            "        print('caught:', exc)\n")
    job = run_job(1, code, timeout=60)
    assert job.stdout.count("caught: MPI is finalized") == len(calls), (job.stdout, job.stderr)
    assert job.returncode == 0, job.stderr


@pytest.mark.single_process
def test_first_uses_after_finalize_raise_too():
    # Calls whose first step is not on a group's communicator: a reduction's one-time probe of
    # the library (float32 is reduced here for the first time), a new group, a placement's
    # split, a global tensor's boxing. Each raised MPICH's own abort before.
    calls = ["dist.all_reduce(numpy.ones(2, numpy.float32))", "dist.new_group([0])",
             "flow.ones(4, placement=flow.placement('cpu', [0, 1]), sbp=flow.sbp.split(0))"
             ".sum().numpy()",
             "flow.ones(2, placement=flow.placement('cpu', [1]), sbp=flow.sbp.broadcast)"
             ".to_global(placement=flow.placement('cpu', [0, 1]), sbp=flow.sbp.broadcast)"
             ".numpy()"]
    code = ("import numpy, mpiflow as flow, mpiflow.distributed as dist\n"
            "from mpi4py import MPI\n"
            "MPI.Finalize()\n"
            f"for call in {calls!r}:\n"
            "    try:\n"
            "        eval(call)\n"
            "    except RuntimeError as exc:\n"
            # one write per line: the two ranks' lines must not interleave mid-line
            "        print(f'caught: {exc}', flush=True)\n"
            "dist.all_reduce(numpy.ones(2, numpy.int16))  # uncaught: a traceback, exit 1\n")
    job = run_job(2, code, timeout=60)
    assert job.stdout.count("caught: MPI is finalized") == 2 * len(calls), (job.stdout,
                                                                           job.stderr)
    assert "before initializing or after finalizing" not in job.stderr
    assert job.returncode != 0
    assert "] RuntimeError: MPI is finalized" in job.stderr, job.stderr
