"""MPIStore, the torch.distributed Store served over MPI: TCPStore's semantics on every rank.

Every rank builds a fresh store per test (collectively). Keys are set on one rank and read on
the others, so both rank 0's own path (the dict) and the other ranks' path (requests to rank
0's thread) are exercised. Runs at 1-4 ranks; the exit cases start their own jobs.
"""

from __future__ import annotations

import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from helpers import run_job
from mpi4py import MPI

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from mpiflow.torch.store import MPIStore  # noqa: E402 - after the importorskip of torch

pytestmark = pytest.mark.mpi
WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.Get_rank(), WORLD.Get_size()
LAST = SIZE - 1  # the rank that sets: another rank than 0 whenever there are two
TIMEOUT = timedelta(seconds=30)  # a failing test ends in this, not in the default 300 s


@pytest.fixture
def store() -> Iterator[MPIStore]:
    s = MPIStore(timeout=TIMEOUT)
    yield s
    s.close()


def later(seconds: float, fn: Callable[..., object], *args: object) -> threading.Thread:
    """Call ``fn(*args)`` in a thread after ``seconds``."""
    def run() -> None:
        time.sleep(seconds)
        fn(*args)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


# -- set / get ---------------------------------------------------------------------------------

def test_a_get_issued_before_the_set_on_another_rank_waits_for_it(store: MPIStore) -> None:
    if RANK == LAST:
        time.sleep(0.2)  # the other ranks' gets are parked on rank 0 by now
        store.set("key", b"from the last rank")
    assert store.get("key") == b"from the last rank"


def test_a_get_waits_for_a_set_from_another_thread(store: MPIStore) -> None:
    setter = later(0.1, store.set, f"thread{RANK}", f"value {RANK}")
    assert store.get(f"thread{RANK}") == f"value {RANK}".encode()
    setter.join()


def test_values_are_bytes_and_str_is_utf8_encoded(store: MPIStore) -> None:
    store.set(f"s{RANK}", "héllo")
    store.set(f"b{RANK}", b"\x00\xff")
    store.set(f"e{RANK}", "")
    assert store.get(f"s{RANK}") == "héllo".encode()
    assert store.get(f"b{RANK}") == b"\x00\xff"
    assert store.get(f"e{RANK}") == b""
    store.set(f"s{RANK}", bytearray(b"over"))  # a second set overwrites
    assert store.get(f"s{RANK}") == b"over"


def test_every_rank_sees_every_rank_s_keys(store: MPIStore) -> None:
    store.set(f"rank{RANK}", str(RANK))
    assert [store.get(f"rank{r}") for r in range(SIZE)] == [str(r).encode() for r in range(SIZE)]


# -- add ---------------------------------------------------------------------------------------

def test_add_from_every_rank_at_once_gives_the_total(store: MPIStore) -> None:
    rounds = 25
    results = [store.add("counter", RANK + 1) for _ in range(rounds)]
    assert all(isinstance(r, int) for r in results)
    assert results == sorted(results) and len(set(results)) == rounds  # each add saw a new value
    WORLD.Barrier()
    total = rounds * SIZE * (SIZE + 1) // 2
    assert store.get("counter") == str(total).encode()  # kept as decimal text
    assert store.add("counter", 0) == total


def test_add_starts_at_zero_takes_negatives_and_reads_a_set_number(store: MPIStore) -> None:
    assert store.add(f"a{RANK}", 5) == 5
    assert store.add(f"a{RANK}", -7) == -2
    assert store.get(f"a{RANK}") == b"-2"
    store.set(f"n{RANK}", "12")
    assert store.add(f"n{RANK}", 1) == 13


def test_add_to_a_value_that_is_not_a_number_raises(store: MPIStore) -> None:
    store.set(f"word{RANK}", "abc")
    with pytest.raises(ValueError, match=f"word{RANK}"):
        store.add(f"word{RANK}", 1)
    assert store.get(f"word{RANK}") == b"abc"


# -- compare_set -------------------------------------------------------------------------------

