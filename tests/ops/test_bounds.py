"""Index bounds checks (mpiflow.ops.bounds) in eager mode and in replays of traced plans:
a label, row or index out of range raises eager's ``IndexError`` on replay too, on every rank
of a split index, and the plan stays usable after."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy
import pytest
from global_helpers import RANK, S0, SIZE, make

import mpiflow as flow
import mpiflow.nn as nn
import mpiflow.nn.functional as F

LOSS_ERROR = "Target {} is out of bounds"


class Replayed(nn.Graph):
    """A graph of ``fn(index)``, with the index as its one input."""

    def __init__(self, fn: Callable[[flow.Tensor], flow.Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def build(self, index: flow.Tensor) -> flow.Tensor:
        return self.fn(index)


def _raises_as_eager(fn: Callable[[flow.Tensor], flow.Tensor], good: Any,
                     bads: list[tuple[Any, int]], message: str,
                     wrap: Callable[[Any], flow.Tensor] = flow.tensor) -> None:
    """``fn`` on each bad index (with the value its error names) raises eager's error, eagerly
    and in replays of a graph traced on ``good``; ``good`` replays as eager after."""
    graph = Replayed(fn)
    want = fn(wrap(numpy.array(good))).numpy()
    numpy.testing.assert_array_equal(graph(wrap(numpy.array(good))).numpy(), want)
    assert len(graph.plans) == 1 and graph.plans[0] is not None  # replayed from here on
    for bad, value in bads:
        with pytest.raises(IndexError, match=message.format(value)):
            fn(wrap(numpy.array(bad)))
        with pytest.raises(IndexError, match=message.format(value)):
            graph(wrap(numpy.array(bad)))
    numpy.testing.assert_array_equal(graph(wrap(numpy.array(good))).numpy(), want)


def test_cross_entropy_replay_checks_its_targets() -> None:
    logits = flow.tensor(numpy.arange(16.0).reshape(4, 4) / 7)
    _raises_as_eager(lambda y: F.cross_entropy(logits, y), [0, 1, 2, 3],
                     [([0, 1, 2, 4], 4), ([0, -1, 2, 3], -1)], LOSS_ERROR)


def test_nll_loss_replay_checks_its_targets_and_skips_the_ignored() -> None:
    logp = flow.tensor(-numpy.arange(16.0).reshape(4, 4) / 7)
    _raises_as_eager(lambda y: F.nll_loss(logp, y, ignore_index=-100, reduction="sum"),
                     [0, -100, 2, 3], [([0, -100, 9, 3], 9), ([-2, -100, 2, 3], -2)],
                     LOSS_ERROR)


def test_embedding_replay_checks_its_rows() -> None:
    table = nn.Embedding(4, 2)
    _raises_as_eager(lambda i: table(i), [0, 3, 1], [([0, 4, 1], 4), ([0, -1, 1], -1)],
                     r"indices must be in \[0, 4\), got {}")


def test_take_along_dim_replay_checks_its_indices() -> None:
    x = flow.tensor([10.0, 20.0, 30.0, 40.0])
    _raises_as_eager(lambda i: flow.take_along_dim(x, i), [0, -4, 3],
                     [([0, 4, 1], 4), ([0, -5, 1], -5)],
                     "index {} is out of bounds for dimension 0 with size 4")


@pytest.mark.mpi
def test_a_split_label_out_of_range_raises_on_every_rank() -> None:
    # the bad label lies in the last rank's shard only: every rank raises, eager and replayed
    rows = 2 * SIZE + 1
    logits = make(numpy.zeros((rows, 3)), S0)
    labels = numpy.arange(rows) % 3
    bad = labels.copy()
    bad[-1] = 3

    def loss(y: flow.Tensor) -> flow.Tensor:
        return F.cross_entropy(logits, y)

    graph = Replayed(loss)
    assert abs(graph(make(labels, S0)).item() - numpy.log(3)) < 1e-12
    for run in (loss, graph):
        with pytest.raises(IndexError, match="Target 3 is out of bounds"):
            run(make(bad, S0))
    assert abs(graph(make(labels, S0)).item() - numpy.log(3)) < 1e-12
    assert graph.plans[0] is not None and RANK < SIZE
