"""Writing the results: plain-text or Markdown tables, summary lines, and JSON (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .metrics import GOALS, LARGE_BYTES, GoalCheck, Row, Summary, summarize
from .plan import format_bytes

if TYPE_CHECKING:
    from .redistribution import RedistRow
    from .training import DDPResult, GradSyncResult

__all__ = [
    "approx_bytes",
    "format_checkpoint",
    "format_count",
    "format_ddp",
    "format_grad_sync",
    "format_grid",
    "format_header",
    "format_redistribution",
    "format_summary",
    "format_table",
    "format_watchdog",
    "results_json",
    "table_rows",
]

_COLUMNS = ("size", "iters", "mpiflow us", "algbw", "busbw", "raw us", "algbw", "busbw",
            "ratio", "goal")
_RIGHT = (True, True, True, True, True, True, True, True, True, False, False)


def _goal_mark(row: Row) -> str:
    """``ok`` or ``MISS`` for the goals covering the row's size; empty when none does."""
    goals = [g for g in GOALS if g.applies(row.size)]
    if not goals:
        return ""
    missed = [g for g in goals if row.ratio > g.max_ratio]
    return f"MISS (<= {missed[0].max_ratio:g})" if missed else "ok"


def table_rows(rows: Sequence[Row]) -> list[list[str]]:
    """The cells of a case's table, one list of strings per size.

    Times are in microseconds, bandwidths in GB/s (10**9 bytes per second). A case that times
    two raw forms (``all_reduce_best``) gets a last cell: the faster form, the raw side.
    """
    out = []
    for r in rows:
        out.append([
            format_bytes(r.nbytes), str(r.iters),
            f"{r.mpiflow_time * 1e6:.2f}", f"{r.algbw('mpiflow'):.2f}",
            f"{r.busbw('mpiflow'):.2f}",
            f"{r.raw_time * 1e6:.2f}", f"{r.algbw('raw'):.2f}", f"{r.busbw('raw'):.2f}",
            f"{r.ratio:.3f}", _goal_mark(r), *([r.raw_form] if r.raw_form else []),
        ])
    return out


def _plain(cells: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = []
    for row in cells:
        parts = [c.rjust(w) if right else c.ljust(w)
                 for c, w, right in zip(row, widths, _RIGHT, strict=False)]
        lines.append("  ".join(parts).rstrip())
    return lines


def _markdown(cells: Sequence[Sequence[str]]) -> list[str]:
    rule = ["---:" if right else ":---" for right in _RIGHT[:len(cells[0])]]
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
    forms = ["raw form"] if any(r.raw_form for r in rows) else []
    cells = [[*_COLUMNS, *forms], *table_rows(rows)]
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
                "busbw_GBps": row.busbw("raw"), "batches_us": [t * 1e6 for t in row.raw_s],
                **({"form": row.raw_form,
                    "other_form_batches_us": [t * 1e6 for t in row.other_raw_s]}
                   if row.raw_form else {})},
    }