def test_compare_set_as_tcpstore(store: MPIStore) -> None:
    key = f"cs{RANK}"
    # a missing key with a non-empty expected value: not created, the expected value comes back
    assert store.compare_set(key, "old", "new") == b"old"
    assert not store.check([key])
    # a missing key with an empty expected value: created
    assert store.compare_set(key, "", "first") == b"first"
    # a match swaps, a mismatch returns the current value and changes nothing
    assert store.compare_set(key, "first", b"second") == b"second"
    assert store.compare_set(key, "wrong", "third") == b"second"
    assert store.compare_set(key, "", "third") == b"second"
    assert store.get(key) == b"second"


def test_compare_set_elects_exactly_one_rank(store: MPIStore) -> None:
    won = store.compare_set("leader", "", str(RANK)) == str(RANK).encode()
    # allgather, not allreduce: mpi4py's pickled allreduce and bcast hold the GIL while they
    # block, which would keep rank 0's store thread from answering the others' compare_set
    assert sum(WORLD.allgather(int(won))) == 1
    assert int(store.get("leader")) in range(SIZE)


# -- wait, check, timeouts ---------------------------------------------------------------------

def test_wait_returns_once_every_key_exists(store: MPIStore) -> None:
    if RANK == LAST:
        later(0.1, store.set, "w1", "1")
        later(0.2, store.set, "w2", "2")
    store.wait(["w1", "w2"])
    store.wait(["w1", "w2"], timedelta(seconds=5))
    store.wait([])
    assert store.check(["w1", "w2"])


def test_wait_with_a_timeout_raises_within_the_time(store: MPIStore) -> None:
    start = time.monotonic()
    with pytest.raises(dist.DistStoreError, match="never-set"):
        store.wait(["never-set"], timedelta(seconds=0.3))
    took = time.monotonic() - start
    assert 0.29 <= took < 5, took


def test_a_zero_timeout_checks_once(store: MPIStore) -> None:
    store.set(f"here{RANK}", "x")
    store.wait([f"here{RANK}"], timedelta(0))
    start = time.monotonic()
    with pytest.raises(dist.DistStoreError, match="absent"):
        store.wait(["absent"], timedelta(0))
    assert time.monotonic() - start < 5


def test_get_raises_after_the_store_timeout_naming_the_key(store: MPIStore) -> None:
    store.set_timeout(timedelta(seconds=0.3))
    assert store.timeout == timedelta(seconds=0.3)
    start = time.monotonic()
    with pytest.raises(dist.DistStoreError, match="missing-key"):
        store.get("missing-key")
    assert 0.29 <= time.monotonic() - start < 5
    # the store still works after a timeout, and the late key is found
    WORLD.Barrier()  # every rank has given up before the key comes
    if RANK == 0:
        store.set("missing-key", "late")
    store.set_timeout(TIMEOUT)
    assert store.get("missing-key") == b"late"


def test_check_does_not_wait(store: MPIStore) -> None:
    assert store.check([])
    assert not store.check(["nothing"])
    store.set(f"c{RANK}", "1")
    assert store.check([f"c{RANK}"])
    assert not store.check([f"c{RANK}", "nothing"])


# -- delete_key, num_keys ----------------------------------------------------------------------

def test_delete_key_says_whether_the_key_existed(store: MPIStore) -> None:
    store.set(f"d{RANK}", "x")
    assert store.delete_key(f"d{RANK}") is True
    assert store.delete_key(f"d{RANK}") is False
    assert not store.check([f"d{RANK}"])


def test_num_keys_counts_every_rank_s_keys(store: MPIStore) -> None:
    store.set(f"k{RANK}", "1")
    store.set(f"j{RANK}", "2")
    WORLD.Barrier()
    assert store.num_keys() == 2 * SIZE
    WORLD.Barrier()
    store.delete_key(f"j{RANK}")
    WORLD.Barrier()
    assert store.num_keys() == SIZE


# -- the extended API --------------------------------------------------------------------------

def test_multi_set_and_multi_get(store: MPIStore) -> None:
    assert store.has_extended_api()
    if RANK == LAST:
        time.sleep(0.1)
        store.multi_set(["m1", "m2", "m3"], ["one", b"two", ""])
    assert store.multi_get(["m3", "m1", "m2"]) == [b"", b"one", b"two"]
    assert store.multi_get([]) == []
    with pytest.raises(ValueError, match="2 keys but 1 values"):
        store.multi_set(["a", "b"], ["x"])


