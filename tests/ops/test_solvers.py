"""solve, inv, cholesky, det, slogdet, lstsq against numpy on the gathered value, at any rank
count; failures raise the same error on every rank, even where one rank found them."""

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
N = 2 * SIZE + 3
pytestmark = pytest.mark.mpi


def value(shape: tuple[int, ...], seed: int = 0, dtype: Any = numpy.float64) -> numpy.ndarray:
    rng = numpy.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if numpy.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def dominant(shape: tuple[int, ...], seed: int = 0, dtype: Any = numpy.float64
             ) -> numpy.ndarray:
    return value(shape, seed, dtype) + shape[-1] * numpy.eye(shape[-1])


def glob(a: numpy.ndarray, sbp: Any) -> flow.Tensor:
    return flow.tensor(a, placement=ALL, sbp=sbp)


@pytest.mark.parametrize("sbp", [S0, S1, B])
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_solve_inv_det_of_a_split_matrix(sbp: Any, dtype: str) -> None:
    a = dominant((N, N), 1, dtype)
    b = value((N, 2), 2, dtype)
    x = flow.linalg.solve(glob(a, sbp), glob(b, sbp))
    assert_allclose(x.numpy(), numpy.linalg.solve(a, b), rtol=1e-12, atol=1e-12)
    assert_allclose(flow.linalg.inv(glob(a, sbp)).numpy(), numpy.linalg.inv(a), atol=1e-12)
    assert_allclose(flow.linalg.det(glob(a, sbp)).numpy(), numpy.linalg.det(a), rtol=1e-12)
    sign, logabs = flow.linalg.slogdet(glob(a, sbp))
    sign_want, logabs_want = numpy.linalg.slogdet(a)
    assert_allclose(sign.numpy(), sign_want, rtol=1e-12)
    assert_allclose(logabs.numpy(), logabs_want, rtol=1e-12)


def test_solve_vectors_right_sides_and_broadcast_batches() -> None:
    a = dominant((3, 4, 4), 3)
    v = value((4,), 4)
    got = flow.linalg.solve(glob(a, S0), glob(v, B))
    assert tuple(got.shape) == (3, 4) and got.sbp == (S0,)
    assert_allclose(got.numpy(), numpy.linalg.solve(a, v[None, :, None])[..., 0], atol=1e-12)
    bm = value((3, 2, 4), 5)
    right = flow.linalg.solve(glob(a, S0), glob(bm, S0), left=False)
    assert_allclose(right.numpy() @ a, bm, atol=1e-12)
    single = flow.linalg.solve(glob(a[0], B), glob(value((3, 4, 2), 6), S0))
    assert_allclose(single.numpy(), numpy.linalg.solve(a[0], value((3, 4, 2), 6)), atol=1e-12)


def test_cholesky_lower_and_upper() -> None:
    a = value((N, N), 7)
    spd = a @ a.T + numpy.eye(N)
    low = flow.linalg.cholesky(glob(spd, S0))
    assert_allclose(low.numpy(), numpy.linalg.cholesky(spd), atol=1e-12)
    up = flow.linalg.cholesky(glob(spd, S1), upper=True)
    assert_allclose(up.numpy(), numpy.linalg.cholesky(spd).T, atol=1e-12)
    batch = numpy.stack([*[spd, 2 * spd, 3 * spd][: max(1, SIZE - 1)], spd])
    got = flow.linalg.cholesky(glob(batch, S0))
    assert got.sbp == (S0,)
    assert_allclose(got.numpy(), numpy.linalg.cholesky(batch), atol=1e-12)


def _singular_batch() -> numpy.ndarray:
    """A batch whose last matrix (on the last rank of a split) is singular."""
    a = dominant((SIZE + 1, 3, 3), 8)
    a[-1] = 0.0
    return a


def test_a_failure_on_one_rank_is_raised_on_every_rank() -> None:
    a = _singular_batch()
    with pytest.raises(flow.linalg.LinAlgError, match=rf"\(Batch element {SIZE}\)"):
        flow.linalg.inv(glob(a, S0))
    with pytest.raises(flow.linalg.LinAlgError, match="singular"):
        flow.linalg.solve(glob(a, S0), glob(value((SIZE + 1, 3, 1), 9), S0))
    spd = numpy.stack([numpy.eye(3)] * SIZE + [-numpy.eye(3)])
    with pytest.raises(flow.linalg.LinAlgError, match="leading minor of order 1"):
        flow.linalg.cholesky(glob(spd, S0))
    # the error is a RuntimeError (torch) and numpy's LinAlgError alike
    with pytest.raises(RuntimeError):
        flow.linalg.inv(glob(numpy.zeros((N, N)), S0))
    with pytest.raises(numpy.linalg.LinAlgError):
        flow.linalg.inv(glob(numpy.zeros((N, N)), S0))


