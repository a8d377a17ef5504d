"""Scans, masks and indexing of split arrays beside numpy on one process doing the whole job.

Four cases, each on a 1-D placement of every rank with the data split along dim 0:

* ``cumsum``: a running sum of ``n`` float64 (the distributed scan: one all-gather of totals);
* ``x[x > 0]``: a boolean mask of ``n`` float64 (local selection, the counts, a rebalance);
* ``x[idx]``: ``n / 4`` random rows of a ``(n / 4, 4)`` float64 array by a split int64 index
  (the owners answer: two ``all_to_all_v``);
* ``reshape``: ``(n / 3, 3)`` float64 to ``(3, n / 3)`` across the split dim (one fetch of
  flat ranges).

For each case, rank 0 times numpy on the whole arrays while the others wait, then every rank
times mpiflow (the slowest rank's time); each side's best of ``rounds`` is kept, and the ratio
is mpiflow's time over numpy's (below 1: the distributed op is faster than numpy alone). Run
with ``OMP_NUM_THREADS=1``::

    OMP_NUM_THREADS=1 mpiexec -n 2 python -m mpiflow.bench.science_scan --markdown
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy
from mpi4py import MPI

from ..communication.mpi.group import world_comm
from ..layouts.placement import Placement
from ..layouts.sbp import Split
from ..ops.scans import cumsum
from ..tensors.creation import tensor
from ..tensors.tensor import Tensor
from .plan import Settings

__all__ = ["ELEMENTS", "format", "main", "run"]

ELEMENTS = 1 << 22  # about 4 million float64 per case


def _best(call: Callable[[], Any], rounds: int, alone: bool) -> float:
    """The best time of ``call`` over ``rounds`` (seconds): on rank 0 alone while the others
    wait (``alone``), else on every rank, the slowest rank's."""
    comm = world_comm.mpi_comm
    best = float("inf")
    for _ in range(rounds):
        comm.Barrier()
        start = time.perf_counter()
        if not alone or comm.rank == 0:
            call()
        elapsed = time.perf_counter() - start
        best = min(best, comm.allreduce(elapsed, op=MPI.MAX))
    return best


def _cases(n: int) -> list[tuple[str, int, Callable[[], Any], Callable[[], Any]]]:
    """(case, elements, numpy on the whole arrays, mpiflow on split ones)."""
    rng = numpy.random.default_rng(0)  # the same values on every rank
    p = Placement.all("cpu")
    s0 = (Split(0),)
    flat = rng.standard_normal(n)
    x = tensor(flat, placement=p, sbp=s0)
    rows = rng.standard_normal((n // 4, 4))
    index = rng.integers(0, n // 4, n // 4)
    xr, ir = tensor(rows, placement=p, sbp=s0), tensor(index, placement=p, sbp=s0)
    wide = rng.standard_normal((n // 3, 3))
    xw = tensor(wide, placement=p, sbp=s0)

    def masked() -> Tensor:
        return x[x > 0]

    return [("cumsum", n, lambda: numpy.cumsum(flat), lambda: cumsum(x, 0)),
            ("x[x > 0]", n, lambda: flat[flat > 0], masked),
            ("x[idx] (rows of 4)", (n // 4) * 4, lambda: rows[index], lambda: xr[ir]),
            ("reshape (n/3, 3) -> (3, n/3)", (n // 3) * 3,
             lambda: wide.reshape(3, -1).copy(),  # (a view alone would move nothing)
             lambda: xw.reshape(3, -1))]


def run(settings: Settings, elements: int = ELEMENTS) -> list[dict[str, Any]]:
    """Time every case on both sides (collective).

    Returns:
        One row per case: ``case``, ``elements``, ``ranks``, ``numpy_ms``, ``mpiflow_ms`` and
        ``ratio`` (mpiflow over numpy).
    """
    rounds = max(3, settings.rounds // 4)
    rows = []
    for name, count, whole, split in _cases(elements):
        split()  # warm up (plans, caches, communicators)
        numpy_s = _best(whole, rounds, alone=True)
        mpiflow_s = _best(split, rounds, alone=False)
        rows.append({"case": name, "elements": count, "ranks": world_comm.size,
                     "numpy_ms": numpy_s * 1e3, "mpiflow_ms": mpiflow_s * 1e3,
                     "ratio": mpiflow_s / numpy_s})
    return rows


def format(rows: list[dict[str, Any]], markdown: bool = False) -> str:
    """The table of :func:`run`'s rows (plain text or Markdown)."""
    head = ["case", "float64 elements", "ranks", "numpy alone (ms)", "mpiflow (ms)",
            "mpiflow / numpy"]
    body = [[r["case"], str(r["elements"]), str(r["ranks"]), f"{r['numpy_ms']:.2f}",
             f"{r['mpiflow_ms']:.2f}", f"{r['ratio']:.2f}x"] for r in rows]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(b) + " |" for b in body])
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths))
                     for line in [head, *body])


def main(argv: list[str] | None = None) -> int:
    """``mpiexec -n 2 python -m mpiflow.bench.science_scan [--elements N] [--markdown]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=ELEMENTS)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    rows = run(Settings(ops=(), sizes=(), rounds=args.rounds), args.elements)
    if world_comm.rank == 0:
        print(format(rows, args.markdown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
