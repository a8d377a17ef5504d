"""The command line of ``python -m mpiflow.bench``: options to :class:`Settings`, then the run.

Run it under the launcher, e.g. ``mpiexec -n 2 python -m mpiflow.bench --quick``; only rank 0
prints.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from collections.abc import Sequence

from ..communication.group import world_comm
from .cases import CASES, BenchCase, select
from .metrics import Row
from .plan import Settings, format_bytes, message_sizes, parse_bytes
from .report import format_header, format_summary, format_table, results_json
from .runner import describe_run, run

__all__ = ["DTYPES", "QUICK", "build_parser", "main", "settings_from_args"]

DTYPES = ("float32", "float64", "int32", "int64")
# --quick: four sizes (8 B, 1 KiB, 128 KiB, 1 MiB) and short batches, for a smoke run.
QUICK = {"min_bytes": 8, "max_bytes": 1 << 20, "factor": 128, "iters": 100, "warmup": 10,
         "rounds": 4, "min_iters": 3}
_FULL = {"min_bytes": 8, "max_bytes": 64 << 20, "factor": 2, "iters": 1000, "warmup": 100,
         "rounds": 16, "min_iters": 10}


def _byte_count(text: str) -> int:
    try:
        return parse_bytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; options left out take the full or the ``--quick`` defaults."""
    p = argparse.ArgumentParser(
        prog="python -m mpiflow.bench",
        description="OSU-style latency and bandwidth of mpiflow's collectives and send/recv, "
                    "each beside the same operation through raw mpi4py on the same buffers. "
                    "Run under mpiexec; rank 0 prints.")
    p.add_argument("--ops", nargs="+", metavar="OP",
                   help=f"cases to run, by name or comma-separated (default: all): "
                        f"{', '.join(CASES)}")
    p.add_argument("--min-bytes", type=_byte_count, metavar="N",
                   help=f"smallest size, e.g. 8 or 1K (default {_FULL['min_bytes']})")
    p.add_argument("--max-bytes", type=_byte_count, metavar="N",
                   help="largest size, e.g. 64MiB (default 64MiB; 1MiB with --quick)")
    p.add_argument("--factor", type=int, metavar="F",
                   help="ratio of consecutive sizes: 2 (default) or 4 for powers of 4")
    p.add_argument("--iters", type=int, metavar="N",
                   help=f"timed iterations per batch up to 64 KiB, then in proportion to "
                        f"1/size (default {_FULL['iters']})")
    p.add_argument("--min-iters", type=int, metavar="N",
                   help=f"least timed iterations per batch (default {_FULL['min_iters']})")
    p.add_argument("--warmup", type=int, metavar="N",
                   help=f"warm-up iterations per side, scaled as --iters "
                        f"(default {_FULL['warmup']})")
    p.add_argument("--rounds", type=int, metavar="N",
                   help=f"timed batches per side, mpiflow and raw alternating "
                        f"(default {_FULL['rounds']})")
    p.add_argument("--stat", choices=("min", "median"), default="min",
                   help="how a side's batches are summarized (default min)")
    p.add_argument("--dtype", choices=DTYPES, default="float32",
                   help="numpy dtype of the buffers (default float32)")
    p.add_argument("--device", choices=("cpu",), default="cpu",
                   help="where the buffers live (cpu only for now)")
    p.add_argument("--quick", action="store_true",
                   help="a short run: 8 B, 1 KiB, 128 KiB, 1 MiB with short batches")
    p.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    p.add_argument("--json", metavar="PATH", help="also write every result to PATH as JSON")
    return p


def _op_names(values: Sequence[str] | None) -> list[str] | None:
    if values is None:
        return None
    names = [n for v in values for n in v.split(",") if n]
    return None if names == ["all"] else names


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Turn parsed options into :class:`Settings`, filling in the full or quick defaults.

    Raises:
        ValueError: an unknown case, a bad size range, or a count out of range.
    """
    defaults = QUICK if args.quick else _FULL

    def pick(name: str) -> int:
        value = getattr(args, name)
        return int(defaults[name] if value is None else value)

    iters, warmup, rounds, min_iters = (pick(n) for n in ("iters", "warmup", "rounds",
                                                          "min_iters"))
    if iters < 1 or rounds < 1 or min_iters < 1 or warmup < 0:
        raise ValueError("--iters, --rounds and --min-iters must be >= 1, --warmup >= 0")
    sizes = message_sizes(pick("min_bytes"), pick("max_bytes"), pick("factor"))
    cases = select(_op_names(args.ops), args.device)
    return Settings(ops=tuple(c.name for c in cases), sizes=tuple(sizes), iters=iters,
                    warmup=warmup, rounds=rounds, stat=args.stat, dtype=args.dtype,
                    device=args.device, min_iters=min_iters)


def _parse(argv: Sequence[str] | None, quiet: bool) -> tuple[argparse.Namespace, Settings]:
    """Parse on every rank; only rank 0 (``quiet`` False) prints usage, help and errors."""
    parser = build_parser()
    with contextlib.ExitStack() as stack:
        if quiet:
            sink = io.StringIO()
            stack.enter_context(contextlib.redirect_stdout(sink))
            stack.enter_context(contextlib.redirect_stderr(sink))
        args = parser.parse_args(argv)
        try:
            settings = settings_from_args(args)
        except ValueError as exc:
            parser.error(str(exc))
    return args, settings


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark (collective: every rank calls it with the same arguments).

    Returns:
        The exit status, 0.
    """
    rank = world_comm.rank
    args, settings = _parse(argv, quiet=rank != 0)
    markdown = bool(args.markdown)
    meta = describe_run(settings)

    def say(text: str) -> None:
        if rank == 0:
            print(text, flush=True)

    say(format_header(meta, markdown))
    say(f"{'- ' if markdown else '# '}sizes: {', '.join(format_bytes(s) for s in settings.sizes)}")

    def on_case(case: BenchCase, rows: Sequence[Row]) -> None:
        say("")
        say(format_table(case.name, case.mpiflow_call, case.raw_call, case.bus_factor.formula,
                         rows, markdown))

    results = run(settings, on_case)
    say("")
    if markdown:
        say("### Summary\n")
    say(format_summary(results, markdown))
    if rank == 0 and args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results_json(meta, results), f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
