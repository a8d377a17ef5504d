"""What the reproducibility switch costs: exact sums beside the default ones.

Run ``mpiexec -n 2 python -m mpiflow.bench.deterministic`` (``--elements N``, ``--rounds N``); only
rank 0 prints. Three tables, each side timed in interleaved rounds (best round, slowest rank):

* the local kernel: ``numpy.sum`` against the exact sum
  (:func:`mpiflow.core.exact_sum.sum_state` and its rounding) of the same float32/float64 array;
* ``flow.sum`` of a global ``S(0)`` tensor of that many elements with the switch off and on,
  with the collectives each side issues (on: one integer all-reduce of a fixed-size state);
* ``dist.all_reduce`` SUM of a float64 vector off and on (on: an all-gather and exact sums).

The goal of issue 16 is at most 4x the default sum for 16M elements.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy

from .. import distributed as dist
from ..communication import count_collectives
from ..communication.mpi.group import world_comm
from ..core import exact_sum
from ..core.deterministic import deterministic
from ..layouts.placement import placement
from ..layouts.sbp import split
from ..ops.reduction import sum as flow_sum
from ..tensors.creation import tensor

__all__ = ["GOAL", "format_results", "main", "run_reproducible"]

GOAL = 4.0  # the most an exact 16M-element sum may cost, in default sums


def _best(calls: Sequence[Callable[[], Any]], rounds: int) -> list[float]:
    """The best time of each call over interleaved rounds (the slowest rank's)."""
    best = [float("inf")] * len(calls)
    for r in range(rounds):
        for i in range(len(calls)):
            k = (i + r) % len(calls)   # rotate the order so drifts hit every side
            world_comm.barrier()
            start = time.perf_counter()
            calls[k]()
            elapsed = world_comm.mpi_comm.allreduce(time.perf_counter() - start, op=_max())
            best[k] = min(best[k], elapsed)
    return best


def _max() -> Any:
    from mpi4py import MPI

    return MPI.MAX


def _collectives(call: Callable[[], Any]) -> dict[str, int]:
    """The communicator operations one call issues, by name."""
    with count_collectives() as counter:
        call()
    return dict(counter)


def _kernel_row(x: numpy.ndarray, rounds: int) -> dict[str, Any]:
    """``numpy.sum`` against the exact kernel on the same array."""
    dtype = x.dtype
    default, exact = _best([lambda: x.sum(),
                            lambda: exact_sum.state_value(exact_sum.sum_state(x), dtype)],
                           rounds)
    return {"dtype": dtype.name, "default_ms": default * 1e3, "exact_ms": exact * 1e3,
            "ratio": exact / default}


def _global_row(x: numpy.ndarray, rounds: int) -> dict[str, Any]:
    """``flow.sum(t).numpy()`` of an ``S(0)`` global tensor, switch off and on."""
    t = tensor(x, placement=placement("cpu", list(range(world_comm.size))), sbp=split(0))

    def off() -> Any:
        return flow_sum(t).numpy()

    def on() -> Any:
        with deterministic():
            return flow_sum(t).numpy()

    default, exact = _best([off, on], rounds)
    return {"dtype": x.dtype.name, "default_ms": default * 1e3, "exact_ms": exact * 1e3,
            "ratio": exact / default, "default_ops": _collectives(off),
            "exact_ops": _collectives(on)}


def run_reproducible(elements: int = 1 << 24, rounds: int = 5,
                     vector: int = 1 << 12) -> dict[str, Any]:
    """Measure the three tables (collective; same arguments on every rank).

    Args:
        elements: elements of the summed arrays.
        rounds: timed rounds per side.
        vector: elements of the all-reduced vector.

    Returns:
        ``{"kernel": [...], "global": [...], "all_reduce": {...}, "ranks": n, ...}``.
    """
    rng = numpy.random.default_rng(0)
    out: dict[str, Any] = {"ranks": world_comm.size, "elements": elements,
                           "kernel": [], "global": []}
    for dtype in (numpy.float32, numpy.float64):
        x = rng.standard_normal(elements).astype(dtype)
        out["kernel"].append(_kernel_row(x, rounds))
        out["global"].append(_global_row(x, rounds))
    v = rng.standard_normal(vector)

    def reduce_off() -> None:
        dist.all_reduce(v.copy())

    def reduce_on() -> None:
        with deterministic():
            dist.all_reduce(v.copy())

    default, exact = _best([reduce_off, reduce_on], rounds)
    out["all_reduce"] = {"elements": vector, "default_ms": default * 1e3,
                         "exact_ms": exact * 1e3, "ratio": exact / default}
    return out


def format_results(res: dict[str, Any]) -> str:
    """The tables as plain text."""
    lines = [f"# reproducible reductions: {res['elements']} elements, {res['ranks']} rank(s)",
             f"{'what':<28}{'dtype':>9}{'default ms':>12}{'exact ms':>11}{'ratio':>8}"]
    for name, rows in (("numpy.sum vs exact kernel", res["kernel"]),
                       ("flow.sum global S(0)", res["global"])):
        for row in rows:
            lines.append(f"{name:<28}{row['dtype']:>9}{row['default_ms']:>12.2f}"
                         f"{row['exact_ms']:>11.2f}{row['ratio']:>7.2f}x")
    for row in res["global"]:
        lines.append(f"  flow.sum {row['dtype']} collectives: off {row['default_ops']}, "
                     f"on {row['exact_ops']} (state: {exact_sum.STATE_SIZE} int64)")
    ar = res["all_reduce"]
    lines.append(f"{'dist.all_reduce ' + str(ar['elements']):<28}{'float64':>9}"
                 f"{ar['default_ms']:>12.3f}{ar['exact_ms']:>11.3f}{ar['ratio']:>7.1f}x")
    lines.append(f"goal: exact kernel within {GOAL:.0f}x of numpy.sum")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mpiflow.bench.deterministic``: print the tables on rank 0."""
    parser = argparse.ArgumentParser(prog="python -m mpiflow.bench.deterministic")
    parser.add_argument("--elements", type=int, default=1 << 24)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--vector", type=int, default=1 << 12)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    res = run_reproducible(args.elements, args.rounds, args.vector)
    if world_comm.rank == 0:
        print(json.dumps(res, indent=1) if args.json else format_results(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