def test_append_creates_then_extends(store: MPIStore) -> None:
    store.append(f"log{RANK}", "ab")
    store.append(f"log{RANK}", b"cd")
    assert store.get(f"log{RANK}") == b"abcd"


def test_append_from_every_rank_keeps_every_piece(store: MPIStore) -> None:
    store.append("shared", f"<{RANK}>")
    WORLD.Barrier()
    value = store.get("shared").decode()
    assert sorted(value[i:i + 3] for i in range(0, len(value), 3)) == \
        sorted(f"<{r}>" for r in range(SIZE))


# -- through C++: PrefixStore and a gloo process group -------------------------------------------

def test_prefix_store_round_trip(store: MPIStore) -> None:
    prefixed = dist.PrefixStore("p", store)
    if RANK == LAST:
        time.sleep(0.1)
        prefixed.set("key", "value")
    assert prefixed.get("key") == b"value"
    assert store.get("p/key") == b"value"  # what the C++ PrefixStore wrote
    mine = f"r{RANK}"
    assert prefixed.add(mine, 2) == 2
    assert prefixed.compare_set(mine, "2", "3") == b"3"
    prefixed.append(mine, "!")
    prefixed.multi_set([f"{mine}a", f"{mine}b"], ["A", "B"])
    assert prefixed.multi_get([mine, f"{mine}a", f"{mine}b"]) == [b"3!", b"A", b"B"]
    prefixed.wait([mine], timedelta(seconds=5))
    assert prefixed.check([mine])
    with pytest.raises(dist.DistStoreError):
        prefixed.wait(["absent"], timedelta(seconds=0.2))
    assert prefixed.delete_key(f"{mine}b") is True  # the C++ name: deleteKey
    assert prefixed.delete_key(f"{mine}b") is False
    WORLD.Barrier()
    assert prefixed.num_keys() == store.num_keys() == 1 + 2 * SIZE  # the C++ name: getNumKeys


def test_the_store_barrier_of_torch_is_built_on_add_and_wait(store: MPIStore) -> None:
    if RANK == LAST:
        time.sleep(0.1)
    store.barrier("b", SIZE)
    dist.PrefixStore("q", store).barrier("b", SIZE, timedelta(seconds=20))


def test_a_gloo_process_group_rendezvous_through_the_store(store: MPIStore) -> None:
    if dist.is_initialized():
        pytest.skip("a default process group exists already")
    dist.init_process_group("gloo", store=dist.PrefixStore("x", store), rank=RANK,
                            world_size=SIZE, timeout=TIMEOUT)
    try:
        x = torch.full((3,), float(RANK + 1))
        dist.all_reduce(x)
        torch.testing.assert_close(x, torch.full((3,), SIZE * (SIZE + 1) / 2))
        group = dist.new_group(backend="gloo")  # a sub-group exchanges addresses too
        y = torch.ones(2)
        dist.all_reduce(y, group=group)
        torch.testing.assert_close(y, torch.full((2,), float(SIZE)))
    finally:
        dist.destroy_process_group()


# -- threads, closing --------------------------------------------------------------------------

def test_threads_of_one_rank_share_the_store(store: MPIStore) -> None:
    assert store.clone() is store
    got: dict[int, bytes] = {}

    def read(i: int) -> None:
        got[i] = store.get(f"t{i}")

    readers = [threading.Thread(target=read, args=(i,)) for i in range(3)]
    for t in readers:
        t.start()
    if RANK == LAST:
        for i in reversed(range(3)):
            time.sleep(0.05)
            store.set(f"t{i}", str(i))
    for t in readers:
        t.join(timeout=20)
    assert got == {i: str(i).encode() for i in range(3)}


def test_close_is_idempotent_and_later_calls_raise() -> None:
    s = MPIStore(timeout=TIMEOUT)
    s.set(f"x{RANK}", "1")
    s.close()
    s.close()
    with pytest.raises(dist.DistStoreError, match="closed"):
        s.get(f"x{RANK}")
    with pytest.raises(dist.DistStoreError, match="closed"):
        s.set(f"x{RANK}", "2")


