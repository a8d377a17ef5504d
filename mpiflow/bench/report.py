"""Writing the results: plain-text or Markdown tables, summary lines, and JSON (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .metrics import GOALS, LARGE_BYTES, GoalCheck, Row, Summary, summarize
from .plan import format_bytes

__all__ = ["format_header", "format_summary", "format_table", "results_json", "table_rows"]

_COLUMNS = ("size", "iters", "mpiflow us", "algbw", "busbw", "raw us", "algbw", "busbw",
            "ratio", "goal")
_RIGHT = (True, True, True, True, True, True, True, True, True, False)


def _goal_mark(row: Row) -> str:
    """``ok`` or ``MISS`` for the goals covering the row's size; empty when none does."""
    goals = [g for g in GOALS if g.applies(row.size)]
    if not goals:
        return ""
    missed = [g for g in goals if row.ratio > g.max_ratio]
    return f"MISS (<= {missed[0].max_ratio:g})" if missed else "ok"


def table_rows(rows: Sequence[Row]) -> list[list[str]]:
    """The cells of a case's table, one list of strings per size.

    Times are in microseconds, bandwidths in GB/s (10**9 bytes per second).
    """
    out = []
    for r in rows:
        out.append([
            format_bytes(r.nbytes), str(r.iters),
            f"{r.mpiflow_time * 1e6:.2f}", f"{r.algbw('mpiflow'):.2f}",
            f"{r.busbw('mpiflow'):.2f}",
            f"{r.raw_time * 1e6:.2f}", f"{r.algbw('raw'):.2f}", f"{r.busbw('raw'):.2f}",
            f"{r.ratio:.3f}", _goal_mark(r),
        ])
    return out


def _plain(cells: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in cells) for i in range(len(_COLUMNS))]
    lines = []
    for row in cells:
        parts = [c.rjust(w) if right else c.ljust(w)
                 for c, w, right in zip(row, widths, _RIGHT, strict=True)]
        lines.append("  ".join(parts).rstrip())
    return lines


def _markdown(cells: Sequence[Sequence[str]]) -> list[str]:
    rule = ["---:" if right else ":---" for right in _RIGHT]
    return ["| " + " | ".join(row) + " |" for row in (cells[0], rule, *cells[1:])]


def format_table(title: str, mpiflow_call: str, raw_call: str, factor_formula: str,
                 rows: Sequence[Row], markdown: bool = False) -> str:
    """One case's table, with a heading naming both calls and the bus factor.

    Args:
        title: the case's name.
        mpiflow_call: the mpiflow call timed.
        raw_call: the raw mpi4py call timed.
        factor_formula: the bus factor as a formula of ``n``.
        rows: the results, one per size (empty: the case was skipped).
        markdown: write a Markdown heading and table instead of plain text.

    Returns:
        The text, without a trailing newline.
    """
    factor = f"{rows[0].factor:.2f}" if rows else "-"
    if markdown:
        head = [f"### {title}", "",
                f"mpiflow `{mpiflow_call}` vs raw `{raw_call}`; "
                f"busbw = algbw x {factor_formula} = algbw x {factor}", ""]
    else:
        head = [f"== {title}: mpiflow {mpiflow_call}  vs  raw {raw_call}",
                f"   busbw factor {factor_formula} = {factor}"]
    if not rows:
        return "\n".join([*head, "skipped: needs more ranks"])
    cells = [list(_COLUMNS), *table_rows(rows)]
    body = _markdown(cells) if markdown else _plain(cells)
    return "\n".join([*head, *body])


def _at(row: Row | None) -> str:
    return "-" if row is None else f"{row.ratio:.3f} at {format_bytes(row.size)}"


def _check(check: GoalCheck) -> str:
    verdict = {True: "met", False: "MISSED", None: "not measured"}[check.met]
    worst = "" if check.worst is None else f"{check.worst.ratio:.3f} "
    return f"{worst}{verdict}"


