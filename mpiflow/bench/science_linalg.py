"""The linear-algebra part of the science suite: distributed factorizations and products
beside numpy on one process doing the whole job, in the same run.

Each case builds its input split by rows (``S(0)``; each rank generates its own part), runs
mpiflow's function on every rank, and numpy's on the whole array on rank 0 alone (the other
ranks wait): the ratio is mpiflow's time over numpy's, so below 1 the ranks together beat one
process. The time of a side is the best of ``repeat`` calls, each between barriers (the
slowest rank's). Each case also checks its answer against numpy's (``error``: the largest
difference relative to the largest entry), so a fast wrong answer cannot pass.

A second table times the local kernels (:mod:`mpiflow.algorithms.kernels`) on one rank,
numpy's library beside torch's, at the shapes one rank of the cases runs: it is the
measurement behind the choice of each kernel's library.

Run (the issue's setting: 2 ranks, one thread each)::

    OMP_NUM_THREADS=1 mpiexec -n 2 python -m mpiflow.bench.science_linalg --markdown
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy

from .. import linalg
from ..algorithms import kernels
from ..communication.mpi.group import world_comm
from ..core import settings
from ..layouts.placement import Placement
from ..layouts.sbp import Broadcast, Split
from ..tensors.creation import tensor
from ..tensors.tensor import Tensor
from .plan import Settings
from .report import format_grid

__all__ = ["CASES", "Case", "format", "main", "run", "run_cases"]

_S0, _B = Split(0), Broadcast()


@dataclass(frozen=True)
class Case:
    """One job timed both ways.

    Attributes:
        name: the table's label.
        goal: the ratio it should stay under (None: none set).
        inputs: ``rng -> arrays``: the whole inputs (the same on every rank for a seed).
        layouts: the sbp of each input's global tensor.
        ours: ``tensors -> result``: mpiflow's call.
        theirs: ``arrays -> result``: numpy's call on the whole inputs.
        pick: ``result -> tensor``: the part of mpiflow's result compared (gathered on every
            rank: ``numpy()`` is collective).
        compare: ``(picked value, theirs) -> (ours, numpy's)``, e.g. with signs normalised.
    """

    name: str
    goal: float | None
    inputs: Callable[[numpy.random.Generator], tuple[numpy.ndarray, ...]]
    layouts: tuple[Any, ...]
    ours: Callable[..., Any]
    theirs: Callable[..., Any]
    pick: Callable[[Any], Tensor]
    compare: Callable[[numpy.ndarray, Any], tuple[numpy.ndarray, numpy.ndarray]]


def _abs_r(ours: numpy.ndarray, theirs: Any) -> tuple[numpy.ndarray, numpy.ndarray]:
    """R of mpiflow (diagonal >= 0) beside numpy's with its rows' signs fixed likewise."""
    r = theirs[1]
    signs = numpy.where(numpy.diagonal(r) < 0, -1.0, 1.0)
    return ours, r * signs[:, None]


def _same(ours: numpy.ndarray, theirs: Any) -> tuple[numpy.ndarray, numpy.ndarray]:
    return ours, numpy.asarray(theirs)


def _whole(result: Any) -> Tensor:
    return result


def _tall(m: int, n: int) -> Callable[[numpy.random.Generator], tuple[numpy.ndarray, ...]]:
    return lambda rng: (rng.standard_normal((m, n)),)


def _system(n: int) -> Callable[[numpy.random.Generator], tuple[numpy.ndarray, ...]]:
    return lambda rng: (rng.standard_normal((n, n)) + n * numpy.eye(n), rng.standard_normal(n))


def _product(m: int, k: int, n: int) -> Callable[[numpy.random.Generator],
                                                  tuple[numpy.ndarray, ...]]:
    return lambda rng: (rng.standard_normal((m, k), dtype=numpy.float32),
                        rng.standard_normal((k, n), dtype=numpy.float32))


def cases(scale: int = 1) -> list[Case]:
    """The suite's cases; ``scale`` > 1 divides the sizes (for quick checks)."""
    m, n = 400_000 // scale, 64 // min(scale, 8)
    s = 4096 // scale
    a, k, c = 8192 // scale, 1024 // scale, 256 // min(scale, 8)
    return [
        Case(f"qr {m}x{n} float64", 0.8, _tall(m, n), (_S0,),
             lambda x: linalg.qr(x), lambda x: numpy.linalg.qr(x), lambda qr: qr[1], _abs_r),
        Case(f"svdvals {m}x{n} float64", 0.8, _tall(m, n), (_S0,),
             linalg.svdvals, lambda x: numpy.linalg.svd(x, compute_uv=False), _whole, _same),
        Case(f"lstsq {m}x{n} float64", None,
             lambda rng: (rng.standard_normal((m, n)), rng.standard_normal((m, 1))), (_S0, _S0),
             lambda x, y: linalg.lstsq(x, y).solution,
             lambda x, y: numpy.linalg.lstsq(x, y, rcond=None)[0], _whole, _same),
        Case(f"solve {s}x{s} float64", None, _system(s), (_S0, _S0), linalg.solve,
             numpy.linalg.solve, _whole, _same),
        Case(f"matmul {a}x{k} @ {k}x{c} float32, split x replicated", None,
             _product(a, k, c), (_S0, _B), lambda x, y: x @ y, numpy.matmul, _whole, _same),
        Case(f"matmul {a}x{k} @ {k}x{c} float32, split x split", None,
             _product(a, k, c), (_S0, _S0), lambda x, y: x @ y, numpy.matmul, _whole,
             _same),
    ]


CASES = cases()


def _barrier_timed(fn: Callable[[], Any], repeat: int, root_only: bool = False
                   ) -> tuple[float, Any]:
    """The best of ``repeat`` calls between barriers (seconds) and the last result;
    ``root_only``: rank 0 calls, the others wait."""
    best, result = float("inf"), None
    for _ in range(repeat):
        world_comm.barrier()
        start = time.perf_counter()
        if not root_only or world_comm.rank == 0:
            result = fn()
        world_comm.barrier()
        best = min(best, time.perf_counter() - start)
    return best, result


def _case_row(case: Case, repeat: int, seed: int) -> dict[str, Any]:
    """One case timed both ways and checked (collective)."""
    placement = Placement.all("cpu")
    arrays = case.inputs(numpy.random.default_rng(seed))
    tensors = [tensor(a, placement=placement, sbp=sbp) for a, sbp in zip(arrays, case.layouts)]
    case.ours(*tensors)  # warm-up: caches, communicators, kernels' first calls
    ours_s, ours = _barrier_timed(lambda: case.ours(*tensors), repeat)
    theirs_s, theirs = _barrier_timed(lambda: case.theirs(*arrays), repeat, root_only=True)
    picked = case.pick(ours).numpy()  # collective
    error = numpy.zeros(1)
    if world_comm.rank == 0:
        got, want = case.compare(picked, theirs)
        error[0] = numpy.abs(got - want).max() / max(numpy.abs(want).max(), 1e-300)
    world_comm.broadcast(error, 0)
    return {"case": case.name, "ranks": world_comm.size, "mpiflow_ms": ours_s * 1e3,
            "numpy_ms": theirs_s * 1e3, "ratio": ours_s / theirs_s, "goal": case.goal,
            "error": float(error[0])}


def run_cases(chosen: Sequence[Case], repeat: int = 3, seed: int = 0) -> list[dict[str, Any]]:
    """Time each case both ways (collective); one row per case, the same on every rank."""
    return [_case_row(case, repeat, seed) for case in chosen]


def kernel_rows(repeat: int = 3, scale: int = 1) -> list[dict[str, Any]]:
    """The local kernels on rank 0, numpy's library beside torch's (the others wait)."""
    rng = numpy.random.default_rng(1)
    half = 200_000 // scale
    a32 = rng.standard_normal((4096 // scale, 1024 // scale), dtype=numpy.float32)
    b32 = rng.standard_normal((1024 // scale, 256 // max(1, scale // 4)), dtype=numpy.float32)
    a64, b64 = a32.astype(numpy.float64), b32.astype(numpy.float64)
    tall = rng.standard_normal((half, 64 // min(scale, 8)))
    square = rng.standard_normal((2048 // scale, 2048 // scale)) + 2048 * numpy.eye(2048 // scale)
    spd = square @ square.T
    small = rng.standard_normal((512 // scale, 512 // scale))
    small_spd = small @ small.T
    jobs: list[tuple[str, str, Callable[[], Any]]] = [
        ("gemm", f"gemm {a32.shape[0]}x{a32.shape[1]}x{b32.shape[1]} float32",
         lambda: kernels.matmul(a32, b32)),
        ("gemm", f"gemm {a64.shape[0]}x{a64.shape[1]}x{b64.shape[1]} float64",
         lambda: kernels.matmul(a64, b64)),
        ("qr", f"qr {tall.shape[0]}x{tall.shape[1]} float64 (Q and R)",
         lambda: kernels.qr(tall)),
        ("qr", f"qr {tall.shape[0]}x{tall.shape[1]} float64 (R only)",
         lambda: kernels.qr(tall, "r")),
        ("svd", f"svdvals {tall.shape[0]}x{tall.shape[1]} float64",
         lambda: kernels.svd(tall, compute_uv=False)),
        ("svd", f"svd {small.shape[0]}x{small.shape[0]} float64 (square: numpy's)",
         lambda: kernels.svd(small)),
        ("lu", f"solve {square.shape[0]}x{square.shape[0]} float64",
         lambda: kernels.solve_ex(square, square[:, :1])),
        ("cholesky", f"cholesky {square.shape[0]}x{square.shape[0]} float64",
         lambda: kernels.cholesky_ex(spd)),
        ("eigh", f"eigh {small.shape[0]}x{small.shape[0]} float64",
         lambda: kernels.eigh(small_spd)),
    ]
    rows: list[dict[str, Any]] = []
    try:
        for family, name, call in jobs:
            times = {}
            for lib in ("numpy", "torch"):
                with settings.scoped(kernels.KERNELS_ENV, lib), \
                        settings.scoped(kernels.GEMM_ENV, lib):
                    kernels.choose_again()
                    chosen_now = kernels.library(family)  # chosen here, kept after the block
                if chosen_now != lib:
                    times[lib] = float("nan")  # torch is not installed
                    continue
                _barrier_timed(call, 1, root_only=True)
                times[lib] = _barrier_timed(call, repeat, root_only=True)[0] * 1e3
            rows.append({"kernel": name, "family": family, "numpy_ms": times["numpy"],
                         "torch_ms": times["torch"]})
    finally:
        kernels.choose_again()
    chosen = {f: kernels.library(f) for f in kernels.FAMILIES}
    for row in rows:
        by_shape = row["family"] == "svd" and "square" in row["kernel"]
        row["chosen"] = "numpy" if by_shape else chosen[row["family"]]  # svd: by the shape
    return rows


def run(settings: Settings) -> list[dict[str, Any]]:
    """The suite at its full sizes (collective): the case rows, then the kernel rows; the
    best of ``min(settings.rounds, 3)`` calls per side."""
    repeat = max(1, min(settings.rounds, 3))
    return run_cases(CASES, repeat) + kernel_rows(repeat)


def format(rows: Sequence[dict[str, Any]], markdown: bool = False) -> str:
    """The case table (time, numpy alone, ratio, goal, error) and the kernel table."""
    case_rows = [r for r in rows if "case" in r]
    kernel = [r for r in rows if "kernel" in r]
    lines = []
    if case_rows:
        ranks = case_rows[0]["ranks"]
        cells = [[r["case"], f"{r['mpiflow_ms']:.1f}", f"{r['numpy_ms']:.1f}",
                  f"{r['ratio']:.2f}",
                  "-" if r["goal"] is None else
                  f"<= {r['goal']:.1f} {'ok' if r['ratio'] <= r['goal'] else 'MISSED'}",
                  f"{r['error']:.1e}"] for r in case_rows]
        lines += format_grid([f"case ({ranks} ranks)", "mpiflow (ms)", "numpy alone (ms)",
                              "ratio", "goal", "error"], cells,
                             [False, True, True, True, False, True], markdown)
    if kernel:
        lines.append("")
        cells = [[r["kernel"], f"{r['numpy_ms']:.1f}", f"{r['torch_ms']:.1f}",
                  f"{r['numpy_ms'] / r['torch_ms']:.2f}", r["chosen"]] for r in kernel]
        lines += format_grid(["local kernel (one rank)", "numpy (ms)", "torch (ms)",
                              "numpy / torch", "chosen"], cells,
                             [False, True, True, True, False], markdown)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the suite under mpiexec; rank 0 prints the tables (and writes ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed calls per side")
    parser.add_argument("--scale", type=int, default=1, help="divide the sizes (quick runs)")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    rows = run_cases(cases(args.scale), args.repeat) + kernel_rows(args.repeat, args.scale)
    if world_comm.rank == 0:
        print(f"{world_comm.size} ranks, best of {args.repeat}, OMP_NUM_THREADS="
              f"{os.environ.get('OMP_NUM_THREADS', 'unset')}, "
              f"kernels: {kernels.describe()}")
        print(format(rows, args.markdown))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
