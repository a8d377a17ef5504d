"""Unchanged torch programs under MPI launchers: torchrun's variables come from the launcher.

Each case starts its own job (1-rank session only). The programs read ``os.environ`` before
``init_process_group`` as torchrun's contract allows, and never import mpiflow.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import MPIEXEC, Job, run_job

pytest.importorskip("torch")
LIMIT = 90

# The shape of torch's DDP tutorials: the environment first, then the group, then DDP.
TORCHRUN_PROGRAM = """
    import os
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    local_rank = int(os.environ["LOCAL_RANK"])
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_world_size = int(os.environ["LOCAL_WORLD_SIZE"])
    dist.init_process_group(backend="mpiflow", rank=rank, world_size=world_size)
    assert (dist.get_rank(), dist.get_world_size()) == (rank, world_size)
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(rank)
    for _ in range(3):
        x = torch.randn(8, 4, generator=g)
        loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    w = model.module.weight.detach().clone()
    ws = [torch.empty_like(w) for _ in range(world_size)]
    dist.all_gather(ws, w)
    assert all(torch.equal(w, other) for other in ws)
    seen = [None] * world_size
    dist.all_gather_object(seen, f"rank {rank} local {local_rank}/{local_world_size} "
                                 f"group {os.environ.get('GROUP_RANK')}")
    if rank == 0:  # one writer: the ranks' lines would interleave
        print("\\n".join(seen), flush=True)
    dist.destroy_process_group()
"""


def job(ranks: int, code: str, launcher: list[str] | None = None, **env: str) -> Job:
    return run_job(ranks, textwrap.dedent(code), timeout=LIMIT, launcher=launcher,
                   env={"OMP_NUM_THREADS": "1", **env})


def lines(result: Job) -> list[str]:
    return sorted(line for line in result.stdout.splitlines() if line.startswith("rank "))


def test_an_unchanged_torchrun_program_runs_under_mpiexec() -> None:
    result = job(2, TORCHRUN_PROGRAM)
    assert result.returncode == 0, result.stderr
    assert lines(result) == ["rank 0 local 0/2 group 0", "rank 1 local 1/2 group 0"], \
        result.stdout


def test_under_mpiflow_launch_too(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(TORCHRUN_PROGRAM))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "MPI_LOCAL"))}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[2]),
                                         env.get("PYTHONPATH", "")])  # this checkout's
    proc = subprocess.run(
        [sys.executable, "-m", "mpiflow.launch", "--mpiexec", MPIEXEC, "-n", "2", str(script)],
        capture_output=True, text=True, timeout=LIMIT, env={**env, "OMP_NUM_THREADS": "1"})
    result = Job(proc.returncode, proc.stdout, proc.stderr, 0.0)
    assert result.returncode == 0, result.stderr
    assert lines(result) == ["rank 0 local 0/2 group 0", "rank 1 local 1/2 group 0"], \
        result.stdout


def test_values_the_user_set_are_kept_and_mpi_fills_the_node_index() -> None:
    # Two "nodes" of one rank each: Hydra does not say which node; MPI's topology does.
    hosts = [MPIEXEC, "-n", "2", "-ppn", "1", "-hosts", "localhost,127.0.0.1",
             "-launcher", "fork"]
    result = job(2, """
        import os
        import torch  # the auto-load hook sets what the launcher says, without MPI
        before = os.environ.get("GROUP_RANK")
        import mpiflow  # MPI's view fills the node's index
        from mpi4py import MPI
        rank = os.environ["RANK"]
        seen = MPI.COMM_WORLD.gather(
            f"rank {rank} local {os.environ['LOCAL_RANK']} group {before} "
            f"{os.environ['GROUP_RANK']} mine {os.environ['LOCAL_WORLD_SIZE']}")
        if seen:
            print("\\n".join(seen), flush=True)
    """, launcher=hosts, LOCAL_WORLD_SIZE="7")
    assert result.returncode == 0, result.stderr
    assert lines(result) == ["rank 0 local 0 group None 0 mine 7",
                             "rank 1 local 0 group None 1 mine 7"], result.stdout


def test_master_addr_and_port_are_agreed_at_import_torch_and_the_port_is_free() -> None:
    # pytorch/examples' ddp/example.py reads both before init_process_group, never importing
    # mpiflow: the auto-load hook sets them. The "mpiflow" group still rendezvous over MPI.
    result = job(2, """
        import os, sys
        import torch, torch.distributed as dist
        addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
        assert "mpiflow" not in sys.modules
        rank = int(os.environ["RANK"])
        tcp = dist.TCPStore(addr, port, 2, rank == 0, wait_for_workers=True)  # it is free
        tcp.set(f"seen{rank}", f"{addr}:{port}")
        dist.init_process_group("mpiflow")
        store = dist.distributed_c10d._get_default_store()
        while isinstance(store, dist.PrefixStore):
            store = store.underlying_store
        kind = type(store).__name__
        print(f"rank {rank} {kind} {addr} {tcp.get('seen0') == tcp.get('seen1')}", flush=True)
        dist.barrier()
        dist.destroy_process_group()
    """)
    assert result.returncode == 0, result.stderr
    assert lines(result) == ["rank 0 MPIStore 127.0.0.1 True", "rank 1 MPIStore 127.0.0.1 True"], \
        result.stdout


def test_without_the_hook_import_mpiflow_agrees_them_and_keeps_the_users() -> None:
    result = job(2, """
        import os
        import torch  # the hook is off: nothing set yet
        before = "MASTER_ADDR" in os.environ or "RANK" in os.environ
        import mpiflow
        from mpi4py import MPI
        seen = MPI.COMM_WORLD.gather((os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]))
        if seen:
            print(f"rank before {before} {seen}", flush=True)
    """, TORCH_DEVICE_BACKEND_AUTOLOAD="0", MASTER_PORT="29411")
    assert result.returncode == 0, result.stderr
    pair = "('127.0.0.1', '29411')"
    assert lines(result) == [f"rank before False [{pair}, {pair}]"], result.stdout