def test_ex_forms_return_the_codes_and_agree_with_one_gather() -> None:
    a = _singular_batch()
    x, info = flow.linalg.inv_ex(glob(a, S0))
    codes = info.numpy()
    assert codes.shape == (SIZE + 1,) and codes[-1] > 0 and not codes[:-1].any()
    assert_allclose(x.numpy()[:-1], numpy.linalg.inv(a[:-1]), atol=1e-12)
    with count_collectives() as calls, pytest.raises(flow.linalg.LinAlgError):
        flow.linalg.inv_ex(glob(a, S0), check_errors=True)
    assert calls["all_gather_v"] + calls["all_gather"] <= 1, dict(calls)
    assert flow.linalg.cholesky_ex(glob(-numpy.eye(3), S0)).info.item() == 1
    assert flow.linalg.solve_ex(glob(numpy.eye(3), S0), glob(numpy.ones(3), S0)).info.item() == 0


@pytest.mark.parametrize("driver", [None, "gels", "gelsd"])
@pytest.mark.parametrize("sbp", [S0, S1])
def test_lstsq_of_a_tall_split_matrix(driver: Any, sbp: Any) -> None:
    m = 5 * SIZE + 3
    a, b = value((m, 3), 10), value((m, 2), 11)
    with count_collectives() as calls:
        got = flow.linalg.lstsq(glob(a, S0), glob(b, S0), driver=driver)
    if sbp == S0:  # TSQR of [A | B]: small blocks and broadcasts only
        assert set(calls) <= {"send", "recv", "broadcast"}, dict(calls)
    x, residuals, rank, sv = numpy.linalg.lstsq(a, b, rcond=None)
    assert_allclose(got.solution.numpy(), x, rtol=1e-12, atol=1e-12)
    if driver in ("gels", "gelsd"):
        assert_allclose(got.residuals.numpy(), residuals, rtol=1e-10)
    else:
        assert tuple(got.residuals.shape) == (0,)
    if driver != "gels":
        assert int(got.rank.numpy()) == rank
    assert tuple(got.singular_values.shape) == ((3,) if driver == "gelsd" else (0,))
    if driver == "gelsd":
        assert_allclose(got.singular_values.numpy(), sv, rtol=1e-12)


def test_lstsq_rank_deficient_wide_and_vector_cases() -> None:
    m = 4 * SIZE + 2
    a = value((m, 3), 12)
    a[:, 2] = a[:, 0] + a[:, 1]  # rank 2: the minimum-norm solution
    b = value((m,), 13)
    got = flow.linalg.lstsq(glob(a, S0), glob(b, S0), driver="gelsd")
    x, _, rank, _ = numpy.linalg.lstsq(a, b, rcond=None)
    assert_allclose(got.solution.numpy(), x, rtol=1e-10, atol=1e-12)
    assert int(got.rank.numpy()) == rank == 2
    wide = value((3, m), 14)
    rhs = value((3, 2), 15)
    got = flow.linalg.lstsq(glob(wide, S1), glob(rhs, B))
    assert_allclose(got.solution.numpy(), numpy.linalg.lstsq(wide, rhs, rcond=None)[0],
                    atol=1e-12)
    batch = value((SIZE + 1, 6, 2), 16)
    rhs3 = value((SIZE + 1, 6, 1), 17)
    got = flow.linalg.lstsq(glob(batch, S0), glob(rhs3, S0))
    assert got.solution.sbp == (S0,)
    for i in range(SIZE + 1):
        assert_allclose(got.solution.numpy()[i],
                        numpy.linalg.lstsq(batch[i], rhs3[i], rcond=None)[0], atol=1e-12)


def test_bad_arguments_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="square"):
        flow.linalg.solve(glob(value((4, 3)), S0), glob(value((4,)), S0))
    with pytest.raises(ValueError, match="incompatible shapes"):
        flow.linalg.solve(glob(numpy.eye(3), S0), glob(value((4,)), B))
    with pytest.raises(ValueError, match="driver"):
        flow.linalg.lstsq(glob(value((4, 3)), S0), glob(value((4, 1)), S0), driver="x")
    with pytest.raises(TypeError, match="floating point"):
        flow.linalg.det(glob(numpy.eye(3, dtype=numpy.int64), S0))
