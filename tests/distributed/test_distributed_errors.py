"""Bad input to ``mpiflow.distributed`` raises on the calling rank before anything is sent.

Every call here raises on every rank (so no rank is left inside a collective). Checks that only
the source/destination rank makes are triggered by passing each rank's *own* rank as src/dst:
every rank is then "the root" and raises before communicating.
"""

from __future__ import annotations

import numpy
import pytest
from collective_helpers import INVALID_PAIRS, RANK, WORLD, pair_id

import mpiflow.distributed as dist
from mpiflow.distributed import ReduceOp

pytestmark = pytest.mark.mpi

X = numpy.zeros(4, dtype=numpy.float32)


def f32(*shape):
    return numpy.zeros(shape, dtype=numpy.float32)


# -- ranks ------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [WORLD, -1, WORLD + 5])
def test_bad_src_dst(bad):
    x = f32(4)
    cases = [
        ("src", lambda: dist.broadcast(x, src=bad)),
        ("src", lambda: dist.broadcast(x, src=bad, async_op=True)),
        ("dst", lambda: dist.reduce(x, dst=bad)),
        ("dst", lambda: dist.gather(x, [f32(4)] * WORLD, dst=bad)),
        ("src", lambda: dist.scatter(x, [f32(4)] * WORLD, src=bad)),
        ("dst", lambda: dist.send(x, dst=bad)),
        ("dst", lambda: dist.isend(x, dst=bad)),
        ("src", lambda: dist.recv(x, src=bad)),
        ("src", lambda: dist.irecv(x, src=bad)),
        ("src", lambda: dist.broadcast_object_list([1], src=bad)),
        ("dst", lambda: dist.gather_object(1, [None] * WORLD, dst=bad)),
        ("src", lambda: dist.scatter_object_list([None], [1] * WORLD, src=bad)),
    ]
    for what, call in cases:
        with pytest.raises(ValueError, match=rf"{what}={bad} is not a rank of the world"):
            call()


@pytest.mark.parametrize("bad", [None, "zero", 1.5j])
def test_src_of_wrong_type(bad):
    with pytest.raises(TypeError, match="src must be an int rank"):
        dist.broadcast(f32(2), src=bad)
    with pytest.raises(TypeError, match="dst must be an int rank"):
        dist.reduce(f32(2), dst=bad)


def test_send_recv_to_self():
    x = f32(2)
    with pytest.raises(ValueError, match=f"dst={RANK} is this process's own rank"):
        dist.send(x, dst=RANK)
    with pytest.raises(ValueError, match=f"dst={RANK} is this process's own rank"):
        dist.isend(x, dst=RANK)
    with pytest.raises(ValueError, match=f"src={RANK} is this process's own rank"):
        dist.recv(x, src=RANK)
    with pytest.raises(ValueError, match=f"src={RANK} is this process's own rank"):
        dist.irecv(x, src=RANK)


# -- lists ------------------------------------------------------------------------------------


@pytest.mark.parametrize("length", [WORLD - 1, WORLD + 1])
def test_list_length(length):
    items = [f32(4) for _ in range(length)]
    match = rf"must have one entry per rank of the group \({WORLD}\), got {length}"
    with pytest.raises(ValueError, match="tensor_list " + match):
        dist.all_gather(items, f32(4))
    with pytest.raises(ValueError, match="tensor_list " + match):
        dist.all_gather(items, f32(4), async_op=True)
    with pytest.raises(ValueError, match="input_list " + match):
        dist.reduce_scatter(f32(4), items)
    with pytest.raises(ValueError, match="input_tensor_list " + match):
        dist.all_to_all([f32(4) for _ in range(WORLD)], items)
    with pytest.raises(ValueError, match="output_tensor_list " + match):
        dist.all_to_all(items, [f32(4) for _ in range(WORLD)])
    with pytest.raises(ValueError, match="gather_list " + match):
        dist.gather(f32(4), items, dst=RANK)
    with pytest.raises(ValueError, match="scatter_list " + match):
        dist.scatter(f32(4), items, src=RANK)
    with pytest.raises(ValueError, match=rf"object_list must have one entry per rank .*got "
                                         rf"{length}"):
        dist.all_gather_object([None] * length, 1)
    with pytest.raises(ValueError, match="object_gather_list must be a list with one entry"):
        dist.gather_object(1, [None] * length, dst=RANK)
    with pytest.raises(ValueError, match="scatter_object_input_list must be a list with one"):
        dist.scatter_object_list([None], [1] * length, src=RANK)


