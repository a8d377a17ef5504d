"""The command line of ``python -m mpiflow.bench``: options to :class:`Settings`, then the run.

Run it under the launcher, e.g. ``mpiexec -n 2 python -m mpiflow.bench --quick``; only rank 0
prints. ``--suite`` picks the tables: ``osu`` (the default: the cases of :mod:`.cases`, picked
with ``--ops``), ``redistribution``, ``grad_sync``, ``ddp``, ``checkpoint``, ``watchdog``, or
``all`` (see :mod:`.suites`), ``torch`` (the torch.distributed backend beside raw mpi4py and
gloo, :mod:`.torch_suite`; needs PyTorch, not part of ``all``), and ``engine`` (per-op overhead,
training steps and memory beside numpy and PyTorch, :mod:`.engine`; not part of ``all``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from collections.abc import Sequence
from typing import Any

from ..communication.mpi.group import world_comm
from ..core.extras import install_hint
from ..cuda import CudaUnavailableError
from .cases import BenchCase, select
from .metrics import Row
from .plan import (
    CHECKPOINT_BYTES,
    GRAD_RANGES,
    GRAD_TENSORS,
    REDIST_SIZES,
    SUITES,
    Settings,
    format_bytes,
    message_sizes,
    parse_bytes,
    parse_range,
)
from .report import format_header, format_summary, format_table, results_json
from .runner import describe_run, make_context, run
from .suites import ALL_RUNNERS, OPTIONAL_SUITES, expand_suites
from .torch_suite import TORCH_OPS, torch_settings

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


def _element_range(text: str) -> tuple[int, int]:
    try:
        return parse_range(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _names(values: Sequence[str] | None) -> list[str] | None:
    """Names given as separate words and/or comma-separated."""
    return None if values is None else [n for v in values for n in v.split(",") if n]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; options left out take the full or the ``--quick`` defaults."""
    p = argparse.ArgumentParser(
        prog="python -m mpiflow.bench",
        description="mpiflow beside the raw alternative, timed in the same run: OSU-style "
                    "latency and bandwidth of the collectives and send/recv against raw mpi4py "
                    "(suite osu), global tensor redistribution against the one raw collective, "
                    "packed gradient sync against one all-reduce per parameter, the DDP step "
                    "with and without overlap, parallel checkpoints against rank-0 numpy, the "
                    "collective watchdog on and off. Run under mpiexec; rank 0 prints.")
    p.add_argument("--suite", nargs="+", metavar="NAME",
                   help=f"tables to produce, by name or comma-separated, in this order: "
                        f"{', '.join(SUITES)}, or all (default: osu); then "
                        f"{', '.join(OPTIONAL_SUITES)} (not part of all; torch needs PyTorch, "
                        f"engine compares with it where present)")
    cpu = ", ".join(c.name for c in select(device="cpu"))
    p.add_argument("--ops", nargs="+", metavar="OP",
                   help=f"osu cases to run, by name or comma-separated (default: all of the "
                        f"device's): {cpu}; with --device cuda: cuda_<op> and nccl_<op>")
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
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="where the osu cases' buffers live: cpu (numpy) or cuda (CuPy; the "
                        "other suites run on cpu only)")
    p.add_argument("--quick", action="store_true",
                   help="a short run: osu at 8 B, 1 KiB, 128 KiB, 1 MiB; short batches and 4 "
                        "rounds for every suite")
    p.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    p.add_argument("--json", metavar="PATH", help="also write every result to PATH as JSON")
    p.add_argument("--plot", metavar="PATH",
                   help="also draw bandwidth against size, mpiflow and raw, one subplot per "
                        "operation measured (osu, redistribution), into the PNG file PATH "
                        "(needs matplotlib)")
    g = p.add_argument_group("redistribution")
    g.add_argument("--redist-sizes", nargs="+", type=_byte_count, metavar="N",
                   help=f"tensor sizes (default "
                        f"{' '.join(format_bytes(n).replace(' ', '') for n in REDIST_SIZES)}); "
                        "each also in an uneven shape")
    g = p.add_argument_group("grad_sync")
    g.add_argument("--grad-tensors", type=int, default=GRAD_TENSORS, metavar="N",
                   help=f"parameter tensors per model (default {GRAD_TENSORS})")
    g.add_argument("--grad-range", nargs="+", type=_element_range, metavar="LO:HI",
                   help="per model, its smallest and largest tensor in float32 elements, "
                        "log-spaced between (K = 1024; default "
                        + " ".join(f"{_k(lo)}:{_k(hi)}" for lo, hi in GRAD_RANGES) + ")")
    g.add_argument("--grad-fuse", type=_byte_count, default=256 << 10, metavar="N",
                   help="the fused_small side packs the tensors smaller than N bytes and "
                        "all-reduces the others in place (default 256KiB)")
    g.add_argument("--grad-chunk", type=_byte_count, default=16 << 20, metavar="N",
                   help="the raw_chunked side all-reduces the flat gradient buffer in pieces "
                        "of N bytes (default 16MiB)")
    g = p.add_argument_group("ddp")
    g.add_argument("--ddp-layers", type=int, default=8, metavar="N",
                   help="Linear layers (default 8)")
    g.add_argument("--ddp-width", type=int, default=1024, metavar="N",
                   help="their features (default 1024)")
    g.add_argument("--ddp-batch", type=int, default=32, metavar="N",
                   help="rows per rank per step (default 32)")
    g.add_argument("--ddp-bucket-mb", type=float, default=25.0, metavar="MB",
                   help="bucket size of the overlapped side (default 25, DDP's own)")
    g = p.add_argument_group("checkpoint")
    g.add_argument("--checkpoint-size", type=_byte_count, default=CHECKPOINT_BYTES, metavar="N",
                   help="the tensor's size (default 256MiB)")
    g.add_argument("--checkpoint-dir", metavar="PATH",
                   help="where to write, the same path on every rank (default: a temporary "
                        "directory on rank 0's disk, removed afterwards)")
    g.add_argument("--checkpoint-repeat", type=int, default=3, metavar="N",
                   help="timed runs per side, the best kept (default 3)")
    g = p.add_argument_group("torch")
    g.add_argument("--torch-ops", nargs="+", metavar="OP",
                   help=f"what the torch suite runs, by name or comma-separated (default: all): "
                        f"{', '.join(TORCH_OPS)}, ddp")
    g.add_argument("--torch-ddp-features", type=int, default=512, metavar="N",
                   help="input and output features of the DDP step's MLP (default 512)")
    g.add_argument("--torch-ddp-width", type=int, default=1024, metavar="N",
                   help="its hidden features (default 1024: with 512, about 1M parameters)")
    g.add_argument("--torch-ddp-batch", type=int, default=32, metavar="N",
                   help="rows per rank per DDP step (default 32)")
    g.add_argument("--torch-threads", type=int, default=1, metavar="N",
                   help="torch's intra-op threads per rank (default 1, so that the ranks do "
                        "not compete for cores)")
    return p


