"""Leaving the job: an early ``os._exit`` fails the job with a report, and messages nobody
received are reported at exit. Each test runs a small job of its own under a timeout.
"""

from __future__ import annotations

import pathlib
import textwrap

import pytest
from helpers import run_job

from mpiflow.communication.watchdog import exits


def job(ranks: int, body: str, **env: str) -> tuple[int, str, str, float]:
    code = textwrap.dedent(body)
    result = run_job(ranks, code, timeout=60, env={"MPIFLOW_TIMEOUT": "30", **env})
    return result.returncode, result.stdout, result.stderr, result.seconds


@pytest.mark.parametrize("status", [0, 3])
def test_an_early_os_exit_fails_the_job_with_a_report(status: int) -> None:
    code, out, err, seconds = job(3, f"""
        import os, time, mpiflow
        if mpiflow.env.get_rank() == 1:
            os._exit({status})
        time.sleep(20)
        print("finished")
    """)
    assert code == (status or 1), err
    assert seconds < 15, (seconds, err)
    assert "finished" not in out
    assert (f"[rank 1] mpiflow: rank 1 called os._exit({status}) at <string>:4 in <module> "
            "while ranks 0, 2 had not finished") in err, err
    assert "aborting the job instead" in err


def test_os_exit_on_every_rank_at_the_end_is_a_normal_end() -> None:
    code, out, err, _ = job(3, """
        import os, time, mpiflow
        time.sleep(0.2 * mpiflow.env.get_rank())
        print("done", flush=True)
        os._exit(0)
    """)
    assert code == 0, err
    assert out.count("done") == 3
    assert "aborting" not in err


def test_launch_propagates_an_early_os_exit(tmp_path: object) -> None:
    import os
    import subprocess
    import sys

    from helpers import job_env

    path = os.path.join(str(tmp_path), "job.py")
    with open(path, "w") as f:
        f.write("import os, time, mpiflow\nif mpiflow.env.get_rank() == 1:\n    os._exit(0)\n"
                "time.sleep(20)\n")
    env = job_env()
    env.pop("MPIEXEC", None)
    env["PYTHONPATH"] = str(pathlib.Path(__file__).resolve().parents[2])  # this checkout
    done = subprocess.run([sys.executable, "-m", "mpiflow.launch", "-n", "2", "--timeout", "60",
                           path], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 1, done.stderr
    assert "rank 1 called os._exit(0)" in done.stderr


@pytest.mark.parametrize("count", [3, 300_000])  # eager and rendezvous sizes
def test_an_isend_never_received_is_reported_at_exit(count: int) -> None:
    code, _, err, _ = job(3, f"""
        import numpy, mpiflow as flow, mpiflow.distributed as dist
        rank = dist.get_rank()
        if rank == 0:
            dist.isend(flow.tensor(numpy.zeros({count}, numpy.float32)), 2, tag=5)
        if rank == 1:
            g = dist.new_group([1, 2])
            dist.send(flow.tensor([1.0, 2.0]), 2, group=g, tag=9)
        else:
            g = dist.new_group([1, 2])
    """)
    assert code == 0, err
    assert ("[rank 2] mpiflow warning: 2 messages sent to rank 2 were never received") in err
    assert f"[rank 2]   from rank 0 on the world (ranks 0..2): tag 5, {4 * count} bytes" in err
    assert "[rank 2]   from rank 1 on the group [1, 2]: tag 9, 8 bytes" in err
    assert "[rank 0] mpiflow warning" not in err and "[rank 1] mpiflow warning" not in err


def test_received_messages_leave_no_warning() -> None:
    code, _, err, _ = job(2, """
        import numpy, mpiflow as flow, mpiflow.distributed as dist
        t = flow.tensor(numpy.zeros(4))
        if dist.get_rank() == 0:
            dist.isend(t, 1, tag=5).wait()
        else:
            dist.recv(t, 0, tag=5)
    """)
    assert code == 0, err
    assert "warning" not in err


def test_gather_exits_names_the_ranks_not_heard_from() -> None:
    heard: set[int] = set()
    pending = [3, 0]

    def poll() -> bool:
        if pending:
            heard.add(pending.pop())
            return True
        return False

    assert exits.gather_exits(poll, [0, 2, 3], lambda: heard, wait=0.05) == [2]
    assert exits.gather_exits(poll, [0, 3], lambda: heard, wait=10.0) == []
