"""mpiflow.utils.data: datasets, collation, DataLoader batching and shuffling, and
DistributedSampler against PyTorch's rules (REFERENCE.md's examples) on every rank count."""

from __future__ import annotations

import collections

import numpy
import pytest
from numpy.testing import assert_array_equal

import mpiflow as flow
from mpiflow.distributed import all_gather_object
from mpiflow.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    DistributedSampler,
    RandomSampler,
    SequentialSampler,
    Subset,
    TensorDataset,
    default_collate,
)

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
ALL = flow.placement("cpu", list(range(SIZE)))


def shares(n: int, replicas: int, **options: object) -> list[list[int]]:
    return [list(DistributedSampler(range(n), replicas, r, **options))  # type: ignore[arg-type]
            for r in range(replicas)]


# -- datasets and collation ------------------------------------------------------------------
@pytest.mark.mpi
def test_tensor_dataset_rows_share_memory() -> None:
    x = flow.arange(12).reshape(4, 3)
    ds = TensorDataset(x, numpy.array([0.5, 1.5, 2.5, 3.5]))
    assert len(ds) == 4
    row, value = ds[2]
    assert row.tolist() == [6, 7, 8] and value.item() == 2.5 and value.shape == ()
    x[2, 0] = -1
    assert ds[2][0].tolist() == [-1, 7, 8]
    with pytest.raises(ValueError, match="Size mismatch"):
        TensorDataset(flow.zeros(3), flow.zeros(4))
    with pytest.raises(TypeError, match="local data"):
        TensorDataset(flow.zeros(SIZE, placement=ALL, sbp=flow.sbp.split(0)))
    sub = Subset(ds, [3, 0])
    assert len(sub) == 2 and sub[0][0].tolist() == [9, 10, 11]


def test_default_collate_follows_pytorch() -> None:
    point = collections.namedtuple("point", "x y")
    batch = default_collate([
        {"t": flow.tensor([1.0, 2.0]), "a": numpy.array([1, 2], dtype=numpy.int32),
         "f": 0.5, "i": 3, "b": True, "s": "one", "p": point(1, 2.0), "pair": (1, [2.0])},
        {"t": flow.tensor([3.0, 4.0]), "a": numpy.array([3, 4], dtype=numpy.int32),
         "f": 1.5, "i": 4, "b": False, "s": "two", "p": point(3, 4.0), "pair": (5, [6.0])},
    ])
    assert batch["t"].tolist() == [[1.0, 2.0], [3.0, 4.0]] and batch["t"].dtype == flow.float32
    assert batch["a"].dtype == flow.int32 and batch["a"].shape == (2, 2)
    assert batch["f"].dtype == flow.float64 and batch["f"].tolist() == [0.5, 1.5]
    assert batch["i"].dtype == flow.int64 and batch["b"].dtype == flow.bool
    assert batch["s"] == ["one", "two"]
    assert isinstance(batch["p"], point) and batch["p"].x.tolist() == [1, 3]
    assert isinstance(batch["pair"], list) and batch["pair"][0].tolist() == [1, 5]
    assert batch["pair"][1][0].tolist() == [2.0, 6.0]
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([flow.zeros(2), flow.zeros(3)])
    with pytest.raises(TypeError, match="default_collate"):
        default_collate([object()])


