"""What each MPI library family needs from its launcher, and which settings it reads: pure tables.

Three families start almost every job on clusters: MPICH (and MVAPICH, Cray MPICH) with its
Hydra ``mpiexec``, Intel MPI with its own Hydra, and Open MPI with PRRTE's ``mpirun``
(``mpiexec``). They take the same request (N processes, so many per node, these hosts) in
different words; :func:`placement_args` and :func:`placement_env` say them in the family's
words, and :func:`mpi_settings` picks out of an environment the variables the library reads
(Open MPI's MCA parameters, Intel MPI's ``I_MPI_*`` and libfabric's ``FI_*``, MPICH's
``MPIR_CVAR_*``). Nothing here imports MPI: ``python -m mpiflow.launch`` and
``python -m mpiflow info`` call these functions with what they found.

Examples:
    >>> placement_args("openmpi", "5.0.11", ppn=2, hosts=["a", "b"])
    ['--map-by', 'ppr:2:node', '--host', 'a:2,b:2']
    >>> placement_args("mpich", "5.0.2", ppn=2, hosts=["a", "b"])
    ['-ppn', '2', '-hosts', 'a,b']
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from .launcher_env import launcher_values

__all__ = ["FAMILIES", "LOCAL_HOSTS", "ROOT_VARIABLES", "SETTING_PREFIXES", "all_local",
           "family_name", "host_name", "job_launcher", "library_family", "mpi_settings",
           "mpich_netmods", "open_mpi_major", "placement_args", "placement_env"]

FAMILIES = {"mpich": "MPICH (Hydra)", "intel": "Intel MPI (Hydra)", "openmpi": "Open MPI"}
# Names every machine gives itself: a job on these hosts alone runs on this machine.
LOCAL_HOSTS = ("localhost", "localhost.localdomain", "ip6-localhost", "::1")
# Open MPI refuses to start as root (containers, CI) unless both are set.
ROOT_VARIABLES = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
# The environment variables each family's library and launcher read as settings; libfabric's
# and UCX's are read by whichever library uses them as its network layer.
SETTING_PREFIXES: dict[str, tuple[str, ...]] = {
    "mpich": ("MPIR_CVAR_", "MPICH_", "HYDRA_", "FI_", "UCX_"),
    "intel": ("I_MPI_", "FI_", "UCX_"),
    "openmpi": ("OMPI_MCA_", "PRTE_MCA_", "PMIX_MCA_", "OMPI_ALLOW_RUN_AS_ROOT", "UCX_"),
}
# Variables with those prefixes that a launcher sets for its own processes (not settings).
_LAUNCHER_SET = re.compile(
    r"^(OMPI_MCA_(orte_|ess|pmix|PREFIXES$|cpu_type$|num_procs$|initial_wdir$|ompi_)"
    r"|PRTE_MCA_(ess|pmix)|PMIX_MCA_(gds|psec|ptl|pcompress)$"
    r"|HYDRA_(PROXY|CONTROL|PMI|BSTRAP|IP_VERSION$|LAUNCH_TYPE$)"
    r"|I_MPI_(HYDRA_UUID$|HYDRA_TOPOLIB$|INFO_|PIN_INFO$|PIN_MAPPING$|MPIRUN$|ROOT$"
    r"|INTERNAL_MEM_POLICY$|BIND_WIN_ALLOCATE$|RETURN_WIN_MEM_NUMA$)"
    r"|MPICH_INTERFACE_HOSTNAME$)")


def library_family(library_version: str) -> str:
    """The family of an MPI library from ``MPI.Get_library_version()``.

    ``Get_library_version`` may be called before MPI is initialized, so a caller can learn
    the family without starting MPI.

    Args:
        library_version: the library's version string.

    Returns:
        "openmpi", "intel", "mpich" (MPICH, MVAPICH, Cray MPICH) or "unknown".

    Examples:
        >>> library_family("MPICH Version:      5.0.2\\nMPICH Release date: ...")
        'mpich'
        >>> library_family("Intel(R) MPI Library 2021.18 for Linux* OS")
        'intel'
    """
    if "Open MPI" in library_version:
        return "openmpi"
    if "Intel(R) MPI" in library_version:
        return "intel"
    if "MPICH" in library_version or "MVAPICH" in library_version:
        return "mpich"
    return "unknown"


def family_name(family: str) -> str:
    """A family's name for people ("Open MPI"); "an unrecognized launcher" when unknown."""
    return FAMILIES.get(family, "an unrecognized launcher")


def open_mpi_major(version: str) -> int:
    """The major version in a version string ("5.0.11" -> 5; "" -> 0)."""
    match = re.match(r"(\d+)", version)
    return int(match.group(1)) if match else 0


