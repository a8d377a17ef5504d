"""What the sampled argument check costs: all_reduce loops with ``MPIFLOW_CHECK`` sampled and off.

Run ``mpiexec -n 2 python -m mpiflow.bench.collective_check`` (``--bytes``, ``--iters``,
``--rounds``); only rank 0 prints. Each round times one loop of ``iters`` all-reduces per
side, in a rotating order, on a communicator made fresh for the round (so the sampled side
pays its whole schedule: the first call, the powers of two, every 4096th): raw mpi4py
(``Allreduce``), mpiflow with the sampled check (the default) and mpiflow with
``MPIFLOW_CHECK=off``, both through the function ``mpiflow.distributed.all_reduce`` is, made
over the round's communicator; each side is called from a lambda, raw mpi4py's with its
method and arguments bound beforehand. The overhead is the median over the rounds of each
round's sampled / off, the slowest rank's times. The goals: at most 3 % at 8 bytes over
100k calls, 1 % at 1 MiB.

``python -m mpiflow.bench --suite collective_check`` (:func:`run_collective_check`) reports the
issue's two jobs: the long one (100k 8-byte all-reduces, as above) and the short one
(:mod:`.check_job`: a tiny DDP run of 300 steps through the torch backend), each as the median
of the rounds' default-checks / off (goal: at most :data:`RATIO_GOAL` for both), and the
8-byte all-reduce's cost over raw mpi4py with the default checks on (median of the rounds'
differences; goal: at most :data:`OVER_RAW_GOAL_US` microseconds at 2 ranks).

Examples:
    >>> result = measure_check_overhead(8, iters=300, rounds=1)
    >>> sorted(k for k in result if k.endswith("_us"))
    ['off_over_raw_us', 'off_us', 'over_raw_us', 'raw_us', 'sampled_us']
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy
from mpi4py import MPI

from ..communication.debug.sampled import SampledMPICommunicator
from ..communication.fast_all_reduce import NEVER_ON
from ..communication.mpi.communicator import MPICommunicator
from ..communication.mpi.group import world_comm
from ..core.reduce_op import ReduceOp
from .check_job import short_job, torch_missing
from .metrics import time_per_call
from .plan import Settings
from .report import format_grid, section_heading

__all__ = ["GOALS", "LONG_CALLS", "OVER_RAW_GOAL_US", "RATIO_GOAL", "format_collective_check",
           "format_result", "main", "measure_check_overhead", "run_collective_check"]

GOALS = {8: 0.03, 1 << 20: 0.01}  # bytes -> the most the sampled check may add
RATIO_GOAL = 1.03  # default checks / MPIFLOW_CHECK=off, the long job and the short one
OVER_RAW_GOAL_US = 0.5  # an 8-byte all_reduce with the default checks, over raw mpi4py
LONG_CALLS = 100_000


def _side(kind: str, comm: Any, buf: numpy.ndarray) -> tuple[Callable[[], Any], Any]:
    if kind == "raw":
        allreduce, in_place, total = comm.Allreduce, MPI.IN_PLACE, MPI.SUM
        return (lambda: allreduce(in_place, buf, total)), None
    made = (SampledMPICommunicator if kind == "sampled" else MPICommunicator)(comm)

    def general(tensor: Any, op: ReduceOp, group: Any, async_op: bool) -> None:
        made.all_reduce(tensor, op)

    # mpiflow.distributed.all_reduce as it is made for the world, over this communicator
    all_reduce = made.fast.public_all_reduce(general, NEVER_ON, ReduceOp.SUM)
    return (lambda: all_reduce(buf)), made


def measure_check_overhead(nbytes: int = 8, iters: int = 100_000, rounds: int = 7
                           ) -> dict[str, Any]:
    """Time raw mpi4py and mpiflow's all_reduce with the sampled check and without (collective).

    Args:
        nbytes: the buffer size in bytes (float32 elements, at least one).
        iters: calls per loop (a fresh communicator each).
        rounds: loops per side.

    Returns:
        ``raw_us``, ``sampled_us``, ``off_us`` (microseconds per call, best round, slowest
        rank), ``overhead`` (the median over the rounds of sampled / off, minus 1), the
        settings, and ``goal`` where one is set for ``nbytes``.
    """
    world = world_comm.mpi_comm
    timer = world.Dup()
    buf = numpy.zeros(max(1, nbytes // 4), dtype=numpy.float32)
    names = ["raw", "sampled", "off"]
    best = dict.fromkeys(names, float("inf"))
    ratios, over_raw, off_over_raw = [], [], []
    for r in range(rounds):
        this = {}
        for name in names[r % 3:] + names[:r % 3]:
            comm = world.Dup()
            call, _ = _side(name, comm, buf)
            this[name] = timer.allreduce(time_per_call(call, iters, timer.Barrier), op=MPI.MAX)
            best[name] = min(best[name], this[name])
            comm.Free()
        ratios.append(this["sampled"] / this["off"])
        over_raw.append(1e6 * (this["sampled"] - this["raw"]))
        off_over_raw.append(1e6 * (this["off"] - this["raw"]))
    timer.Free()
    overhead = float(numpy.median(ratios)) - 1
    goal = GOALS.get(int(buf.nbytes))
    return {"bytes": int(buf.nbytes), "ranks": world.Get_size(), "iters": iters,
            "rounds": rounds, **{f"{k}_us": v * 1e6 for k, v in best.items()},
            "overhead": overhead, "ratios": ratios, "goal": goal,
            "goal_met": None if goal is None else overhead <= goal,
            "over_raw_us": float(numpy.median(over_raw)),
            "off_over_raw_us": float(numpy.median(off_over_raw))}


def format_result(result: dict[str, Any]) -> str:
    """The result as a few lines of text."""
    goal = result["goal"]
    verdict = "" if goal is None else (
        f" -- goal <= {100 * goal:.0f} %: {'met' if result['goal_met'] else 'NOT met'}")
    return (f"all_reduce of {result['bytes']} B on {result['ranks']} rank(s), loops of "
            f"{result['iters']} calls, best of {result['rounds']}:\n"
            f"  raw mpi4py        {result['raw_us']:9.3f} us\n"
            f"  MPIFLOW_CHECK=off {result['off_us']:9.3f} us\n"
            f"  sampled (default) {result['sampled_us']:9.3f} us\n"
            f"  sampled overhead  {100 * result['overhead']:+.2f} % (median of the rounds' "
            f"sampled/off){verdict}")


def run_collective_check(settings: Settings) -> dict[str, Any]:
    """The ``collective_check`` suite: the long job, the short one (collective).

    Returns:
        ``long`` (:func:`measure_check_overhead` of :data:`LONG_CALLS` 8-byte all-reduces) and
        ``short`` (:func:`.check_job.short_job`, or ``{"missing": why}`` without PyTorch),
        both over ``settings.rounds`` rounds, and ``ranks``.
    """
    long = measure_check_overhead(8, LONG_CALLS, settings.rounds)
    missing = torch_missing()
    short = {"missing": missing} if missing else short_job(settings.rounds)
    return {"ranks": world_comm.size, "rounds": settings.rounds, "long": long, "short": short}


def _verdict(value: float, goal: float) -> str:
    return f"<= {goal:g}: {'met' if value <= goal else 'NOT met'}"


def format_collective_check(result: dict[str, Any], markdown: bool = False) -> str:
    """The table of a :func:`run_collective_check` result."""
    long, short = result["long"], result["short"]
    ratio = 1 + long["overhead"]
    head = section_heading("collective_check", [
        f"the default (sampled) argument checks against MPIFLOW_CHECK=off on {result['ranks']} "
        f"rank(s); medians of {result['rounds']} interleaved rounds, slowest rank"], markdown)
    rows = [[f"long: {long['iters']} all_reduce of {long['bytes']} B (us/call)",
             f"{long['off_us']:.3f}", f"{long['sampled_us']:.3f}", f"{ratio:.3f}",
             _verdict(ratio, RATIO_GOAL)]]
    if "missing" in short:
        rows.append([f"short: tiny DDP job (skipped: {short['missing']})", "", "", "", ""])
    else:
        rows.append([f"short: tiny DDP job, {short['steps']} steps (ms/step)",
                     f"{short['off_ms']:.3f}", f"{short['sampled_ms']:.3f}",
                     f"{short['ratio']:.3f}", _verdict(short["ratio"], RATIO_GOAL)])
    rows.append([f"all_reduce of {long['bytes']} B minus raw mpi4py's {long['raw_us']:.3f}"
                 f" (us)", f"{long['off_over_raw_us']:+.3f}", f"{long['over_raw_us']:+.3f}", "",
                 _verdict(long["over_raw_us"], OVER_RAW_GOAL_US) + (
                     "" if result["ranks"] == 2 else " (judged at 2 ranks)")])
    grid = format_grid(["job", "off", "default", "default/off", "goal"], rows,
                       [False, True, True, True, False], markdown)
    note = ("   (long: best rounds in us/call, ratio = median of the rounds' ratios; "
            "over raw: median of the rounds' differences)")
    return "\n".join([*head, *grid, "" if markdown else note])


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mpiflow.bench.collective_check``: measure and print (rank 0)."""
    parser = argparse.ArgumentParser(prog="python -m mpiflow.bench.collective_check",
                                     description="The sampled argument check's cost on "
                                                 "all_reduce loops, beside raw mpi4py.")
    parser.add_argument("--bytes", type=int, nargs="+", default=[8, 1 << 20])
    parser.add_argument("--iters", type=int, nargs="+", default=[100_000, 2_000],
                        help="calls per loop, one per --bytes value")
    parser.add_argument("--rounds", type=int, default=7, help="loops per side")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    iters = args.iters + [args.iters[-1]] * (len(args.bytes) - len(args.iters))
    results = [measure_check_overhead(b, n, args.rounds) for b, n in zip(args.bytes, iters)]
    if world_comm.rank == 0:
        print("\n".join(format_result(r) for r in results))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
