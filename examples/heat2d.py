"""The 2-D heat equation, explicit in time, on a grid split by rows across the ranks.

    du/dt = D (d2u/dx2 + d2u/dy2)   on the unit square, u = 0 on the boundary,

with the five-point Laplacian and forward Euler steps, ``u += alpha * lap(u)`` where
``alpha = D dt / h^2`` (stable for ``alpha <= 1/4``). The grid ``u`` is a global tensor split
by rows (``S(0)``): each rank holds a band of rows. Neighbours along a row are on the same rank,
so the horizontal part of the stencil is ordinary global tensor ops; the rows just above and
below a band live on the neighbouring ranks, and :func:`mpiflow.halo.halo_exchange` brings
them in (one ghost row on each side, zeros beyond the top and bottom edges: the boundary).

Every grid value is computed by the same floating-point operations in the same order whatever
the number of ranks, so the field is bitwise identical on 1 or N ranks; the summary line (the
total heat, a reduction of partial sums, to 6 significant digits) is too.

Run:
    mpiexec -n 4 python examples/heat2d.py
    python -m mpiflow.launch -n 4 examples/heat2d.py --nx 256 --ny 256 --steps 2000 --plot heat.png
"""

from __future__ import annotations

import argparse

import numpy

import mpiflow as flow
from mpiflow.halo import halo_exchange


def initial_field(ny: int, nx: int) -> numpy.ndarray:
    """Two hot spots on a cold plate: the same array on every rank."""
    y = (numpy.arange(ny) + 1.0) / (ny + 1)
    x = (numpy.arange(nx) + 1.0) / (nx + 1)
    yy, xx = numpy.meshgrid(y, x, indexing="ij")
    spot1 = numpy.exp(-((xx - 0.3) ** 2 + (yy - 0.35) ** 2) / 0.01)
    spot2 = 0.5 * numpy.exp(-((xx - 0.7) ** 2 + (yy - 0.65) ** 2) / 0.02)
    return spot1 + spot2


def step(u: flow.Tensor, alpha: float) -> flow.Tensor:
    """One forward-Euler step of the five-point stencil on the row-split field ``u``."""
    sbp = u.sbp
    ext = halo_exchange(u, 1)                      # local: ghost row, my rows, ghost row
    vertical = (ext[:-2] + ext[2:]).to_global(u.placement, sbp)
    zeros = flow.zeros(u.shape[0], 1, dtype=u.dtype, placement=u.placement, sbp=sbp)
    left = flow.cat([zeros, u[:, :-1]], dim=1)     # u[i, j-1], 0 beyond the left edge
    right = flow.cat([u[:, 1:], zeros], dim=1)     # u[i, j+1], 0 beyond the right edge
    return u + alpha * (vertical + left + right - 4.0 * u)


def main(argv: list[str] | None = None) -> str:
    """Run the simulation; print (rank 0) and return the summary line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ny", type=int, default=50, help="grid rows (split across ranks)")
    parser.add_argument("--nx", type=int, default=64, help="grid columns")
    parser.add_argument("--steps", type=int, default=200, help="time steps")
    parser.add_argument("--alpha", type=float, default=0.2, help="D dt / h^2 (<= 0.25)")
    parser.add_argument("--plot", metavar="PNG", help="write the final field as a PNG")
    args = parser.parse_args(argv)
    if not 0 < args.alpha <= 0.25:
        parser.error(f"--alpha must be in (0, 0.25] for a stable explicit scheme, got {args.alpha}")

    rank, size = flow.env.get_rank(), flow.env.get_world_size()
    placement = flow.placement("cpu", list(range(size)))
    u = flow.tensor(initial_field(args.ny, args.nx), dtype=flow.float64,
                    placement=placement, sbp=flow.sbp.split(0))
    heat0 = flow.sum(u).item()  # a partial sum per rank, all-reduced by item()

    for _ in range(args.steps):
        u = step(u, args.alpha)

    heat = flow.sum(u).item()
    peak = flow.max(u).item()
    rows = flow.arange(args.ny, dtype=flow.float64, placement=placement, sbp=flow.sbp.split(0))
    centre = (flow.sum(u.sum(dim=1) * rows) / heat).item()   # the row of the centre of heat
    field = u.numpy()  # collective: every rank gathers the whole field
    summary = (f"heat2d {args.ny}x{args.nx} steps={args.steps}: heat {heat:.6g} "
               f"(from {heat0:.6g}), peak {peak:.6g}, centre row {centre:.6g}")
    if rank == 0:
        print(f"{size} rank(s), {args.ny} rows split {flow.sbp.balanced_sizes(args.ny, size)}")
        if args.plot:
            plot(field, args.plot, f"heat after {args.steps} steps ({size} ranks)",
                 flow.sbp.balanced_sizes(args.ny, size))
            print(f"wrote {args.plot}")
        print(summary)
    return summary


def plot(field: numpy.ndarray, path: str, title: str, shard_rows: list[int]) -> None:
    """Write ``field`` as a heat map, the ranks' bands of rows marked (matplotlib, from the
    ``examples`` extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.5), dpi=100)
    image = ax.imshow(field, origin="lower", cmap="inferno", aspect="auto")
    fig.colorbar(image, ax=ax, label="u")
    for edge in numpy.cumsum(shard_rows)[:-1]:          # where one rank's rows end
        ax.axhline(edge - 0.5, color="white", linestyle=":", linewidth=0.8)
    ax.set_xlabel("column")
    ax.set_ylabel("row (split across ranks)")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    main()
