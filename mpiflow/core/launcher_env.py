"""torchrun's variables from an MPI launcher's own: a table per launcher, a pure function.

torchrun gives each process ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` and
``GROUP_RANK`` (the node's index), and torch programs read them before
``init_process_group``. MPI launchers (mpiexec, mpirun, srun) announce the same facts under
their own names. :data:`LAUNCHERS` maps them; :func:`launcher_values` reads them and
:func:`torchrun_env` says which torchrun variables to set. Nothing here starts MPI or imports
anything but the standard library, so torch's backend auto-load hook (which runs at
``import torch``) can load this file on its own, without importing ``mpiflow``.

``MASTER_ADDR``/``MASTER_PORT`` complete torchrun's contract: rank 0's host and a port free
there, which the ranks must agree on, so they come from :func:`agree_master` over MPI (the
communicator is passed in; this module still starts nothing) and :func:`apply_master_env`.

Values a user, a batch script or torchrun set are never replaced. The variables this module
set are recorded in ``MPIFLOW_LAUNCHER_ENV``, so a process started from a rank (a nested
``mpiexec``, a subprocess) recognises inherited values as its parent's guesses and replaces
them with its own launcher's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from typing import Any, NamedTuple

__all__ = ["LAUNCHERS", "LauncherVars", "LauncherValues", "MARKER", "MASTER_NAMES",
           "TORCHRUN_NAMES", "agree_master", "apply_master_env", "apply_torchrun_env",
           "fresh_job_env", "launcher_values", "master_env_wanted", "set_here",
           "slurm_tasks_on_node", "torchrun_env"]

MARKER = "MPIFLOW_LAUNCHER_ENV"
TORCHRUN_NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK")
MASTER_NAMES = ("MASTER_ADDR", "MASTER_PORT")
_RECORDED = TORCHRUN_NAMES + MASTER_NAMES


class LauncherVars(NamedTuple):
    """The variables through which one launcher announces a process's place.

    Each field but ``name`` is a tuple of variable names, the first one set wins; an empty
    tuple means the launcher does not say.
    """

    name: str
    rank: tuple[str, ...]
    size: tuple[str, ...]
    local_rank: tuple[str, ...]
    local_size: tuple[str, ...]
    node: tuple[str, ...]


class LauncherValues(NamedTuple):
    """What a launcher said about this process; ``None`` where it said nothing."""

    launcher: str
    rank: int
    world_size: int | None
    local_rank: int | None
    local_world_size: int | None
    group_rank: int | None


# Most specific first: an mpirun or Hydra mpiexec inside a Slurm allocation inherits the
# allocation's SLURM_* variables, which describe its own daemons, not the ranks.
LAUNCHERS: tuple[LauncherVars, ...] = (
    LauncherVars("Open MPI / PRRTE mpirun", ("OMPI_COMM_WORLD_RANK",), ("OMPI_COMM_WORLD_SIZE",),
                 ("OMPI_COMM_WORLD_LOCAL_RANK",), ("OMPI_COMM_WORLD_LOCAL_SIZE",), ()),
    LauncherVars("MVAPICH mpirun_rsh", ("MV2_COMM_WORLD_RANK",), ("MV2_COMM_WORLD_SIZE",),
                 ("MV2_COMM_WORLD_LOCAL_RANK",), ("MV2_COMM_WORLD_LOCAL_SIZE",), ()),
    LauncherVars("IBM jsrun", ("JSM_NAMESPACE_RANK",), ("JSM_NAMESPACE_SIZE",),
                 ("JSM_NAMESPACE_LOCAL_RANK",), ("JSM_NAMESPACE_LOCAL_SIZE",), ()),
    LauncherVars("Cray PALS mpiexec", ("PALS_RANKID",), ("PMI_SIZE",),
                 ("PALS_LOCAL_RANKID", "PMI_LOCAL_RANK"), ("PALS_LOCAL_SIZE", "PMI_LOCAL_SIZE"),
                 ("PALS_NODEID",)),
    LauncherVars("MPICH / Intel MPI Hydra mpiexec", ("PMI_RANK",), ("PMI_SIZE",),
                 ("MPI_LOCALRANKID", "PMI_LOCAL_RANK"), ("MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"),
                 ()),
    LauncherVars("PMIx", ("PMIX_RANK",), ("PMIX_SIZE",), ("PMIX_LOCAL_RANK",),
                 ("PMIX_LOCAL_SIZE",), ()),
    LauncherVars("Slurm srun", ("SLURM_PROCID",), ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"),
                 ("SLURM_LOCALID",), (), ("SLURM_NODEID",)),
)

# Slurm's batch and "extern" steps: SLURM_PROCID there is the batch script's, not a rank's.
_SLURM_SPECIAL_STEPS = {"4294967290", "4294967291", "4294967292", "4294967293", "4294967294",
                        "4294967295", "batch", "extern", "interactive"}


def _first(environ: Mapping[str, str], names: tuple[str, ...]) -> int | None:
    for name in names:
        value = environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return None


def slurm_tasks_on_node(tasks_per_node: str, node: int) -> int | None:
    """Read Slurm's compressed tasks-per-node list at one node's index.

    Args:
        tasks_per_node: ``SLURM_STEP_TASKS_PER_NODE``, such as ``"2(x3),1"``.
        node: the node's index in the step.

    Returns:
        The number of tasks on that node, or ``None`` if the list is malformed or too short.

    >>> slurm_tasks_on_node("2(x3),1", 3)
    1
    """
    seen = 0
    for item in tasks_per_node.split(","):
        count, sep, repeat = item.strip().partition("(x")
        if not count.isdigit() or (sep and not (repeat.endswith(")")
                                                and repeat[:-1].isdigit())):
            return None
        seen += int(repeat[:-1]) if sep else 1
        if node < seen:
            return int(count)
    return None


def _in_slurm_step(environ: Mapping[str, str]) -> bool:
    step = environ.get("SLURM_STEP_ID", environ.get("SLURM_STEPID", ""))
    return bool(step) and step not in _SLURM_SPECIAL_STEPS


def launcher_values(environ: Mapping[str, str]) -> LauncherValues | None:
    """Read the first launcher of :data:`LAUNCHERS` whose rank variable is set.

    Args:
        environ: the environment (``os.environ`` or a copy).

    Returns:
        The launcher's name and what it says about this process, or ``None`` when no known
        launcher started it (a plain ``python``, a Slurm batch script).

    >>> launcher_values({"PMI_RANK": "1", "PMI_SIZE": "4", "MPI_LOCALRANKID": "1",
    ...                  "MPI_LOCALNRANKS": "2"})[1:]
    (1, 4, 1, 2, None)
    """
    for vars_ in LAUNCHERS:
        rank = _first(environ, vars_.rank)
        if rank is None:
            continue
        if vars_.name == "Slurm srun" and not _in_slurm_step(environ):
            continue
        size = _first(environ, vars_.size)
        local_rank = _first(environ, vars_.local_rank)
        local_size = _first(environ, vars_.local_size)
        node = _first(environ, vars_.node)
        if vars_.name == "Slurm srun" and node is not None:
            per_node = environ.get("SLURM_STEP_TASKS_PER_NODE",
                                   environ.get("SLURM_TASKS_PER_NODE", ""))
            local_size = slurm_tasks_on_node(per_node, node)
        if size is not None and size <= rank:
            size = None  # inconsistent: say nothing rather than something wrong
        if local_rank is not None and local_size is not None and local_size <= local_rank:
            local_size = None
        if size == 1:  # one process: everything is known
            local_rank, local_size, node = 0, 1, 0
        elif size is not None and local_size == size:  # every rank on this node
            node = 0
        return LauncherValues(vars_.name, rank, size, local_rank, local_size, node)
    return None


def _inherited(environ: Mapping[str, str]) -> dict[str, str]:
    """The values an ancestor process set with :func:`torchrun_env` (from the marker)."""
    recorded: dict[str, str] = {}
    for item in environ.get(MARKER, "").split(","):
        name, _, value = item.partition("=")
        if name in _RECORDED:
            recorded[name] = value
    return recorded


def torchrun_env(environ: Mapping[str, str],
                 known: LauncherValues | None = None) -> dict[str, str]:
    """Say which of torchrun's variables to set, from the launcher's (or from ``known``).

    A variable already set is kept, unless an ancestor set it with this function (the
    marker says so, and its value is unchanged): then it is this process's to set.

    Args:
        environ: the environment.
        known: values that are known better than the launcher's (MPI's own rank and
            topology, once MPI runs); where they are ``None``, the launcher's are used.

    Returns:
        The variables to add to the environment, with the marker listing them; empty when
        nothing is to be set.

    >>> env = torchrun_env({"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1",
    ...                     "MPI_LOCALNRANKS": "2", "LOCAL_RANK": "5"})
    >>> env["RANK"], env["WORLD_SIZE"], "LOCAL_RANK" in env, env["GROUP_RANK"]
    ('1', '2', False, '0')
    """
    if environ.get("TORCHELASTIC_RUN_ID"):  # torchrun started this process: its values hold
        return {}
    found = launcher_values(environ)
    values: dict[str, int | None] = dict.fromkeys(TORCHRUN_NAMES)
    for source in (found, known):
        if source is None:
            continue
        for name, value in zip(TORCHRUN_NAMES, source[1:], strict=True):
            if value is not None:
                values[name] = value
    inherited = _inherited(environ)
    updates: dict[str, str] = {}
    for name, value in values.items():
        if value is None:
            continue
        current = environ.get(name)
        ours = current is None or current == "" or inherited.get(name) == current
        if ours and (current != str(value) or name in inherited):
            updates[name] = str(value)
    if not updates:
        return {}
    mine = {**{k: v for k, v in inherited.items() if environ.get(k) == v}, **updates}
    updates[MARKER] = ",".join(f"{name}={mine[name]}" for name in _RECORDED if name in mine)
    return updates


def fresh_job_env(environ: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``environ`` for a new job started from this process: without the torchrun
    variables that :func:`torchrun_env` set here (the marker lists them), nor the marker.

    A new launch (a nested ``mpiexec``, ``python -m mpiflow.launch`` run from a rank, a test
    starting its own job) must get its ranks from its own launcher, not inherit this job's.
    Values a user set (not in the marker, or changed since) are kept.

    >>> env = fresh_job_env({"RANK": "1", "LOCAL_RANK": "7", "PATH": "/bin",
    ...                      "MPIFLOW_LAUNCHER_ENV": "RANK=1,LOCAL_RANK=1"})
    >>> sorted(env.items())
    [('LOCAL_RANK', '7'), ('PATH', '/bin')]
    """
    inherited = _inherited(environ)
    return {k: v for k, v in environ.items()
            if k != MARKER and not (k in inherited and inherited[k] == v)}


