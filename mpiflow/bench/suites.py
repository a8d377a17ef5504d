"""The suites of ``python -m mpiflow.bench`` beyond the OSU tables, by name (``--suite``).

A suite is a collective ``run(settings)`` returning its results, and pure ``format`` (plain or
Markdown) and ``to_json`` functions of them. The OSU suite (``osu``: the cases of
:mod:`.cases`) is run by :func:`.runner.run` and printed case by case; the others are here:

* ``redistribution``: :mod:`.redistribution` (global tensor layout conversions);
* ``grad_sync`` and ``ddp``: :mod:`.training` (gradient sync, the DDP step);
* ``checkpoint``: :func:`.checkpoint.run_checkpoint_bench` (parallel save/load);
* ``watchdog``: :func:`.watchdog.measure_watchdog_overhead` (the collective watchdog's cost on
  an 8-byte all-reduce; imported only when it runs);
* ``to_global_check``: :mod:`.meta_check` (what the ranks' agreement check of ``to_global``
  costs, beside skipping it).

Optional suites (:data:`OPTIONAL_SUITES`) need a dependency mpiflow does not: they run only when
named (not with ``all``), after the others, and their ``check`` says what is missing before
anything runs:

* ``torch``: :mod:`.torch_suite` (the ``"mpiflow"`` torch.distributed backend beside raw mpi4py
  and gloo; needs PyTorch).
* ``engine``: :mod:`.engine` (one op's overhead beside numpy, MLP training steps and their
  memory beside PyTorch on one thread; single-process figures, so named rather than part of
  ``all``; without PyTorch its torch columns are left out).
* ``graph``: :mod:`.graph` (a training step as a replayed ``nn.Graph`` plan beside the eager
  step; named rather than part of ``all``, like ``engine``).
* ``science``: :mod:`.science` (sorting, statistics, scans, FFT, linear algebra and files on
  split arrays beside numpy doing the whole job on one process; minutes, so named).
* ``collective_check``: :mod:`.collective_check` (the default argument checks against
  ``MPIFLOW_CHECK=off`` on a long job of 100k 8-byte all-reduces and a short tiny-model DDP
  job through the torch backend, and the all-reduce's cost over raw mpi4py; without PyTorch
  the short job is reported as skipped).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .plan import SUITES, Settings
from .report import (
    format_checkpoint,
    format_ddp,
    format_grad_sync,
    format_redistribution,
    format_watchdog,
)

__all__ = ["ALL_RUNNERS", "OPTIONAL_RUNNERS", "OPTIONAL_SUITES", "SUITE_RUNNERS", "Suite",
           "expand_suites", "run_suite"]


@dataclass(frozen=True)
class Suite:
    """One table of the command line beyond OSU's.

    Attributes:
        name: the name ``--suite`` selects it by.
        run: measures it (collective), returning its results.
        format: ``(results, markdown) -> str``, its table and summary lines.
        to_json: ``results -> data`` for the ``--json`` file.
        check: ``settings -> problem``: why it cannot run here (a missing dependency), or
            None; called on every rank before any suite runs (None: it can always run).
    """

    name: str
    run: Callable[[Settings], Any]
    format: Callable[[Any, bool], str]
    to_json: Callable[[Any], Any]
    check: Callable[[Settings], str | None] | None = None


def _run_redistribution(settings: Settings) -> Any:
    from .redistribution import run_redistribution

    return run_redistribution(settings)


def _run_grad_sync(settings: Settings) -> Any:
    from .training import run_grad_sync

    return run_grad_sync(settings)


def _run_ddp(settings: Settings) -> Any:
    from .training import run_ddp

    return run_ddp(settings)


def _run_checkpoint(settings: Settings) -> Any:
    from .checkpoint import run_checkpoint_bench

    return run_checkpoint_bench(settings.checkpoint_bytes, settings.checkpoint_dir,
                                settings.checkpoint_repeat)


def _run_watchdog(settings: Settings) -> Any:
    from .watchdog import measure_watchdog_overhead

    # 8-byte calls take about a microsecond: 20 times the OSU batch (20000 calls by default).
    return measure_watchdog_overhead(8, iters=20 * settings.iters, rounds=settings.rounds,
                                     warmup=20 * settings.warmup)


def _run_meta_check(settings: Settings) -> Any:
    from .meta_check import run_meta_check

    return run_meta_check(settings)


def _format_meta_check(result: Any, markdown: bool) -> str:
    from .meta_check import format_meta_check

    return format_meta_check(result, markdown)


SUITE_RUNNERS: dict[str, Suite] = {s.name: s for s in (
    Suite("redistribution", _run_redistribution, format_redistribution,
          lambda rows: [r.to_json() for r in rows]),
    Suite("grad_sync", _run_grad_sync, format_grad_sync,
          lambda results: [r.to_json() for r in results]),
    Suite("ddp", _run_ddp, format_ddp, lambda result: result.to_json()),
    Suite("checkpoint", _run_checkpoint, format_checkpoint, dict),
    Suite("watchdog", _run_watchdog, format_watchdog, dict),
    Suite("to_global_check", _run_meta_check, _format_meta_check, dict),
)}


def _run_torch(settings: Settings) -> Any:
    from .torch_suite import run_torch

    return run_torch(settings)


def _format_torch(result: Any, markdown: bool) -> str:
    from .torch_report import format_torch

    return format_torch(result, markdown)


def _run_collective_check(settings: Settings) -> Any:
    from .collective_check import run_collective_check

    return run_collective_check(settings)


def _format_collective_check(result: Any, markdown: bool) -> str:
    from .collective_check import format_collective_check

    return format_collective_check(result, markdown)


def _check_torch(settings: Settings) -> str | None:
    from .torch_suite import torch_problem

    return torch_problem(settings)


def _run_engine(settings: Settings) -> Any:
    from .engine import run_engine

    return run_engine(settings)


def _format_engine(result: Any, markdown: bool) -> str:
    from .engine import format_engine

    return format_engine(result, markdown)


def _run_graph(settings: Settings) -> Any:
    from .graph import run_graph

    return run_graph(settings)


def _format_graph(result: Any, markdown: bool) -> str:
    from .graph import format_graph

    return format_graph(result, markdown)


def _run_science(settings: Settings) -> Any:
    from .science import run_science

    return run_science(settings)


def _format_science(result: Any, markdown: bool) -> str:
    from .science import format_science

    return format_science(result, markdown)


OPTIONAL_RUNNERS: dict[str, Suite] = {s.name: s for s in (
    Suite("torch", _run_torch, _format_torch, lambda result: result.to_json(), _check_torch),
    Suite("engine", _run_engine, _format_engine, lambda result: result.to_json()),
    Suite("graph", _run_graph, _format_graph, lambda result: result.to_json()),
    Suite("science", _run_science, _format_science, dict),
    Suite("collective_check", _run_collective_check, _format_collective_check, dict),
)}
OPTIONAL_SUITES = tuple(OPTIONAL_RUNNERS)
"""The suites that need an optional dependency: run when named, not with ``all``, last."""
ALL_RUNNERS: dict[str, Suite] = {**SUITE_RUNNERS, **OPTIONAL_RUNNERS}
"""Every suite beyond OSU's, by name."""


def expand_suites(names: Sequence[str]) -> tuple[str, ...]:
    """The suites to run, in :data:`.plan.SUITES` order then :data:`OPTIONAL_SUITES`, without
    repeats; ``all``: every one of :data:`.plan.SUITES`.

    Raises:
        ValueError: an unknown name.
    """
    order = (*SUITES, *OPTIONAL_SUITES)
    wanted: set[str] = set()
    for name in names:
        if name == "all":
            wanted.update(SUITES)
        elif name in order:
            wanted.add(name)
        else:
            raise ValueError(f"unknown suite {name!r}; choose from {', '.join(order)} or all")
    return tuple(s for s in order if s in wanted)


def run_suite(name: str, settings: Settings) -> Any:
    """Run the suite ``name`` (collective; not ``osu``, which :func:`.runner.run` runs)."""
    return ALL_RUNNERS[name].run(settings)
