"""The MPI process environment: initialization, node topology, launcher checks, abort on failure.

Importing this module initializes MPI (through mpi4py) exactly once. Everything here is
computed eagerly at import, when every rank is known to be executing the same code, so that
later queries such as :func:`mpiflow.env.get_local_rank` never communicate and can never hang.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import threading
import traceback
from dataclasses import dataclass
from types import TracebackType

from mpi4py import MPI

__all__ = ["Topology", "LauncherMismatchError", "topology", "world", "install_abort_handler"]

# Environment variables through which launchers announce the job size, by launcher.
_LAUNCHER_SIZE_VARS = (
    ("PMI_SIZE", "set by an MPICH-family mpiexec (Hydra) or srun with PMI"),
    ("OMPI_COMM_WORLD_SIZE", "set by Open MPI's mpirun/mpiexec"),
    ("MV2_COMM_WORLD_SIZE", "set by MVAPICH's mpirun_rsh"),
    ("PMIX_SIZE", "set by a PMIx launcher"),
)
# Slurm's batch step and "extern" step use these step ids; a batch script itself is one process.
_SLURM_SPECIAL_STEPS = {"4294967290", "4294967291", "4294967292", "4294967293", "4294967294",
                        "4294967295", "batch", "extern", "interactive"}


class LauncherMismatchError(RuntimeError):
    """The launcher started several processes but MPI sees each as a world of one."""


@dataclass(frozen=True)
class Topology:
    """Where this process sits: global rank, rank on its node, and node index."""

    rank: int
    size: int
    local_rank: int
    local_size: int
    node_rank: int
    node_size: int


def launcher_size(environ: dict[str, str] | None = None) -> tuple[int, str]:
    """Return the job size the launcher announced in the environment, and who announced it.

    Returns ``(0, "")`` when no known launcher variable is set.
    """
    env = os.environ if environ is None else environ
    for var, who in _LAUNCHER_SIZE_VARS:
        value = env.get(var, "")
        if value.isdigit():
            return int(value), f"{var}={value}, {who}"
    step = env.get("SLURM_STEP_ID", "")
    tasks = env.get("SLURM_STEP_NUM_TASKS", "")
    if tasks.isdigit() and step and step not in _SLURM_SPECIAL_STEPS:
        return int(tasks), f"SLURM_STEP_NUM_TASKS={tasks}, set by srun"
    return 0, ""


def mismatch_message(announced: int, who: str) -> str:
    """Explain a launcher/MPI-library mismatch and how to fix it."""
    library = " ".join(MPI.Get_library_version().strip().splitlines()[0].split())
    on_path = shutil.which("mpiexec")
    own = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    lines = [
        f"mpiflow: the launcher started {announced} processes ({who}), but the MPI library",
        f"that mpi4py loaded ({library}) sees this process alone (world size 1).",
        "The launcher does not belong to that MPI library, so every process believes it is",
        "rank 0 of 1" + (f" (the mpiexec on PATH is {on_path})." if on_path else "."),
        "To fix it, either",
    ]
    if os.path.exists(own):
        lines.append(f"  * launch with the mpiexec of mpi4py's MPI library: {own}")
    else:
        lines.append("  * launch with the mpiexec that belongs to mpi4py's MPI library,")
    lines += [
        "  * or make mpi4py load the launcher's MPI library: set MPI4PY_LIBMPI to its libmpi.so",
        "    (e.g. MPI4PY_LIBMPI=$(dirname $(which mpiexec))/../lib/libmpi.so), or build mpi4py",
        "    against it (pip install --no-binary mpi4py mpi4py).",
        "`python -m mpiflow info` names the MPI library in use; MPIFLOW_IGNORE_LAUNCHER=1 skips",
        "this check.",
    ]
    return "\n".join(lines)


def _check_launcher(comm: MPI.Comm) -> None:
    if comm.Get_size() != 1 or os.environ.get("MPIFLOW_IGNORE_LAUNCHER", "") not in ("", "0"):
        return
    announced, who = launcher_size()
    if announced > 1:
        raise LauncherMismatchError(mismatch_message(announced, who))


def _discover_topology(comm: MPI.Comm) -> Topology:
    rank, size = comm.Get_rank(), comm.Get_size()
    if size == 1:
        return Topology(0, 1, 0, 1, 0, 1)
    local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
    local_rank, local_size = local.Get_rank(), local.Get_size()
    # Node leaders number the nodes in the order of their lowest global rank.
    leaders = comm.Split(0 if local_rank == 0 else MPI.UNDEFINED, key=rank)
    node_info = [0, 0]
    if leaders != MPI.COMM_NULL:
        node_info = [leaders.Get_rank(), leaders.Get_size()]
        leaders.Free()
    node_rank, node_size = local.bcast(node_info, root=0)
    local.Free()
    return Topology(rank, size, local_rank, local_size, node_rank, node_size)


def _format_exception(
    kind: type[BaseException], value: BaseException, tb: TracebackType | None, rank: int
) -> str:
    lines = "".join(traceback.format_exception(kind, value, tb)).rstrip("\n").split("\n")
    return "".join(f"[rank {rank}] {line}\n" for line in lines)


def abort_job(message: str, code: int = 1) -> None:
    """Write ``message`` to stderr and abort every rank of the job (MPI_Abort)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    try:
        sys.stderr.write(message)
        sys.stderr.flush()
    except Exception:
        pass
    MPI.COMM_WORLD.Abort(code)


_previous_hook = sys.excepthook
_installed = False


def _abort_hook(
    kind: type[BaseException], value: BaseException, tb: TracebackType | None
) -> None:
    if world.Get_size() == 1 or threading.current_thread() is not threading.main_thread():
        _previous_hook(kind, value, tb)
        return
    rank = world.Get_rank()
    code = 130 if issubclass(kind, KeyboardInterrupt) else 1
    abort_job(
        _format_exception(kind, value, tb, rank)
        + f"[rank {rank}] mpiflow: aborting the job because rank {rank} failed\n",
        code,
    )


def install_abort_handler() -> None:
    """Make an uncaught exception or Ctrl-C on any rank abort the whole job.

    Without this, a rank that dies leaves the others blocked forever in their next collective.
    Installed on ``import mpiflow``; a no-op at world size 1, where the previous hook runs.
    """
    global _installed, _previous_hook
    if _installed:
        return
    _previous_hook = sys.excepthook
    sys.excepthook = _abort_hook
    _installed = True


world: MPI.Comm = MPI.COMM_WORLD
_check_launcher(world)
topology: Topology = _discover_topology(world)