# -- samplers and the loader -------------------------------------------------------------------
def test_dataloader_batches_in_order_with_and_without_drop_last() -> None:
    ds = TensorDataset(flow.arange(10), flow.arange(10) * 10)
    loader = DataLoader(ds, batch_size=4)
    assert len(loader) == 3
    batches = list(loader)
    assert [b[0].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert batches[2][1].tolist() == [80, 90]
    dropped = DataLoader(ds, batch_size=4, drop_last=True)
    assert len(dropped) == 2 and [b[0].shape[0] for b in dropped] == [4, 4]
    assert [x.tolist() for x, _ in DataLoader(ds)][:2] == [[0], [1]]
    single = list(DataLoader(ds, batch_size=None))
    assert len(single) == 10 and single[3][0].shape == ()
    custom = DataLoader(ds, batch_size=3, collate_fn=lambda samples: len(samples))
    assert list(custom) == [3, 3, 3, 1]
    by_batches = DataLoader(ds, batch_sampler=[[9, 0], [5]])
    assert [b[0].tolist() for b in by_batches] == [[9, 0], [5]]


@pytest.mark.mpi
def test_shuffling_is_seeded_and_changes_every_epoch() -> None:
    ds = TensorDataset(flow.arange(20))
    loader = DataLoader(ds, batch_size=6, shuffle=True, seed=3)
    epochs = [numpy.concatenate([b[0].numpy() for b in loader]) for _ in range(3)]
    for order in epochs:
        assert sorted(order.tolist()) == list(range(20))
    assert not numpy.array_equal(epochs[0], epochs[1])
    again = DataLoader(ds, batch_size=6, shuffle=True, seed=3)
    assert_array_equal(numpy.concatenate([b[0].numpy() for b in again]), epochs[0])
    rng = DataLoader(ds, batch_size=20, shuffle=True,
                     generator=numpy.random.default_rng(3))
    assert_array_equal(next(iter(rng))[0].numpy(), epochs[0])
    flow.manual_seed(0)  # no seed: mpiflow's default generator, the same on every rank
    first = next(iter(DataLoader(ds, batch_size=20, shuffle=True)))[0].tolist()
    orders: list[object] = [None] * SIZE
    all_gather_object(orders, first)
    assert all(o == first for o in orders) and sorted(first) == list(range(20))
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        DataLoader(ds, shuffle=True, sampler=SequentialSampler(ds))
    with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive"):
        DataLoader(ds, batch_size=2, batch_sampler=[[0]])


def test_samplers() -> None:
    assert list(SequentialSampler(range(3))) == [0, 1, 2]
    assert sorted(RandomSampler(range(7), seed=1)) == list(range(7))
    assert list(BatchSampler(range(7), 3, drop_last=False)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert len(BatchSampler(range(7), 3, drop_last=True)) == 2
    with pytest.raises(ValueError, match="positive integer"):
        BatchSampler(range(3), 0, False)

    class Squares(Dataset):
        def __len__(self) -> int:
            return 5

        def __getitem__(self, i: int) -> int:
            return i * i

    assert [b.tolist() for b in DataLoader(Squares(), batch_size=2)] == [[0, 1], [4, 9], [16]]


# -- DistributedSampler ------------------------------------------------------------------------
def test_distributed_sampler_reference_examples() -> None:
    assert shares(10, 4, shuffle=False) == [[0, 4, 8], [1, 5, 9], [2, 6, 0], [3, 7, 1]]
    assert shares(10, 4, shuffle=False, drop_last=True) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert shares(3, 4, shuffle=False) == [[0], [1], [2], [0]]
    assert shares(2, 5, shuffle=False) == [[0], [1], [0], [1], [0]]  # padding repeats
    assert shares(3, 4, shuffle=False, drop_last=True) == [[], [], [], []]
    sampler = DistributedSampler(range(10), 4, 1, shuffle=False)
    assert len(sampler) == 3 and sampler.total_size == 12
    with pytest.raises(ValueError, match="Invalid rank 4"):
        DistributedSampler(range(10), 4, 4)


@pytest.mark.parametrize("drop_last", [False, True])
def test_shuffled_shares_cover_the_dataset_and_follow_the_epoch(drop_last: bool) -> None:
    n, replicas = 23, 4

    def expected(epoch: int) -> list[list[int]]:
        order = numpy.random.default_rng(5 + epoch).permutation(n).tolist()
        order = order[:20] if drop_last else order + order[:1]  # cut, or pad from the start
        return [order[r::replicas] for r in range(replicas)]

    first = shares(n, replicas, seed=5, drop_last=drop_last)
    assert first == expected(0)
    merged = [i for part in first for i in part]
    if drop_last:
        assert len(merged) == 20 and len(set(merged)) == 20
    else:
        assert set(merged) == set(range(n)) and len(merged) == 24
    samplers = [DistributedSampler(range(n), replicas, r, seed=5, drop_last=drop_last)
                for r in range(replicas)]
    for s in samplers:
        s.set_epoch(1)
    second = [list(s) for s in samplers]
    assert second == expected(1) and second != first


@pytest.mark.mpi
def test_default_replicas_and_identical_orders_on_every_rank() -> None:
    n = 4 * SIZE + 3
    sampler = DistributedSampler(range(n), seed=7)
    assert sampler.num_replicas == SIZE and sampler.rank == RANK
    sampler.set_epoch(3)
    everyone: list[object] = [None] * SIZE
    all_gather_object(everyone, list(sampler))
    for r in range(SIZE):  # every rank built the same permutation and took its share
        expect = DistributedSampler(range(n), SIZE, r, seed=7)
        expect.set_epoch(3)
        assert everyone[r] == list(expect)
    assert {i for part in everyone for i in part} == set(range(n))  # type: ignore[attr-defined]


@pytest.mark.mpi
def test_data_parallel_loader_gives_global_batches() -> None:
    n = 5 * SIZE
    x = numpy.arange(n * 2, dtype=numpy.float32).reshape(n, 2)
    ds = TensorDataset(x, numpy.arange(n))
    sampler = DistributedSampler(ds, shuffle=False)
    loader = DataLoader(ds, batch_size=2, sampler=sampler)
    assert len(loader) == 3
    rows, labels = next(iter(loader))
    assert labels.tolist() == [RANK, RANK + SIZE]
    batch = rows.to_global(ALL, flow.sbp.split(0))
    assert batch.shape == (2 * SIZE, 2)
    assert_array_equal(batch.numpy()[:, 0], numpy.array(
        [[r * 2, (r + SIZE) * 2] for r in range(SIZE)]).ravel())
