"""Per-column statistics of a large HDF5 dataset, computed where its rows lie.

Each rank reads only its own rows of the dataset (``load_hdf5`` with ``split(0)``: an
HDF5 hyperslab per rank, never the whole dataset on any rank), computes its part of each
column's mean, standard deviation, minimum and maximum, and one collective per statistic
combines the parts. The ``(4, columns)`` result is written to an HDF5 file with attributes
saying what each row is. Without ``--input`` the example first writes a synthetic dataset
(``--rows`` x ``--columns`` float64, each rank writing its own rows with MPI-IO), so that it
runs as is; point it at your own file with ``--input data.h5 --dataset path/in/file``.

The standard deviation is the sample one (``n - 1`` in the denominator, as ``torch.std``).
The printed statistics do not depend on the number of ranks beyond rounding.

Run:
    mpiexec -n 4 python examples/hdf5_stats.py
    mpiexec -n 4 python examples/hdf5_stats.py --input big.h5 --dataset fields/t \\
        --output stats.h5
"""

from __future__ import annotations

import argparse
import os

import mpiflow as flow
from mpiflow.io import load_hdf5, save_hdf5

STATISTICS = ("mean", "std", "min", "max")


def make_dataset(path: str, dataset: str, rows: int, columns: int, seed: int) -> None:
    """Write a synthetic ``(rows, columns)`` float64 dataset: column ``j`` is normal with mean
    ``j`` and standard deviation ``1 + j / 10``. Each rank makes and writes only its rows."""
    size = flow.env.get_world_size()
    placement = flow.placement("cpu", list(range(size)))
    flow.manual_seed(seed)
    noise = flow.randn(rows, columns, dtype=flow.float64, placement=placement,
                       sbp=flow.sbp.split(0))
    j = flow.arange(columns, dtype=flow.float64, placement=placement, sbp=flow.sbp.broadcast)
    save_hdf5(noise * (1 + j / 10) + j, path, dataset, attrs={"source": "hdf5_stats.py"})


def column_statistics(x: flow.Tensor) -> flow.Tensor:
    """The ``(4, columns)`` mean, std, min and max of each column of ``x``, broadcast."""
    stats = flow.stack([x.mean(0), x.std(0), x.amin(0), x.amax(0)])
    return stats.to_global(x.placement, flow.sbp.broadcast)


def main(argv: list[str] | None = None) -> str:
    """Compute and save the statistics; print (rank 0) and return the summary line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", help="an HDF5 file (default: write a synthetic one)")
    parser.add_argument("--dataset", default="data", help="the dataset's path in the file")
    parser.add_argument("--output", default="hdf5_stats.h5", help="where the results go")
    parser.add_argument("--rows", type=int, default=100_003, help="synthetic rows")
    parser.add_argument("--columns", type=int, default=6, help="synthetic columns")
    parser.add_argument("--seed", type=int, default=3, help="seed of the synthetic data")
    args = parser.parse_args(argv)

    rank, size = flow.env.get_rank(), flow.env.get_world_size()
    source = args.input
    if source is None:
        source = os.path.splitext(args.output)[0] + "-input.h5"
        make_dataset(source, args.dataset, args.rows, args.columns, args.seed)
    placement = flow.placement("cpu", list(range(size)))
    x = load_hdf5(source, args.dataset, placement, flow.sbp.split(0), dtype=flow.float64)
    stats = column_statistics(x)
    save_hdf5(stats, args.output, "statistics", attrs={
        "rows": ",".join(STATISTICS), "source": os.path.abspath(source),
        "dataset": args.dataset, "count": x.shape[0]})
    values = stats.numpy()  # (4, columns): small, on every rank
    summary = (f"hdf5_stats {x.shape[0]}x{x.shape[1]}: sum of means {values[0].sum():.6g}, "
               f"sum of stds {values[1].sum():.6g}, min {values[2].min():.6g}, "
               f"max {values[3].max():.6g}")
    if rank == 0:
        print(f"{size} rank(s), rows split {flow.sbp.balanced_sizes(x.shape[0], size)}; "
              f"statistics written to {args.output}:/statistics")
        for j in range(values.shape[1]):
            print(f"column {j}: " + " ".join(f"{name} {float(values[i, j])!r}"
                                             for i, name in enumerate(STATISTICS)))
        print(summary)
    return summary


if __name__ == "__main__":
    main()
