"""Helpers shared by the tests: per-rank data and running a separate mpiexec job."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy

MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")
# The variables a launcher gives the processes of a job (their rank, size, server): a job the
# tests start must not see those of the job running the tests.
LAUNCHER_PREFIXES = ("PMI_", "PMIX_", "MPI_LOCAL", "HYDRA_", "OMPI_", "PRTE_", "MV2_", "SLURM_")
# ...but these are settings of the person running them, which every job needs again: Open
# MPI refuses root without the first two, and more ranks than cores without the third.
# torchrun's variables that the auto-load hook set in this (test) process from its own launch:
# a new job is a new launch, whose ranks must not inherit them.
FRESH_JOB_DROPS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                   "MASTER_ADDR", "MASTER_PORT", "MPIFLOW_LAUNCHER_ENV")
KEPT_SETTINGS = ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM",
                 "PRTE_MCA_rmaps_default_mapping_policy")


def job_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment for a new mpiexec job: no launcher variables but the
    settings in ``KEPT_SETTINGS``, and ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if (k in KEPT_SETTINGS or not k.startswith(LAUNCHER_PREFIXES))
           and k not in FRESH_JOB_DROPS}
    env.update(extra or {})
    return env


def rank_data(shape: tuple[int, ...], dtype: object, rank: int, salt: int = 0) -> numpy.ndarray:
    """Deterministic data that differs by rank; small values keep float16 and int8 sums exact."""
    count = int(numpy.prod(shape, dtype=numpy.int64))
    base = (numpy.arange(count) * 7 + rank * 3 + salt) % 5 + 1
    dt = numpy.dtype(dtype)
    if dt.kind == "b":
        return ((base + rank) % 2 == 0).reshape(shape)
    if dt.kind == "c":
        return (base + 1j * (base % 3)).astype(dt).reshape(shape)
    return base.astype(dt).reshape(shape)


@dataclass
class Job:
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def run_job(ranks: int, code: str, timeout: float = 60, env: dict[str, str] | None = None,
            launcher: list[str] | None = None) -> Job:
    """Run ``code`` as a Python program under ``mpiexec -n ranks`` (or ``launcher``), bounded."""
    cmd = (launcher if launcher is not None else [MPIEXEC, "-n", str(ranks)])
    cmd = [*cmd, sys.executable, "-c", code]
    # The launcher's variables of the job running the tests must not leak into the new job.
    full_env = job_env(env)
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env)
    return Job(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)


def shared_memory_nodes() -> tuple[int, int]:
    """``(nodes, ranks on this node)`` as MPI's shared-memory split of the world finds them
    (collective): what the node-layout tests hold mpiflow's own answers against. A simulated
    2-node job (scripts/test --nodes 2) gives 2 nodes on one host."""
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    shared = world.Split_type(MPI.COMM_TYPE_SHARED, key=world.Get_rank())
    try:
        nodes = world.allreduce(int(shared.Get_rank() == 0))
        return nodes, shared.Get_size()
    finally:
        shared.Free()
