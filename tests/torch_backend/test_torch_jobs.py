"""Whole torch jobs on the "mpiflow" backend under mpiexec: start-up, auto-load and failures.

Each case runs a small program with a hard time limit (and a short watchdog where one is
expected to fire); these start their own jobs, so they run in the 1-rank session only.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import Job, job_env, run_job

pytest.importorskip("torch")
LIMIT = 90  # the hard limit of every job
PTDIST = Path(__file__).resolve().parent / "programs" / "ptdist.py"


def job(ranks: int, code: str, **env: str) -> Job:
    return run_job(ranks, textwrap.dedent(code), timeout=LIMIT,
                   env={"OMP_NUM_THREADS": "1", **env})


def test_torch_auto_loads_the_backend_without_importing_mpiflow() -> None:
    result = job(2, """
        import sys
        import torch, torch.distributed as dist
        assert "mpiflow" in dist.Backend.backend_list, dist.Backend.backend_list
        assert "mpiflow" not in sys.modules  # only MPI, for MASTER_ADDR/MASTER_PORT
        dist.init_process_group("mpiflow")  # no MASTER_ADDR, no RANK: all from MPI
        t = torch.ones(2)
        dist.all_reduce(t)
        seen = [None] * dist.get_world_size()
        dist.all_gather_object(seen, (dist.get_rank(), t.tolist()))
        if dist.get_rank() == 0:
            print(f"ranks {seen}", flush=True)
        dist.destroy_process_group()
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ranks [(0, [2.0, 2.0]), (1, [2.0, 2.0])]", result.stdout


def test_one_process_without_a_launcher_starts_no_mpi_at_import_torch() -> None:
    code = ("import sys, os, torch, torch.distributed as dist; "
            "print('mpi4py.MPI' in sys.modules, 'MASTER_ADDR' in os.environ, "
            "dist.is_mpi_available())")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=LIMIT, env=job_env({}))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False", "False"], proc.stdout


def test_the_seeds_ptdist_runs_unchanged_with_backend_mpi_as_on_gloo(tmp_path: Path) -> None:
    """The seed's program under mpiexec at 2 ranks, as is, then with 'gloo': the same output.
    Each rank's stdout goes to its own file (the ranks' prints interleave on one stream)."""
    source = PTDIST.read_text()
    assert source.count("backend='mpi'") == 1
    outputs = {}
    for backend in ("mpi", "gloo"):
        program = tmp_path / backend / "ptdist.py"
        program.parent.mkdir()
        program.write_text(source.replace("backend='mpi'", f"backend='{backend}'"))
        result = job(2, f"""
            import os, runpy, sys
            rank = os.environ.get("PMI_RANK") or os.environ.get("OMPI_COMM_WORLD_RANK")
            sys.stdout = open(os.path.join({str(program.parent)!r}, f"out.{{rank}}"), "w")
            runpy.run_path({str(program)!r}, run_name="__main__")
        """)
        assert result.returncode == 0, f"{backend}: {result.stderr}"
        outputs[backend] = [(program.parent / f"out.{r}").read_text() for r in range(2)]
    assert outputs["mpi"] == ["Rank-0 has sent the following tensor to Rank-1\n"
                              "tensor([ 1., -1.])\n",
                              "Rank-1 has recieved the following tensor from Rank-0\n"
                              "tensor([ 1., -1.])\n"], outputs["mpi"]
    assert outputs["mpi"] == outputs["gloo"]


def test_mpi_backend_switched_off_is_torchs_error_again() -> None:
    result = job(2, """
        import torch.distributed as dist
        import mpiflow.torch
        assert not dist.is_mpi_available() and not mpiflow.torch.install_mpi()
        try:
            dist.init_process_group("mpi")
        except RuntimeError as exc:
            print(f"refused: {exc}", flush=True)  # one write: the ranks share stdout
    """, MPIFLOW_TORCH_MPI="0")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("refused: Distributed package doesn't have MPI built in") == 2