def results_json(meta: Mapping[str, Any], results: Mapping[str, Sequence[Row]],
                 suites: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Everything about a run as JSON-ready data: the header, every row and the summaries.

    Args:
        meta: what the run ran on (:func:`.runner.describe_run`).
        results: the OSU rows by case name.
        suites: the other suites' JSON-ready results by suite name (a ``"suites"`` key).
    """
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
    out = {
        "meta": dict(meta),
        "results": {op: [_row_json(r) for r in rows] for op, rows in results.items()},
        "summary": summary,
    }
    if suites:
        out["suites"] = dict(suites)
    return out


# -- the suites beyond OSU's ------------------------------------------------------------------

def approx_bytes(nbytes: int) -> str:
    """A byte count in its largest unit: exact when whole (``1 MiB``), else to 3 decimals
    (``1.005 MiB``, ``32.031 MiB``)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            if nbytes % scale == 0:
                return f"{nbytes // scale} {unit}"
            return f"{nbytes / scale:.3f} {unit}"
    return f"{nbytes} B"


def format_count(n: int) -> str:
    """An element count compactly: ``256``, ``1Ki``, ``64Ki``, ``1Mi``, ``1000`` (exact only)."""
    for unit, scale in (("Mi", 1 << 20), ("Ki", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def format_grid(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool],
                markdown: bool = False) -> list[str]:
    """A table's lines: plain text, columns aligned, or Markdown.

    Args:
        header: the column titles.
        rows: the cells, one list of strings per row.
        right: per column, whether it is right-aligned.
        markdown: write a Markdown table.
    """
    cells = [list(header), *[list(r) for r in rows]]
    if markdown:
        rule = ["---:" if r else ":---" for r in right]
        return ["| " + " | ".join(row) + " |" for row in (cells[0], rule, *cells[1:])]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return ["  ".join(c.rjust(w) if r else c.ljust(w)
                      for c, w, r in zip(row, widths, right, strict=True)).rstrip()
            for row in cells]


def section_heading(title: str, lines: Sequence[str], markdown: bool) -> list[str]:
    if markdown:
        return [f"### {title}", "", *lines, ""]
    return [f"== {title}", *(f"   {line}" for line in lines)]


def _ops(collectives: Sequence[tuple[str, int]]) -> str:
    return ", ".join(f"{name} x{n}" for name, n in collectives) or "none"


def format_redistribution(rows: Sequence[RedistRow], markdown: bool = False) -> str:
    """The redistribution table: per conversion and shape, mpiflow, raw, ratio, collectives."""
    nranks = rows[0].nranks if rows else 0
    head = section_heading("redistribution", [
        f"mpiflow `x.to_global(sbp=dst)` on a float32 global tensor of a 1-D placement of "
        f"{nranks} rank(s) vs the one raw mpi4py collective doing the same job on buffers "
        "allocated once; size: the whole tensor; GB/s: size / time; ratio: mpiflow / raw "
        "(paired); collectives: what one mpiflow conversion issued (count_collectives)"],
        markdown)
    header = ["conversion", "shape", "size", "iters", "mpiflow us", "GB/s", "raw call",
              "raw us", "GB/s", "ratio", "mpiflow collectives"]
    right = [False, False, True, True, True, True, False, True, True, True, False]
    cells = [[r.conversion, f"{r.shape[0]}x{r.shape[1]}", approx_bytes(r.nbytes), str(r.iters),
              f"{r.timings.time('mpiflow') * 1e6:.1f}", f"{r.gbps('mpiflow'):.2f}", r.raw_call,
              f"{r.timings.time('raw') * 1e6:.1f}", f"{r.gbps('raw'):.2f}", f"{r.ratio:.3f}",
              _ops(r.collectives)] for r in rows]
    lines = [*head, *format_grid(header, cells, right, markdown)]
    if rows:
        worst = max(rows, key=lambda r: r.ratio)
        single = all(r.collective_count == 1 for r in rows)
        lines += ["",
                  f"summary redistribution: worst mpiflow/raw {worst.ratio:.3f} "
                  f"({worst.conversion} {worst.shape[0]}x{worst.shape[1]}); one collective per "
                  f"conversion: {'yes' if single else 'NO'}"]
    return "\n".join(lines).rstrip()


_GRAD_NAMES = {"packed": "dist.sync_gradients(model, average=False)",
               "bucket_view": "dist.sync_gradients(DDP(model), average=False)",
               "fused_small": "the tensors below {fuse} packed as sync_gradients packs them, the "
                              "others all-reduced in place",
               "per_tensor": "dist.all_reduce(p.grad) per parameter",
               "raw_per_tensor": "comm.Allreduce(IN_PLACE, g, SUM) per parameter",
               "raw_chunked": "comm.Allreduce(IN_PLACE, piece, SUM) over the one buffer all "
                              "gradients are views of, {chunk} at a time"}


def _goal_text(result: GradSyncResult) -> str:
    met = result.goal_met
    if met is None:
        return "n/a" if not result.goal_text() else f"judged at 4 ranks (here {result.nranks})"
    return "met" if met else "MISSED"


def format_grad_sync(results: Sequence[GradSyncResult], markdown: bool = False) -> str:
    """The gradient-sync table: per model, the sides' times and the packed speedups."""
    from .training import GRAD_SMALL_GOAL, GRAD_SYNC_GOAL

    nranks = results[0].nranks if results else 0
    fuse = approx_bytes(results[0].fuse_bytes if results else 256 << 10)
    chunk = approx_bytes(results[0].chunk_bytes if results else 16 << 20)
    head = section_heading("grad_sync", [
        f"summing the float32 gradients of a model over {nranks} rank(s): "
        + "; ".join(f"{k}: {v.format(fuse=fuse, chunk=chunk)}" if "{" in v else f"{k}: `{v}`"
                    for k, v in _GRAD_NAMES.items())
        + "; speedup: per_tensor time / packed (or bucket_view, fused_small) time, paired by "
          "round; view/raw: bucket_view time / raw_chunked time, paired (bucket_view's "
          "gradients are views of DDP's flat buckets); bound: per_tensor / raw_chunked, about "
          "the most any packing can gain here; goals at 4 ranks: bucket_view <= "
          f"{GRAD_SYNC_GOAL:g}x raw_chunked for 100 tensors of 1 Ki..1 Mi elements, and >= "
          f"{GRAD_SMALL_GOAL:g}x faster than per_tensor for 100 tensors of 256..4 Ki elements"],
        markdown)
    header = ["model", "total", "iters", "packed ms", "bucket_view ms", "fused_small ms",
              "per_tensor ms", "raw_per_tensor ms", "raw_chunked ms", "speedup packed",
              "speedup bucket_view", "speedup fused_small", "speedup packed vs raw",
              "view/raw", "bound", "calls packed/view/fused/per_tensor", "goal"]
    right = [False, *[True] * (len(header) - 2), False]
    cells = []
    for r in results:
        t = r.timings
        cells.append([f"{r.tensors} tensors, {format_count(r.lo)}..{format_count(r.hi)} elements",
                      approx_bytes(r.nbytes), str(r.iters),
                      *(f"{t.time(s) * 1e3:.3f}" for s in t.sides),
                      f"{r.speedup:.2f}x", f"{r.view_speedup:.2f}x", f"{r.fused_speedup:.2f}x",
                      f"{r.raw_speedup:.2f}x", f"{r.view_over_bound:.2f}x", f"{r.bound:.2f}x",
                      f"{r.calls('packed')}/{r.calls('bucket_view')}/"
                      f"{r.calls('fused_small')}/{r.calls('per_tensor')}",
                      _goal_text(r)])
    lines = [*head, *format_grid(header, cells, right, markdown)]
    for r in results:
        if r.goal_text():
            lines += ["", f"summary grad_sync ({format_count(r.lo)}..{format_count(r.hi)}): "
                          f"bucket_view {r.view_over_bound:.2f}x raw_chunked, "
                          f"{r.view_speedup:.2f}x as fast as per-parameter all_reduce at "
                          f"{r.nranks} rank(s) (packed: {r.speedup:.2f}x; bound {r.bound:.2f}x); "
                          f"goal {r.goal_text()} at 4 ranks: {_goal_text(r)}"]
    return "\n".join(lines)


_DDP_NAMES = {"ddp": "DistributedDataParallel, buckets all-reduced during backward",
              "ddp_copy": "the same, gradient_as_bucket_view=False (gradients copied into the "
                          "buckets and back)",
              "ddp_one_bucket": "DistributedDataParallel, one bucket (all-reduced after "
                                "backward: no overlap)",
              "sync_after": "no DDP: backward, then dist.sync_gradients(model)",
              "local": "no communication (the same step on one rank's data)"}


def format_ddp(result: DDPResult, markdown: bool = False) -> str:
    """The DDP table: one training step five ways, and what the overlap gains."""
    r, t = result, result.timings
    head = section_heading("ddp", [
        f"one training step (zero_grad, forward, backward, SGD step) of {r.layers} x "
        f"Linear({r.width}, {r.width}) with ReLU between, batch {r.batch} per rank, "
        f"{r.nranks} rank(s); parameters {approx_bytes(r.param_bytes)}; the ddp side has "
        f"bucket_size_mb={r.bucket_mb:g} ({r.buckets} bucket(s)); {r.iters} steps per batch"],
        markdown)
    header = ["side", "what", "ms per step", "vs local"]
    right = [False, False, True, True]
    cells = [[s, _DDP_NAMES.get(s, s), f"{t.time(s) * 1e3:.2f}", f"{t.ratio(s, 'local'):.3f}"]
             for s in t.sides]
    hidden = r.hidden_fraction
    lines = [*head, *format_grid(header, cells, right, markdown), "",
             f"summary ddp: communication without overlap {r.comm_exposed * 1e3:.2f} ms per step "
             f"(ddp_one_bucket - local); overlap saves {r.overlap_saved * 1e3:.2f} ms"
             + ("" if hidden is None else f" ({100 * hidden:.0f}% of it)")
             + f"; ddp_one_bucket / ddp = {r.overlap_speedup:.3f}, ddp_copy / ddp = "
               f"{r.view_speedup:.3f} (paired)"]
    return "\n".join(lines)


def format_checkpoint(result: Mapping[str, Any], markdown: bool = False) -> str:
    """The checkpoint table (a :func:`.checkpoint.run_checkpoint_bench` result)."""
    head = section_heading("checkpoint", [
        f"a float32 tensor of {approx_bytes(result['bytes'])} split by rows over "
        f"{result['ranks']} rank(s): mpiflow.io.save/load (parallel) vs rank 0 gathering it "
        "and calling numpy.save (then numpy.load and a scatter); files fsynced; best of the "
        "timed runs, slowest rank"], markdown)
    names = {"parallel_save": "mpiflow.io.save", "gather_save": "gather + numpy.save",
             "parallel_load": "mpiflow.io.load", "load_scatter": "numpy.load + scatter"}
    cells = [[side, names.get(side, side), f"{seconds:.4f}", f"{result['GBps'][side]:.3f}"]
             for side, seconds in result["seconds"].items()]
    lines = [*head, *format_grid(["side", "what", "seconds", "GB/s"], cells,
                                 [False, False, True, True], markdown), "",
             f"summary checkpoint: parallel / gathered: save x{result['speedup']['save']:.2f}, "
             f"load x{result['speedup']['load']:.2f}"]
    return "\n".join(lines)


def format_watchdog(result: Mapping[str, Any], markdown: bool = False) -> str:
    """The watchdog table (a :func:`.watchdog.measure_watchdog_overhead` result)."""
    head = section_heading("watchdog", [
        f"all_reduce of {result['bytes']} B on {result['ranks']} rank(s): raw mpi4py, "
        "mpiflow with the collective watchdog on and off; best of "
        f"{result['rounds']} rounds of {result['iters']} calls, slowest rank"], markdown)
    cells = [["raw", "comm.Allreduce(IN_PLACE, buf, SUM)", f"{result['raw_us']:.3f}", "1.000"],
             ["on", "dist.all_reduce(buf), watchdog on", f"{result['on_us']:.3f}",
              f"{result['on_vs_raw']:.3f}"],
             ["off", "dist.all_reduce(buf), watchdog off", f"{result['off_us']:.3f}",
              f"{result['off_vs_raw']:.3f}"]]
    from .watchdog import GOAL

    met = "met" if result["goal_met"] else "MISSED"
    # Newer versions of measure_watchdog_overhead also give the paired (per-round) overhead,
    # on which they judge the goal; older ones only the ratio of the best rounds.
    paired = result.get("paired_overhead")
    overhead = (f"paired {100 * paired:+.1f}% (best rounds {100 * result['overhead']:+.1f}%)"
                if paired is not None else f"{100 * result['overhead']:+.1f}%")
    lines = [*head, *format_grid(["side", "what", "us", "vs raw"], cells,
                                 [False, False, True, True], markdown), "",
             f"summary watchdog: overhead on/off - 1 = {overhead}; "
             f"goal <= {100 * GOAL:g}% at 8 B on 2 ranks: {met}"]
    return "\n".join(lines)
