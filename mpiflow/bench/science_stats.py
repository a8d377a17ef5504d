"""Sorting and statistics on split arrays beside numpy on one process doing the whole job.

The ``science`` suite's sorting-and-statistics part (``python -m mpiflow.bench``; runnable on
its own: ``mpiexec -n 2 python -m mpiflow.bench.science_stats``). Each case builds a float64
(or int64) array of :data:`N` elements split along dim 0 (``S(0)``) over every rank, and
times one mpiflow call on it; in the same run rank 0 times numpy on the whole array while the
other ranks wait, so both columns come from the same machine state:

=====================================  =========================================  ==========
case                                   mpiflow                                    numpy
=====================================  =========================================  ==========
sort 8M float64                        ``flow.msort(x)`` (values: a sample sort)  ``np.sort``
unique 8M int64 (1000 values)          ``flow.unique(x)``                         ``np.unique``
median 8M float64                      ``flow.median(x)`` (selection)             ``np.median``
quantile 8M float64 (0.1, 0.5, 0.9)    ``flow.quantile(x, q)`` (selection)        ``np.quantile``
histogram 8M float64 (100 bins)        ``flow.histc(x, 100, -4, 4)`` and its sum  ``np.histogram``
=====================================  =========================================  ==========

Each side runs once to warm up, then the median of the timed calls is kept (a barrier before
and after each mpiflow call, rank 0's clock). The histogram's partial sum is finished (read
as a broadcast tensor) inside the timed call, so its one all-reduce counts. Heat's times for
the same shapes come from ``scripts/heat_science_bench.py``, run in Heat's own venv.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy

from ..communication.mpi.group import world_comm
from .plan import Settings

__all__ = ["N", "format", "main", "run"]

N = 8_000_000
_REPEAT = 7  # at most this many timed calls per side (the median is kept)


def _timed(fn: Callable[[], Any], repeat: int, everyone: bool) -> float:
    """The median time of ``fn`` (run once first); ``everyone``: every rank calls it, with
    barriers around each call; else rank 0 alone times it."""
    comm = world_comm.mpi_comm
    times = []
    if everyone or comm.rank == 0:
        fn()
    for _ in range(repeat):
        if everyone:
            comm.Barrier()
        start = time.perf_counter()
        if everyone or comm.rank == 0:
            fn()
        if everyone:
            comm.Barrier()
        times.append(time.perf_counter() - start)
    comm.Barrier()
    return statistics.median(times)


def _cases(n: int) -> list[tuple[str, Callable[[], numpy.ndarray], Callable[[Any], Any],
                                 Callable[[numpy.ndarray], Any]]]:
    """``(name, whole value, mpiflow call on the split tensor, numpy call on the whole)``."""
    import mpiflow as flow

    from ..ops import histc, median, msort, quantile, unique

    def normal() -> numpy.ndarray:
        return numpy.random.default_rng(0).standard_normal(n)

    def integers() -> numpy.ndarray:
        return numpy.random.default_rng(1).integers(0, 1000, n)

    q = numpy.array([0.1, 0.5, 0.9])
    size = f"{n // 10**6}M" if n >= 10**6 else f"{n // 1000}k"
    sbp_b = flow.sbp.broadcast
    return [
        (f"sort {size} float64", normal, msort, numpy.sort),
        (f"unique {size} int64 (1000 values)", integers, unique, numpy.unique),
        (f"median {size} float64", normal, median, numpy.median),
        (f"quantile {size} float64 (0.1, 0.5, 0.9)", normal,
         lambda x: quantile(x, flow.tensor(q, dtype=flow.float64, placement=x.placement,
                                                sbp=sbp_b)),
         lambda a: numpy.quantile(a, q)),
        (f"histogram {size} float64 (100 bins)", normal,
         lambda x: histc(x, 100, -4, 4).to_global(sbp=sbp_b),
         lambda a: numpy.histogram(a, bins=100, range=(-4, 4))[0]),
    ]


def run(settings: Settings | None = None, n: int = N) -> list[dict[str, Any]]:
    """Time every case at the job's rank count (collective).

    Args:
        settings: the bench's settings: ``rounds`` caps the timed calls per side (at
            :data:`_REPEAT`).
        n: elements of each array.

    Returns:
        One row per case: ``case``, ``ranks``, ``mpiflow_ms``, ``numpy_ms`` (rank 0's, the
        whole array on one process) and ``ratio`` (mpiflow / numpy).
    """
    import mpiflow as flow

    repeat = max(3, min(_REPEAT, settings.rounds if settings is not None else _REPEAT))
    placement = flow.placement("cpu", list(range(world_comm.size)))
    rows = []
    for name, make, call, reference in _cases(n):
        whole = make()
        x = flow.tensor(whole, placement=placement, sbp=flow.sbp.split(0))
        ours = _timed(functools.partial(call, x), repeat, everyone=True)
        theirs = _timed(functools.partial(reference, whole), repeat, everyone=False)
        rows.append({"case": name, "ranks": world_comm.size, "mpiflow_ms": ours * 1e3,
                     "numpy_ms": theirs * 1e3, "ratio": ours / theirs})
    return rows


def format(rows: list[dict[str, Any]], markdown: bool = False) -> str:
    """The results as a table (plain text, or Markdown).

    Examples:
        >>> print(format([{"case": "sort", "ranks": 2, "mpiflow_ms": 150.0, "numpy_ms": 200.0,
        ...                "ratio": 0.75}]))
        case  ranks  mpiflow (ms)  numpy, 1 process (ms)  ratio
        sort      2         150.0                  200.0  0.75x
    """
    from .report import format_grid

    header = ("case", "ranks", "mpiflow (ms)", "numpy, 1 process (ms)", "ratio")
    cells = [(r["case"], str(r["ranks"]), f"{r['mpiflow_ms']:.1f}", f"{r['numpy_ms']:.1f}",
              f"{r['ratio']:.2f}x") for r in rows]
    lines = format_grid(header, cells, (False, True, True, True, True), markdown)
    return "\n".join(line.rstrip() for line in lines)


def main() -> None:
    """Run the cases and print the table on rank 0 (``--markdown`` for Markdown)."""
    import sys

    rows = run()
    if world_comm.rank == 0:
        print(f"{world_comm.size} ranks, numpy on one process, median of the timed calls")
        print(format(rows, "--markdown" in sys.argv[1:]), flush=True)


if __name__ == "__main__":
    main()