def _k(n: int) -> str:
    """An element count as the options read it: ``256``, ``1K``, ``1M``."""
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def _op_names(values: Sequence[str] | None) -> list[str] | None:
    names = _names(values)
    return None if names == ["all"] else names


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Turn parsed options into :class:`Settings`, filling in the full or quick defaults.

    Raises:
        ValueError: an unknown case or torch operation, a bad size range, or a count out of
            range.
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
    suites = expand_suites(_names(args.suite) or ["osu"])
    if args.ops is not None and "osu" not in suites:
        raise ValueError("--ops picks cases of the osu suite; add osu to --suite")
    if args.torch_ops is not None and "torch" not in suites:
        raise ValueError("--torch-ops picks operations of the torch suite; add torch to --suite")
    cases = select(_op_names(args.ops), args.device) if "osu" in suites else []
    if args.device != "cpu" and suites != ("osu",):
        raise ValueError(f"--device {args.device} runs the osu suite only (not "
                         f"{', '.join(s for s in suites if s != 'osu')})")
    counts = {"--grad-tensors": args.grad_tensors, "--ddp-layers": args.ddp_layers,
              "--ddp-width": args.ddp_width, "--ddp-batch": args.ddp_batch,
              "--checkpoint-repeat": args.checkpoint_repeat}
    amounts = {"--ddp-bucket-mb": args.ddp_bucket_mb, "--grad-fuse": args.grad_fuse,
               "--grad-chunk": args.grad_chunk,
               "--checkpoint-size": args.checkpoint_size}
    bad = [name for name, value in {**counts, **amounts}.items() if value <= 0]
    if bad:
        raise ValueError(f"{', '.join(bad)} must be positive")
    settings = Settings(ops=tuple(c.name for c in cases), sizes=tuple(sizes), iters=iters,
                        warmup=warmup, rounds=rounds, stat=args.stat, dtype=args.dtype,
                        device=args.device, min_iters=min_iters, suites=suites,
                        redist_sizes=tuple(args.redist_sizes or REDIST_SIZES),
                        grad_tensors=args.grad_tensors,
                        grad_ranges=tuple(args.grad_range or GRAD_RANGES),
                        grad_fuse_bytes=args.grad_fuse, grad_chunk_bytes=args.grad_chunk,
                        ddp_layers=args.ddp_layers, ddp_width=args.ddp_width,
                        ddp_batch=args.ddp_batch, ddp_bucket_mb=args.ddp_bucket_mb,
                        checkpoint_bytes=args.checkpoint_size, checkpoint_dir=args.checkpoint_dir,
                        checkpoint_repeat=args.checkpoint_repeat)
    if "torch" not in suites:
        return settings
    return torch_settings(settings, _op_names(args.torch_ops),
                          torch_ddp_features=args.torch_ddp_features,
                          torch_ddp_width=args.torch_ddp_width,
                          torch_ddp_batch=args.torch_ddp_batch,
                          torch_threads=args.torch_threads)


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
        The exit status: 0, or 2 when ``--device cuda`` finds no CuPy or no CUDA device,
        ``--suite torch`` no PyTorch, or ``--plot`` no matplotlib (before anything runs; rank 0
        says why on stderr).
    """
    rank = world_comm.rank
    args, settings = _parse(argv, quiet=rank != 0)
    markdown = bool(args.markdown)

    def fail(message: str) -> int:
        if rank == 0:
            print(f"python -m mpiflow.bench: error: {message}", file=sys.stderr, flush=True)
        return 2

    # Decided together, so that no rank goes on alone into a collective.
    comm = world_comm.mpi_comm
    problem = None
    if "osu" in settings.suites:
        try:
            make_context(settings.dtype, settings.device)
        except CudaUnavailableError as exc:
            problem = f"--device cuda: CUDA is unavailable: {exc}"
    for name in settings.suites:
        check = None if name == "osu" else ALL_RUNNERS[name].check
        if problem is None and check is not None:
            problem = check(settings)  # e.g. --suite torch without PyTorch
    problems = comm.allgather(problem)
    if any(problems):
        first = next(p for p in problems if p)
        return fail(problems[0] or f"{first} (on rank {problems.index(first)})")
    if args.plot:
        from .plot import have_matplotlib

        if not comm.bcast(have_matplotlib() if rank == 0 else None, root=0):
            return fail(f"--plot needs matplotlib: {install_hint('examples', 'matplotlib')}")
    meta = describe_run(settings)

    def say(text: str) -> None:
        if rank == 0:
            print(text, flush=True)

    say(format_header(meta, markdown))
    results: dict[str, list[Row]] = {}
    if "osu" in settings.suites:
        say(f"{'- ' if markdown else '# '}sizes: "
            f"{', '.join(format_bytes(s) for s in settings.sizes)}")

        def on_case(case: BenchCase, rows: Sequence[Row]) -> None:
            say("")
            say(format_table(case.name, case.mpiflow_call, case.raw_call,
                             case.bus_factor.formula, rows, markdown))

        results = run(settings, on_case)
        say("")
        if markdown:
            say("### Summary\n")
        say(format_summary(results, markdown))
    extra: dict[str, Any] = {}
    for name in settings.suites:
        if name == "osu":
            continue
        suite = ALL_RUNNERS[name]
        data = suite.run(settings)
        extra[name] = data
        say("")
        say(suite.format(data, markdown))
    if rank == 0 and args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results_json(meta, results, {k: ALL_RUNNERS[k].to_json(v)
                                                   for k, v in extra.items()}), f, indent=1)
            f.write("\n")
    if rank == 0 and args.plot:
        from .plot import bandwidth_series, plot_title, write_plot

        series = bandwidth_series(results, extra.get("redistribution", ()))
        if series:
            write_plot(args.plot, series, plot_title(meta))
            say(f"\n{'- ' if markdown else '# '}plot: {args.plot}")
        else:
            say(f"\n{'- ' if markdown else '# '}plot: nothing to draw (no osu or "
                "redistribution suite ran)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
