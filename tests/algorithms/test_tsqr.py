"""TSQR against numpy's QR of the whole matrix, at any rank count and row counts."""

from __future__ import annotations

from typing import Any

import numpy
import pytest
from numpy.testing import assert_allclose

from mpiflow.algorithms.ranges import balanced, offsets
from mpiflow.algorithms.tsqr import normalize_qr, tree, tsqr
from mpiflow.communication import count_collectives
from mpiflow.communication.mpi.group import world_comm as comm

RANK, SIZE = comm.rank, comm.size


def test_the_tree_is_a_pure_function_of_the_rank_count() -> None:
    assert tree(1) == []
    assert tree(2) == [[(0, 1)]]
    assert tree(3) == [[(0, 1), (2,)], [(0, 2)]]
    assert tree(7, fanin=3) == [[(0, 1, 2), (3, 4, 5), (6,)], [(0, 3, 6)]]
    for size in range(1, 40):
        for fanin in (2, 3, 4):
            levels = tree(size, fanin)
            # every rank but the root hands its R on exactly once, to a rank below it
            members = [r for groups in levels for g in groups for r in g[1:]]
            assert sorted(members) == list(range(1, size))
            assert all(g[0] < r for groups in levels for g in groups for r in g[1:])
            assert len(levels) == (0 if size == 1 else int(numpy.ceil(
                numpy.log(size) / numpy.log(fanin) - 1e-12)))
    with pytest.raises(ValueError, match="fan-in"):
        tree(4, fanin=1)


def _rows(whole: numpy.ndarray, counts: list[int]) -> numpy.ndarray:
    lo, hi = offsets(counts)[RANK], offsets(counts)[RANK + 1]
    return numpy.ascontiguousarray(whole[..., lo:hi, :])


def _reference(whole: numpy.ndarray) -> tuple[numpy.ndarray, numpy.ndarray]:
    q, r = numpy.linalg.qr(whole)
    return normalize_qr(q, r)


def _matrix(shape: tuple[int, ...], dtype: Any, seed: int = 0) -> numpy.ndarray:
    rng = numpy.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if numpy.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


CASES = [
    ((3 * SIZE + 1, 4), "balanced"),    # uneven parts
    ((13, 5), "first"),                 # every row on rank 0, the others empty
    ((2 * SIZE + 6, 6), "short"),       # parts with fewer rows than columns
    ((2, 9, 3), "balanced"),            # a batch of two
]


def _counts(m: int, how: str) -> list[int]:
    if how == "first":
        return [m] + [0] * (SIZE - 1)
    return balanced(m, SIZE)


@pytest.mark.mpi
@pytest.mark.parametrize(("shape", "how"), CASES)
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_q_and_r_are_numpys_normalised(shape: tuple[int, ...], how: str, dtype: str) -> None:
    whole = _matrix(shape, dtype)
    counts = _counts(shape[-2], how)
    f = tsqr(_rows(whole, counts), comm)
    q_want, r_want = _reference(whole)
    assert_allclose(f.r, r_want, rtol=1e-12, atol=1e-12)
    assert_allclose(f.q(), _rows(q_want, counts), rtol=1e-11, atol=1e-12)
    diag = numpy.diagonal(f.r, axis1=-2, axis2=-1)
    assert numpy.all(diag.real >= 0) and numpy.all(diag.imag == 0)


@pytest.mark.mpi
@pytest.mark.parametrize("fanin", [3, 4])
def test_any_fanin_gives_the_same_factors(fanin: int) -> None:
    whole = _matrix((5 * SIZE + 2, 3), "float64", seed=1)
    counts = balanced(whole.shape[0], SIZE)
    f = tsqr(_rows(whole, counts), comm, fanin=fanin)
    q_want, r_want = _reference(whole)
    assert_allclose(f.r, r_want, rtol=1e-12, atol=1e-12)
    assert_allclose(f.q(), _rows(q_want, counts), rtol=1e-11, atol=1e-12)


@pytest.mark.mpi
def test_q_times_coefficients_given_on_the_root_only() -> None:
    whole = _matrix((4 * SIZE + 1, 3), "float64", seed=2)
    counts = balanced(whole.shape[0], SIZE)
    c = _matrix((3, 2), "float64", seed=3)
    f = tsqr(_rows(whole, counts), comm)
    got = f.q(c if RANK == 0 else None, columns=2)
    q_want, _ = _reference(whole)
    assert_allclose(got, _rows(q_want @ c, counts), rtol=1e-11, atol=1e-12)


@pytest.mark.mpi
def test_float32_keeps_its_dtype() -> None:
    whole = _matrix((3 * SIZE + 2, 4), "float32", seed=4)
    counts = balanced(whole.shape[0], SIZE)
    f = tsqr(_rows(whole, counts), comm)
    assert f.r.dtype == numpy.float32 and f.q().dtype == numpy.float32
    _, r_want = _reference(whole.astype(numpy.float64))
    assert_allclose(f.r, r_want, rtol=1e-4, atol=1e-4)


class Recording:
    """The world communicator, recording the bytes of every buffer it sends or broadcasts."""

    def __init__(self) -> None:
        self.rank, self.size = comm.rank, comm.size
        self.sent: list[tuple[str, int]] = []

    def send(self, buf: numpy.ndarray, dst: int, tag: int = 0) -> None:
        self.sent.append(("send", buf.nbytes))
        comm.send(buf, dst, tag)

    def recv(self, buf: numpy.ndarray, src: int, tag: int = 0) -> int:
        return comm.recv(buf, src, tag)

    def broadcast(self, buf: numpy.ndarray, root: int) -> None:
        self.sent.append(("broadcast", buf.nbytes))
        comm.broadcast(buf, root)


@pytest.mark.mpi
def test_only_small_factors_move() -> None:
    """No row of A or Q moves: every message is one n x n matrix (R going up, a block of
    coefficients going down), one broadcast of R; no all-gather or all-to-all."""
    n = 4
    whole = _matrix((50 * SIZE, n), "float64", seed=5)
    counts = balanced(whole.shape[0], SIZE)
    recording = Recording()
    with count_collectives() as calls:
        f = tsqr(_rows(whole, counts), recording)  # type: ignore[arg-type]
        f.q()
    assert set(calls) <= {"send", "recv", "broadcast"}, dict(calls)
    assert all(nbytes == n * n * 8 for _, nbytes in recording.sent), recording.sent
    levels = tree(SIZE)
    # up: each non-root rank sends its R once; down: each receives one block once
    sends = sum(1 for kind, _ in recording.sent if kind == "send")
    led = sum(len(g) - 1 for groups in levels for g in groups if g[0] == RANK)
    assert sends == (0 if RANK == 0 else 1) + led
    assert calls["broadcast"] == (1 if SIZE > 1 else 0)


@pytest.mark.mpi
def test_r_only_skips_q() -> None:
    whole = _matrix((3 * SIZE + 1, 3), "float64", seed=6)
    f = tsqr(_rows(whole, balanced(whole.shape[0], SIZE)), comm, q=False)
    assert_allclose(f.r, _reference(whole)[1], rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="without Q"):
        f.q()
