"""The MPI process environment: initialization, node topology, launcher checks, abort on failure.

Importing this module initializes MPI (through mpi4py) exactly once. Everything here is
computed eagerly at import, when every rank is known to be executing the same code, so that
later queries such as :func:`mpiflow.env.get_local_rank` never communicate and can never hang.

:func:`install_abort_handler` (run by ``import mpiflow``) sets up failure handling with more
than one rank: an uncaught exception or Ctrl-C in the main thread aborts the job; an uncaught
exception in another thread prints a rank-tagged traceback and ends only that thread (as in
Python and PyTorch; a hang that follows is the watchdog's); and ``sys.exit`` is remembered so
that the other ranks can be told how this one ended (:func:`exit_description`). The collective
watchdog (:mod:`mpiflow.communication.watchdog.monitor`, a layer above this one) is started by
``mpiflow/__init__`` right after.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, NoReturn

from mpi4py import MPI

from .core import settings
from .core.launcher_env import (
    LauncherValues,
    agree_master,
    apply_master_env,
    apply_torchrun_env,
    launcher_values,
    master_env_wanted,
)
from .layouts import placement

__all__ = ["Topology", "LauncherMismatchError", "abort_job", "exit_description", "exit_status",
           "install_abort_handler", "on_os_exit", "topology", "torchrun_message", "world"]

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
    # Open MPI's string ends in a NUL byte, which made the report a "binary file" to grep.
    version = MPI.Get_library_version().replace("\0", "").strip()
    library = " ".join(version.splitlines()[0].split())
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


def torchrun_message(environ: Mapping[str, str]) -> str | None:
    """The error for a process that torchrun started as one of several, or ``None``.

    torchrun starts its processes without MPI: each one is rank 0 of a world of one, so an
    mpiflow job would silently run as that many separate jobs.

    >>> print(torchrun_message({"TORCHELASTIC_RUN_ID": "x", "WORLD_SIZE": "4"}).splitlines()[0])
    mpiflow: this process was started by torchrun (WORLD_SIZE=4), which does not start MPI:
    """
    size = environ.get("WORLD_SIZE", "")
    if not environ.get("TORCHELASTIC_RUN_ID") or not size.isdigit() or int(size) < 2:
        return None
    return "\n".join([
        f"mpiflow: this process was started by torchrun (WORLD_SIZE={size}), which does not "
        "start MPI:",
        f"each of its {size} processes would be rank 0 of a job of its own. Start the program "
        "with an MPI launcher",
        f"instead of torchrun: `mpiexec -n {size} python PROGRAM.py` (or `srun -n {size} ...`, "
        f"or `python -m mpiflow.launch -n {size} PROGRAM.py`).",
        "RANK, LOCAL_RANK, WORLD_SIZE... are set from the MPI launcher's variables, so "
        "programs written for torchrun run unchanged.",
    ])


def _check_launcher(comm: MPI.Comm) -> None:
    if comm.Get_size() != 1 or settings.read("MPIFLOW_IGNORE_LAUNCHER"):
        return
    message = torchrun_message(os.environ)
    if message is not None:
        raise LauncherMismatchError(message)
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


_ABORT_DELAY = 0.2  # seconds between writing the message and MPI_Abort


def abort_job(message: str, code: int = 1) -> NoReturn:
    """Write ``message`` to stderr and abort every rank of the job (MPI_Abort); never returns."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    stream = sys.stderr
    try:
        stream.fileno()
    except Exception:
        # A wrapping excepthook (torch's init_process_group installs one) points sys.stderr
        # at a buffer it prints only after the hook returns; after MPI_Abort it never does.
        stream = sys.__stderr__ or stream
    try:
        stream.write(message)
        stream.flush()
    except Exception:
        pass
    # Give the launcher a moment to forward the message: an abort that comes first can make
    # it drop what is still in the pipe.
    time.sleep(_ABORT_DELAY)
    MPI.COMM_WORLD.Abort(code)
    # MPICH's MPI_Abort can return while its launcher tears the job down: run nothing more
    # (no atexit hook, no second report through the exception hook).
    _real_os_exit(code)


_previous_hook = sys.excepthook
_previous_thread_hook = threading.excepthook
_real_exit = sys.exit
_real_os_exit = os._exit
_exit_request: tuple[object, str] | None = None
_exit_function = "sys.exit"
_os_exit_hooks: list[Callable[[], None]] = []
_main_pid = os.getpid()
_installed = False


def _abort_hook(
    kind: type[BaseException], value: BaseException, tb: TracebackType | None
) -> None:
    if MPI.Is_finalized():  # no MPI call is possible (MPICH would abort with its own words)
        with contextlib.suppress(Exception):
            sys.stderr.write(_format_exception(kind, value, tb, _world_rank))
            sys.stderr.flush()
        return
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


