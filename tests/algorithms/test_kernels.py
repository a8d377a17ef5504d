"""The local kernels: which library runs them, and that both give numpy's results to the
documented tolerance."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import numpy
import pytest
import torch
from numpy.testing import assert_allclose

from mpiflow.algorithms import kernels


@pytest.fixture
def choose(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """Re-choose the libraries under the environment a test sets (and restore after)."""
    kernels.choose_again()

    def set_env(**env: str) -> None:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        kernels.choose_again()

    yield set_env
    monkeypatch.undo()
    kernels.choose_again()


def test_the_choice_follows_the_environment(choose: object) -> None:
    choose()  # type: ignore[operator]
    for family in kernels.FAMILIES:  # torch is installed here: the measured defaults
        assert kernels.library(family) == kernels.DEFAULTS[family]
    choose(MPIFLOW_KERNELS="torch")  # type: ignore[operator]
    assert [kernels.library(f) for f in ("gemm", "qr", "lu")] == ["numpy", "torch", "torch"]
    choose(MPIFLOW_KERNELS="numpy", MPIFLOW_GEMM="torch")  # type: ignore[operator]
    assert kernels.library("qr") == "numpy"
    assert kernels.library("gemm") == "torch"
    assert "gemm torch" in kernels.describe() and "qr numpy" in kernels.describe()
    choose(MPIFLOW_KERNELS="blas")  # type: ignore[operator]
    with pytest.raises(ValueError,
                       match="MPIFLOW_KERNELS must be one of auto, numpy, torch; got 'blas'"):
        kernels.library("gemm")


def test_threads_are_the_users_to_ask_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MPIFLOW_KERNEL_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert kernels.threads() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert kernels.threads() == 3
    monkeypatch.setenv("MPIFLOW_KERNEL_THREADS", "2")
    assert kernels.threads() == 2


def test_torchs_own_thread_setting_is_restored(monkeypatch: pytest.MonkeyPatch,
                                               choose: object) -> None:
    choose()  # type: ignore[operator]
    monkeypatch.setenv("MPIFLOW_KERNEL_THREADS", "1")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        kernels.qr(numpy.ones((kernels.TORCH_MIN_ELEMENTS // 16, 16)) + numpy.eye(
            kernels.TORCH_MIN_ELEMENTS // 16, 16))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_small_matrices_never_import_torch() -> None:
    program = ("import sys, numpy\n"
               "from mpiflow.algorithms import kernels\n"
               "a = numpy.random.default_rng(0).standard_normal((100, 8))\n"
               "kernels.qr(a); kernels.svd(a, False); kernels.matmul(a.T, a)\n"
               "assert kernels.library('qr') == 'torch'\n"
               "assert 'torch' not in sys.modules, 'a small QR imported torch'\n"
               "n = kernels.TORCH_MIN_ELEMENTS\n"
               "big = numpy.random.default_rng(1).standard_normal((n, 2))\n"
               "kernels.qr(big)\n"
               "assert 'torch' in sys.modules, 'a large QR did not run torch'\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPIFLOW_")}
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
def test_both_libraries_agree_with_numpy(dtype: str, choose: object) -> None:
    rng = numpy.random.default_rng(0)
    a = rng.standard_normal((300, 280)).astype(dtype)
    b = rng.standard_normal((280, 260)).astype(dtype)
    eps = float(numpy.finfo(a.real.dtype).eps)
    want = numpy.matmul(a.astype(numpy.complex128), b)
    bound = 280 * eps * (numpy.abs(a) @ numpy.abs(b))  # the documented tolerance of a product
    for lib in ("numpy", "torch"):
        choose(MPIFLOW_KERNELS=lib, MPIFLOW_GEMM=lib)  # type: ignore[operator]
        got = kernels.matmul(a, b)
        assert got.dtype == numpy.dtype(dtype)
        assert numpy.all(numpy.abs(got - want) <= bound)
        sq = a[:50, :50] + 50 * numpy.eye(50, dtype=dtype)
        x, info = kernels.solve_ex(sq, b[:50, :3])
        assert not info.any()
        tol = 1e-3 if dtype == "float32" else 1e-10
        assert_allclose(sq @ x, b[:50, :3], rtol=tol, atol=tol)
        q, r = kernels.qr(a[:, :20])
        assert_allclose(q @ r, a[:, :20], rtol=tol, atol=tol)
        s = kernels.svd(a[:, :20], compute_uv=False)
        assert_allclose(s, numpy.linalg.svd(a[:, :20], compute_uv=False), rtol=tol)


def test_failures_are_info_codes_not_exceptions(choose: object) -> None:
    batch = numpy.stack([numpy.eye(3), numpy.zeros((3, 3)), -numpy.eye(3)])
    for lib in ("numpy", "torch"):
        choose(MPIFLOW_KERNELS=lib)  # type: ignore[operator]
        _, info = kernels.inv_ex(batch)
        assert info[0] == 0 and info[1] > 0 and info[2] == 0
        _, info = kernels.cholesky_ex(batch)
        assert info[0] == 0 and info[1] > 0 and info[2] == 1
        _, info = kernels.solve_ex(batch, numpy.ones((3, 3, 1)))
        assert info[0] == 0 and info[1] > 0


def test_read_only_and_reversed_arrays_go_to_numpy(choose: object) -> None:
    choose(MPIFLOW_GEMM="torch")  # type: ignore[operator]
    a = numpy.random.default_rng(1).standard_normal((300, 300))
    a.flags.writeable = False
    got = kernels.matmul(a, a[::-1, ::-1])
    assert_allclose(got, a @ a[::-1, ::-1], rtol=1e-10)
