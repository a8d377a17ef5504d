"""Conjugate gradient on a distributed banded matrix: the 2-D Poisson problem, rows split.

    -(d2u/dx2 + d2u/dy2) = f   on the unit square, u = 0 on the boundary,

discretized with the five-point stencil on an ``ny x nx`` grid of unknowns numbered row by
row, is ``A x = b`` with ``A`` symmetric positive definite and banded: diagonals at offsets
``-nx, -1, 0, 1, nx``. ``A`` is stored in diagonal (DIA) format as a global ``(n, 5)`` tensor
split by rows (``S(0)``), so each rank holds the coefficients of its own rows, and the
vectors ``x``, ``r``, ``p`` are split the same way. The row split is of the ``n`` unknowns, not
of grid rows, so shards start anywhere in the grid.

- ``A @ p`` needs, for this rank's rows, ``nx`` entries of ``p`` on each side of its shard:
  :func:`mpiflow.halo.halo_exchange` brings them from whichever ranks hold them (a shard
  shorter than ``nx`` is fine).
- Dot products ``flow.dot(r, r)`` of two split vectors are partial sums (``P``): each rank
  sums its part and ``.item()`` all-reduces them.
- The iterations are :func:`mpiflow.linalg.cg`'s, which takes the banded matrix as it is (any
  object with ``@``, or a function) and keeps the vectors laid out as ``b``.

By default the dot products are summed in a different order on different rank counts, so the
iterates agree only to rounding; the solution (converged to ``--tol``) and the iteration count
agree to the 6 significant digits of the summary line. With ``--deterministic`` (or
``MPIFLOW_DETERMINISTIC=1``) every dot product is exact and rounded once
(``flow.use_deterministic_algorithms``), so every iterate has the same bits at any rank count:
the residual history printed in full (``float.hex``) is identical at 1, 2, 3 or 4 ranks.

Run:
    mpiexec -n 4 python examples/cg.py
    mpiexec -n 3 python examples/cg.py --deterministic --print-residuals
    python -m mpiflow.launch -n 4 examples/cg.py --nx 200 --ny 150 --plot cg.png
"""

from __future__ import annotations

import argparse
import math

import numpy

import mpiflow as flow
from mpiflow.halo import halo_exchange


class BandedMatrix:
    """A square matrix in diagonal format, its rows split across ranks.

    Args:
        offsets: the diagonal of each band (0 the main diagonal, ``k > 0`` above it).
        bands: a global ``(n, len(offsets))`` tensor split by rows: ``bands[i, k]`` is the
            entry ``A[i, i + offsets[k]]`` (0 where that column is outside the matrix).

    Example:
        >>> A = BandedMatrix([-1, 0, 1], bands)       # a tridiagonal matrix
        >>> y = A @ x                                  # x, y split like the rows
    """

    def __init__(self, offsets: list[int], bands: flow.Tensor) -> None:
        self.offsets = offsets
        self.bands = bands
        self.width = max(abs(k) for k in offsets)

    def __matmul__(self, x: flow.Tensor) -> flow.Tensor:
        """``A @ x`` for ``x`` split like the rows of ``A``: one halo exchange, local work."""
        ext = halo_exchange(x, self.width)      # local: width, my rows, width
        mine = self.bands.to_local()
        rows = mine.shape[0]
        w = self.width
        y = mine[:, 0] * ext[w + self.offsets[0]:w + self.offsets[0] + rows]
        for k, offset in enumerate(self.offsets[1:], start=1):
            y = y + mine[:, k] * ext[w + offset:w + offset + rows]
        return y.to_global(x.placement, x.sbp)


def poisson_bands(ny: int, nx: int) -> numpy.ndarray:
    """The five-point Laplacian of an ``ny x nx`` grid (row-major), in diagonal format."""
    j = numpy.arange(ny * nx) % nx          # the grid column of each unknown
    i = numpy.arange(ny * nx) // nx         # the grid row
    bands = numpy.zeros((ny * nx, 5))
    bands[:, 0] = numpy.where(i > 0, -1.0, 0.0)            # offset -nx: the row above
    bands[:, 1] = numpy.where(j > 0, -1.0, 0.0)            # offset -1
    bands[:, 2] = 4.0                                      # the diagonal
    bands[:, 3] = numpy.where(j < nx - 1, -1.0, 0.0)       # offset +1
    bands[:, 4] = numpy.where(i < ny - 1, -1.0, 0.0)       # offset +nx: the row below
    return bands


def source(ny: int, nx: int) -> numpy.ndarray:
    """``h^2 f`` at the unknowns: a uniform load plus a strong off-centre source."""
    h = 1.0 / (max(nx, ny) + 1)
    y = (numpy.arange(ny) + 1.0) / (ny + 1)
    x = (numpy.arange(nx) + 1.0) / (nx + 1)
    yy, xx = numpy.meshgrid(y, x, indexing="ij")
    f = 1.0 + 50.0 * numpy.exp(-((xx - 0.65) ** 2 + (yy - 0.4) ** 2) / 0.005)
    return (h * h * f).reshape(-1)