def format_summary(results: Mapping[str, Sequence[Row]], markdown: bool = False) -> str:
    """The final lines: per case, its worst ratio at small and at large sizes, and its goals.

    Args:
        results: the rows by case name.
        markdown: write a Markdown table instead of one line per case.

    Returns:
        The text, without a trailing newline.
    """
    summaries: list[Summary] = [summarize(op, rows) for op, rows in results.items()]
    small, large = f"< {format_bytes(LARGE_BYTES)}", f">= {format_bytes(LARGE_BYTES)}"
    if markdown:
        head = ["| op | worst ratio " + small + " | worst ratio " + large + " | "
                + " | ".join(f"goal {g.label}: <= {g.max_ratio:g}" for g in GOALS) + " |",
                "|" + " :--- |" * (3 + len(GOALS))]
        body = [f"| {s.op} | {_at(s.small)} | {_at(s.large)} | "
                + " | ".join(_check(c) for c in s.goals) + " |" for s in summaries]
        return "\n".join(head + body)
    lines = []
    for s in summaries:
        goals = "; ".join(f"{c.goal.label} <= {c.goal.max_ratio:g}: {_check(c)}"
                          for c in s.goals)
        lines.append(f"summary {s.op}: worst mpiflow/raw {small} {_at(s.small)}, "
                     f"{large} {_at(s.large)}; goals: {goals}")
    return "\n".join(lines)


def format_header(meta: Mapping[str, Any], markdown: bool = False) -> str:
    """The lines that say what was run on and how it was timed."""
    lines = [
        f"mpiflow.bench: mpiflow {meta['mpiflow']} vs raw mpi4py {meta['mpi4py']} on "
        f"{meta['mpi_library']}; {meta['ranks']} rank(s), {meta['dtype']} on {meta['device']}",
        f"time: per batch the max over ranks of the per-rank average; the {meta['stat']} of "
        f"{meta['rounds']} rounds, a round timing both sides back to back at every size",
        f"iterations: {meta['iters']} per batch up to {format_bytes(meta['knee_bytes'])}, then "
        f"in proportion to 1/size (at least {meta['min_iters']}); warm-up {meta['warmup']}",
        "us: microseconds per operation; algbw, busbw: GB/s; ratio: mpiflow time / raw time, "
        "paired: the median over the rounds of each round's ratio",
    ]
    if markdown:
        return "\n".join(f"- {line}" for line in lines)
    return "\n".join(f"# {line}" for line in lines)


def _row_json(row: Row) -> dict[str, Any]:
    return {
        "size": row.size, "nbytes": row.nbytes, "iters": row.iters, "warmup": row.warmup,
        "ratio": row.ratio, "time_ratio": row.time_ratio,
        "mpiflow": {"time_us": row.mpiflow_time * 1e6, "algbw_GBps": row.algbw("mpiflow"),
                    "busbw_GBps": row.busbw("mpiflow"),
                    "batches_us": [t * 1e6 for t in row.mpiflow_s]},
        "raw": {"time_us": row.raw_time * 1e6, "algbw_GBps": row.algbw("raw"),
                "busbw_GBps": row.busbw("raw"), "batches_us": [t * 1e6 for t in row.raw_s]},
    }


def results_json(meta: Mapping[str, Any], results: Mapping[str, Sequence[Row]]
                 ) -> dict[str, Any]:
    """Everything about a run as JSON-ready data: the header, every row and the summaries."""
    summary = {}
    for op, rows in results.items():
        s = summarize(op, rows)
        summary[op] = {
            "worst_small": None if s.small is None else {"size": s.small.size,
                                                         "ratio": s.small.ratio},
            "worst_large": None if s.large is None else {"size": s.large.size,
                                                         "ratio": s.large.ratio},
            "goals": [{"sizes": c.goal.label, "max_ratio": c.goal.max_ratio,
                       "worst_ratio": None if c.worst is None else c.worst.ratio,
                       "met": c.met} for c in s.goals],
        }
    return {
        "meta": dict(meta),
        "results": {op: [_row_json(r) for r in rows] for op, rows in results.items()},
        "summary": summary,
    }
