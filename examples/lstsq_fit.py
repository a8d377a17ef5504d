"""A least-squares fit of a model to noisy samples, the design matrix split by rows.

The model is ``y = c0 + c1 x + c2 x^2 + c3 sin(3 x)``, sampled at ``n`` points with noise.
The samples and the ``n x 4`` design matrix ``X`` (one row per sample) are global tensors
split by rows (``S(0)``): each rank builds the rows of its own samples. Then
``flow.linalg.lstsq(X, y)`` runs TSQR on ``[X | y]``: each rank factors its rows, the small
``5 x 5`` R factors climb a tree of ranks, and the root reads the coefficients off ``R``
(``R_X c = (Q^T y)_1``, a 4 x 4 triangular system) and the residual (``R``'s last entry):
no ``Q`` is formed and no sample moves. The coefficients come back on every rank.

The fit is compared with the coefficients the noise was added to; the summary (the
coefficients, the residual's root mean square and R^2) agrees to its 6 significant digits
at any rank count, and ``--check`` compares it with numpy's ``lstsq`` of the whole matrix.

Run:
    mpiexec -n 4 python examples/lstsq_fit.py
    python -m mpiflow.launch -n 4 examples/lstsq_fit.py --samples 1000000 --check
    mpiexec -n 2 python examples/lstsq_fit.py --plot fit.png
"""

from __future__ import annotations

import argparse
import math

import numpy

import mpiflow as flow

TRUE = (1.5, -2.0, 0.75, 0.5)  # c0, c1, c2, c3


def design(x: flow.Tensor) -> flow.Tensor:
    """The ``(n, 4)`` design matrix of the model at the points ``x`` (split like them)."""
    return flow.stack([flow.ones_like(x), x, x * x, flow.sin(3.0 * x)], dim=1)


def make_samples(n: int, noise: float, placement: flow.placement, seed: int
                 ) -> tuple[flow.Tensor, flow.Tensor]:
    """``n`` points evenly in ``[-2, 2]`` and the model's values there plus Gaussian noise,
    both split by rows; each rank makes its own."""
    split = flow.sbp.split(0)
    x = flow.arange(n, dtype=flow.float64, placement=placement, sbp=split) * (4.0 / (n - 1)) - 2
    coefficients = flow.tensor(TRUE, dtype=flow.float64, placement=placement,
                               sbp=flow.sbp.broadcast)
    flow.manual_seed(seed)
    y = design(x) @ coefficients + noise * flow.randn(n, dtype=flow.float64,
                                                      placement=placement, sbp=split)
    return x, y


def fit(x: flow.Tensor, y: flow.Tensor) -> tuple[flow.Tensor, float, float]:
    """The least-squares coefficients (``B``), the residual's root mean square, and R^2."""
    n = x.shape[0]
    result = flow.linalg.lstsq(design(x), y, driver="gelsd")   # TSQR of [X | y]
    rss = result.residuals.item()                    # |X c - y|^2, from R's last entry
    centred = y - y.mean()
    tss = flow.dot(centred, centred).item()
    return result.solution, math.sqrt(rss / n), 1.0 - rss / tss


def main(argv: list[str] | None = None) -> str:
    """Fit the model; print (rank 0) and return the summary line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=5000, help="number of samples")
    parser.add_argument("--noise", type=float, default=0.3, help="noise standard deviation")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--check", action="store_true",
                        help="compare with numpy's lstsq of the whole matrix (gathers it)")
    parser.add_argument("--plot", metavar="PNG", help="write the data and the fit as a PNG")
    args = parser.parse_args(argv)
    rank, size = flow.env.get_rank(), flow.env.get_world_size()
    placement = flow.placement("cpu", list(range(size)))
    x, y = make_samples(args.samples, args.noise, placement, args.seed)
    coefficients, rms, r2 = fit(x, y)
    c = coefficients.numpy()
    summary = (f"lstsq_fit n={args.samples}: coefficients "
               f"{' '.join(f'{v:.6g}' for v in c)} (true {' '.join(map(str, TRUE))}), "
               f"residual rms {rms:.6g}, R^2 {r2:.6g}")
    if args.check:
        want = numpy.linalg.lstsq(design(x).numpy(), y.numpy(), rcond=None)[0]   # gathers
        check = f"numpy check: largest coefficient difference {numpy.abs(c - want).max():.2e}"
    points = (x.numpy(), y.numpy()) if args.plot else None    # collective
    if rank == 0:
        print(f"{size} rank(s), {args.samples} samples split "
              f"{flow.sbp.balanced_sizes(args.samples, size)}")
        if args.check:
            print(check)
        if args.plot and points is not None:
            plot(points[0], points[1], c, args.plot)
            print(f"wrote {args.plot}")
        print(summary)
    return summary


def plot(x: numpy.ndarray, y: numpy.ndarray, c: numpy.ndarray, path: str) -> None:
    """The samples and the fitted curve (matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    ax.scatter(x, y, s=2, alpha=0.3, label="samples")
    fitted = c[0] + c[1] * x + c[2] * x * x + c[3] * numpy.sin(3 * x)
    ax.plot(x, fitted, color="C1", label="least-squares fit")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    main()
