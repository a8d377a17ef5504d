"""What the sampled argument check costs: all_reduce loops with ``MPIFLOW_CHECK`` sampled and off.

Run ``mpiexec -n 2 python -m mpiflow.bench.collective_check`` (``--bytes``, ``--iters``,
``--rounds``); only rank 0 prints. Each round times one loop of ``iters`` all-reduces per
side, in a rotating order, on a communicator made fresh for the round (so the sampled side
pays its whole schedule: every one of the first calls checked, then the sparse ones): raw
mpi4py (``Allreduce``), mpiflow with the sampled check (the default) and mpiflow with
``MPIFLOW_CHECK=off``, both called as ``mpiflow.distributed.all_reduce`` calls them (the fast
path first). The overhead is the median over the rounds of each round's sampled / off, the
slowest rank's times. The goals: at most 3 % at 8 bytes over 100k calls, 1 % at 1 MiB.

Examples:
    >>> result = measure_check_overhead(8, iters=300, rounds=1)
    >>> sorted(k for k in result if k.endswith("_us"))
    ['off_us', 'raw_us', 'sampled_us']
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
from ..communication.mpi.communicator import MPICommunicator
from ..communication.mpi.group import world_comm
from ..core.reduce_op import ReduceOp
from .metrics import time_per_call

__all__ = ["GOALS", "format_result", "main", "measure_check_overhead"]

GOALS = {8: 0.03, 1 << 20: 0.01}  # bytes -> the most the sampled check may add


def _side(kind: str, comm: Any, buf: numpy.ndarray) -> tuple[Callable[[], Any], Any]:
    if kind == "raw":
        return (lambda: comm.Allreduce(MPI.IN_PLACE, buf, MPI.SUM)), None
    made = (SampledMPICommunicator if kind == "sampled" else MPICommunicator)(comm)
    fast, general, total = made.fast, made.all_reduce, ReduceOp.SUM

    def call() -> None:  # as mpiflow.distributed.all_reduce: the fast path, else the method
        if not fast.all_reduce(buf, total):
            general(buf, total)

    return call, made


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
    ratios = []
    for r in range(rounds):
        this = {}
        for name in names[r % 3:] + names[:r % 3]:
            comm = world.Dup()
            call, _ = _side(name, comm, buf)
            this[name] = timer.allreduce(time_per_call(call, iters, timer.Barrier), op=MPI.MAX)
            best[name] = min(best[name], this[name])
            comm.Free()
        ratios.append(this["sampled"] / this["off"])
    timer.Free()
    overhead = float(numpy.median(ratios)) - 1
    goal = GOALS.get(int(buf.nbytes))
    return {"bytes": int(buf.nbytes), "ranks": world.Get_size(), "iters": iters,
            "rounds": rounds, **{f"{k}_us": v * 1e6 for k, v in best.items()},
            "overhead": overhead, "goal": goal,
            "goal_met": None if goal is None else overhead <= goal}


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
