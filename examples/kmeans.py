"""k-means clustering (Lloyd's algorithm) on points split across the ranks.

The ``n`` points are a global ``(n, 2)`` tensor split by rows (``S(0)``): each rank generates
and keeps only its own points (mpiflow's random numbers depend on the element's global index,
not on the layout, so the data set is the same on any number of ranks). The ``k`` centroids
are broadcast (``B``): every rank holds all of them. One iteration is:

- squared distances of my points to every centroid, ``(n, k)``, split like the points: local;
- each point's nearest centroid, ``argmin`` along the centroid axis: local;
- per cluster, the number of points and the sum of their coordinates, as a one-hot matrix
  product ``onehot.T @ points``: the contracted dimension is split, so the result is a
  partial sum (``P``) and turning it into the new (broadcast) centroids is one all-reduce.

It stops when no point changes cluster. Cluster sizes are integer counts (exact); centroids and
the inertia are sums whose order depends on the rank count, so they agree to rounding, and
the summary line to its 6 significant digits.

Run:
    mpiexec -n 4 python examples/kmeans.py
    python -m mpiflow.launch -n 4 examples/kmeans.py --points 200000 --clusters 8 --plot km.png
"""

from __future__ import annotations

import argparse

import numpy

import mpiflow as flow


def make_points(n: int, clusters: int, placement: flow.placement, seed: int) -> flow.Tensor:
    """``n`` points in ``clusters`` Gaussian blobs, split by rows; point ``i`` is in blob
    ``i % clusters``. Each rank generates only its own rows."""
    split = flow.sbp.split(0)
    angle = 2 * numpy.pi * numpy.arange(clusters) / clusters
    radius = 3.0 + numpy.arange(clusters) % 3                 # blobs on a wobbly ring
    centres = flow.tensor(numpy.stack([radius * numpy.cos(angle), radius * numpy.sin(angle)], 1),
                          dtype=flow.float64, placement=placement, sbp=flow.sbp.broadcast)
    blob = flow.arange(n, placement=placement, sbp=split) % clusters
    onehot = one_hot(blob, clusters, placement)
    flow.manual_seed(seed)
    spread = 0.8 + 0.8 * flow.rand(n, 1, dtype=flow.float64, placement=placement, sbp=split)
    noise = flow.randn(n, 2, dtype=flow.float64, placement=placement, sbp=split)
    return onehot @ centres + spread * noise


def one_hot(labels: flow.Tensor, k: int, placement: flow.placement) -> flow.Tensor:
    """The ``(n, k)`` float64 one-hot matrix of integer ``labels`` (split like them)."""
    ids = flow.arange(k, placement=placement, sbp=flow.sbp.broadcast)
    return (labels.unsqueeze(1) == ids).to(flow.float64)


def farthest_points(points: flow.Tensor, k: int, first: int) -> flow.Tensor:
    """``k`` starting centroids (``B``): point ``first``, then each time the point farthest
    from those chosen so far (a deterministic cousin of k-means++)."""
    chosen = [first]
    d2 = ((points - points[first]) ** 2).sum(dim=1)            # (n,), split like the points
    while len(chosen) < k:
        chosen.append(int(d2.argmax().item()))                 # a global argmax: exact
        d2 = flow.minimum(d2, ((points - points[chosen[-1]]) ** 2).sum(dim=1))
    # Indexing a split tensor with a list of rows gathers them; make them broadcast.
    return points[chosen].to_global(sbp=flow.sbp.broadcast)


def kmeans(points: flow.Tensor, centroids: flow.Tensor, max_iter: int
           ) -> tuple[flow.Tensor, flow.Tensor, int, list[float]]:
    """Lloyd iterations from ``centroids`` until no point changes cluster.

    Returns:
        The centroids (``B``), each point's cluster (split like the points), the number of
        iterations, and the inertia (sum of squared distances) after each one.
    """
    k = centroids.shape[0]
    labels = flow.full((points.shape[0],), -1, dtype=flow.int64, placement=points.placement,
                       sbp=flow.sbp.split(0))
    inertia: list[float] = []
    for iteration in range(1, max_iter + 1):
        d2 = ((points.unsqueeze(1) - centroids.unsqueeze(0)) ** 2).sum(dim=2)   # (n, k), S(0)
        nearest = d2.argmin(dim=1)                                               # local work
        inertia.append(flow.sum(d2.min(dim=1).values).item())                   # P -> number
        changed = int((nearest != labels).sum().item())
        labels = nearest
        if changed == 0:
            return centroids, labels, iteration, inertia
        onehot = one_hot(labels, k, points.placement)
        counts = onehot.sum(dim=0).unsqueeze(1)                 # (k, 1), partial sums
        sums = onehot.T @ points                                # (k, 2), partial sums
        means = sums / flow.clamp(counts, min=1.0)
        centroids = flow.where(counts > 0, means, centroids)    # keep an empty cluster's centroid
        centroids = centroids.to_global(sbp=flow.sbp.broadcast)
    return centroids, labels, max_iter, inertia


def main(argv: list[str] | None = None) -> str:
    """Cluster the points; print (rank 0) and return the summary line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=3001, help="number of points")
    parser.add_argument("--clusters", type=int, default=6, help="k")
    parser.add_argument("--max-iter", type=int, default=100, help="iterations at most")
    parser.add_argument("--seed", type=int, default=7, help="seed of the data and the start")
    parser.add_argument("--plot", metavar="PNG", help="write the clustering as a PNG")
    args = parser.parse_args(argv)

    rank, size = flow.env.get_rank(), flow.env.get_world_size()
    placement = flow.placement("cpu", list(range(size)))
    points = make_points(args.points, args.clusters, placement, args.seed)
    first = int(numpy.random.default_rng(args.seed).integers(args.points))
    centroids = farthest_points(points, args.clusters, first)

    centroids, labels, iterations, inertia = kmeans(points, centroids, args.max_iter)
    sizes = one_hot(labels, args.clusters, placement).sum(dim=0).to(flow.int64).tolist()
    cents = centroids.numpy()
    everything = (points.numpy(), labels.numpy()) if args.plot else None  # collective
    summary = (f"kmeans n={args.points} k={args.clusters}: {iterations} iterations, "
               f"inertia {inertia[-1]:.6g}, sizes {sizes}, "
               f"centroid sum {float(numpy.abs(cents).sum()):.6g}")
    if rank == 0:
        print(f"{size} rank(s), points split {flow.sbp.balanced_sizes(args.points, size)}")
        if everything is not None:
            plot(*everything, cents, args.plot,
                 f"k-means, k={args.clusters}, {iterations} iterations ({size} ranks)")
            print(f"wrote {args.plot}")
        print(summary)
    return summary


def plot(points: numpy.ndarray, labels: numpy.ndarray, centroids: numpy.ndarray, path: str,
         title: str) -> None:
    """The points coloured by cluster, centroids marked (matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 6), dpi=100)
    ax.scatter(points[:, 0], points[:, 1], c=labels, s=4, cmap="tab10", alpha=0.6)
    ax.scatter(centroids[:, 0], centroids[:, 1], c="black", marker="X", s=120,
               label="centroids")
    ax.set_aspect("equal")
    ax.legend(loc="upper right")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    main()
