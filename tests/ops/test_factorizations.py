"""qr, svd, svdvals, eigh, eigvalsh against numpy on the gathered value, at any rank count:
split along each dim, uneven splits, signs normalised before comparing. A tall matrix split
by rows stays distributed: its Q (U) keeps the split, and only small blocks move."""

from __future__ import annotations

from typing import Any

import numpy
import pytest
from numpy.testing import assert_allclose

import mpiflow as flow
from mpiflow.communication import count_collectives

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
ALL = flow.placement("cpu", list(range(SIZE)))
S0, S1, S2 = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.split(2)
B = flow.sbp.broadcast
ROWS = 3 * SIZE + 1  # no rank count divides it evenly
pytestmark = pytest.mark.mpi


def value(shape: tuple[int, ...], dtype: Any = numpy.float64, seed: int = 0) -> numpy.ndarray:
    rng = numpy.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if numpy.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def glob(a: numpy.ndarray, sbp: Any) -> flow.Tensor:
    return flow.tensor(a, placement=ALL, sbp=sbp)


def numpy_qr(a: numpy.ndarray, mode: str = "reduced") -> tuple[numpy.ndarray, numpy.ndarray]:
    """numpy's QR with R's diagonal made real non-negative (mpiflow's convention)."""
    q, r = numpy.linalg.qr(a, mode=mode)
    k = min(a.shape[-2:])
    d = numpy.diagonal(r, axis1=-2, axis2=-1)[..., :k]
    phase = numpy.where(d == 0, 1, d / numpy.where(d == 0, 1, numpy.abs(d)))
    r = r.copy()
    r[..., :k, :] *= numpy.conj(phase)[..., :, None]
    q = q.copy()
    q[..., :, :k] *= phase[..., None, :]
    return q, r


def unsign(u: numpy.ndarray, vh: numpy.ndarray) -> tuple[numpy.ndarray, numpy.ndarray]:
    """The singular vectors with each pair's sign fixed by vh's largest entry (any rule
    would do: the same one is applied to both sides of a comparison)."""
    k = min(u.shape[-1], vh.shape[-2])
    at = numpy.argmax(numpy.abs(vh[..., :k, :]), axis=-1)
    pick = numpy.take_along_axis(vh[..., :k, :], at[..., None], axis=-1)[..., 0]
    phase = pick / numpy.abs(pick)
    return u[..., :, :k] * phase[..., None, :], vh[..., :k, :] * numpy.conj(phase)[..., :, None]


@pytest.mark.parametrize("sbp", [S0, S1, B])
@pytest.mark.parametrize("dtype", ["float64", "complex128", "float32"])
def test_qr_of_a_tall_matrix(sbp: Any, dtype: str) -> None:
    a = value((ROWS + 5, 4), dtype)
    q, r = flow.linalg.qr(glob(a, sbp))
    q_want, r_want = numpy_qr(a.astype(numpy.complex128 if dtype == "complex128"
                                       else numpy.float64))
    tol = 1e-4 if dtype == "float32" else 1e-12
    assert q.dtype.numpy == numpy.dtype(dtype)
    assert_allclose(r.numpy(), r_want, rtol=tol, atol=tol)
    assert_allclose(q.numpy(), q_want, rtol=tol, atol=tol)
    assert r.sbp == (B,)
    assert q.sbp == ((B,) if sbp == B else (S0,))  # Q stays split by rows, like A


def test_q_of_tsqr_stays_split_and_nothing_big_moves() -> None:
    a = value((50 * SIZE + 3, 3), seed=1)
    x = glob(a, S0)
    with count_collectives() as calls:
        q, r = flow.linalg.qr(x)
    assert q.sbp == (S0,) and r.sbp == (B,)
    # TSQR: point-to-point n x n blocks and one broadcast of R; no gather, no all-to-all
    assert set(calls) <= {"send", "recv", "broadcast"}, dict(calls)
    assert tuple(q.to_local().shape) == (len(numpy.array_split(a, SIZE)[RANK]), 3)


