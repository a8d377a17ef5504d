"""Axes made of pieces of another (roll, pad), their adjoint, and differences, against numpy."""

from __future__ import annotations

import numpy
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from mpiflow.algorithms import assemble, differences, scatter_sum
from mpiflow.algorithms.ranges import balanced, offsets
from mpiflow.algorithms.segments import check_segments, segment_length, segment_pieces
from mpiflow.communication import count_collectives
from mpiflow.communication.mpi.group import world_comm as comm

RANK, SIZE = comm.rank, comm.size


def _part(counts: list[int]) -> slice:
    starts = offsets(counts)
    return slice(starts[RANK], starts[RANK + 1])


def _whole(segments: list[tuple[str, int, int]], x: numpy.ndarray, fill: float) -> numpy.ndarray:
    parts = []
    for kind, a, b in segments:
        if kind == "rows":
            parts.append(x[a:b])
        elif kind == "reversed":
            parts.append(x[a:b][::-1])
        elif kind == "repeat":
            parts.append(numpy.repeat(x[a:a + 1], b, axis=0))
        else:
            parts.append(numpy.full((b, *x.shape[1:]), fill))
    return numpy.concatenate(parts)


def test_pieces_and_checks_are_pure() -> None:
    segs = [("fill", 0, 2), ("reversed", 1, 4), ("repeat", 0, 3)]
    assert [segment_length(s) for s in segs] == [2, 3, 3]
    assert segment_pieces(segs, 1, 7) == [("fill", 0, 1), ("reversed", 1, 4), ("repeat", 0, 2)]
    assert segment_pieces(segs, 3, 4) == [("reversed", 2, 3)]
    with pytest.raises(ValueError, match="outside"):
        check_segments([("rows", 0, 5)], 4)
    with pytest.raises(ValueError, match="unknown"):
        check_segments([("skip", 0, 1)], 4)


CASES = {
    "roll": lambda n: [("rows", n - 2, n), ("rows", 0, n - 2)],
    "reflect": lambda n: [("reversed", 1, 3), ("rows", 0, n), ("reversed", n - 2, n - 1)],
    "replicate": lambda n: [("repeat", 0, 2), ("rows", 0, n), ("repeat", n - 1, 3)],
    "constant": lambda n: [("fill", 0, 1), ("rows", 1, n - 1), ("fill", 0, 4)],
}


@pytest.mark.mpi
@pytest.mark.parametrize("case", sorted(CASES))
def test_assemble_and_its_adjoint_match_numpy(case: str) -> None:
    n = 3 * SIZE + 1
    rng = numpy.random.default_rng(1)
    x = rng.standard_normal((n, 2))
    segs = CASES[case](n)
    counts = balanced(n, SIZE)
    length = sum(segment_length(s) for s in segs)
    out_counts = balanced(length, SIZE)
    with count_collectives() as calls:
        got = assemble(x[_part(counts)].T.copy(), comm, 1, counts, segs, out_counts, fill=7.0)
    assert_array_equal(got.T, _whole(segs, x, 7.0)[_part(out_counts)])
    assert sum(calls.values()) <= 1  # one fetch (none where nothing crosses ranks)
    # the adjoint: <assemble(x), g> == <x, scatter_sum(g)>
    g = rng.standard_normal((length, 2))
    back = scatter_sum(g[_part(out_counts)], comm, 0, out_counts, segs, counts)
    whole_back = numpy.zeros_like(x)
    for i in range(n):  # the adjoint by definition: row i gets every output row copied from it
        e = numpy.zeros((n, 1))
        e[i] = 1.0
        whole_back[i] = (_whole(segs, e, 0.0) * g).sum(axis=0)
    assert_allclose(back, whole_back[_part(counts)], atol=1e-12)


@pytest.mark.mpi
@pytest.mark.parametrize("n_diff", [0, 1, 2, 5])
def test_differences_match_numpy(n_diff: int) -> None:
    n = 3 * SIZE + 1
    x = numpy.random.default_rng(2).standard_normal((2, n))
    before, after = numpy.arange(4.0).reshape(2, 2), numpy.ones((2, 1))
    counts = balanced(n, SIZE)
    whole = numpy.diff(numpy.concatenate([before, x, after], axis=1), n=n_diff, axis=1)
    out_counts = balanced(whole.shape[1], SIZE)
    got = differences(x[:, _part(counts)], comm, 1, counts, n_diff, before, after, out_counts)
    assert_allclose(got, whole[:, _part(out_counts)], rtol=1e-12)
    crop = balanced(max(whole.shape[1] - 3, 0), SIZE)  # rows [2, L-1) of the differences
    got = differences(x[:, _part(counts)], comm, 1, counts, n_diff, before, after, crop, start=2)
    assert_allclose(got, whole[:, 2:][:, _part(crop)], rtol=1e-12)


@pytest.mark.mpi
def test_differences_beyond_the_axis_are_empty() -> None:
    counts = balanced(2, SIZE)
    got = differences(numpy.arange(2.0)[_part(counts)], comm, 0, counts, 3, None, None,
                      [0] * SIZE)
    assert got.shape == (0,)
