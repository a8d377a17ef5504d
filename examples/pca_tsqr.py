"""Principal component analysis of a tall data set split by rows, by TSQR and a small SVD.

The ``n x d`` data (``n`` samples of ``d`` features, ``n >> d``) is a global tensor split by
rows (``S(0)``): each rank generates and keeps only its own samples (mpiflow's random numbers
depend on the element's global index, not on the layout, so the data set is the same on any
number of ranks). PCA is the SVD of the centred data ``X - mean = U S V^T``:

- the column means: each rank sums its rows, one all-reduce (a partial sum made broadcast);
- ``flow.linalg.svd(Xc, full_matrices=False)``: TSQR (each rank factors its rows, the small
  ``d x d`` R factors climb a tree of ranks, ``Q`` is applied back down) and the SVD of ``R``
  on one rank. Only ``d x d`` blocks move; no rank ever holds the whole data;
- the components ``V^T`` and the singular values are on every rank (``B``), the scores
  ``U S`` stay split like the samples.

The data has a few strong directions plus isotropic noise, so the explained variance drops
after the planted rank. The summary (explained variance ratios, the first score's spread)
agrees to its 6 significant digits at any rank count; ``--check`` compares with numpy's SVD
of the whole data on every rank (small sizes only: it gathers the data).

Run:
    mpiexec -n 4 python examples/pca_tsqr.py
    python -m mpiflow.launch -n 4 examples/pca_tsqr.py --samples 400000 --features 64 --check
    mpiexec -n 2 python examples/pca_tsqr.py --plot pca.png
"""

from __future__ import annotations

import argparse

import numpy

import mpiflow as flow


def make_data(n: int, d: int, rank: int, placement: flow.placement, seed: int) -> flow.Tensor:
    """``n`` samples of ``d`` features, split by rows: ``rank`` strong directions (variances
    ``9, 4, 1, ...`` scaled down) plus unit noise, around a non-zero mean."""
    split = flow.sbp.split(0)
    rng = numpy.random.default_rng(seed)           # the same small matrices on every rank
    directions = numpy.linalg.qr(rng.standard_normal((d, rank)))[0].T      # (rank, d)
    scales = 3.0 / numpy.arange(1, rank + 1)                                # 3, 1.5, 1, ...
    mixing = flow.tensor(scales[:, None] * directions * 4.0, dtype=flow.float64,
                         placement=placement, sbp=flow.sbp.broadcast)
    mean = flow.tensor(rng.uniform(-2, 2, d), dtype=flow.float64, placement=placement,
                       sbp=flow.sbp.broadcast)
    flow.manual_seed(seed)
    latent = flow.randn(n, rank, dtype=flow.float64, placement=placement, sbp=split)
    noise = flow.randn(n, d, dtype=flow.float64, placement=placement, sbp=split)
    return latent @ mixing + noise + mean


def pca(data: flow.Tensor, k: int) -> tuple[flow.Tensor, flow.Tensor, flow.Tensor]:
    """The first ``k`` principal components of ``data`` (split by rows).

    Returns:
        The explained variance of every component (``B``, descending), the components
        ``(k, d)`` (``B``), and the scores ``(n, k)`` (split like the samples).
    """
    n = data.shape[0]
    centred = data - data.mean(dim=0)                       # one all-reduce of d sums
    u, s, vh = flow.linalg.svd(centred, full_matrices=False)  # TSQR: U split, S and Vh B
    variance = s * s / (n - 1)
    return variance, vh[:k], u[:, :k] * s[:k]


def main(argv: list[str] | None = None) -> str:
    """Run PCA; print (rank 0) and return the summary line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=2000, help="rows of the data")
    parser.add_argument("--features", type=int, default=8, help="columns of the data")
    parser.add_argument("--rank", type=int, default=3, help="strong directions planted")
    parser.add_argument("--components", type=int, default=3, help="components kept")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--check", action="store_true",
                        help="compare with numpy's SVD of the whole data (gathers it)")
    parser.add_argument("--plot", metavar="PNG", help="write the spectrum and scores as a PNG")
    args = parser.parse_args(argv)
    rank, size = flow.env.get_rank(), flow.env.get_world_size()
    placement = flow.placement("cpu", list(range(size)))
    data = make_data(args.samples, args.features, args.rank, placement, args.seed)
    variance, _, scores = pca(data, args.components)
    ratios = variance.numpy() / variance.numpy().sum()
    spread = scores[:, 0].std().item()
    summary = (f"pca_tsqr n={args.samples} d={args.features}: explained variance ratio "
               f"{' '.join(f'{r:.6g}' for r in ratios[:args.components])}, "
               f"rest {ratios[args.components:].sum():.6g}, first score std {spread:.6g}")
    if args.check:
        whole = data.numpy()                                  # collective: gathers the data
        s = numpy.linalg.svd(whole - whole.mean(axis=0), compute_uv=False)
        error = numpy.abs(variance.numpy() - s * s / (args.samples - 1)).max()
        check = f"numpy check: largest variance difference {error:.2e}"
    points = scores.numpy() if args.plot else None            # collective
    if rank == 0:
        print(f"{size} rank(s), {args.samples} samples split "
              f"{flow.sbp.balanced_sizes(args.samples, size)}, scores laid out {scores.sbp}")
        if args.check:
            print(check)
        if args.plot:
            plot(ratios, points, args.plot)
            print(f"wrote {args.plot}")
        print(summary)
    return summary


def plot(ratios: numpy.ndarray, scores: numpy.ndarray | None, path: str) -> None:
    """The explained variance ratios and the first two scores (matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 4), dpi=100)
    ax.bar(range(1, len(ratios) + 1), ratios)
    ax.set_xlabel("component")
    ax.set_ylabel("explained variance ratio")
    ax.set_title("spectrum")
    if scores is not None and scores.shape[1] >= 2:
        ax2.scatter(scores[:, 0], scores[:, 1], s=2, alpha=0.4)
    ax2.set_xlabel("score 1")
    ax2.set_ylabel("score 2")
    ax2.set_title("samples in the first two components")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    main()