def test_close_wakes_a_call_waiting_in_another_thread() -> None:
    s = MPIStore(timeout=TIMEOUT)
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            s.get("never")
        except dist.DistStoreError as error:
            errors.append(error)

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.1)
    start = time.monotonic()
    s.close()
    waiter.join(timeout=10)
    assert not waiter.is_alive() and time.monotonic() - start < 10
    assert len(errors) == 1 and "closed" in str(errors[0])


def test_a_store_on_a_sub_communicator() -> None:
    sub = WORLD.Split(RANK % 2, RANK)
    with MPIStore(sub, timeout=TIMEOUT) as s:
        s.add("members", 1)
        s.wait(["members"])
        sub.Barrier()
        assert s.get("members") == str(sub.Get_size()).encode()
    sub.Free()


# -- at exit: each case is its own job ---------------------------------------------------------

EXIT_LIMIT = 60  # the hard limit of each job


@pytest.mark.single_process
def test_rank_0_leaving_first_keeps_serving_the_others_and_nobody_hangs() -> None:
    result = run_job(2, textwrap.dedent("""
        import time
        from mpi4py import MPI
        import torch.distributed as dist
        from mpiflow.torch.store import MPIStore

        rank = MPI.COMM_WORLD.Get_rank()
        store = MPIStore()
        dist.init_process_group("gloo", store=dist.PrefixStore("x", store), rank=rank,
                                world_size=2)   # left alive at exit on purpose
        if rank == 1:
            time.sleep(1.0)  # rank 0 has reached its exit by now
            store.set("late", "yes")
            print("rank 1 got", store.get("late").decode(), store.add("n", 2), flush=True)
    """), timeout=EXIT_LIMIT)
    assert result.returncode == 0, result.stderr
    assert "rank 1 got yes 2" in result.stdout
    assert result.seconds < 40, (result.seconds, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr


@pytest.mark.single_process
def test_exiting_with_calls_still_waiting_in_threads_does_not_hang() -> None:
    result = run_job(2, textwrap.dedent("""
        import threading
        import time
        from mpi4py import MPI
        from mpiflow.torch.store import MPIStore

        rank = MPI.COMM_WORLD.Get_rank()
        store = MPIStore()
        # a daemon thread on each rank blocked in get at exit: the exit must neither wait for
        # it (300 s) nor let it touch MPI after MPI_Finalize
        threading.Thread(target=store.get, args=("never",), daemon=True).start()
        store.set(f"r{rank}", "1")
        store.wait(["r0", "r1"])
        if rank == 1:
            time.sleep(0.5)  # rank 0 is exiting: this set wakes its waiting thread there
            store.set("late", "1")
        print(f"rank {rank} done", flush=True)
    """), timeout=EXIT_LIMIT)
    assert result.returncode == 0, result.stderr
    assert "rank 0 done" in result.stdout and "rank 1 done" in result.stdout
    assert result.seconds < 40, (result.seconds, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr  # the waiting calls stay silent


def test_argument_types_are_tcpstores(store: MPIStore) -> None:
    # TCPStore's binding refuses these with TypeError; none may be stored as something else.
    with pytest.raises(TypeError, match="key must be str"):
        store.set(1, b"x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key must be str"):
        store.get(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key must be str"):
        store.check(["a", 2])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="integer amount"):
        store.add(f"n{RANK}", 1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="str or bytes"):
        store.set(f"v{RANK}", 5)  # type: ignore[arg-type]
    assert store.add(f"n{RANK}", 2) == 2
    assert not store.check([f"v{RANK}"])


@pytest.mark.mpi(min_size=2)
def test_a_set_that_times_out_in_transit_says_so_and_still_lands() -> None:
    """A large value still on its way to rank 0 when the store's timeout ends: the error says
    that rank 0 had not received it yet, how large it was, and that it takes effect when it
    arrives (it does), not that rank 0 failed to answer."""
    s = MPIStore(timeout=timedelta(milliseconds=1))
    value = b"v" * (80 << 20)
    try:
        if RANK == LAST:
            with pytest.raises(dist.DistStoreError) as caught:
                s.set("big", value)
            text = str(caught.value)
            assert f"had not received the set of 0.08 GiB from rank {LAST}" in text, text
            assert "takes effect when it arrives" in text and "set_timeout" in text
        WORLD.Barrier()
        s.set_timeout(TIMEOUT)
        assert s.get("big") == value
    finally:
        WORLD.Barrier()
        s.close()