@pytest.mark.parametrize("mode", ["r", "complete"])
def test_qr_modes(mode: str) -> None:
    a = value((ROWS, 3), seed=2)
    q, r = flow.linalg.qr(glob(a, S0), mode=mode)
    q_want, r_want = numpy_qr(a, "complete" if mode == "complete" else "reduced")
    assert_allclose(r.numpy(), r_want, atol=1e-12)
    if mode == "r":
        assert tuple(q.shape) == (0,)
    else:
        assert_allclose(q.numpy()[:, :3], q_want[:, :3], atol=1e-12)
        assert_allclose(q.numpy() @ r.numpy(), a, atol=1e-12)


@pytest.mark.parametrize("sbp", [S0, S1, S2])
def test_qr_svd_eigh_of_a_split_batch(sbp: Any) -> None:
    a = value((SIZE + 2, 5, 3), seed=3)
    q, r = flow.linalg.qr(glob(a, sbp))
    q_want, r_want = numpy_qr(a)
    assert_allclose(r.numpy(), r_want, atol=1e-12)
    assert_allclose(q.numpy(), q_want, atol=1e-12)
    u, s, vh = flow.linalg.svd(glob(a, sbp), full_matrices=False)
    u_want, s_want, vh_want = numpy.linalg.svd(a, full_matrices=False)
    assert_allclose(s.numpy(), s_want, atol=1e-12)
    for got, want in zip(unsign(u.numpy(), vh.numpy()), unsign(u_want, vh_want)):
        assert_allclose(got, want, atol=1e-11)
    h = a.swapaxes(-1, -2) @ a + numpy.eye(3)
    w, v = flow.linalg.eigh(glob(h, sbp))
    assert_allclose(w.numpy(), numpy.linalg.eigvalsh(h), atol=1e-12)
    assert_allclose(v.numpy() @ (w.numpy()[..., None] * v.numpy().swapaxes(-1, -2)), h,
                    atol=1e-11)
    if sbp == S0:
        assert q.sbp == (S0,) and w.sbp == (S0,)


@pytest.mark.parametrize(("shape", "sbp", "layouts"), [
    ((ROWS + 4, 4), S0, (S0, B, B)),      # tall, rows split: TSQR, U split by rows
    ((ROWS + 4, 4), S1, (S0, B, B)),      # converted to rows (all-to-all), then TSQR
    ((3, ROWS + 4), S1, (B, B, S1)),      # wide, columns split: TSQR of A^H, Vh split
    ((5, 5), S0, (S0, B, B)),
])
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_svd_stays_distributed(shape: tuple[int, int], sbp: Any, layouts: tuple[Any, ...],
                               dtype: str) -> None:
    a = value(shape, dtype, seed=4)
    u, s, vh = flow.linalg.svd(glob(a, sbp), full_matrices=False)
    assert (u.sbp, s.sbp, vh.sbp) == tuple((x,) for x in layouts)
    u_want, s_want, vh_want = numpy.linalg.svd(a, full_matrices=False)
    assert_allclose(s.numpy(), s_want, atol=1e-12)
    for got, want in zip(unsign(u.numpy(), vh.numpy()), unsign(u_want, vh_want)):
        assert_allclose(got, want, atol=1e-11)
    sv = flow.linalg.svdvals(glob(a, sbp))
    assert sv.sbp == (B,)
    assert_allclose(sv.numpy(), s_want, atol=1e-12)


def test_svd_signs_do_not_depend_on_the_layout() -> None:
    a = value((ROWS + 2, 3), seed=5)
    split = flow.linalg.svd(glob(a, S0), full_matrices=False)
    whole = flow.linalg.svd(flow.tensor(a), full_matrices=False)
    for got, want in zip(split, whole):
        assert_allclose(got.numpy(), want.numpy(), atol=1e-12)


def test_svd_full_matrices_of_a_small_split_matrix_is_gathered() -> None:
    a = value((ROWS, 3), seed=6)
    u, s, vh = flow.linalg.svd(glob(a, S0))
    assert tuple(u.shape) == (ROWS, ROWS) and u.sbp == (B,)
    assert_allclose((u.numpy()[:, :3] * s.numpy()) @ vh.numpy(), a, atol=1e-12)


