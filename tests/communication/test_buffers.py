"""Outputs a rank cannot write (read-only arrays): the call still completes on every rank, into
a scratch buffer on that rank, which then raises; no message is left for its next call.

Before, mpi4py refused the buffer on that rank alone while the others ran the call (a
broadcast's root finished it), and that rank's next call received the failed one's data.
"""

from __future__ import annotations

import numpy
import pytest

import mpiflow.distributed as dist
from mpiflow.communication.mpi.group import world_comm

pytestmark = pytest.mark.mpi

RANK, SIZE = world_comm.rank, world_comm.size
LAST = SIZE - 1
COMPLETED = "read-only.*The call completed on every rank"


def read_only_on_last(values: numpy.ndarray) -> numpy.ndarray:
    if RANK == LAST:
        values.flags.writeable = False
    return values


def assert_in_step() -> None:
    """The next broadcast gives every rank rank 0's new values (not a failed call's)."""
    fresh = numpy.full(4, 7.0 if RANK == 0 else -1.0)
    dist.broadcast(fresh, src=0)
    assert fresh.tolist() == [7.0] * 4


@pytest.mark.parametrize("op", ["broadcast", "all_reduce"])
def test_a_read_only_output_on_one_rank_completes_the_call_then_raises(op: str) -> None:
    x = read_only_on_last(numpy.full(4, 5.0 if RANK == 0 else float(RANK + 1)))
    if op == "broadcast":
        fails = RANK == LAST and LAST != 0  # the root only reads
        expected = [5.0] * 4
        call = lambda: dist.broadcast(x, src=0)  # noqa: E731
    else:
        fails = RANK == LAST
        expected = [5.0 + sum(range(2, SIZE + 1))] * 4  # rank LAST's values are summed too
        call = lambda: dist.all_reduce(x)  # noqa: E731
    if fails:
        with pytest.raises(ValueError, match=COMPLETED):
            call()
    else:
        call()
        assert x.tolist() == expected
    assert_in_step()


@pytest.mark.skipif(SIZE == 1, reason="a message between two ranks")
def test_a_recv_into_a_read_only_array_takes_the_message_then_raises() -> None:
    if RANK == 0:
        dist.send(numpy.full(3, 1.0), dst=LAST, tag=3)
        dist.send(numpy.full(3, 2.0), dst=LAST, tag=3)
    elif RANK == LAST:
        with pytest.raises(ValueError, match=COMPLETED):
            dist.recv(read_only_on_last(numpy.zeros(3)), src=0, tag=3)
        second = numpy.zeros(3)
        dist.recv(second, src=0, tag=3)
        assert second.tolist() == [2.0] * 3  # not the first message, left pending
    assert_in_step()


@pytest.mark.parametrize("at_call", [1, 3])
def test_a_read_only_output_keeps_the_check_schedule_in_step(at_call: int) -> None:
    # Call 3 on a new group is one the sampled schedule skips: the rank whose output is
    # read-only must count it as the others do, or their next checked calls (4, 8) part ways.
    group = dist.new_group(list(range(SIZE)))
    for call in range(1, 9):
        x = numpy.full(2, float(RANK + 1))
        if call == at_call and RANK == LAST:
            x.flags.writeable = False
            with pytest.raises(ValueError, match=COMPLETED):
                dist.all_reduce(x, group=group)
        else:
            dist.all_reduce(x, group=group)
            assert x.tolist() == [SIZE * (SIZE + 1) / 2] * 2
