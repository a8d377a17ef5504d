"""cg and gmres on split vectors, with a matrix, a function or a preconditioner, against
numpy's direct solution; non-convergence is the same flag on every rank."""

from __future__ import annotations

from typing import Any

import numpy
import pytest
from numpy.testing import assert_allclose

import mpiflow as flow
from mpiflow.communication.mpi.group import world_comm as comm

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
ALL = flow.placement("cpu", list(range(SIZE)))
S0, B = flow.sbp.split(0), flow.sbp.broadcast
N = 4 * SIZE + 3
pytestmark = pytest.mark.mpi


def glob(a: numpy.ndarray, sbp: Any = S0) -> flow.Tensor:
    return flow.tensor(a, placement=ALL, sbp=sbp)


def spd(n: int, seed: int = 0) -> numpy.ndarray:
    a = numpy.random.default_rng(seed).standard_normal((n, n))
    return a @ a.T + n * numpy.eye(n)


def same_everywhere(info: int) -> bool:
    infos = numpy.empty(SIZE, dtype=numpy.int64)
    comm.all_gather(numpy.array([info], dtype=numpy.int64), infos)
    return bool((infos == info).all())


def test_cg_with_a_split_matrix_and_with_a_function() -> None:
    a = spd(N)
    b = numpy.random.default_rng(1).standard_normal(N)
    want = numpy.linalg.solve(a, b)
    x, info = flow.linalg.cg(glob(a), glob(b), rtol=1e-12)
    assert info == 0 and x.sbp == (S0,)
    assert_allclose(x.numpy(), want, rtol=1e-9, atol=1e-12)
    A = glob(a, B)
    x, info = flow.linalg.cg(lambda v: A @ v, glob(b), rtol=1e-12, x0=glob(numpy.ones(N)))
    assert info == 0
    assert_allclose(x.numpy(), want, rtol=1e-9, atol=1e-12)


def test_cg_with_a_preconditioner_takes_fewer_iterations() -> None:
    a = spd(N, 2) + numpy.diag(numpy.arange(N) * 50.0)   # a wide spread of scales
    b = numpy.ones(N)
    diag = glob(numpy.diag(a).copy())
    steps: list[int] = []
    x, info = flow.linalg.cg(glob(a), glob(b), rtol=1e-10,
                             callback=lambda _: steps.append(1))
    plain = len(steps)
    steps.clear()
    x, info = flow.linalg.cg(glob(a), glob(b), rtol=1e-10, M=lambda r: r / diag,
                             callback=lambda _: steps.append(1))
    assert info == 0 and len(steps) <= plain
    assert_allclose(x.numpy(), numpy.linalg.solve(a, b), rtol=1e-7)


def test_non_convergence_and_breakdown_are_flags_agreed_by_every_rank() -> None:
    a = spd(N, 3)
    b = numpy.random.default_rng(4).standard_normal(N)
    x, info = flow.linalg.cg(glob(a), glob(b), rtol=1e-14, maxiter=2)
    assert info == 2 and same_everywhere(info)
    indefinite = numpy.diag(numpy.r_[numpy.ones(N - 1), -1.0])
    _, info = flow.linalg.cg(glob(indefinite), glob(numpy.ones(N)), rtol=1e-12)
    assert info == -1 and same_everywhere(info)
    _, info = flow.linalg.gmres(glob(a), glob(b), rtol=1e-14, restart=2, maxiter=1)
    assert info == 2 and same_everywhere(info)
    x, info = flow.linalg.cg(glob(a), glob(numpy.zeros(N)))
    assert info == 0 and not x.numpy().any()


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_gmres_solves_a_non_symmetric_system(dtype: str) -> None:
    rng = numpy.random.default_rng(5)
    a = rng.standard_normal((N, N)) + 2 * N * numpy.eye(N)
    b = rng.standard_normal(N)
    if dtype == "complex128":
        a = a + 1j * rng.standard_normal((N, N))
        b = b + 1j * rng.standard_normal(N)
    x, info = flow.linalg.gmres(glob(a), glob(b), rtol=1e-12, restart=5)
    assert info == 0 and x.sbp == (S0,)
    assert_allclose(x.numpy(), numpy.linalg.solve(a, b), rtol=1e-9, atol=1e-12)
    x, info = flow.linalg.gmres(glob(a), glob(b), rtol=1e-12, M=lambda r: r * (1 / (2 * N)))
    assert info == 0
    assert_allclose(x.numpy(), numpy.linalg.solve(a, b), rtol=1e-9, atol=1e-12)


def test_bad_operators_are_refused() -> None:
    with pytest.raises(ValueError, match="square"):
        flow.linalg.cg(glob(numpy.ones((N, 2))), glob(numpy.ones(N)))
    with pytest.raises(TypeError, match="function"):
        flow.linalg.gmres(3, glob(numpy.ones(N)))
    with pytest.raises(ValueError, match="vector"):
        flow.linalg.cg(glob(numpy.eye(N)), glob(numpy.ones((N, 1))))