def host_name(host: str) -> str:
    """A host entry's name: ``name:slots`` without its slots (an IPv6 address stays whole).

    Examples:
        >>> host_name("node1:16"), host_name("::1")
        ('node1', '::1')
    """
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def all_local(hosts: Sequence[str], this_host: str = "") -> bool:
    """Whether every host names this machine (``localhost``, ``127.x.y.z`` or its own name).

    Examples:
        >>> all_local(["localhost", "127.0.0.1"]), all_local(["localhost", "node2"])
        (True, False)
    """
    def local(host: str) -> bool:
        name = host_name(host)
        return (name in LOCAL_HOSTS or name.startswith("127.")
                or (bool(this_host) and name.split(".")[0] == this_host.split(".")[0]))
    return bool(hosts) and all(local(h) for h in hosts)


def _with_slots(hosts: Sequence[str], slots: int) -> str:
    """Open MPI's ``--host`` list: ``name:slots``, unless an entry names its slots already."""
    return ",".join(h if re.search(r":\d+$", h) else f"{h}:{slots}" for h in hosts)


def placement_args(family: str, version: str, *, ranks: int = 0, ppn: int | None = None,
                   hosts: Sequence[str] = (), hostfile: str | None = None,
                   oversubscribe: bool = False, local_launch: bool = False) -> list[str]:
    """The launcher options that place ``ranks`` processes, in the family's words.

    ============  ===============  ==================================  ================
    request       MPICH Hydra      Open MPI (PRRTE) 4 / 5              Intel MPI Hydra
    ============  ===============  ==================================  ================
    per node      ``-ppn N``       ``--map-by ppr:N:node``             ``-ppn N``
    hosts         ``-hosts a,b``   ``--host a:S,b:S`` (S slots each)   ``-hosts a,b``
    host file     ``-f FILE``      ``--hostfile FILE``                 ``-f FILE``
    more ranks    (nothing)        ``--oversubscribe`` /               (nothing)
    than cores                     ``--map-by ...:OVERSUBSCRIBE``
    this machine  ``-launcher      (nothing: PRRTE starts local         ``-bootstrap
    only          fork``           daemons itself)                     fork``
    ============  ===============  ==================================  ================

    Args:
        family: "mpich", "intel", "openmpi" (anything else: Hydra's words).
        version: the launcher's version (Open MPI 4 and 5 differ).
        ranks: the number of processes (sizes Open MPI's slots when ``ppn`` is not given).
        ppn: processes per node, or None for the library's default placement.
        hosts: host names (``name`` or ``name:slots``), or empty.
        hostfile: a host file (one host per line, repeated per slot, works for all three), or
            None.
        oversubscribe: allow more processes than cores (Open MPI refuses otherwise).
        local_launch: every host is this machine: start its processes without ``ssh``.

    Returns:
        The options, to go after ``-n N``.

    Examples:
        >>> placement_args("openmpi", "4.1.5", ranks=4, hosts=["n1", "n2"], oversubscribe=True)
        ['--host', 'n1:2,n2:2', '--oversubscribe']
        >>> placement_args("intel", "2021.18", ppn=2, hostfile="nodes.txt")
        ['-ppn', '2', '-f', 'nodes.txt']
    """
    if ppn is not None and ppn < 1:
        raise ValueError(f"processes per node must be at least 1, got {ppn}")
    args: list[str] = []
    if family == "openmpi":
        new = open_mpi_major(version) >= 5
        mapping = f"ppr:{ppn}:node" if ppn is not None else ""
        if oversubscribe and new:
            mapping += ":OVERSUBSCRIBE"
        if mapping:
            args += ["--map-by", mapping]
        if hosts:
            slots = ppn if ppn is not None else max(1, -(-ranks // len(hosts)))
            args += ["--host", _with_slots(hosts, slots)]
        if hostfile:
            args += ["--hostfile", hostfile]
        if oversubscribe and not new:
            args.append("--oversubscribe")
        return args
    if ppn is not None:
        args += ["-ppn", str(ppn)]
    if hosts:
        args += ["-hosts", ",".join(hosts)]
    if hostfile:
        args += ["-f", hostfile]
    if local_launch and (hosts or hostfile):
        args += ["-bootstrap", "fork"] if family == "intel" else ["-launcher", "fork"]
    return args


def mpich_netmods(library_version: str) -> tuple[str, ...]:
    """The network modules an MPICH (ch4) library was built with, the default first.

    Examples:
        >>> mpich_netmods("MPICH Version:      5.0.2\\nMPICH Device:       ch4:ucx ofi\\n")
        ('ucx', 'ofi')
        >>> mpich_netmods("Open MPI v5.0.11")
        ()
    """
    match = re.search(r"^MPICH Device:\s*ch4:(.*)$", library_version, re.M)
    return tuple(match.group(1).replace(",", " ").split()) if match else ()


def placement_env(family: str, environ: Mapping[str, str], *, ppn: int | None = None,
                  as_root: bool = False, simulated_nodes: bool = False,
                  library_version: str = "") -> dict[str, str]:
    """The environment variables the family's launcher needs for a job; the user's kept.

    Open MPI run as root needs :data:`ROOT_VARIABLES` (its ranks and any ``mpirun`` they start
    inherit them, unlike ``--allow-run-as-root``). Intel MPI inside a Slurm or PBS job takes the
    scheduler's processes per node and ignores ``-ppn`` unless
    ``I_MPI_JOB_RESPECT_PROCESS_PLACEMENT=0``. An MPICH built with UCX as its default network
    module and libfabric beside it (the ``mpich`` wheel) gets ``MPIR_CVAR_CH4_NETMOD=ofi`` for
    several "nodes" on this machine: UCX over the loopback leaves a small all-reduce waiting
    forever now and then there (docs/hpc.md, "Several nodes on one machine").

    Args:
        family: "mpich", "intel" or "openmpi".
        environ: the current environment: a variable set there is never changed.
        ppn: the processes per node asked for, or None.
        as_root: the launcher runs as root.
        simulated_nodes: the hosts are several names of this machine.
        library_version: ``MPI.Get_library_version()`` (MPICH's network modules).

    Returns:
        The variables to add.

    Examples:
        >>> placement_env("intel", {}, ppn=2)
        {'I_MPI_JOB_RESPECT_PROCESS_PLACEMENT': '0'}
        >>> placement_env("openmpi", {"OMPI_ALLOW_RUN_AS_ROOT": "1"}, as_root=True)
        {'OMPI_ALLOW_RUN_AS_ROOT_CONFIRM': '1'}
        >>> placement_env("mpich", {}, ppn=2, simulated_nodes=True,
        ...               library_version="MPICH Device:       ch4:ucx ofi")
        {'MPIR_CVAR_CH4_NETMOD': 'ofi'}
    """
    wanted: dict[str, str] = {}
    if family == "openmpi" and as_root:
        wanted.update(ROOT_VARIABLES)
    if family == "intel" and ppn is not None:
        wanted["I_MPI_JOB_RESPECT_PROCESS_PLACEMENT"] = "0"
    netmods = mpich_netmods(library_version)
    if family == "mpich" and simulated_nodes and netmods[:1] == ("ucx",) and "ofi" in netmods:
        wanted["MPIR_CVAR_CH4_NETMOD"] = "ofi"
    return {k: v for k, v in wanted.items() if k not in environ}


def mpi_settings(family: str, environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``environ`` that the family's library or launcher reads as settings.

    Those a launcher sets for its own processes (PRRTE's ``PMIX_MCA_gds``, Hydra's proxy
    variables, ...) are left out. An unknown family gets every family's.

    Args:
        family: "mpich", "intel", "openmpi" or "unknown".
        environ: the environment.

    Returns:
        The settings, sorted by name.

    Examples:
        >>> mpi_settings("intel", {"I_MPI_FABRICS": "shm:ofi", "FI_PROVIDER": "tcp",
        ...                        "OMPI_MCA_btl": "self", "HOME": "/root"})
        {'FI_PROVIDER': 'tcp', 'I_MPI_FABRICS': 'shm:ofi'}
    """
    prefixes = SETTING_PREFIXES.get(family) or tuple(
        {p for ps in SETTING_PREFIXES.values() for p in ps})
    return {k: environ[k] for k in sorted(environ)
            if k.startswith(prefixes) and not _LAUNCHER_SET.match(k)}


def job_launcher(environ: Mapping[str, str], family: str) -> str:
    """Which launcher started this process, from the variables it set.

    Args:
        environ: the process's environment.
        family: the library's family: Hydra's variables are the same for MPICH and Intel MPI.

    Returns:
        A description such as ``"Intel MPI Hydra mpiexec"`` or ``"Open MPI / PRRTE mpirun
        (in Slurm job 42)"``; ``"none (a single process, no launcher)"`` when none did.

    Examples:
        >>> job_launcher({"PMI_RANK": "0", "PMI_SIZE": "2"}, "intel")
        'Intel MPI Hydra mpiexec'
        >>> job_launcher({}, "mpich")
        'none (a single process, no launcher)'
    """
    found = launcher_values(environ)
    if found is None:
        name = "none (a single process, no launcher)"
    elif found.launcher.startswith("MPICH / Intel MPI Hydra") and family in ("mpich", "intel"):
        name = ("Intel MPI" if family == "intel" else "MPICH") + " Hydra mpiexec"
    else:
        name = found.launcher
    job = environ.get("SLURM_JOB_ID") or environ.get("PBS_JOBID")
    if job and found is not None:
        name += f" (in {'Slurm' if environ.get('SLURM_JOB_ID') else 'PBS'} job {job})"
    return name
