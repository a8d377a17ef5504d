"""FFTs of split arrays beside numpy on one process doing the whole job.

Two cases, each on a 1-D placement of every rank with the data split along dim 0:

* ``fft2``: a ``side x side`` complex128 matrix (default 2048) split by rows; the result is
  split by columns (one all-to-all between the row and the column transforms);
* ``fft``: a 1-D complex128 signal of ``2**22`` elements split along its only dim (the
  six-step algorithm: three all-to-alls, never gathered).

numpy's side is ``numpy.fft`` on the whole array on rank 0 while the others wait; mpiflow's
is ``mpiflow.fft`` on the split array on every rank (the slowest rank's time). Each side's
best of ``rounds`` is kept, with the spread (the slowest round over the best); the ratio is
mpiflow's time over numpy's (below 1: the distributed transform is faster than numpy alone).
The local kernel mpiflow runs is reported (``scipy.fft`` where SciPy is installed). Run with
one thread per rank::

    OMP_NUM_THREADS=1 mpiexec -n 2 python -m mpiflow.bench.science_fft --markdown
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy
from mpi4py import MPI

from .. import fft as flow_fft
from ..algorithms.fftlocal import kernel_name
from ..communication.mpi.group import world_comm
from ..layouts.placement import Placement
from ..layouts.sbp import Split
from ..tensors.creation import tensor
from .plan import Settings

__all__ = ["LENGTH", "SIDE", "format", "main", "run"]

SIDE = 2048      # fft2 of SIDE x SIDE complex128
LENGTH = 1 << 22  # fft of LENGTH complex128


def _times(call: Callable[[], Any], rounds: int, alone: bool) -> list[float]:
    """The time of ``call`` in each of ``rounds`` (seconds): on rank 0 alone while the others
    wait (``alone``), else on every rank, the slowest rank's."""
    comm = world_comm.mpi_comm
    out = []
    for _ in range(rounds):
        comm.Barrier()
        start = time.perf_counter()
        if not alone or comm.rank == 0:
            call()
        elapsed = time.perf_counter() - start
        out.append(comm.allreduce(elapsed, op=MPI.MAX))
    return out


def _cases(side: int, length: int) -> list[tuple[str, str, Callable[[], Any],
                                                  Callable[[], Any]]]:
    """(case, shape, numpy on the whole array, mpiflow on the split one)."""
    rng = numpy.random.default_rng(0)  # the same values on every rank
    p = Placement.all("cpu")
    s0 = (Split(0),)
    square = rng.standard_normal((side, side)) + 1j * rng.standard_normal((side, side))
    xs = tensor(square, placement=p, sbp=s0)
    signal = rng.standard_normal(length) + 1j * rng.standard_normal(length)
    x1 = tensor(signal, placement=p, sbp=s0)
    return [("fft2 (rows split)", f"{side}x{side}", lambda: numpy.fft.fft2(square),
             lambda: flow_fft.fft2(xs)),
            ("fft (1-D, split)", str(length), lambda: numpy.fft.fft(signal),
             lambda: flow_fft.fft(x1))]


def run(settings: Settings, side: int = SIDE, length: int = LENGTH) -> list[dict[str, Any]]:
    """Time both cases on both sides (collective).

    Returns:
        One row per case: ``case``, ``shape``, ``ranks``, ``numpy_ms``, ``mpiflow_ms``,
        ``numpy_spread``, ``mpiflow_spread`` (slowest round over the best), ``ratio``
        (mpiflow over numpy) and ``kernel``.
    """
    rounds = max(3, settings.rounds // 2)
    rows = []
    for name, shape, whole, split in _cases(side, length):
        split()  # warm up (plans, communicators, twiddles)
        numpy_t = _times(whole, rounds, alone=True)
        mpiflow_t = _times(split, rounds, alone=False)
        rows.append({"case": name, "shape": shape, "ranks": world_comm.size,
                     "numpy_ms": min(numpy_t) * 1e3, "mpiflow_ms": min(mpiflow_t) * 1e3,
                     "numpy_spread": max(numpy_t) / min(numpy_t),
                     "mpiflow_spread": max(mpiflow_t) / min(mpiflow_t),
                     "ratio": min(mpiflow_t) / min(numpy_t), "kernel": kernel_name(numpy)})
    return rows


def format(rows: list[dict[str, Any]], markdown: bool = False) -> str:
    """The table of :func:`run`'s rows (plain text or Markdown)."""
    head = ["case", "complex128", "ranks", "numpy alone (ms)", "mpiflow (ms)",
            "mpiflow / numpy", "spread (numpy, mpiflow)"]
    body = [[r["case"], r["shape"], str(r["ranks"]), f"{r['numpy_ms']:.1f}",
             f"{r['mpiflow_ms']:.1f}", f"{r['ratio']:.2f}x",
             f"{r['numpy_spread']:.2f}, {r['mpiflow_spread']:.2f}"] for r in rows]
    kernel = f"local kernel: {rows[0]['kernel']}" if rows else ""
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(b) + " |" for b in body] + ["", kernel])
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    return "\n".join(["  ".join(c.ljust(w) for c, w in zip(line, widths))
                      for line in [head, *body]] + [kernel])


def main(argv: list[str] | None = None) -> int:
    """``mpiexec -n 2 python -m mpiflow.bench.science_fft [--side N] [--length N]
    [--rounds N] [--markdown]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=SIDE)
    parser.add_argument("--length", type=int, default=LENGTH)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    rows = run(Settings(ops=(), sizes=(), rounds=args.rounds), args.side, args.length)
    if world_comm.rank == 0:
        print(format(rows, args.markdown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