def conjugate_gradient(A: BandedMatrix, b: flow.Tensor, tol: float, max_iter: int
                       ) -> tuple[flow.Tensor, list[float], int]:
    """Solve ``A x = b`` (``A`` symmetric positive definite) from ``x = 0`` with
    :func:`mpiflow.linalg.cg`, which takes ``A`` as it is: any object with ``@``.

    Returns:
        ``x`` (split like ``b``), the relative residual ``|b - A x| / |b|`` after each
        iteration (computed for the history by the callback: one more product and dot
        product per iteration), and cg's ``info`` (0: converged to ``tol``).
    """
    b_norm = math.sqrt(flow.dot(b, b).item())   # partial sums, all-reduced by item()
    history = [1.0]

    def record(x: flow.Tensor) -> None:
        r = b - A @ x
        history.append(math.sqrt(flow.dot(r, r).item()) / b_norm)

    x, info = flow.linalg.cg(A, b, rtol=tol, maxiter=max_iter, callback=record)
    return x, history, info


def main(argv: list[str] | None = None) -> str:
    """Solve the problem; print (rank 0) and return the summary line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nx", type=int, default=37, help="grid columns (= the halo width)")
    parser.add_argument("--ny", type=int, default=29, help="grid rows")
    parser.add_argument("--tol", type=float, default=1e-8, help="relative residual to reach")
    parser.add_argument("--max-iter", type=int, default=2000, help="iterations at most")
    parser.add_argument("--plot", metavar="PNG", help="write the residual history as a PNG")
    parser.add_argument("--deterministic", action="store_true",
                        help="exact dot products: the same bits at any rank count")
    parser.add_argument("--print-residuals", action="store_true",
                        help="print every relative residual in full (float.hex)")
    args = parser.parse_args(argv)
    previous = flow.are_deterministic_algorithms_enabled()
    flow.use_deterministic_algorithms(previous or args.deterministic)
    try:
        return solve(args)
    finally:
        flow.use_deterministic_algorithms(previous)


def solve(args: argparse.Namespace) -> str:
    """Set up and solve the problem of the parsed arguments; print (rank 0) the summary."""
    rank, size = flow.env.get_rank(), flow.env.get_world_size()
    placement = flow.placement("cpu", list(range(size)))
    split = flow.sbp.split(0)
    n = args.ny * args.nx
    A = BandedMatrix([-args.nx, -1, 0, 1, args.nx],
                     flow.tensor(poisson_bands(args.ny, args.nx), placement=placement,
                                 sbp=split, dtype=flow.float64))
    b = flow.tensor(source(args.ny, args.nx), placement=placement, sbp=split,
                    dtype=flow.float64)

    x, history, info = conjugate_gradient(A, b, args.tol, args.max_iter)
    iterations = len(history) - 1
    converged = info == 0
    x_norm = flow.norm(x)
    solution = x.numpy()  # collective
    summary = (f"cg n={n} ({args.ny}x{args.nx}): "
               f"{'converged' if converged else 'NOT converged'} in {iterations} iterations, "
               f"|x| {x_norm.item():.6g}, sum(x) {flow.sum(x).item():.6g}, "
               f"max(x) {flow.max(x).item():.6g}")
    if rank == 0:
        sizes = flow.sbp.balanced_sizes(n, size)
        print(f"{size} rank(s), {n} unknowns split {sizes}, halo width {args.nx}")
        if args.print_residuals:
            for k, res in enumerate(history):
                print(f"iteration {k:4d}  |r|/|b| = {res.hex()}  ({res!r})")
        if args.plot:
            plot(history, solution.reshape(args.ny, args.nx), args.tol, args.plot,
                 f"CG on the {args.ny}x{args.nx} Poisson problem ({size} ranks)")
            print(f"wrote {args.plot}")
        print(summary)
    return summary


def plot(history: list[float], field: numpy.ndarray, tol: float, path: str, title: str
         ) -> None:
    """The residual history and the solution, side by side (matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 4), dpi=100)
    ax.semilogy(range(len(history)), history, marker=".", markersize=3)
    ax.axhline(tol, color="grey", linestyle="--", label=f"tol {tol:g}")
    ax.set_xlabel("iteration")
    ax.set_ylabel("|r| / |b|")
    ax.set_title("residual history")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    image = ax2.imshow(field, origin="lower", cmap="viridis", aspect="auto")
    fig.colorbar(image, ax=ax2, label="x")
    ax2.set_title("solution")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    main()