def test_missing_root_lists():
    with pytest.raises(ValueError, match="gather_list is required on the destination rank"):
        dist.gather(f32(2), None, dst=RANK)
    with pytest.raises(ValueError, match="scatter_list is required on the source rank"):
        dist.scatter(f32(2), None, src=RANK)
    with pytest.raises(ValueError, match="object_gather_list"):
        dist.gather_object(1, None, dst=RANK)
    with pytest.raises(ValueError, match="scatter_object_input_list"):
        dist.scatter_object_list([None], None, src=RANK)


def test_mismatched_shapes_in_lists():
    bad = [f32(4) for _ in range(WORLD)]
    bad[-1] = f32(5)
    match = rf"\[{WORLD - 1}\] has shape \(5,\), expected \(4,\)"
    with pytest.raises(ValueError, match="tensor_list" + match):
        dist.all_gather(bad, f32(4))
    with pytest.raises(ValueError, match="input_list" + match):
        dist.reduce_scatter(f32(4), bad)
    with pytest.raises(ValueError, match="gather_list" + match):
        dist.gather(f32(4), bad, dst=RANK)
    with pytest.raises(ValueError, match="scatter_list" + match):
        dist.scatter(f32(4), bad, src=RANK)


def test_mismatched_dtypes():
    bad = [f32(4) for _ in range(WORLD)]
    bad[0] = numpy.zeros(4, dtype=numpy.float64)
    match = r"\[0\] has dtype float64, expected float32"
    with pytest.raises(TypeError, match="tensor_list" + match):
        dist.all_gather(bad, f32(4))
    with pytest.raises(TypeError, match="input_list" + match):
        dist.reduce_scatter(f32(4), bad)
    with pytest.raises(TypeError, match="gather_list" + match):
        dist.gather(f32(4), bad, dst=RANK)
    with pytest.raises(TypeError, match="scatter_list" + match):
        dist.scatter(f32(4), bad, src=RANK)
    with pytest.raises(TypeError, match="all_to_all needs one dtype for every entry"):
        dist.all_to_all([f32(4) for _ in range(WORLD)], bad)
    with pytest.raises(TypeError, match="output_tensor has dtype float64, expected float32"):
        dist.all_gather_into_tensor(numpy.zeros(4 * WORLD), f32(4))
    with pytest.raises(TypeError, match="input has dtype float64, expected float32"):
        dist.reduce_scatter_tensor(f32(4), numpy.zeros(4 * WORLD))
    with pytest.raises(TypeError, match="output dtype int32 differs from input dtype float32"):
        dist.all_to_all_single(numpy.zeros(WORLD, dtype=numpy.int32), f32(WORLD))


def test_wrong_concat_shapes():
    with pytest.raises(ValueError, match=rf"output_tensor has shape \({WORLD * 4 + 1},\); "
                                         rf"with {WORLD} ranks it must be \({WORLD * 4},\) "
                                         rf"\(concatenated\) or \({WORLD}, 4\) \(stacked\)"):
        dist.all_gather_into_tensor(f32(WORLD * 4 + 1), f32(4))
    with pytest.raises(ValueError, match="output_tensor has shape"):
        dist.all_gather_into_tensor(f32(WORLD * 4, 2), f32(4, 1))
    with pytest.raises(ValueError, match=rf"input has shape \(3, {WORLD * 2 + 1}\)"):
        dist.reduce_scatter_tensor(f32(3, 2), f32(3, WORLD * 2 + 1))
    with pytest.raises(ValueError, match="input has shape"):
        dist.reduce_scatter_tensor(f32(), f32(WORLD + 1))


def test_all_to_all_single_bad_splits():
    x = f32(WORLD * 2, 3)
    with pytest.raises(ValueError, match=rf"input_split_sizes must be {WORLD} non-negative "
                                         rf"sizes summing to dim 0 \({WORLD * 2}\)"):
        dist.all_to_all_single(x, x, [2] * WORLD, [2] * (WORLD + 1))
    with pytest.raises(ValueError, match="input_split_sizes must be"):
        dist.all_to_all_single(x, x, [2] * WORLD, [3] * WORLD)
    with pytest.raises(ValueError, match="output_split_sizes must be"):
        dist.all_to_all_single(x, x, [-2, *[4] * (WORLD - 1)], [2] * WORLD)
    with pytest.raises(ValueError, match="at least one dimension"):
        dist.all_to_all_single(f32(), f32())
    with pytest.raises(ValueError, match="without split sizes they must match"):
        dist.all_to_all_single(f32(WORLD), f32(2 * WORLD))
    if WORLD > 1:
        with pytest.raises(ValueError, match=rf"dim 0 \({WORLD + 1}\) is not divisible by "
                                             rf"the group size \({WORLD}\); pass split sizes"):
            dist.all_to_all_single(f32(WORLD + 1), f32(WORLD + 1))


