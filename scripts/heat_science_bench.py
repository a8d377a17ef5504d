"""Heat 1.9's times for the shapes of the science bench suite: the peer's column.

Heat is not a dependency of mpiflow: run this in a venv of its own, where Heat 1.9 (Python 3.12
or newer) and the same MPI are installed, under the same mpiexec and rank count as the mpiflow
suite, with one thread per rank::

    python3.12 -m venv .venv-heat && .venv-heat/bin/pip install heat==1.9.0 mpich
    OMP_NUM_THREADS=1 .venv-heat/bin/mpiexec -n 2 .venv-heat/bin/python \\
        scripts/heat_science_bench.py

Each case builds its input split along dim 0 (``split=0``), runs once to warm up, then reports
the median of ``--repeat`` timed calls (barrier before, barrier after, rank 0's clock). A case
Heat refuses or gets wrong is reported as such, not timed: the check compares with numpy on a
small input of the same kind first. Cases name the mpiflow function they stand beside.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy


def _timed(ht: Any, fn: Callable[[], Any], repeat: int) -> float:
    comm = ht.MPI_WORLD
    fn()
    times = []
    for _ in range(repeat):
        comm.Barrier()
        start = time.perf_counter()
        fn()
        comm.Barrier()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _checked(ht: Any, name: str, heat_fn: Callable[[Any], Any], numpy_fn: Callable[[Any], Any],
             sample: numpy.ndarray) -> str | None:
    """None where Heat's answer on a small input matches numpy's, else what went wrong."""
    try:
        got = heat_fn(ht.array(sample, split=0))
        got = got.numpy() if hasattr(got, "numpy") else got
    except Exception as exc:  # Heat refuses the call: report it, do not time it
        return f"error: {type(exc).__name__}: {exc}"[:120]
    want = numpy_fn(sample)
    if got is None:
        return "returned None"
    if numpy.shape(got) != numpy.shape(want) or not numpy.allclose(got, want, rtol=1e-6,
                                                                     atol=1e-8):
        return "wrong answer on a small input"
    return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--only", nargs="*", default=[],
                   help="run the cases whose names contain one of these words")
    args = p.parse_args()
    import heat as ht

    rank = ht.MPI_WORLD.rank
    rng = numpy.random.default_rng(0)
    n_sort = 8_000_000
    n_scan = 1 << 22  # mpiflow.bench.science_scan's size
    cases: list[tuple[str, Callable[[], Any], str | None]] = []

    def add(name: str, make: Callable[[], Any], run: Callable[[Any], Any],
            check: tuple[Callable[[Any], Any], Callable[[Any], Any], numpy.ndarray] | None
            ) -> None:
        if args.only and not any(word in name for word in args.only):
            return
        problem = _checked(ht, name, *check) if check is not None else None
        x = make()
        cases.append((name, lambda: run(x), problem))

    small = rng.standard_normal(1001)
    add("sort 8M float64", lambda: ht.random.randn(n_sort, split=0, dtype=ht.float64),
        lambda x: ht.sort(x), (lambda x: ht.sort(x)[0], numpy.sort, small))
    add("unique 8M int64 (1000 values)",
        lambda: ht.random.randint(0, 1000, (n_sort,), split=0, dtype=ht.int64),
        lambda x: ht.unique(x), (lambda x: ht.unique(x), numpy.unique,
                                 rng.integers(0, 20, 1001)))
    add("median 8M float64", lambda: ht.random.randn(n_sort, split=0, dtype=ht.float64),
        lambda x: ht.median(x), (lambda x: ht.median(x), numpy.median, small))
    add("quantile 8M float64 (0.1, 0.5, 0.9)",
        lambda: ht.random.randn(n_sort, split=0, dtype=ht.float64),
        lambda x: ht.percentile(x, [10.0, 50.0, 90.0]),
        (lambda x: ht.percentile(x, [10.0, 50.0, 90.0]),
         lambda x: numpy.percentile(x, [10.0, 50.0, 90.0]), small))
    add("histogram 8M float64 (100 bins)",
        lambda: ht.random.randn(n_sort, split=0, dtype=ht.float64),
        lambda x: ht.histc(x, bins=100, min=-4, max=4),
        (lambda x: ht.histc(x, bins=100, min=-4, max=4),
         lambda x: numpy.histogram(x, bins=100, range=(-4, 4))[0], small))
    add("cumsum 4M float64", lambda: ht.random.randn(n_scan, split=0, dtype=ht.float64),
        lambda x: ht.cumsum(x, 0), (lambda x: ht.cumsum(x, 0), numpy.cumsum, small))
    add("boolean mask x[x > 0] 4M float64",
        lambda: ht.random.randn(n_scan, split=0, dtype=ht.float64),
        lambda x: x[x > 0], (lambda x: x[x > 0], lambda x: x[x > 0], small))
    add("fft2 2048x2048 complex128",
        lambda: ht.array(rng.standard_normal((2048, 2048)) + 1j, split=0),
        lambda x: ht.fft.fft2(x), (lambda x: ht.fft.fft2(x), numpy.fft.fft2,
                                   rng.standard_normal((33, 17)) + 0j))
    add("qr 400000x64 float64", lambda: ht.random.randn(400_000, 64, split=0,
                                                       dtype=ht.float64),
        lambda x: ht.linalg.qr(x), None)
    add("svd 400000x64 float64", lambda: ht.random.randn(400_000, 64, split=0,
                                                        dtype=ht.float64),
        lambda x: ht.linalg.svd(x), None)
    add("matmul 8192x1024 @ 1024x256 float32, split x replicated",
        lambda: (ht.random.randn(8192, 1024, split=0, dtype=ht.float32),
                 ht.random.randn(1024, 256, split=None, dtype=ht.float32)),
        lambda xy: ht.matmul(*xy), None)
    add("matmul 8192x1024 @ 1024x256 float32, split x split",
        lambda: (ht.random.randn(8192, 1024, split=0, dtype=ht.float32),
                 ht.random.randn(1024, 256, split=0, dtype=ht.float32)),
        lambda xy: ht.matmul(*xy), None)
    add("solve 4096x4096 float64",
        lambda: (ht.random.randn(4096, 4096, split=0, dtype=ht.float64) + 4096 * ht.eye(
            4096, split=0, dtype=ht.float64), ht.random.randn(4096, split=0,
                                                             dtype=ht.float64)),
        lambda ab: ht.linalg.solve(*ab), None)
    if rank == 0:
        print(f"Heat {ht.__version__}, {ht.MPI_WORLD.size} ranks, median of {args.repeat}")
        print(f"{'case':58} {'Heat (ms)':>10}")
    for name, fn, problem in cases:
        if problem is not None:
            line = f"{name:58} {'-':>10}  ({problem})"
        else:
            try:
                line = f"{name:58} {_timed(ht, fn, args.repeat) * 1e3:10.1f}"
            except Exception as exc:  # refused at full size
                line = f"{name:58} {'-':>10}  (error: {type(exc).__name__})"
        if rank == 0:
            print(line, flush=True)


if __name__ == "__main__":
    main()
