"""Bad arguments on one rank of the "mpiflow" backend: the same error on every rank, or a call
that completes on every rank and then raises on that one; never ranks left out of step.

An argument error that one rank finds (a short ``gather_list`` on the destination, a wrong
size in ``scatter_list`` on the source, a long output list on one rank) is announced to the
others as in the numpy API: the call is checked (the first calls on a group are), so every
rank raises ``CollectiveMismatchError`` naming it. An output that overlaps itself (a stride-0
view) is nothing the others could know of: the call runs into a copy, then that rank raises.
Runs at 1-4 ranks.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

import mpiflow.distributed as mdist  # noqa: E402
from mpiflow.communication.debug.mode import CollectiveMismatchError  # noqa: E402
from mpiflow.communication.debug.sampled import check_mode  # noqa: E402
from mpiflow.communication.mpi.group import world_comm  # noqa: E402

pytestmark = pytest.mark.mpi
RANK, SIZE = world_comm.rank, world_comm.size
LAST = SIZE - 1


@pytest.fixture(scope="module", autouse=True)
def default_group():
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("mpiflow")
    yield dist.group.WORLD
    dist.destroy_process_group()


def two(value: float) -> torch.Tensor:
    return torch.full((2,), float(value))


CASES: dict[str, tuple[Callable[[object], None], str]] = {
    # gather_list one short on the destination (one long at 1 rank: torch refuses [] itself)
    "gather": (lambda g: dist.gather(two(RANK), [two(0) for _ in range(SIZE - 1 or 2)]
                                     if RANK == 0 else None, dst=0, group=g),
               "gather_list must have one tensor per rank of the group"),
    # a wrong-size first entry of scatter_list on the source
    "scatter": (lambda g: dist.scatter(two(0), [torch.zeros(3 if i == 0 else 2)
                                                for i in range(SIZE)]
                                       if RANK == 0 else None, src=0, group=g),
                r"scatter_list\[0\] has shape \(3,\)"),
    # one output too many on the last rank
    "all_gather": (lambda g: dist.all_gather([two(0) for _ in range(SIZE + (RANK == LAST))],
                                             two(RANK), group=g),
                   "output_tensor_list must have one tensor per rank of the group"),
}


@pytest.mark.skipif(check_mode() == "off", reason="MPIFLOW_CHECK=off compares no call")
@pytest.mark.parametrize("case", sorted(CASES))
def test_an_argument_error_on_one_rank_raises_on_every_rank(case: str) -> None:
    call, message = CASES[case]
    group = dist.new_group(list(range(SIZE)))  # a new group: its first calls are checked
    if SIZE == 1:
        with pytest.raises(ValueError, match=message):
            call(group)
    else:
        with pytest.raises(CollectiveMismatchError, match="raised before taking part") as info:
            call(group)
        assert re.search(message, str(info.value)), info.value  # the failing rank's error
    t = two(9.0 if RANK == 0 else -1.0)
    dist.broadcast(t, src=0, group=group)  # in step: every rank gets rank 0's
    assert t.tolist() == [9.0, 9.0]
    dist.destroy_process_group(group)


@pytest.mark.parametrize("api", ["torch", "mpiflow"])
@pytest.mark.parametrize("op", ["broadcast", "all_reduce"])
def test_an_output_overlapping_itself_on_one_rank_completes_the_call_then_raises(
        api: str, op: str) -> None:
    face = dist if api == "torch" else mdist
    value = 5 if RANK == 0 else RANK + 1
    x = (torch.full((1,), value).expand(4) if RANK == LAST  # stride 0: one memory cell
         else torch.full((4,), value))
    if op == "broadcast":
        fails, expected = RANK == LAST and LAST != 0, 5  # the root only reads
        call = lambda: face.broadcast(x, src=0)  # noqa: E731
    else:
        fails, expected = RANK == LAST, 5 + sum(range(2, SIZE + 1))  # LAST's values count
        call = lambda: face.all_reduce(x)  # noqa: E731
    if fails:
        with pytest.raises(ValueError, match=r"overlaps itself.*completed on every rank"):
            call()
        assert x.tolist() == [value] * 4  # untouched
    else:
        call()
        assert x.tolist() == [expected] * 4
    t = torch.full((4,), 7 if RANK == 0 else -1)
    face.broadcast(t, src=0)  # in step: not the failed call's data
    assert t.tolist() == [7] * 4
