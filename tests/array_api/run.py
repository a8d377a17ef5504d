"""Run the array API standard's test suite (array-api-tests) on ``mpiflow.array_api`` under
mpiexec, every rank drawing the same examples, rank 0 reporting.

    python tests/array_api/run.py -n 2 --max-examples 1          # what CI runs
    python tests/array_api/run.py --table 1 2 3 --max-examples 5  # the docs' table

The suite is ``$MPIFLOW_ARRAY_API_TESTS`` or ``../shared/third_party/array-api-tests`` beside
the checkout. Tests listed in ``tests/array_api/xfails.txt`` (each with its reason) are
skipped; any other failure fails the run (exit status 1). ``--table`` runs the suite at each
rank count (and numpy on one process, for the reference column) and prints a Markdown table
of passed/failed/skipped per test file. Extra arguments go to pytest (e.g. ``-k sum``).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
XFAILS = HERE / "xfails.txt"


def suite_dir() -> Path:
    """Where array-api-tests is (a clear error where it is not)."""
    path = Path(os.environ.get("MPIFLOW_ARRAY_API_TESTS")
                or ROOT.parent / "shared" / "third_party" / "array-api-tests")
    if not (path / "array_api_tests").is_dir():
        sys.exit(f"run.py: array-api-tests not found at {path}; set MPIFLOW_ARRAY_API_TESTS")
    return path


def command(ranks: int | None, max_examples: int, json_path: Path, module: str,
            extra: list[str], mpiexec: str, timeout: int) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of one run (``ranks`` None: no mpiexec)."""
    env = dict(os.environ)
    env.update({
        "ARRAY_API_TESTS_MODULE": module,
        "ARRAY_API_TESTS_VERSION": "2024.12",
        # Skipped, not xfailed: a failing Hypothesis test spends most of its time shrinking.
        "ARRAY_API_TESTS_XFAIL_MARK": "skip",
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE), env.get("PYTHONPATH", "")]),
        "PYTHONWARNINGS": "ignore",
    })
    paths = [] if any(a.startswith("array_api_tests") for a in extra) else ["array_api_tests"]
    pytest = [sys.executable, "-m", "pytest", *paths, "-q", "-p", "no:cacheprovider",
              "-p", "xp_plugin", "--max-examples", str(max_examples), "--hypothesis-seed=0",
              "--derandomize", "--disable-deadline", f"--xp-json={json_path}",
              "-W", "ignore", "--timeout", str(timeout), "-o", "timeout_method=thread"]
    if module != "numpy":
        # (one argument: pytest would take a separate path for a test path, and load the
        # conftest files above it)
        pytest += [f"--xfails-file={XFAILS}"]
    pytest += extra
    if ranks is None:
        return pytest, env
    return [mpiexec, "-n", str(ranks), *pytest], env


def run(ranks: int | None, max_examples: int, module: str, extra: list[str], mpiexec: str,
        timeout: int, quiet: bool = False) -> tuple[int, dict[str, str], float]:
    """One run: (exit status, outcome per test, seconds)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "outcomes.json"
        cmd, env = command(ranks, max_examples, out, module, extra, mpiexec, timeout)
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=suite_dir(), env=env,
                              stdout=subprocess.DEVNULL if quiet else None)
        seconds = time.perf_counter() - start
        outcomes = json.loads(out.read_text()) if out.exists() else {}
    return proc.returncode, outcomes, seconds


def per_file(outcomes: dict[str, str]) -> dict[str, collections.Counter[str]]:
    """Counts of passed / failed / skipped per test file (xfailed counts as skipped)."""
    table: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for nodeid, outcome in outcomes.items():
        name = nodeid.split("::")[0].rsplit("/", 1)[-1]
        kind = {"xfailed": "skipped", "xpassed": "passed"}.get(outcome, outcome)
        table[name][kind] += 1
        table["total"][kind] += 1
    return table


def cell(counts: collections.Counter[str] | None) -> str:
    if not counts:
        return "-"
    return f"{counts['passed']} / {counts['failed']} / {counts['skipped']}"


def markdown(columns: dict[str, dict[str, str]]) -> str:
    """The Markdown table: one row per test file, one column per run."""
    tables = {name: per_file(outcomes) for name, outcomes in columns.items()}
    files = [*sorted({f for t in tables.values() for f in t if f != "total"}), "total"]
    lines = ["| test file | " + " | ".join(tables) + " |",
             "|---|" + "---|" * len(tables)]
    for f in files:
        lines.append(f"| {f.removesuffix('.py')} | "
                     + " | ".join(cell(t.get(f)) for t in tables.values()) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--ranks", type=int, default=2, help="ranks (default 2)")
    parser.add_argument("--max-examples", type=int, default=1,
                        help="Hypothesis examples per test (default 1)")
    parser.add_argument("--table", type=int, nargs="+", metavar="RANKS",
                        help="run at these rank counts and numpy, print the per-file table")
    parser.add_argument("--mpiexec", default=str(Path(sys.executable).parent / "mpiexec"),
                        help="the mpiexec of mpi4py's MPI (default: the venv's)")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per test")
    args, extra = parser.parse_known_args()
    if Path(args.mpiexec).exists():
        # the suite runs in its own directory: a relative path would point nowhere there
        args.mpiexec = str(Path(args.mpiexec).absolute())
    else:
        args.mpiexec = "mpiexec"
    if args.table:
        columns: dict[str, dict[str, str]] = {}
        status = 0
        for n in args.table:
            rc, outcomes, seconds = run(n, args.max_examples, "mpiflow.array_api", extra,
                                        args.mpiexec, args.timeout, quiet=True)
            status |= rc != 0
            columns[f"mpiflow, {n} rank{'s' if n > 1 else ''}"] = outcomes
            print(f"{n} rank(s): exit {rc}, {seconds:.0f} s", file=sys.stderr)
        _, outcomes, seconds = run(None, args.max_examples, "numpy", extra, args.mpiexec,
                                   args.timeout, quiet=True)
        columns["numpy, 1 process"] = outcomes
        print(f"numpy: {seconds:.0f} s", file=sys.stderr)
        print(markdown(columns))
        return status
    rc, outcomes, seconds = run(args.ranks, args.max_examples, "mpiflow.array_api", extra,
                                args.mpiexec, args.timeout)
    counts = per_file(outcomes)["total"]
    print(f"array API suite at {args.ranks} rank(s), --max-examples {args.max_examples}: "
          f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped "
          f"in {seconds:.0f} s")
    return 1 if rc else 0


if __name__ == "__main__":
    sys.exit(main())
