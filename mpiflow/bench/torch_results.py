"""What the ``torch`` suite measured, and its goals: the results of :mod:`.torch_suite`.

One :class:`TorchRow` per operation and size (the backend beside raw mpi4py, then beside
gloo), one :class:`TorchOpResult` per operation, the :class:`DDPStepResult` of the training
step, all in a :class:`TorchResult`; :func:`goal_checks` judges the goals (reported, never
asserted; judged at :data:`GOAL_RANKS` ranks). Every result turns into JSON-ready data
(``to_json``). :mod:`.torch_report` formats them.

Example:
    >>> from mpiflow.bench.torch_results import ALL_REDUCE_GOALS
    >>> [goal.label for goal in ALL_REDUCE_GOALS]
    ['8 B', '>= 1 MiB']
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, NamedTuple

from .metrics import LARGE_BYTES, Goal, Timings, bandwidth, paired_ratio
from .plan import format_bytes

__all__ = ["ALL_REDUCE_GOALS", "DDP_GOAL", "GOAL_RANKS", "DDPStepResult", "GoalCheck",
           "TorchOpResult", "TorchResult", "TorchRow", "goal_checks"]

GOAL_RANKS = 2
"""The goals are judged at this many ranks."""
ALL_REDUCE_GOALS = (Goal("8 B", 3.0, 0, 8), Goal(">= 1 MiB", 1.10, LARGE_BYTES))
"""all_reduce: the largest acceptable backend / raw mpi4py ratio, by size."""
DDP_GOAL = 1.10
"""The DDP step: the largest acceptable backend / bound ratio of step times (the bound: the
same step without DDP, plus raw all-reduces of the same gradients)."""


@dataclass(frozen=True)
class TorchRow:
    """One operation at one size: the backend beside raw mpi4py, then beside gloo.

    Attributes:
        op: the operation's name.
        size: the requested size in bytes (the goals use it).
        nbytes: the measured size by the nccl-tests convention.
        iters: timed calls per batch.
        warmup: warm-up calls per side.
        nranks: the number of ranks.
        factor: the bus factor at ``nranks``.
        timings: the sides of :data:`.torch_suite.SIDES`, seconds per operation per round
            (backend and raw from the first phase, gloo from the second).
        gloo_pass: the second phase: ``("backend", "gloo")``, timed back to back.
    """

    op: str
    size: int
    nbytes: int
    iters: int
    warmup: int
    nranks: int
    factor: float
    timings: Timings
    gloo_pass: Timings

    def time(self, side: str) -> float:
        """Seconds per operation of ``side``."""
        return self.timings.time(side)

    def busbw(self, side: str) -> float:
        """Bus bandwidth in GB/s of ``side``."""
        return bandwidth(self.nbytes, self.time(side)) * self.factor

    @property
    def vs_raw(self) -> float:
        """The backend's time over raw mpi4py's, paired by round (1.0: no overhead)."""
        return self.timings.ratio("backend", "raw")

    @property
    def gloo_vs_backend(self) -> float:
        """gloo's time over the backend's, paired by round (> 1: the backend is faster)."""
        return self.gloo_pass.ratio("gloo", "backend")

    def to_json(self) -> dict[str, Any]:
        """The row as JSON-ready data (times in microseconds, bandwidths in GB/s)."""
        return {"size": self.size, "nbytes": self.nbytes, "iters": self.iters,
                "warmup": self.warmup, "backend_vs_raw": self.vs_raw,
                "gloo_vs_backend": self.gloo_vs_backend,
                "busbw_GBps": {s: self.busbw(s) for s in self.timings.sides},
                "sides": self.timings.to_json(), "gloo_pass": self.gloo_pass.to_json()}


@dataclass(frozen=True)
class TorchOpResult:
    """One operation at every size.

    Attributes:
        name: the operation.
        call: the torch call timed (the backend's; gloo's adds ``group=gloo``).
        raw_call: the raw mpi4py call timed.
        factor_formula: the bus factor as a formula of ``n``.
        rows: one per size; empty when the operation needs more ranks.
    """

    name: str
    call: str
    raw_call: str
    factor_formula: str
    rows: tuple[TorchRow, ...]

    def to_json(self) -> dict[str, Any]:
        """The operation as JSON-ready data."""
        return {"call": self.call, "raw_call": self.raw_call,
                "rows": [r.to_json() for r in self.rows]}


@dataclass(frozen=True)
class DDPStepResult:
    """The training step of the MLP, through the backend, gloo and without communication.

    Attributes:
        features: input and output features.
        width: hidden features.
        batch: rows per rank.
        params: parameter count.
        nranks: the number of ranks.
        iters: timed steps per batch.
        timings: the sides of :data:`.torch_suite.DDP_SIDES`, seconds per step per round.
    """

    features: int
    width: int
    batch: int
    params: int
    nranks: int
    iters: int
    timings: Timings

    @property
    def speedup(self) -> float:
        """gloo's step time over the backend's, paired by round (> 1: the backend is faster)."""
        return self.timings.ratio("gloo", "backend")

    @property
    def over_bound(self) -> float:
        """The backend's step time over the bound's, paired by round (1: at the bound)."""
        return self.timings.ratio("backend", "bound")

    @property
    def reducer_cost(self) -> float | None:
        """Seconds per step DDP adds without communicating (``reducer - local``, paired by
        round, median), or None when the ``reducer`` side was not timed."""
        if "reducer" not in self.timings.sides:
            return None
        return float(statistics.median(
            r - loc for r, loc in zip(self.timings.of("reducer"), self.timings.of("local"))))

    @property
    def over_floor(self) -> float | None:
        """The backend's step over DDP's floor, paired by round: the bound plus what DDP costs
        without communicating (``bound + reducer - local``); None without ``reducer``."""
        if "reducer" not in self.timings.sides:
            return None
        t = self.timings
        return paired_ratio(t.of("backend"), [b + r - loc for b, r, loc in zip(
            t.of("bound"), t.of("reducer"), t.of("local"))])

    def to_json(self) -> dict[str, Any]:
        """The result as JSON-ready data (times in microseconds)."""
        cost = self.reducer_cost
        return {"features": self.features, "width": self.width, "batch": self.batch,
                "params": self.params, "ranks": self.nranks, "iters": self.iters,
                "gloo_vs_backend": self.speedup, "backend_vs_bound": self.over_bound,
                "reducer_cost_us": None if cost is None else cost * 1e6,
                "backend_vs_floor": self.over_floor,
                "vs_local": {s: self.timings.ratio(s, "local") for s in self.timings.sides},
                "sides": self.timings.to_json()}


@dataclass(frozen=True)
class TorchResult:
    """Everything the suite measured.

    Attributes:
        torch_version: ``torch.__version__``.
        threads: torch's intra-op threads per rank.
        nranks: the number of ranks.
        rounds: timed batches per side.
        stat: how a side's batches give its time.
        ops: the operations, in the order run.
        ddp: the DDP step (None when not run).
    """

    torch_version: str
    threads: int
    nranks: int
    rounds: int
    stat: str
    ops: tuple[TorchOpResult, ...]
    ddp: DDPStepResult | None

    def to_json(self) -> dict[str, Any]:
        """The result as JSON-ready data."""
        return {"torch": self.torch_version, "threads": self.threads, "ranks": self.nranks,
                "rounds": self.rounds, "stat": self.stat,
                "ops": {o.name: o.to_json() for o in self.ops},
                "ddp": None if self.ddp is None else self.ddp.to_json(),
                "goals": [c._asdict() for c in goal_checks(self)]}


class GoalCheck(NamedTuple):
    """One goal: what it asks, the measured value, where, and whether it is met.

    ``met`` is None when nothing measured covers it, or at a rank count other than
    :data:`GOAL_RANKS`.
    """

    goal: str
    value: float | None
    where: str
    met: bool | None


def goal_checks(result: TorchResult) -> list[GoalCheck]:
    """The goals: all_reduce backend/raw at 8 B and from 1 MiB (worst row), the DDP step."""
    judged = result.nranks == GOAL_RANKS
    rows = next((o.rows for o in result.ops if o.name == "all_reduce"), ())
    checks = []
    for goal in ALL_REDUCE_GOALS:
        covered = [r for r in rows if goal.applies(r.size)]
        worst = max(covered, key=lambda r: r.vs_raw) if covered else None
        text = f"all_reduce {goal.label}: backend/raw <= {goal.max_ratio:g}"
        if worst is None:
            checks.append(GoalCheck(text, None, "", None))
        else:
            checks.append(GoalCheck(text, worst.vs_raw, format_bytes(worst.size),
                                    worst.vs_raw <= goal.max_ratio if judged else None))
    text = f"DDP step: backend/bound <= {DDP_GOAL:g}"
    ddp = result.ddp
    checks.append(GoalCheck(text, None if ddp is None else ddp.over_bound, "",
                            None if ddp is None or not judged else ddp.over_bound <= DDP_GOAL))
    return checks
