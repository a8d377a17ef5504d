"""examples/spectral_poisson.py: the FFT solve against numpy's on the whole grid, nothing
gathered, and the same summary line at 1, 2 and 3 ranks (separate jobs)."""

from __future__ import annotations

import importlib.util
import pathlib
from types import ModuleType

import numpy
import pytest
from helpers import run_job

import mpiflow as flow
from mpiflow.communication import count_collectives

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "spectral_poisson.py"
SIZE = flow.env.get_world_size()
WORLD = flow.placement("cpu", list(range(SIZE)))


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_spectral_poisson", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.mpi
def test_the_solve_is_numpys_and_moves_each_spectrum_once() -> None:
    example = load()
    ny, nx = 2 * SIZE + 9, 10
    u_exact, f_values = example.exact(ny, nx)
    f = flow.tensor(f_values, placement=WORLD, sbp=flow.sbp.split(0))
    example.solve(f, float(u_exact.mean()))  # warm up
    with count_collectives() as calls:
        u, spectrum = example.solve(f, float(u_exact.mean()))
    assert spectrum.sbp == (flow.sbp.split(1),) and u.sbp == (flow.sbp.split(0),)
    assert calls["all_to_all"] + calls["all_to_all_v"] == (2 if SIZE > 1 else 0)
    assert not {"all_gather", "all_gather_v", "gather"} & set(calls)
    ky = numpy.fft.fftfreq(ny, 1.0 / ny)[:, None]
    kx = numpy.fft.rfftfreq(nx, 1.0 / nx)[None, :]
    k2 = ky ** 2 + kx ** 2
    k2[0, 0] = 1.0
    u_hat = numpy.fft.rfft2(f_values) / k2
    u_hat[0, 0] = ny * nx * u_exact.mean()
    numpy.testing.assert_allclose(u.numpy(), numpy.fft.irfft2(u_hat, s=(ny, nx)), atol=1e-12)


def test_the_summary_is_the_same_at_1_to_3_ranks() -> None:
    code = ("import runpy, sys; "
            f"sys.argv = [{str(EXAMPLE)!r}]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")
    lines = {}
    for n in (1, 2, 3):
        job = run_job(n, code, timeout=120)
        assert job.returncode == 0, f"{n} rank(s):\n{job.stdout}\n{job.stderr}"
        lines[n] = job.stdout.strip().splitlines()[-1]
    assert len(set(lines.values())) == 1, lines
    assert lines[1].startswith("spectral_poisson 32x24: max error") and "(ok)" in lines[1]
