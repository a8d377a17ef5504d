"""The periodic Poisson equation solved with FFTs on a grid split by rows across the ranks.

    -(d2u/dx2 + d2u/dy2) = f   on [0, 2 pi)^2, periodic,

with ``f`` made from the exact solution ``u = exp(sin x + cos 2y)`` (smooth, not a finite
Fourier series: the spectral method's error is small but not zero). In Fourier space the
Laplacian is a product: ``u_hat = f_hat / (kx^2 + ky^2)``; the zero mode (the mean, which the
equation leaves free) is the exact solution's.

The grid is a global tensor split by rows (``S(0)``). ``mpiflow.fft.rfft2`` transforms each
rank's rows, then one all-to-all gives each rank whole columns of the half spectrum, which
comes back split by columns (``S(1)``); the wave numbers are small whole tensors, and the
division is local. ``irfft2`` of that spectrum returns to rows (``S(0)``) with one more
all-to-all. Nothing is gathered. The summary line (the error to 3 significant digits, the
layouts) is the same on any number of ranks.

Run:
    mpiexec -n 4 python examples/spectral_poisson.py
    python -m mpiflow.launch -n 2 examples/spectral_poisson.py --ny 256 --nx 192
"""

from __future__ import annotations

import argparse
import math

import numpy

import mpiflow as flow


def exact(ny: int, nx: int) -> tuple[numpy.ndarray, numpy.ndarray]:
    """The solution ``u`` and the source ``f = -lap u`` on the grid (rows: y, columns: x)."""
    y = 2 * math.pi * numpy.arange(ny) / ny
    x = 2 * math.pi * numpy.arange(nx) / nx
    yy, xx = numpy.meshgrid(y, x, indexing="ij")
    u = numpy.exp(numpy.sin(xx) + numpy.cos(2 * yy))
    lap = u * (numpy.cos(xx) ** 2 - numpy.sin(xx) + 4 * numpy.sin(2 * yy) ** 2
               - 4 * numpy.cos(2 * yy))
    return u, -lap


def solve(f: flow.Tensor, mean: float) -> tuple[flow.Tensor, flow.Tensor]:
    """The periodic solution of ``-lap u = f`` with the given mean, and ``f``'s half
    spectrum (for its layout)."""
    ny, nx = f.shape
    spectrum = flow.fft.rfft2(f)                       # S(0) -> S(1): one all-to-all
    whole = {"placement": f.placement, "sbp": flow.sbp.broadcast} if f.is_global else {}
    ky = flow.fft.fftfreq(ny, 1.0 / ny, dtype=flow.float64, **whole).reshape(ny, 1)
    kx = flow.fft.rfftfreq(nx, 1.0 / nx, dtype=flow.float64, **whole).reshape(1, -1)
    k2 = ky * ky + kx * kx
    k2 = flow.where(k2 == 0, 1.0, k2)                  # the zero mode: set below
    u_hat = spectrum / k2
    zero = flow.zeros(ny, nx // 2 + 1, dtype=flow.float64, **whole)
    zero[0, 0] = 1.0
    # the mean's mode: ny * nx * mean (no scaling on the forward transform)
    u_hat = flow.where(zero == 1.0, ny * nx * mean, u_hat)
    return flow.fft.irfft2(u_hat, s=(ny, nx)), spectrum     # S(1) -> S(0)


def main(argv: list[str] | None = None) -> str:
    """Solve; print (rank 0) and return the summary line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ny", type=int, default=32, help="grid rows (split across ranks)")
    parser.add_argument("--nx", type=int, default=24, help="grid columns")
    args = parser.parse_args(argv)
    rank, size = flow.env.get_rank(), flow.env.get_world_size()
    placement = flow.placement("cpu", list(range(size)))
    u_exact, f_values = exact(args.ny, args.nx)
    f = flow.tensor(f_values, placement=placement, sbp=flow.sbp.split(0))
    exact_u = flow.tensor(u_exact, placement=placement, sbp=flow.sbp.split(0))
    u, spectrum = solve(f, float(u_exact.mean()))
    error = (u - exact_u).abs().max().item()
    summary = (f"spectral_poisson {args.ny}x{args.nx}: max error {error:.3g} "
               f"({'ok' if error < 1e-3 else 'NOT converged'}); spectrum "
               f"{spectrum.sbp[0]}, solution {u.sbp[0]}")
    if rank == 0:
        print(f"{size} rank(s), {args.ny} rows split "
              f"{flow.sbp.balanced_sizes(args.ny, size)}")
        print(summary)
    return summary


if __name__ == "__main__":
    main()
