"""The tables of ``--suite torch``: one per collective, the DDP step, summaries and goals.

Formatting only: :mod:`.torch_suite` measures, :mod:`.torch_results` holds the results.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from .metrics import LARGE_BYTES
from .plan import format_bytes
from .report import approx_bytes, format_grid
from .torch_results import (
    ALL_REDUCE_GOALS,
    GOAL_RANKS,
    DDPStepResult,
    GoalCheck,
    TorchOpResult,
    TorchResult,
    TorchRow,
    goal_checks,
)
from .torch_suite import ITEMSIZE, SIDES

__all__ = ["format_torch"]


def _heading(title: str, lines: Sequence[str], markdown: bool) -> list[str]:
    if markdown:
        return [f"### {title}", "", *lines, ""]
    return [f"== {title}", *(f"   {line}" for line in lines)]


def _goal_mark(row: TorchRow) -> str:
    if row.op != "all_reduce" or row.nranks != GOAL_RANKS:
        return ""
    goals = [g for g in ALL_REDUCE_GOALS if g.applies(row.size)]
    missed = [g for g in goals if row.vs_raw > g.max_ratio]
    if missed:
        return f"MISS (<= {missed[0].max_ratio:g})"
    return f"ok (<= {goals[0].max_ratio:g})" if goals else ""


_COLUMNS = ("size", "iters", "backend us", "GB/s", "raw us", "GB/s", "gloo us", "GB/s",
            "backend/raw", "gloo/backend", "goal")
_RIGHT = (*[True] * 10, False)


def _op_table(op: TorchOpResult, markdown: bool) -> list[str]:
    factor = f"{op.rows[0].factor:.2f}" if op.rows else "-"
    gloo_call = op.call.replace(")", ", group=gloo)")
    head = _heading(f"torch {op.name}", [
        f"backend `{op.call}` vs raw `{op.raw_call}` vs gloo `{gloo_call}`; GB/s: busbw = "
        f"size / time x {op.factor_formula} = x {factor}"], markdown)
    if not op.rows:
        return [*head, "skipped: needs 2 ranks"]
    cells = [[format_bytes(r.nbytes), str(r.iters),
              *(f"{v:.2f}" for s in SIDES for v in (r.time(s) * 1e6, r.busbw(s))),
              f"{r.vs_raw:.3f}", f"{r.gloo_vs_backend:.3f}", _goal_mark(r)] for r in op.rows]
    return [*head, *format_grid(_COLUMNS, cells, _RIGHT, markdown)]


_DDP_NAMES = {"backend": 'DistributedDataParallel(model) on the default group ("mpiflow")',
              "gloo": "DistributedDataParallel(model, process_group=gloo)",
              "local": "the model alone, no communication",
              "bound": "the model alone + raw Allreduce of each gradient (DDP's bound)",
              "reducer": "backend with a comm hook that communicates nothing (DDP's own cost)",
              "bucket_view": "backend with gradient_as_bucket_view=True",
              "overlap": "backend on a group in overlap mode (MPIFLOW_TORCH_OVERLAP=1)"}


def _ddp_table(r: DDPStepResult, markdown: bool) -> list[str]:
    t = r.timings
    head = _heading("torch ddp", [
        f"one training step (zero_grad, forward, MSE loss, backward, SGD step) of "
        f"Linear({r.features}, {r.width}), ReLU, Linear({r.width}, {r.features}) "
        f"({r.params:,} parameters, {approx_bytes(r.params * ITEMSIZE)}), batch {r.batch} "
        f"per rank, {r.nranks} rank(s), same weights and data on every side; {r.iters} steps "
        f"per batch"], markdown)
    cells = [[s, _DDP_NAMES[s], f"{t.time(s) * 1e3:.3f}", f"{t.ratio(s, 'local'):.3f}",
              f"{t.ratio(s, 'bound'):.3f}"] for s in t.sides]
    return [*head, *format_grid(["side", "what", "ms per step", "vs local", "vs bound"], cells,
                                [False, False, True, True, True], markdown)]


def _ddp_summary(d: DDPStepResult) -> str:
    t = d.timings
    text = (f"summary torch ddp: {t.time('backend') * 1e3:.3f} ms per step through the backend, "
            f"{t.time('gloo') * 1e3:.3f} ms through gloo (local {t.time('local') * 1e3:.3f} ms, "
            f"bound {t.time('bound') * 1e3:.3f} ms: local + raw all-reduces); gloo/backend = "
            f"{d.speedup:.3f}, backend/bound = {d.over_bound:.3f} (paired)")
    cost, floor = d.reducer_cost, d.over_floor
    if cost is not None and floor is not None:
        text += (f"; DDP's own cost (reducer - local) {cost * 1e3:.3f} ms, backend/(bound + "
                 f"DDP's own cost) = {floor:.3f}")
    return text


def _worst(rows: Sequence[TorchRow]) -> str:
    if not rows:
        return "-"
    worst = max(rows, key=lambda r: r.vs_raw)
    return f"{worst.vs_raw:.3f} at {format_bytes(worst.size)}"


def _verdict(check: GoalCheck, nranks: int) -> str:
    if check.value is None:
        return "not measured"
    where = f" at {check.where}" if check.where else ""
    if check.met is None:
        return f"{check.value:.3f}{where}, judged at {GOAL_RANKS} ranks (here {nranks})"
    return f"{check.value:.3f}{where} {'met' if check.met else 'MISSED'}"


def format_torch(result: TorchResult, markdown: bool = False) -> str:
    """The suite's tables (one per operation, then the DDP step) and its summary lines (in
    Markdown, the lines of text are list items, so that each stays a line)."""
    item = "- " if markdown else ""
    intro = _heading("torch", [item + line for line in (
        f"torch {result.torch_version}, {result.nranks} rank(s), float32 tensors: backend: the "
        "torch.distributed call on the default group (backend \"mpiflow\"); raw: raw mpi4py "
        "on the same tensors' memory (t.numpy()) on a Dup of COMM_WORLD; gloo: the same torch "
        "call with group=gloo, a gloo group over the same ranks",
        f"torch threads per rank: {result.threads} (torch.set_num_threads; OMP_NUM_THREADS="
        f"{os.environ.get('OMP_NUM_THREADS', 'unset')}), so that the ranks do not compete for "
        "cores",
        f"time: per batch the max over ranks of the per-rank average; the {result.stat} of "
        f"{result.rounds} rounds of two sides back to back, their order alternating: first "
        "backend and raw for every operation (backend us: from these), then backend and gloo "
        "(the DDP step: its sides in balanced orders); backend/raw and gloo/backend: paired, "
        "the median over the rounds of each round's ratio; gloo/backend > 1: the backend is "
        "faster than gloo",
    )], markdown)
    lines = list(intro)
    tables = [_op_table(op, markdown) for op in result.ops]
    if result.ddp is not None:
        tables.append(_ddp_table(result.ddp, markdown))
    for table in tables:
        if lines[-1]:
            lines.append("")
        lines += table
    lines.append("")
    small, large = f"< {format_bytes(LARGE_BYTES)}", f">= {format_bytes(LARGE_BYTES)}"
    for op in result.ops:
        if not op.rows:
            continue
        gloo = [r.gloo_vs_backend for r in op.rows]
        lines.append(
            f"{item}summary torch {op.name}: worst backend/raw {small} "
            f"{_worst([r for r in op.rows if r.size < LARGE_BYTES])}, {large} "
            f"{_worst([r for r in op.rows if r.size >= LARGE_BYTES])}; gloo/backend "
            f"{min(gloo):.2f}..{max(gloo):.2f}")
    if result.ddp is not None:
        lines.append(item + _ddp_summary(result.ddp))
    goals = "; ".join(f"{c.goal}: {_verdict(c, result.nranks)}" for c in goal_checks(result))
    lines.append(f"{item}goals (at {GOAL_RANKS} ranks): {goals}")
    return "\n".join(lines)