# -- reductions -------------------------------------------------------------------------------


@pytest.mark.parametrize("pair", INVALID_PAIRS, ids=pair_id)
def test_unsupported_op_dtype(pair):
    dtype, op = pair
    x = numpy.zeros(WORLD * 2, dtype=dtype)
    out = numpy.zeros(2, dtype=dtype)
    match = rf"{op!r}.* {dtype}"
    with pytest.raises(TypeError, match=match):
        dist.all_reduce(x, op=op)
    with pytest.raises(TypeError, match=match):
        dist.all_reduce(x, op=op, async_op=True)
    with pytest.raises(TypeError, match=match):
        dist.reduce(x, dst=0, op=op)
    with pytest.raises(TypeError, match=match):
        dist.reduce_scatter_tensor(out, x, op=op)
    with pytest.raises(TypeError, match=match):
        dist.reduce_scatter(out, [out] * WORLD, op=op)


def test_unsupported_messages():
    with pytest.raises(TypeError, match="AVG is undefined for bool"):
        dist.all_reduce(numpy.zeros(2, dtype=bool), op=ReduceOp.AVG)
    with pytest.raises(TypeError, match="BAND needs an integer or bool dtype, got float64"):
        dist.all_reduce(numpy.zeros(2), op=ReduceOp.BAND)
    with pytest.raises(TypeError, match="MIN is undefined for complex dtype complex64"):
        dist.all_reduce(numpy.zeros(2, dtype=numpy.complex64), op=ReduceOp.MIN)


@pytest.mark.parametrize("op", ["sum", None, 0])
def test_op_not_a_reduce_op(op):
    with pytest.raises(TypeError, match="op must be a mpiflow ReduceOp"):
        dist.all_reduce(f32(2), op=op)
    with pytest.raises(TypeError, match="op must be a mpiflow ReduceOp"):
        dist.reduce_scatter_tensor(f32(2), f32(2 * WORLD), op=op)


def test_non_numeric_dtype():
    with pytest.raises(TypeError, match="numeric or bool dtype"):
        dist.all_reduce(numpy.array(["a", "b"]))
    with pytest.raises(TypeError, match="numeric or bool dtype"):
        dist.all_reduce(numpy.array([object()]))


def test_non_native_byte_order():
    swapped = numpy.arange(4).astype(">f4")
    with pytest.raises(TypeError, match=r"machine's byte order.*newbyteorder"):
        dist.all_reduce(swapped)
    with pytest.raises(TypeError, match="machine's byte order"):
        dist.all_gather_into_tensor(numpy.empty(4 * WORLD, ">i8"), numpy.zeros(4, ">i8"))
    with pytest.raises(TypeError, match="machine's byte order"):
        dist.broadcast(numpy.zeros(3, ">i4"), 0)


def test_read_only_outputs():
    frozen = numpy.zeros(4, "f4")
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        dist.all_reduce(frozen)
    out = numpy.zeros(4 * WORLD, "f4")
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        dist.all_gather_into_tensor(out, numpy.zeros(4, "f4"))
    got = numpy.zeros(4 * WORLD, "f4")
    dist.all_gather_into_tensor(got, frozen)  # a read-only input is fine
    numpy.testing.assert_array_equal(got, numpy.zeros(4 * WORLD))


# -- non-arrays and groups --------------------------------------------------------------------


@pytest.mark.parametrize("bad", [[1.0, 2.0], "abc", None, 3, (1, 2)], ids=repr)
def test_non_array_inputs(bad):
    ok = f32(4)
    cases = [
        ("tensor", lambda: dist.all_reduce(bad)),
        ("tensor", lambda: dist.all_reduce(bad, group=dist.group.WORLD)),
        ("tensor", lambda: dist.broadcast(bad, src=0)),
        ("tensor", lambda: dist.reduce(bad, dst=0)),
        ("tensor", lambda: dist.all_gather([ok] * WORLD, bad)),
        ("tensor_list", lambda: dist.all_gather(bad, ok)),
        ("output_tensor", lambda: dist.all_gather_into_tensor(bad, ok)),
        ("input_tensor", lambda: dist.all_gather_into_tensor(f32(4 * WORLD), bad)),
        ("tensor", lambda: dist.gather(bad, [ok] * WORLD, dst=RANK)),
        ("tensor", lambda: dist.scatter(bad, [ok] * WORLD, src=RANK)),
        ("scatter_list", lambda: dist.scatter(ok, [bad] * WORLD, src=RANK)),
        ("output", lambda: dist.reduce_scatter(bad, [ok] * WORLD)),
        ("input_list", lambda: dist.reduce_scatter(ok, bad)),
        ("input", lambda: dist.reduce_scatter_tensor(ok, bad)),
        ("input_tensor_list", lambda: dist.all_to_all([ok] * WORLD, [bad] * WORLD)),
        ("output", lambda: dist.all_to_all_single(bad, ok)),
        ("input", lambda: dist.all_to_all_single(ok, bad)),
    ]
    if WORLD > 1:
        peer = (RANK + 1) % WORLD
        cases += [
            ("tensor", lambda: dist.send(bad, dst=peer)),
            ("tensor", lambda: dist.isend(bad, dst=peer)),
            ("tensor", lambda: dist.recv(bad, src=peer)),
            ("tensor", lambda: dist.irecv(bad, src=peer)),
        ]
    for what, call in cases:
        with pytest.raises(TypeError, match=rf"{what}(\[\d+\])? must be a"):
            call()


