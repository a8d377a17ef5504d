"""What the collective watchdog costs: a small all-reduce with the watchdog on and off.

Run ``mpiexec -n 2 python -m mpiflow.bench.watchdog`` (``--bytes 8``, ``--iters N``,
``--rounds N``); only rank 0 prints. Three sides are timed on the same buffer, interleaved round
by round (the order rotates) so that drifts of the machine hit them alike: raw mpi4py
(``comm.Allreduce(MPI.IN_PLACE, buf, MPI.SUM)``), ``mpiflow.distributed.all_reduce`` with the
watchdog thread running, and the same with it stopped. Each side's time is its best round, the
slowest rank's; the overhead is the median over the rounds of each round's on / off (robust on
a loaded machine, where the best rounds of two sides may come from quiet and busy moments), and
also shown from the best rounds. The goal is an overhead of at most 5 % at 8 bytes on 2 ranks.
The call marks themselves (two increments per call) are paid on both mpiflow sides.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy
from mpi4py import MPI

from .. import distributed as dist
from ..communication.mpi.group import world_comm
from ..communication.watchdog import monitor as watchdog
from .metrics import time_per_call

__all__ = ["GOAL", "format_result", "main", "measure_watchdog_overhead"]

GOAL = 0.05  # the most the watchdog may add to an 8-byte all_reduce on 2 ranks
_SETTLE = 0.02  # seconds of pause before each timed batch


def measure_watchdog_overhead(nbytes: int = 8, iters: int = 20000, rounds: int = 15,
                              warmup: int = 2000) -> dict[str, Any]:
    """Time raw mpi4py and mpiflow's all_reduce with the watchdog on and off (collective).

    Every rank must call it with the same arguments. The watchdog is left as it was found
    (on, with ``MPIFLOW_TIMEOUT``'s value or 600 s, for the "on" side if it was off).

    Args:
        nbytes: the buffer size in bytes (float32 elements, at least one).
        iters: calls per timed batch.
        rounds: timed batches per side.
        warmup: untimed calls per side first.

    Returns:
        ``raw_us``, ``on_us``, ``off_us`` (microseconds per call, best round, slowest rank),
        ``overhead`` (on / off - 1), ``paired_overhead`` (the median over the rounds of each
        round's on / off, minus 1: robust to a loaded machine), ``on_vs_raw`` and
        ``off_vs_raw``, the settings, and ``goal_met`` (the paired overhead is at most
        :data:`GOAL`).
    """
    comm = world_comm.mpi_comm
    timer = comm.Dup()  # the barriers of the measurement, apart from the traffic measured
    buf = numpy.zeros(max(1, nbytes // 4), dtype=numpy.float32)
    previous = watchdog.get_timeout()
    on_timeout = previous if previous > 0 else watchdog.DEFAULT_TIMEOUT
    sides: dict[str, tuple[Callable[[], Any], float | None]] = {
        "raw": (partial(comm.Allreduce, MPI.IN_PLACE, buf, MPI.SUM), None),
        "on": (partial(dist.all_reduce, buf), on_timeout),
        "off": (partial(dist.all_reduce, buf), 0.0),
    }
    best = dict.fromkeys(sides, float("inf"))
    ratios: list[float] = []  # on / off within each round: drifts of the machine cancel
    names = list(sides)
    try:
        for name in names:
            call, timeout = sides[name]
            if timeout is not None:
                watchdog.set_timeout(timeout)
            time_per_call(call, warmup, timer.Barrier)
        for r in range(rounds):
            this_round = {}
            for name in names[r % 3:] + names[:r % 3]:
                call, timeout = sides[name]
                if timeout is not None and watchdog.get_timeout() != timeout:
                    watchdog.set_timeout(timeout)
                # Every side alike: a pause (a new thread's start stays out of the timing),
                # then a few untimed calls (the pause must not slow the first timed ones).
                time.sleep(_SETTLE)
                time_per_call(call, max(1, iters // 10), timer.Barrier)
                this_round[name] = time_per_call(call, iters, timer.Barrier)
                best[name] = min(best[name], this_round[name])
            ratios.append(world_comm.mpi_comm.allreduce(this_round["on"], op=MPI.MAX)
                          / world_comm.mpi_comm.allreduce(this_round["off"], op=MPI.MAX))
    finally:
        watchdog.set_timeout(previous)
        timer.Free()
    worst = {k: world_comm.mpi_comm.allreduce(v, op=MPI.MAX) for k, v in best.items()}
    overhead = worst["on"] / worst["off"] - 1
    paired = float(numpy.median(ratios)) - 1
    return {"bytes": int(buf.nbytes), "ranks": world_comm.size, "iters": iters,
            "rounds": rounds, "raw_us": worst["raw"] * 1e6, "on_us": worst["on"] * 1e6,
            "off_us": worst["off"] * 1e6, "overhead": overhead,
            "on_vs_raw": worst["on"] / worst["raw"], "off_vs_raw": worst["off"] / worst["raw"],
            "paired_overhead": paired, "goal_met": paired <= GOAL}


def format_result(result: dict[str, Any]) -> str:
    """The result as a few lines of text."""
    return (f"all_reduce of {result['bytes']} B on {result['ranks']} rank(s), best of "
            f"{result['rounds']} rounds of {result['iters']} calls:\n"
            f"  raw mpi4py         {result['raw_us']:8.3f} us\n"
            f"  mpiflow, watchdog  {result['on_us']:8.3f} us  ({result['on_vs_raw']:.3f} x raw)\n"
            f"  mpiflow, no dog    {result['off_us']:8.3f} us  ({result['off_vs_raw']:.3f} x raw)\n"
            f"  watchdog overhead  {100 * result['paired_overhead']:+.1f} % (median of the rounds' "
            f"on/off; {100 * result['overhead']:+.1f} % from the best rounds) -- goal <= "
            f"{100 * GOAL:.0f} %: {'met' if result['goal_met'] else 'NOT met'}")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mpiflow.bench.watchdog``: measure and print (rank 0); 0 when the goal holds."""
    parser = argparse.ArgumentParser(prog="python -m mpiflow.bench.watchdog",
                                     description="The collective watchdog's cost on a small "
                                                 "all_reduce, on and off, beside raw mpi4py.")
    parser.add_argument("--bytes", type=int, default=8, help="buffer size (default 8)")
    parser.add_argument("--iters", type=int, default=20000, help="calls per batch")
    parser.add_argument("--rounds", type=int, default=15, help="batches per side")
    parser.add_argument("--json", metavar="PATH", help="also write the result as JSON")
    args = parser.parse_args(argv)
    result = measure_watchdog_overhead(args.bytes, args.iters, args.rounds)
    if world_comm.rank == 0:
        print(format_result(result))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=2)
    return 0 if result["goal_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
