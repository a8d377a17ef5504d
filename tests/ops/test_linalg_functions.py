"""Norms, cross, multi_dot, matrix_rank, pinv, matrix_power, vecdot against numpy/torch on
the gathered value, split along each dim, at any rank count."""

from __future__ import annotations

import math
from typing import Any

import numpy
import pytest
import torch
from numpy.testing import assert_allclose

import mpiflow as flow

RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
ALL = flow.placement("cpu", list(range(SIZE)))
S0, S1, S2 = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.split(2)
B = flow.sbp.broadcast
M = 3 * SIZE + 1
pytestmark = pytest.mark.mpi


def value(shape: tuple[int, ...], seed: int = 0, dtype: Any = numpy.float64) -> numpy.ndarray:
    rng = numpy.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if numpy.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def glob(a: numpy.ndarray, sbp: Any) -> flow.Tensor:
    return flow.tensor(a, placement=ALL, sbp=sbp)


@pytest.mark.parametrize("sbp", [S0, S1, B])
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_vector_and_matrix_norms(sbp: Any, dtype: str) -> None:
    a = value((M + 2, 4), 1, dtype)
    t, ta = glob(a, sbp), torch.from_numpy(a)
    for ord in (2, 1, 3, math.inf, -math.inf, 0):
        assert_allclose(flow.linalg.vector_norm(t, ord).numpy(),
                        torch.linalg.vector_norm(ta, ord).numpy(), rtol=1e-12)
    assert_allclose(flow.linalg.vector_norm(t, 2, dim=1, keepdim=True).numpy(),
                    torch.linalg.vector_norm(ta, 2, dim=1, keepdim=True).numpy(), rtol=1e-12)
    for ord in ("fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf):
        assert_allclose(flow.linalg.matrix_norm(t, ord).numpy(),
                        torch.linalg.matrix_norm(ta, ord).numpy(), rtol=1e-12)
    assert_allclose(flow.linalg.norm(t).numpy(), torch.linalg.norm(ta).numpy(), rtol=1e-12)
    assert_allclose(flow.linalg.norm(t, 2).numpy(), torch.linalg.norm(ta, 2).numpy(),
                    rtol=1e-12)
    assert_allclose(flow.linalg.norm(t, 1, dim=0).numpy(),
                    torch.linalg.norm(ta, 1, dim=0).numpy(), rtol=1e-12)


def test_matrix_norm_of_other_dims_and_batches() -> None:
    a = value((3, M, 4), 2)
    ta = torch.from_numpy(a)
    for sbp in (S0, S1, S2):
        for ord in ("nuc", -2, 1, math.inf):
            got = flow.linalg.matrix_norm(glob(a, sbp), ord, dim=(0, 2), keepdim=True)
            want = torch.linalg.matrix_norm(ta, ord, dim=(0, 2), keepdim=True)
            assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_cross_and_multi_dot() -> None:
    a, b = value((M, 3), 3), value((M, 3), 4)
    got = flow.linalg.cross(glob(a, S0), glob(b, S0))
    assert got.sbp == (S0,)
    assert_allclose(got.numpy(), numpy.cross(a, b), atol=1e-12)
    got = flow.linalg.cross(glob(a.T.copy(), S1), glob(b.T.copy(), B), dim=0)
    assert_allclose(got.numpy(), numpy.cross(a, b).T, atol=1e-12)
    mats = [value((M, 4), 5), value((4, 7), 6), value((7, 2), 7), value((2,), 8)]
    tensors = [glob(mats[0], S0), glob(mats[1], B), glob(mats[2], S1), glob(mats[3], B)]
    got = flow.linalg.multi_dot(tensors)
    assert_allclose(got.numpy(), numpy.linalg.multi_dot(mats), atol=1e-12)
    with pytest.raises(ValueError, match="at least 2"):
        flow.linalg.multi_dot(tensors[:1])
    with pytest.raises(ValueError, match="length 3"):
        flow.linalg.cross(glob(value((4, 2)), S0), glob(value((4, 2)), S0))


@pytest.mark.parametrize("sbp", [S0, B])
def test_matrix_rank_and_pinv(sbp: Any) -> None:
    a = value((M + 3, 4), 9)
    a[:, 3] = a[:, 0] - 2 * a[:, 1]  # rank 3
    t, ta = glob(a, sbp), torch.from_numpy(a)
    assert flow.linalg.matrix_rank(t).item() == torch.linalg.matrix_rank(ta).item() == 3
    assert flow.linalg.matrix_rank(t, atol=1e9).item() == 0
    pinv = flow.linalg.pinv(t)
    assert pinv.sbp == ((S1,) if sbp == S0 else (B,))  # A^H's layout: split by columns
    assert_allclose(pinv.numpy(), torch.linalg.pinv(ta).numpy(), atol=1e-10)
    h = a.T @ a
    assert_allclose(flow.linalg.pinv(glob(h, S0), hermitian=True).numpy(),
                    torch.linalg.pinv(torch.from_numpy(h), hermitian=True).numpy(), atol=1e-9)
    assert flow.linalg.matrix_rank(glob(h, S0), hermitian=True).item() == 3


def test_matrix_power_and_vecdot() -> None:
    a = value((3, 3), 10) + 3 * numpy.eye(3)
    for n in (0, 1, 5, -2):
        got = flow.linalg.matrix_power(glob(a, S0), n)
        assert_allclose(got.numpy(), numpy.linalg.matrix_power(a, n), rtol=1e-10, atol=1e-12)
    x, y = value((M, 3), 11, numpy.complex128), value((M, 3), 12, numpy.complex128)
    got = flow.linalg.vecdot(glob(x, S0), glob(y, S0))
    assert_allclose(got.numpy(), (numpy.conj(x) * y).sum(-1), atol=1e-12)


def test_tolerance_tensors_are_per_matrix_as_torch() -> None:
    a = numpy.random.default_rng(0).standard_normal((2, 4, 3))
    a[1, :, 2] = a[1, :, 0]  # rank 2
    tol = numpy.array([0.5, 1e-3])
    for name in ("pinv", "matrix_rank"):
        for kw in ("rtol", "atol"):
            got = getattr(flow.linalg, name)(flow.tensor(a), **{kw: flow.tensor(tol)})
            want = getattr(torch.linalg, name)(torch.tensor(a), **{kw: torch.tensor(tol)})
            numpy.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-12)