def test_python_list_hint():
    with pytest.raises(TypeError, match=r"wrap Python data with numpy\.asarray first"):
        dist.all_reduce([1, 2, 3])


@pytest.mark.parametrize("bad", ["world", [0], 0, object()],
                         ids=["str", "list", "int", "object"])
def test_group_of_wrong_type(bad):
    x = f32(WORLD)
    calls = [
        lambda: dist.all_reduce(x, group=bad),
        lambda: dist.broadcast(x, 0, group=bad),
        lambda: dist.reduce(x, 0, group=bad),
        lambda: dist.all_gather([x] * WORLD, x, group=bad),
        lambda: dist.all_gather_into_tensor(f32(WORLD * WORLD), x, group=bad),
        lambda: dist.gather(x, [x] * WORLD, group=bad),
        lambda: dist.scatter(x, [x] * WORLD, group=bad),
        lambda: dist.reduce_scatter(x, [x] * WORLD, group=bad),
        lambda: dist.reduce_scatter_tensor(f32(1), x, group=bad),
        lambda: dist.all_to_all([x] * WORLD, [x] * WORLD, group=bad),
        lambda: dist.all_to_all_single(x, x, group=bad),
        lambda: dist.barrier(group=bad),
        lambda: dist.send(x, 0, group=bad),
        lambda: dist.recv(x, 0, group=bad),
        lambda: dist.get_rank(bad),
        lambda: dist.get_world_size(bad),
        lambda: dist.get_backend(bad),
        lambda: dist.get_process_group_ranks(bad),
        lambda: dist.broadcast_object_list([1], 0, group=bad),
        lambda: dist.all_gather_object([None] * WORLD, 1, group=bad),
        lambda: dist.gather_object(1, [None] * WORLD, group=bad),
        lambda: dist.scatter_object_list([None], [1] * WORLD, group=bad),
    ]
    for call in calls:
        with pytest.raises(TypeError, match="group must be a group from new_group"):
            call()


def test_object_lists_of_wrong_type():
    with pytest.raises(TypeError, match="object_list must be a list, got tuple"):
        dist.broadcast_object_list((1, 2))
    with pytest.raises(TypeError, match="object_list must be a list, got str"):
        dist.all_gather_object("ab", 1)
    with pytest.raises(ValueError, match="scatter_object_output_list must be a non-empty list"):
        dist.scatter_object_list([], [1] * WORLD)
    with pytest.raises(ValueError, match="scatter_object_output_list must be a non-empty list"):
        dist.scatter_object_list(None, [1] * WORLD)


def test_nothing_was_left_in_flight():
    # after all the raising above, the ranks still agree on what comes next
    x = numpy.full(3, float(RANK))
    dist.all_reduce(x)
    numpy.testing.assert_array_equal(x, numpy.full(3, WORLD * (WORLD - 1) / 2))
    y = numpy.full(2, float(RANK))
    dist.broadcast(y, WORLD - 1)
    numpy.testing.assert_array_equal(y, numpy.full(2, float(WORLD - 1)))


@pytest.mark.parametrize("bad", [True, "0", 0.7, None])
def test_ranks_must_be_integers_not_bools_strings_or_floats(bad: object) -> None:
    with pytest.raises(TypeError, match="int rank"):
        dist.broadcast(numpy.ones(1), bad)  # type: ignore[arg-type]


def test_numpy_integer_ranks_are_accepted() -> None:
    x = numpy.full(1, float(dist.get_rank()))
    dist.broadcast(x, numpy.int64(0))
    assert x[0] == 0.0