def test_gloo_runs_on_the_mpi_store_under_mpiexec_without_master_addr() -> None:
    result = job(2, """
        import torch, torch.distributed as dist
        import mpiflow.torch
        dist.init_process_group("gloo")  # env:// without MASTER_ADDR: MPI's rendezvous
        t = torch.ones(3)
        dist.all_reduce(t)
        sub = dist.new_group(backend="mpiflow")
        dist.all_reduce(t, group=sub)
        seen = [None] * dist.get_world_size()
        dist.all_gather_object(seen, t.tolist())
        if dist.get_rank() == 0:
            print(f"ok {seen}", flush=True)
        dist.destroy_process_group()
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok [[4.0, 4.0, 4.0], [4.0, 4.0, 4.0]]", result.stdout


def test_a_rank_disagreeing_with_mpi_is_a_clear_error() -> None:
    result = job(2, """
        import os, torch.distributed as dist
        import mpiflow.torch
        os.environ["RANK"] = "0"  # wrong on rank 1
        os.environ["WORLD_SIZE"] = "2"
        dist.init_process_group("mpiflow")
    """)
    assert result.returncode != 0
    assert "rank=0 was given, but MPI says 1" in result.stderr


def test_an_uncaught_exception_on_one_rank_ends_the_torch_job() -> None:
    result = job(3, """
        import torch, torch.distributed as dist
        import mpiflow.torch
        dist.init_process_group("mpiflow")
        if dist.get_rank() == 1:
            raise RuntimeError("boom on one rank")
        dist.all_reduce(torch.ones(1))
        print("unreachable")
    """)
    assert result.returncode != 0
    assert result.seconds < 60
    assert "unreachable" not in result.stdout
    assert "[rank 1] RuntimeError: boom on one rank" in result.stderr


def test_the_watchdog_names_the_rank_that_never_arrives() -> None:
    result = job(2, """
        import time, datetime, torch, torch.distributed as dist
        import mpiflow.torch
        dist.init_process_group("mpiflow", timeout=datetime.timedelta(seconds=3))
        if dist.get_rank() == 1:
            time.sleep(60)
        dist.all_reduce(torch.ones(4))
        print("unreachable")
    """)
    assert result.returncode != 0
    assert result.seconds < 50
    err = result.stderr
    assert "has not completed after" in err
    assert "not arrived: rank 1" in err


def test_debug_mode_reports_mismatched_torch_collectives_on_every_rank() -> None:
    result = job(2, """
        import sys, torch, torch.distributed as dist
        import mpiflow.torch
        from mpiflow.communication.debug.mode import CollectiveMismatchError
        dist.init_process_group("mpiflow")
        rank = dist.get_rank()
        try:
            dist.all_reduce(torch.ones(2 + rank))
        except CollectiveMismatchError as exc:
            print(f"mismatch {rank} " + str(exc).replace("\\n", " | "), flush=True)
        dist.barrier()
    """, MPIFLOW_DEBUG="1")
    assert result.returncode == 0, result.stderr
    out = result.stdout  # the two ranks' lines may interleave
    assert "mismatch 0 ranks called mismatched" in out and "mismatch 1 ranks called" in out, out
    assert out.count("they differ in: shape") == 2, out


def test_without_torch_the_import_says_how_to_install_it() -> None:
    result = job(1, """
        import sys
        sys.modules["torch"] = None  # as if PyTorch were not installed
        try:
            import mpiflow.torch
        except ModuleNotFoundError as exc:
            print(exc)
    """)
    assert result.returncode == 0, result.stderr
    assert "mpiflow.torch needs PyTorch, which is not installed: pip install 'torch>=2.1'" \
        in result.stdout, result.stdout


def test_a_collective_on_a_group_with_a_timeout_raises_when_others_do_not_come() -> None:
    """gloo's contract: past the group's timeout a collective raises (catchable), and the
    group is unusable. Unchecked (MPIFLOW_CHECK=off): a sampled check's exchange is a
    blocking collective of its own, which only the watchdog ends (docs/torch.md)."""
    result = job(2, """
        import datetime, time
        import torch, torch.distributed as dist
        dist.init_process_group("mpiflow")
        sub = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=1))
        dist.all_reduce(torch.ones(1), group=sub)  # both come: fine
        if dist.get_rank() == 0:
            start = time.monotonic()
            try:
                dist.all_reduce(torch.ones(3), group=sub)
            except RuntimeError as exc:
                print("raised", round(time.monotonic() - start), exc, flush=True)
            try:
                dist.broadcast(torch.ones(1), src=0, group=sub)
            except RuntimeError as exc:
                print("then", "unusable" in str(exc), flush=True)
        dist.barrier()  # the default group (no timeout of its own) still works
        dist.destroy_process_group()
    """, MPIFLOW_CHECK="off")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("raised 1 [rank 0] a collective of the process group"), lines
    assert "Timed out waiting 1000ms" in lines[0] and lines[1] == "then True", lines


def test_an_isend_nobody_receives_is_reported_at_exit() -> None:
    # as the numpy API reports it (tests/communication/test_exits.py): on the default group,
    # and on a group destroyed before the end (its communicator is kept for the check)
    result = job(2, """
        import torch, torch.distributed as dist
        import mpiflow.torch
        dist.init_process_group("mpiflow")
        sub = dist.new_group([0, 1])
        if dist.get_rank() == 0:
            dist.isend(torch.zeros(3), 1, tag=5).wait()
            dist.isend(torch.zeros(2, dtype=torch.float64), 1, group=sub, tag=9).wait()
        dist.barrier()
        dist.destroy_process_group(sub)
    """, MPIFLOW_TIMEOUT="30")
    assert result.returncode == 0, result.stderr
    err = result.stderr
    assert "[rank 1] mpiflow warning: 2 messages sent to rank 1 were never received" in err, err
    assert "[rank 1]   from rank 0 on the world (ranks 0..1): tag 5, 12 bytes" in err
    assert "[rank 1]   from rank 0 on the world (ranks 0..1): tag 9, 16 bytes" in err
    assert "[rank 0] mpiflow warning" not in err