def test_gathering_beyond_the_limit_is_refused_on_every_rank(monkeypatch: Any) -> None:
    from mpiflow.ops import factorizations, linalg_rules

    monkeypatch.setattr(linalg_rules, "GATHER_LIMIT", 30)
    monkeypatch.setattr(factorizations, "GATHER_LIMIT", 30)
    x = glob(value((8, 5), seed=7), S0)
    with pytest.raises(ValueError, match="GATHER_LIMIT = 30"):
        flow.linalg.svd(x)              # U of 8 x 8 whole on every rank
    with pytest.raises(ValueError, match="full_matrices=False"):
        flow.linalg.svd(x)
    with pytest.raises(ValueError, match="whole on every rank"):
        flow.linalg.eigh(glob(numpy.eye(6), S0))
    # tall-skinny stays distributed: R is 5 x 5 = 25 elements, within the limit
    assert flow.linalg.qr(x).Q.sbp == (S0,)
    assert flow.linalg.eigh(flow.tensor(numpy.eye(6))).eigenvalues.shape == (6,)  # local


def test_eigh_uplo_and_eigvalsh() -> None:
    a = value((ROWS, ROWS), seed=8)
    h = a + a.T
    lower = numpy.tril(h) + numpy.tril(h, -1).T
    for uplo, tri in (("L", numpy.tril(h)), ("U", numpy.triu(h))):
        got = flow.linalg.eigvalsh(glob(tri, S1), UPLO=uplo)
        assert_allclose(got.numpy(), numpy.linalg.eigvalsh(lower), atol=1e-12)


def test_bad_arguments_say_what_is_wrong() -> None:
    x = glob(value((6, 3), seed=9), S0)
    with pytest.raises(ValueError, match="mode must be one of"):
        flow.linalg.qr(x, mode="full")
    with pytest.raises(ValueError, match="square"):
        flow.linalg.eigh(x)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        flow.linalg.svdvals(glob(value((6,)), S0))
    with pytest.raises(TypeError, match="floating point"):
        flow.linalg.qr(glob(numpy.ones((4, 2), dtype=numpy.int64), S0))
    with pytest.raises(ValueError, match="UPLO"):
        flow.linalg.eigh(glob(numpy.eye(3), B), UPLO="X")


@pytest.mark.mpi(min_size=4)
@pytest.mark.parametrize("sbp", [(S0, S0), (S0, B), (B, S0), (S1, S0)])
def test_tsqr_on_a_2d_mesh(sbp: Any) -> None:
    mesh = flow.placement("cpu", [[0, 1], [2, 3]])
    a = value((23, 4), seed=10)
    x = flow.tensor(a, placement=mesh, sbp=sbp)
    q, r = flow.linalg.qr(x)
    q_want, r_want = numpy_qr(a)
    assert_allclose(r.numpy(), r_want, atol=1e-12)
    assert_allclose(q.numpy(), q_want, atol=1e-12)
    assert r.sbp == (B, B) and all(s in (S0, B) for s in q.sbp)
    s = flow.linalg.svdvals(x)
    assert_allclose(s.numpy(), numpy.linalg.svd(a, compute_uv=False), atol=1e-12)


@pytest.mark.parametrize("shape", [(4, 0, 1), (4, 1, 0), (0, 3), (3, 0), (2, 0, 0)])
def test_empty_matrices_have_an_empty_svd_and_pinv(shape: tuple[int, ...]) -> None:
    a = numpy.zeros(shape)
    x = flow.tensor(a)
    u, s, vh = flow.linalg.svd(x, full_matrices=False)
    want = numpy.linalg.svd(a, full_matrices=False)
    assert [tuple(t.shape) for t in (u, s, vh)] == [w.shape for w in want]
    assert tuple(flow.linalg.pinv(x).shape) == numpy.linalg.pinv(a).shape