def _thread_hook(args: Any) -> None:
    """An uncaught exception in a thread other than the main one: a rank-tagged traceback."""
    if MPI.Is_finalized() or world.Get_size() == 1 or args.exc_type is SystemExit:
        _previous_thread_hook(args)
        return
    rank = world.Get_rank()
    name = args.thread.name if args.thread is not None else "unknown"
    value = args.exc_value if args.exc_value is not None else args.exc_type()
    text = (f"[rank {rank}] Exception in thread {name} (the thread ends, the job goes on):\n"
            + _format_exception(args.exc_type, value, args.exc_traceback, rank))
    with contextlib.suppress(Exception):
        sys.stderr.write(text)
        sys.stderr.flush()


def _recording_exit(status: object = None) -> NoReturn:
    """``sys.exit``, remembering the status and the caller for the other ranks' watchdogs."""
    global _exit_request, _exit_function
    caller = sys._getframe(1)
    _exit_request = (status, f"{caller.f_code.co_filename}:{caller.f_lineno} in "
                             f"{caller.f_code.co_name}")
    _exit_function = "sys.exit"
    _real_exit(status)  # type: ignore[arg-type]  # sys.exit takes any object


def _recording_os_exit(status: int) -> NoReturn:
    """``os._exit`` of the MPI process: say so on stderr and tell the other ranks, then leave.

    ``os._exit`` skips ``atexit`` and MPI_Finalize, and a launcher that sees a rank leave that
    way ends the others at once (MPICH's Hydra with status 0 and no message). A forked child
    (multiprocessing, data-loader workers) leaves as before, silently.
    """
    if os.getpid() != _main_pid:
        _real_os_exit(status)
    global _exit_request, _exit_function
    caller = sys._getframe(1)
    _exit_request = (status, f"{caller.f_code.co_filename}:{caller.f_lineno} in "
                             f"{caller.f_code.co_name}")
    _exit_function = "os._exit"
    rank = world.Get_rank()
    with contextlib.suppress(Exception):
        os.write(2, (f"[rank {rank}] mpiflow: rank {rank} called {exit_description()}: it "
                     "leaves without MPI_Finalize\n").encode())
    for hook in list(_os_exit_hooks):
        with contextlib.suppress(Exception):
            hook()
    _real_os_exit(status)


def on_os_exit(hook: Callable[[], None]) -> None:
    """Run ``hook`` when this process calls ``os._exit`` (which runs no ``atexit`` hook).

    The watchdog registers its exit notice to the other ranks here.
    """
    if hook not in _os_exit_hooks:
        _os_exit_hooks.append(hook)


def exit_status() -> object:
    """The status this process passed to ``sys.exit`` or ``os._exit`` (None if neither)."""
    return None if _exit_request is None else _exit_request[0]


def exit_description() -> str:
    """How this process is ending, for the ranks that outlive it: ``sys.exit(0) at x.py:3``."""
    if _exit_request is None:
        return "its program ended or raised SystemExit"
    status, where = _exit_request
    return f"{_exit_function}({status!r}) at {where}"


def install_abort_handler() -> None:
    """Make a failure on any rank end the whole job instead of leaving the others waiting.

    With more than one rank: an uncaught exception or Ctrl-C aborts the job (MPI_Abort) with a
    rank-tagged traceback; an uncaught exception in a non-main thread prints a rank-tagged
    traceback (the thread ends, the job goes on); ``sys.exit`` is remembered for the exit
    notice, and ``os._exit`` of this process (not of a forked child) says so on stderr and
    runs the :func:`on_os_exit` hooks first. Installed on ``import mpiflow``, which then
    starts the collective watchdog (``MPIFLOW_TIMEOUT``); with one rank the previous hooks
    run unchanged.
    """
    global _installed, _previous_hook, _previous_thread_hook
    if _installed:
        return
    _previous_hook = sys.excepthook
    sys.excepthook = _abort_hook
    _previous_thread_hook = threading.excepthook
    threading.excepthook = _thread_hook
    if world.Get_size() > 1:
        setattr(sys, "exit", _recording_exit)  # noqa: B010 - sys.exit is typed as a function
        os._exit = _recording_os_exit
    _installed = True


world: MPI.Comm = MPI.COMM_WORLD
_world_rank = world.Get_rank()  # for a traceback after MPI_Finalize, when none can be asked
_check_launcher(world)
topology: Topology = _discover_topology(world)
placement.set_world_size(topology.size)
# torchrun's RANK, LOCAL_RANK, ... for programs that read them, from MPI's own view (never
# replacing a user's). A plain `python x.py` gets none, and loses those a parent job set.
apply_torchrun_env(os.environ, LauncherValues(
    "MPI", topology.rank, topology.size, topology.local_rank, topology.local_size,
    topology.node_rank) if topology.size > 1 or launcher_values(os.environ) is not None
    else None)
# MASTER_ADDR/MASTER_PORT (rank 0's host, a port free there) where unset, agreed now if the
# auto-load hook did not (torch < 2.5, TORCH_DEVICE_BACKEND_AUTOLOAD=0): collective, as is this
# import; the condition is the same on every rank.
if master_env_wanted(os.environ, topology.size):
    apply_master_env(os.environ, *agree_master(world, topology.node_size == 1))