def apply_torchrun_env(environ: MutableMapping[str, str], known: LauncherValues | None = None,
                       pid: int | None = None) -> None:
    """Set torchrun's variables in ``environ`` as :func:`torchrun_env` says, and remove those
    another process set (the marker names them and its ``PID``) that this launch does not set.

    A process started from a rank of another job inherits that job's ``RANK``,
    ``GROUP_RANK``...; where its own launcher says nothing of one (or there is no launcher:
    a plain subprocess), the inherited value would be wrong, so it goes. Values this process
    set itself (the hook at ``import torch``, then ``import mpiflow``) are kept.

    Args:
        environ: the environment to change (``os.environ``).
        known: as for :func:`torchrun_env`.
        pid: this process's id (``os.getpid()`` when ``None``).

    >>> env = {"PMI_RANK": "0", "PMI_SIZE": "2", "GROUP_RANK": "1",
    ...        "MPIFLOW_LAUNCHER_ENV": "GROUP_RANK=1,PID=1"}
    >>> apply_torchrun_env(env, pid=2)
    >>> env["RANK"], "GROUP_RANK" in env, env["MPIFLOW_LAUNCHER_ENV"]
    ('0', False, 'RANK=0,WORLD_SIZE=2,PID=2')
    """
    if environ.get("TORCHELASTIC_RUN_ID"):
        return
    me = str(os.getpid() if pid is None else pid)
    updates = torchrun_env(environ, known)
    marker = environ.get(MARKER, "")
    setter = next((item[4:] for item in marker.split(",") if item.startswith("PID=")), None)
    if marker and setter != me:  # another process's values: those not set again go
        for name, value in _inherited(environ).items():
            if name not in updates and environ.get(name) == value:
                del environ[name]
        names = [item for item in updates.get(MARKER, "").split(",")
                 if item.partition("=")[0] in updates]
        if MARKER in updates:
            updates[MARKER] = ",".join(names)
        else:
            environ.pop(MARKER, None)
    environ.update(updates)
    if MARKER in environ:
        items = [item for item in environ[MARKER].split(",") if not item.startswith("PID=")]
        environ[MARKER] = ",".join([*items, f"PID={me}"])


