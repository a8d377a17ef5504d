"""The array API namespace on split arrays: values equal numpy's on the whole array, results
stay split where the input was, and no function gathers a split array (every
redistribution the engine makes is recorded: none turns a split of the whole array into a
broadcast); the collectives of a few are counted."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import mpiflow as flow
from mpiflow import array_api as xp
from mpiflow.boxing import execute
from mpiflow.communication import count_collectives
from mpiflow.layouts.sbp import Broadcast, Split

SIZE = flow.env.get_world_size()
N = 3 * SIZE + 1  # uneven parts at 2 and 3 ranks, an empty one at 4 ranks for 5 rows
S0 = Split(0)
A = numpy.random.default_rng(5).standard_normal((N, 3))


@pytest.fixture
def moves(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[Any, ...]]]:
    """Every redistribution made while the test runs: (shape, source sbp, target sbp)."""
    seen: list[tuple[Any, ...]] = []
    real = execute.redistribute

    def spy(local: Any, shape: Any, src: Any, dst: Any) -> Any:
        seen.append((tuple(shape), tuple(src.sbp), tuple(dst.sbp)))
        return real(local, shape, src, dst)

    monkeypatch.setattr(execute, "redistribute", spy)
    yield seen


def gathers(seen: list[tuple[Any, ...]], rows: int) -> list[tuple[Any, ...]]:
    """The redistributions that made a split dim of ``rows`` or more whole."""
    return [m for m in seen if any(isinstance(a, Split) and isinstance(b, Broadcast)
                                   and m[0][a.dim] >= rows for a, b in zip(m[1], m[2]))]


CASES: dict[str, tuple[Callable[[Any], Any], Callable[[numpy.ndarray], Any]]] = {
    "add": (lambda x: xp.add(x, 1.5), lambda a: a + 1.5),
    "hypot": (lambda x: xp.hypot(x, x), lambda a: numpy.hypot(a, a)),
    "clip": (lambda x: xp.clip(x, -0.5, 0.5), lambda a: numpy.clip(a, -0.5, 0.5)),
    "sum": (lambda x: xp.sum(x, axis=0), lambda a: a.sum(0)),
    "prod": (lambda x: xp.prod(x, axis=0), lambda a: a.prod(0)),
    "std": (lambda x: xp.std(x, axis=0, correction=1), lambda a: a.std(0, ddof=1)),
    "max": (lambda x: xp.max(x), lambda a: a.max()),
    "median": (lambda x: xp.median(x, axis=0), lambda a: numpy.median(a, axis=0)),
    "median_all": (lambda x: xp.median(x, keepdims=True), lambda a: numpy.median(a, keepdims=True)),
    "median_axes": (lambda x: xp.median(x[:, :, None] * x[:, None, :], axis=(0, 2)),
                    lambda a: numpy.median(a[:, :, None] * a[:, None, :], axis=(0, 2))),
    "all": (lambda x: xp.all(xp.greater(x, -9.0), axis=0), lambda a: (a > -9).all(0)),
    "any": (lambda x: xp.any(xp.greater(x, 1.0)), lambda a: (a > 1).any()),
    "argmax": (lambda x: xp.argmax(x, axis=0), lambda a: a.argmax(0)),
    "argmin": (lambda x: xp.argmin(x[:, 1]), lambda a: a[:, 1].argmin()),
    "cumulative_sum": (lambda x: xp.cumulative_sum(x, axis=0), lambda a: a.cumsum(0)),
    "sort": (lambda x: xp.sort(x[:, 0]), lambda a: numpy.sort(a[:, 0])),
    "row": (lambda x: x[N - 2], lambda a: a[N - 2]),
    "slice": (lambda x: x[1::2], lambda a: a[1::2]),
    "flip": (lambda x: xp.flip(x, axis=0), lambda a: a[::-1]),
    "concat": (lambda x: xp.concat([x, x[:2]]), lambda a: numpy.concatenate([a, a[:2]])),
    "tril": (lambda x: xp.tril(x, k=1), lambda a: numpy.tril(a, 1)),
    "matmul": (lambda x: xp.matmul(x, xp.ones((3, 2))), lambda a: a @ numpy.ones((3, 2))),
    "vecdot": (lambda x: xp.vecdot(x, x), lambda a: (a * a).sum(-1)),
    "where": (lambda x: xp.where(xp.less(x, 0), 0.0, x), lambda a: numpy.where(a < 0, 0, a)),
    "expand_dims": (lambda x: xp.expand_dims(x, axis=1), lambda a: a[:, None]),
    "unstack": (lambda x: xp.unstack(x, axis=1)[2], lambda a: a[:, 2]),
}
KEEP_SPLIT = {"add", "hypot", "clip", "cumulative_sum", "sort", "slice", "flip", "concat",
              "tril", "matmul", "vecdot", "where", "expand_dims", "unstack"}


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(CASES))
def test_split_arrays_are_never_gathered(name: str, moves: list[tuple[Any, ...]]) -> None:
    fn, want = CASES[name]
    x = xp.asarray(A)
    assert x.sbp == (S0,)
    out = fn(x)
    made = list(moves)
    assert not gathers(made, N), f"{name} gathered a split array: {gathers(made, N)}"
    if name in KEEP_SPLIT:
        assert out.sbp == (S0,), f"{name}: {out.sbp}"
    assert_allclose(numpy.asarray(out.numpy(), dtype=float), want(A), rtol=1e-12, atol=1e-12)


@pytest.mark.mpi
def test_collectives_of_a_few_functions() -> None:
    x = xp.asarray(A)
    with count_collectives() as calls:
        xp.multiply(xp.add(x, x), 2.0)
        total = xp.sum(x)  # a partial sum: finished when read
    assert not calls
    with count_collectives() as calls:
        value = float(total)
    assert dict(calls) == ({"all_reduce": 1} if SIZE > 1 else {}) or calls["all_reduce"] == 1
    assert_allclose(value, A.sum(), rtol=1e-12)
    with count_collectives() as calls:
        row = x[N - 1]
    if SIZE > 1:  # the row moves alone: one exchange of it, then a small one of its layout
        assert calls["all_gather"] == 0 and calls["all_to_all_v"] <= 2, dict(calls)
    assert_array_equal(row.numpy(), A[N - 1])
    with count_collectives() as calls:
        xp.prod(x, axis=0)
    assert calls["all_reduce"] == (1 if SIZE > 1 else 0) and calls["all_gather"] == 0


@pytest.mark.mpi
def test_the_suites_element_reads_match_numpy() -> None:
    """The suite reads arrays element by element (``float(x[i, j])``) at every rank count."""
    x = xp.asarray(A)
    for i in (0, N // 2, N - 1):
        for j in (0, 2):
            assert float(x[i, j]) == A[i, j]
    assert int(xp.asarray([5, 6, 7])[-1]) == 7
