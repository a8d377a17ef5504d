"""PyTorch's own distributed tests on a backend under mpiexec, a process group per test.

The tests are ``DistributedTest._DistTestBase`` from the installed torch wheel
(``torch.testing._internal.distributed.distributed_test``; importing it needs ``expecttest``);
nothing of them is copied here. As torch's harness (``TestDistBackend``) does, every test
gets a fresh default process group (``init_process_group`` before it, ``destroy_process_group``
after it) and torch's file-based ``Barrier`` around it; unlike that harness, the ranks are
MPI processes started once by ``mpiexec`` and reused from test to test, so 285 tests cost
one job, not 285 process starts.

The tests run are those gloo runs on the CPU (torch's skip list, evaluated as gloo's) and,
on other backends, the tests torch keeps for its MPI backend (all_to_all, uneven splits,
subgroups); docs/torch.md says which are left out and why. A test that kills or hangs the job
(a watchdog abort, a deadlock) is recorded as such and the job is started again after it.
Usage (from the repository root)::

    python tests/torch_backend/upstream_runner.py --backend mpiflow -n 3
    python tests/torch_backend/upstream_runner.py --backend gloo -n 3 -k all_gather

Prints one line per failing test and the counts; ``--json FILE`` writes every outcome.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import unittest
from pathlib import Path
from typing import Any

# The skip list is gloo's: torch's skip decorators are evaluated with BACKEND="gloo", so every
# test gloo runs on the CPU runs. Left out on other backends: tests named for gloo, and these,
# which call APIs torch refuses on any backend but gloo (monitored_barrier) or make gloo
# groups themselves.
GLOO_ONLY = {
    "test_monitored_barrier_allreduce_hang": "monitored_barrier: torch allows it on gloo only",
    "test_monitored_barrier_allreduce_hang_wait_all_ranks": "monitored_barrier: gloo only",
    "test_monitored_barrier_failure_order": "monitored_barrier: gloo only",
    "test_monitored_barrier_gloo": "monitored_barrier: gloo only",
    "test_monitored_barrier_gloo_rank_0_timeout": "monitored_barrier: gloo only",
    "test_monitored_barrier_gloo_subgroup": "monitored_barrier: gloo only",
    "test_monitored_barrier_wait_all_ranks": "monitored_barrier: gloo only",
    "test_ddp_build_debug_param_to_name_mapping": "its group is made with backend='gloo'",
}
# These build their (CPU) model only `if BACKEND == "mpi" or BACKEND == "gloo"`, read while
# the test runs: for them alone the module's BACKEND reads "gloo" (the group is still the
# backend's under test), so the CPU branch runs.
CPU_BRANCH = {"test_accumulate_gradients_no_sync",
              "test_accumulate_gradients_no_sync_allreduce_hook",
              "test_accumulate_gradients_no_sync_allreduce_with_then_hook",
              "test_accumulate_gradients_no_sync_grad_is_view"}
SKIP_CODES: set[int] = set()
# Tests torch's skip list reserves for its own MPI backend ("Only MPI supports all_to_all..."):
# on a backend other than gloo they run as well (uneven all_to_all, the subgroup variants),
# with the environment's BACKEND reading "mpi" while they run at 3 ranks or more, so that
# the decorators that read it then (skip_if_small_worldsize: MPI at any size, others at 8
# ranks) treat them as torch treats its MPI backend.
MPI_ONLY_REASON = "Only MPI supports"
LIMIT = 120  # seconds a job may go without finishing a test before it counts as hung


def _outcome(case: unittest.TestCase) -> str:
    """Run one test method; ``pass``, ``skip: why`` or ``fail: first line``."""
    class Result(unittest.TestResult):
        def __init__(self) -> None:
            super().__init__()
            self.outcome = "pass"

        def addSkip(self, test: Any, reason: str) -> None:
            self.outcome = f"skip: {reason}"

        def addError(self, test: Any, err: Any) -> None:
            kind, value, tb = err
            if kind is SystemExit and value.code in SKIP_CODES:
                self.outcome = f"skip: exit code {value.code}"
                return
            self.outcome = "fail: " + _summary(kind, value, tb)

        addFailure = addError

        def addExpectedFailure(self, test: Any, err: Any) -> None:
            self.outcome = "pass"

        def addUnexpectedSuccess(self, test: Any) -> None:
            self.outcome = "fail: unexpected success"

    result = Result()
    case.run(result)
    return result.outcome


def _prompt_sync(dt: Any) -> Any:
    """torch's file barrier (``distributed_test.Barrier.sync``: each rank writes its count to a
    file of its own, then reads everyone's) polling every 2-20 ms instead of every 100 ms.

    Each test passes it twice or more; at 100 ms a poll it kept a core idle for a minute at
    each rank count. The protocol, its lock, its count and its timeout are torch's.
    """
    def sync(cls: Any, wait_for: int | None = None, timeout: float = 10) -> None:
        if wait_for is None:
            wait_for = dt.dist.get_world_size()
        cls.barrier_id += 1
        folder = os.path.join(os.environ["TEMP_DIR"], "barrier")
        with dt._lock(), open(os.path.join(folder, str(os.getpid())), "w") as f:
            f.write(str(cls.barrier_id))
        start, pause = time.time(), 0.002
        while True:
            with dt._lock():
                arrived = 0
                for name in os.listdir(folder):
                    with open(os.path.join(folder, name)) as f:
                        arrived += int(f.read()) >= cls.barrier_id
            if arrived == wait_for:
                return
            if time.time() - start > timeout:
                raise RuntimeError("barrier timeout")
            time.sleep(pause)
            pause = min(2 * pause, 0.02)

    return classmethod(sync)


def _summary(kind: Any, value: Any, tb: Any) -> str:
    text = "".join(traceback.format_exception_only(kind, value)).strip().splitlines()
    return (text[0] if text else kind.__name__)[:300]


def worker(backend: str, start: int, names: list[str], progress: Path) -> int:
    """Run ``names[start:]`` on every rank of this mpiexec job; rank 0 appends outcomes."""
    os.environ["BACKEND"] = backend
    os.environ.setdefault("INIT_METHOD", "env://")
    os.environ.pop("MASTER_ADDR", None)  # env:// then takes rank, size and store from MPI
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    os.environ["WORLD_SIZE"] = str(size)
    temp = world.bcast(tempfile.mkdtemp(prefix="torch-dist-") if rank == 0 else None)
    os.environ["TEMP_DIR"] = temp
    import torch.distributed as dist
    from torch.testing._internal.common_distributed import TEST_SKIPS
    from torch.testing._internal.common_utils import TestCase

    # The module reads BACKEND at import for its skip decorators: import it as gloo's, so the
    # tests run are those gloo runs on the CPU; the tests then read BACKEND as ours.
    os.environ["BACKEND"] = "gloo"
    from torch.testing._internal.distributed import distributed_test as dt

    dt.BACKEND = os.environ["BACKEND"] = backend
    dt.Barrier.sync = _prompt_sync(dt)
    mpi_names = set(mpi_only(dt)) if backend != "gloo" else set()
    for name in mpi_names:
        getattr(dt.DistributedTest._DistTestBase, name).__unittest_skip__ = False

    import mpiflow.torch  # noqa: F401  (the backend; also the MPI rendezvous for gloo)

    SKIP_CODES.update(skip.exit_code for skip in TEST_SKIPS.values())

    class Case(dt.DistributedTest._DistTestBase, TestCase):  # type: ignore[misc]
        world_size = str(size)
        destroy_pg_upon_exit = False

        @property
        def init_method(self) -> str:
            return "env://"

    for index in range(start, len(names)):
        name = names[index]
        if rank == 0:
            for sub in ("barrier", "test_dir", "init_dir"):
                shutil.rmtree(os.path.join(temp, sub), ignore_errors=True)
                os.mkdir(os.path.join(temp, sub))
            with progress.open("a") as f:
                f.write(json.dumps({"start": index}) + "\n")
        world.Barrier()
        dt.Barrier.init()  # the directory is empty: this resets the barrier count
        # (At 2 ranks the subgroup variants, written for 3 ranks and more, skip as gloo's.)
        os.environ["BACKEND"] = "mpi" if name in mpi_names and size >= 3 else backend
        dt.BACKEND = "gloo" if name in CPU_BRANCH else backend
        case = Case(name)
        case.rank = rank
        case.file_name = os.path.join(temp, "init_dir", "file")
        seconds = min(dt.CUSTOM_PG_TIMEOUT.get(name, 60), 60)
        started = time.monotonic()
        try:
            dist.init_process_group(backend=backend, world_size=size, rank=rank,
                                    timeout=__import__("datetime").timedelta(seconds=seconds))
            case._barrier()
            outcome = _outcome(case)
        except Exception as exc:  # the set-up failed, not the test
            outcome = "fail: set-up: " + _summary(type(exc), exc, None)
        try:
            if dist.is_initialized():
                case._barrier()
                dist.destroy_process_group()
        except Exception as exc:
            if not outcome.startswith("fail"):
                outcome = "fail: tear-down: " + _summary(type(exc), exc, None)
        if outcome.startswith("fail"):
            print(f"[rank {rank}] {name}: {outcome}", file=sys.stderr, flush=True)
        outcomes = world.gather(outcome)
        if rank == 0:
            assert outcomes is not None
            fails = [f"fail: rank {r}{o[4:]}" for r, o in enumerate(outcomes)
                     if o.startswith("fail")]
            final = fails[0] if fails else outcomes[0]
            with progress.open("a") as f:
                f.write(json.dumps({"test": name, "outcome": final,
                                    "seconds": round(time.monotonic() - started, 2)}) + "\n")
    if rank == 0:
        shutil.rmtree(temp, ignore_errors=True)
    return 0


def mpi_only(dt: Any) -> list[str]:
    """The tests that torch's skip list (imported as gloo's) leaves to its MPI backend."""
    base = dt.DistributedTest._DistTestBase
    return sorted(n for n in dir(base) if n.startswith("test_")
                  and getattr(getattr(base, n), "__unittest_skip__", False)
                  and MPI_ONLY_REASON in getattr(getattr(base, n), "__unittest_skip_why__", ""))


def test_names(pattern: str | None, backend: str) -> tuple[list[str], dict[str, str]]:
    """The tests of ``_DistTestBase`` in order, and those left out with the reason."""
    os.environ.setdefault("BACKEND", "gloo")
    os.environ.setdefault("WORLD_SIZE", "2")
    os.environ.setdefault("TEMP_DIR", tempfile.gettempdir())
    from torch.testing._internal.distributed import distributed_test as dt

    names = sorted(n for n in dir(dt.DistributedTest._DistTestBase) if n.startswith("test_"))
    if pattern:
        names = [n for n in names if re.search(pattern, n)]
    left_out = {n: why for n, why in GLOO_ONLY.items() if n in names and backend != "gloo"}
    if backend != "gloo":
        left_out.update({n: "named for gloo" for n in names if "gloo" in n})
    return [n for n in names if n not in left_out], left_out


def drive(backend: str, ranks: int, pattern: str | None, mpiexec: str) -> dict[str, str]:
    """Run the tests in as many jobs as crashes need; return every test's outcome."""
    # A new job: none of this process's launcher variables, nor torchrun's that were set
    # from them (the ranks get theirs from their own launcher).
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PMI_", "MPI_LOCAL", "OMPI_", "SLURM_", "MASTER_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                         "MPIFLOW_LAUNCHER_ENV")}
    env.update({"OMP_NUM_THREADS": "1", "MPIFLOW_TIMEOUT": "90", "BACKEND": backend})
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                         env.get("PYTHONPATH", "")])
    names, left_out = test_names(pattern, backend)
    outcomes: dict[str, str] = {n: f"left out: {why}" for n, why in left_out.items()}
    start = 0
    with tempfile.TemporaryDirectory() as tmp:
        progress = Path(tmp) / "progress.jsonl"
        (Path(tmp) / "names.json").write_text(json.dumps(names))
        while start < len(names):
            progress.write_text("")
            cmd = [mpiexec, "-n", str(ranks), sys.executable, __file__, "--worker",
                   "--backend", backend, "--start", str(start), "--names",
                   str(Path(tmp) / "names.json"), "--progress", str(progress)]
            errors = (Path(tmp) / "stderr").open("w+")
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=errors,
                                    text=True, start_new_session=True)
            last, current = time.monotonic(), start
            while proc.poll() is None:
                time.sleep(0.5)
                done = _read(progress, outcomes)
                if done != current:
                    current, last = done, time.monotonic()
                if time.monotonic() - last > LIMIT:
                    os.killpg(proc.pid, 9)
                    proc.wait()
                    break
            errors.seek(0)
            stderr = errors.read()
            errors.close()
            current = _read(progress, outcomes)
            if current >= len(names):
                break
            name = names[current]
            if name not in outcomes:
                tail = [line for line in stderr.splitlines() if line.strip()][-1:] or ["?"]
                outcomes[name] = f"fail: the job ended or hung in it: {tail[0][:200]}"
            start = current + 1
    return outcomes