def set_here(environ: Mapping[str, str], name: str) -> bool:
    """Whether ``environ[name]`` is a value mpiflow set (the marker lists it, unchanged).

    >>> set_here({"MASTER_ADDR": "n1", MARKER: "MASTER_ADDR=n1,PID=7"}, "MASTER_ADDR")
    True
    >>> set_here({"MASTER_ADDR": "n2", MARKER: "MASTER_ADDR=n1,PID=7"}, "MASTER_ADDR")
    False
    """
    value = environ.get(name)
    return bool(value) and _inherited(environ).get(name) == value


def master_env_wanted(environ: Mapping[str, str], world_size: int | None) -> bool:
    """Whether to agree on ``MASTER_ADDR``/``MASTER_PORT``: several ranks, not torchrun's
    process, and one of them unset. Every rank must answer alike (the agreement is collective):
    it depends only on the job's size and on variables a launcher gives every rank alike.

    >>> master_env_wanted({"MASTER_ADDR": "n1"}, 4), master_env_wanted({}, 1)
    (True, False)
    """
    if world_size is None or world_size < 2 or environ.get("TORCHELASTIC_RUN_ID"):
        return False
    return any(not environ.get(name) for name in MASTER_NAMES)


def _master_here(single_node: bool) -> tuple[str, str]:
    """This host's name (the loopback address when every rank is on it) and a free port."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))  # the kernel picks a port free on every interface
        port = probe.getsockname()[1]
    return ("127.0.0.1" if single_node else socket.getfqdn()), str(port)


def agree_master(comm: Any, single_node: bool) -> tuple[str, str]:
    """Rank 0's host and a port free there, the same on every rank of ``comm`` (collective).

    Args:
        comm: an mpi4py communicator over the whole job (its rank 0 is torch's rank 0).
        single_node: whether every rank runs on rank 0's node (then ``127.0.0.1``).

    Returns:
        ``(MASTER_ADDR, MASTER_PORT)``, as torchrun gives them. As with torchrun's own choice,
        the port was free when rank 0 looked; nothing holds it.
    """
    chosen = _master_here(single_node) if comm.Get_rank() == 0 else None
    addr, port = comm.bcast(chosen, root=0)
    return str(addr), str(port)


def apply_master_env(environ: MutableMapping[str, str], addr: str, port: str) -> None:
    """Set ``MASTER_ADDR``/``MASTER_PORT`` where unset, recording them in the marker.

    A value already set (by the user, a batch script, a framework) is kept, and so is the
    pair: a lone ``MASTER_ADDR`` keeps its own host, and only the port is added.

    >>> env = {"MPIFLOW_LAUNCHER_ENV": "RANK=1,PID=7"}
    >>> apply_master_env(env, "n1", "29400")
    >>> env["MASTER_ADDR"], env["MASTER_PORT"], env["MPIFLOW_LAUNCHER_ENV"]
    ('n1', '29400', 'RANK=1,MASTER_ADDR=n1,MASTER_PORT=29400,PID=7')
    """
    added = {name: value for name, value in zip(MASTER_NAMES, (addr, port), strict=True)
             if not environ.get(name)}
    if not added:
        return
    environ.update(added)
    items = [item for item in environ.get(MARKER, "").split(",") if item]
    pid = [item for item in items if item.startswith("PID=")]
    kept = [item for item in items if not item.startswith("PID=")
            and item.partition("=")[0] not in added]
    mine = [f"{name}={value}" for name, value in added.items()]
    environ[MARKER] = ",".join([*kept, *mine, *(pid or [f"PID={os.getpid()}"])])
