"""The science examples: correct at every rank count, and the same summary whatever the count.

In-process tests (``mpi``: every rank, collectively) check each example's pieces against numpy
on the whole problem. The unmarked tests (1-rank session only) run each example as its own job
at 1, 2, 3 and 4 ranks and compare the summary lines, and check that ``--plot`` writes a PNG.
"""

from __future__ import annotations

import importlib.util
import pathlib
from types import ModuleType

import numpy
import pytest
from helpers import run_job

import mpiflow as flow

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
SCIENCE = ["heat2d", "cg", "kmeans"]
LINALG = ["pca_tsqr", "lstsq_fit"]  # compared at 1-3 ranks (the CI budget)
RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()
WORLD = flow.placement("cpu", list(range(SIZE)))
S0 = flow.sbp.split(0)


def load(name: str) -> ModuleType:
    """Import ``examples/<name>.py`` as a module (the examples are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- in-process, at the suite's rank count ---------------------------------------------------------
@pytest.mark.mpi
def test_heat2d_field_is_bitwise_the_numpy_stencil() -> None:
    heat2d = load("heat2d")
    ny, nx, alpha = 2 * SIZE + 3, 7, 0.2
    field = heat2d.initial_field(ny, nx)
    u = flow.tensor(field, dtype=flow.float64, placement=WORLD, sbp=S0)
    for _ in range(5):
        u = heat2d.step(u, alpha)
        padded = numpy.pad(field, 1)
        vertical = padded[:-2, 1:-1] + padded[2:, 1:-1]
        field = field + alpha * (vertical + padded[1:-1, :-2] + padded[1:-1, 2:] - 4.0 * field)
    numpy.testing.assert_array_equal(u.numpy(), field)


@pytest.mark.mpi
def test_banded_matvec_matches_the_dense_matrix() -> None:
    cg = load("cg")
    ny, nx = 3, 2 * SIZE + 1            # shards shorter than the halo width at 4 ranks
    bands = cg.poisson_bands(ny, nx)
    offsets = [-nx, -1, 0, 1, nx]
    n = ny * nx
    dense = numpy.zeros((n, n))
    for k, offset in enumerate(offsets):
        for i in range(n):
            if 0 <= i + offset < n:
                dense[i, i + offset] = bands[i, k]
    A = cg.BandedMatrix(offsets, flow.tensor(bands, placement=WORLD, sbp=S0))
    x = numpy.cos(numpy.arange(n, dtype=numpy.float64))
    y = A @ flow.tensor(x, placement=WORLD, sbp=S0)
    assert y.sbp == (S0,)
    numpy.testing.assert_allclose(y.numpy(), dense @ x, rtol=1e-14, atol=1e-14)


@pytest.mark.mpi
def test_cg_solves_the_poisson_problem() -> None:
    cg = load("cg")
    ny, nx = 5, 6
    A = cg.BandedMatrix([-nx, -1, 0, 1, nx], flow.tensor(cg.poisson_bands(ny, nx),
                                                         placement=WORLD, sbp=S0))
    b_full = cg.source(ny, nx)
    x, history, info = cg.conjugate_gradient(A, flow.tensor(b_full, placement=WORLD, sbp=S0),
                                             1e-12, 200)
    assert info == 0 and history[-1] <= 2e-12
    assert len(history) - 1 <= ny * nx      # CG converges in at most n steps (in exact math)
    residual = (A @ x).numpy() - b_full
    assert numpy.linalg.norm(residual) <= 1e-11 * numpy.linalg.norm(b_full)


@pytest.mark.mpi
def test_kmeans_matches_lloyd_in_numpy() -> None:
    kmeans = load("kmeans")
    n, k = 6 * SIZE + 5, 3
    points = kmeans.make_points(n, k, WORLD, seed=3)
    start = kmeans.farthest_points(points, k, 0)
    centroids, labels, iterations, _ = kmeans.kmeans(points, start, 50)
    # The same iterations on the whole array with numpy.
    p, c = points.numpy(), start.numpy()
    for _ in range(50):
        assign = ((p[:, None, :] - c[None]) ** 2).sum(axis=2).argmin(axis=1)
        new = numpy.array([p[assign == j].mean(axis=0) if (assign == j).any() else c[j]
                           for j in range(k)])
        if numpy.allclose(new, c, rtol=0, atol=0):
            break
        c = new
    numpy.testing.assert_array_equal(labels.numpy(), assign)
    numpy.testing.assert_allclose(centroids.numpy(), c, rtol=1e-12)
    assert iterations >= 1


@pytest.mark.mpi
def test_make_points_does_not_depend_on_the_rank_count() -> None:
    kmeans = load("kmeans")
    points = kmeans.make_points(23, 4, WORLD, seed=5).numpy()
    alone = kmeans.make_points(23, 4, flow.placement("cpu", [0]), seed=5).numpy()
    numpy.testing.assert_array_equal(points, alone)


@pytest.mark.mpi
def test_pca_matches_numpys_svd_of_the_whole_data() -> None:
    pca = load("pca_tsqr")
    n, d = 7 * SIZE + 5, 5
    data = pca.make_data(n, d, 2, WORLD, seed=3)
    variance, components, scores = pca.pca(data, 2)
    assert scores.sbp == (S0,) and components.sbp == (flow.sbp.broadcast,)
    whole = data.numpy()
    centred = whole - whole.mean(axis=0)
    u, s, vh = numpy.linalg.svd(centred, full_matrices=False)
    numpy.testing.assert_allclose(variance.numpy(), s * s / (n - 1), rtol=1e-11)
    signs = numpy.sign((components.numpy() * vh[:2]).sum(axis=1))   # components up to sign
    numpy.testing.assert_allclose(components.numpy() * signs[:, None], vh[:2], atol=1e-10)
    numpy.testing.assert_allclose(scores.numpy() * signs, (u * s)[:, :2], atol=1e-9)


@pytest.mark.mpi
def test_lstsq_fit_matches_numpy() -> None:
    fit = load("lstsq_fit")
    x, y = fit.make_samples(9 * SIZE + 4, 0.2, WORLD, seed=2)
    coefficients, rms, r2 = fit.fit(x, y)
    X, yv = fit.design(x).numpy(), y.numpy()
    want, rss = numpy.linalg.lstsq(X, yv, rcond=None)[:2]
    numpy.testing.assert_allclose(coefficients.numpy(), want, rtol=1e-10, atol=1e-12)
    numpy.testing.assert_allclose(rms, numpy.sqrt(rss[0] / len(yv)), rtol=1e-9)
    assert 0.9 < r2 < 1


@pytest.mark.mpi
@pytest.mark.parametrize("name", SCIENCE + LINALG)
def test_main_returns_the_summary(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    summary = load(name).main([])
    out = capsys.readouterr().out
    if RANK == 0:
        assert out.strip().splitlines()[-1] == summary
    else:
        assert out == ""


# -- separate jobs at 1..4 ranks -------------------------------------------------------------------
def run_example(name: str, ranks: int, *args: str, timeout: float = 120) -> str:
    """Run ``examples/<name>.py args`` on ``ranks`` processes; return its output."""
    code = ("import runpy, sys; "
            f"sys.argv = [{str(EXAMPLES / (name + '.py'))!r}, *{list(args)!r}]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")
    job = run_job(ranks, code, timeout=timeout)
    assert job.returncode == 0, f"{name} at {ranks} rank(s) failed:\n{job.stdout}\n{job.stderr}"
    return job.stdout


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", SCIENCE)
def test_the_summary_is_the_same_at_1_to_4_ranks(name: str) -> None:
    lines = {n: run_example(name, n).strip().splitlines()[-1] for n in (1, 2, 3, 4)}
    assert len(set(lines.values())) == 1, "\n".join(f"{n} ranks: {s}" for n, s in lines.items())
    assert lines[1].startswith(name), lines[1]
    assert "NOT" not in lines[1]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", LINALG)
def test_the_linalg_summaries_are_the_same_at_1_to_3_ranks(name: str) -> None:
    lines = {n: run_example(name, n, "--check").strip().splitlines() for n in (1, 2, 3)}
    last = {n: out[-1] for n, out in lines.items()}
    assert len(set(last.values())) == 1, "\n".join(f"{n} ranks: {s}" for n, s in last.items())
    assert last[1].startswith(name), last[1]
    for out in lines.values():  # the --check line: numpy agrees with the distributed result
        check = next(line for line in out if line.startswith("numpy check"))
        assert float(check.split()[-1]) < 1e-9, check


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", SCIENCE + LINALG)
def test_plot_writes_a_png(name: str, tmp_path: pathlib.Path) -> None:
    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("matplotlib is not installed (pip install -e '.[examples]')")
    png = tmp_path / f"{name}.png"
    out = run_example(name, 2, "--plot", str(png))
    assert f"wrote {png}" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 5000


def test_bigger_problems_through_the_flags() -> None:
    out = run_example("cg", 3, "--nx", "12", "--ny", "9", "--tol", "1e-10")
    assert "cg n=108 (9x12): converged" in out
    out = run_example("heat2d", 3, "--ny", "7", "--nx", "5", "--steps", "3")
    assert "heat2d 7x5 steps=3" in out
    out = run_example("kmeans", 3, "--points", "50", "--clusters", "2")
    assert "kmeans n=50 k=2" in out