def _read(progress: Path, outcomes: dict[str, str]) -> int:
    """Record finished tests; return the index of the test running (or next)."""
    index = 0
    for line in progress.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if "start" in entry:
            index = entry["start"]
        else:
            outcomes[entry["test"]] = entry["outcome"]
            index += 1
    return index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="mpiflow")
    parser.add_argument("-n", dest="ranks", type=int, default=3)
    parser.add_argument("-k", dest="pattern", default=None, help="regex on the test names")
    parser.add_argument("--json", default=None, help="write every outcome to this file")
    parser.add_argument("--mpiexec", default=os.path.join(os.path.dirname(sys.executable),
                                                          "mpiexec"))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--names", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--progress", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.backend, args.start, json.loads(Path(args.names).read_text()),
                      Path(args.progress))
    started = time.monotonic()
    outcomes = drive(args.backend, args.ranks, args.pattern, args.mpiexec)
    counts: dict[str, int] = {}
    for name, outcome in sorted(outcomes.items()):
        kind = outcome.split(":")[0]
        counts[kind] = counts.get(kind, 0) + 1
        if kind == "fail":
            print(f"{name}: {outcome}")
    print(f"{args.backend} at {args.ranks} ranks: " +
          ", ".join(f"{counts[k]} {k}" for k in sorted(counts)) +
          f" ({time.monotonic() - started:.0f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(outcomes, indent=1, sort_keys=True))
    return 1 if counts.get("fail") else 0


if __name__ == "__main__":
    sys.exit(main())
