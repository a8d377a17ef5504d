"""``python -m mpiflow.launch``: start an MPI job with the launcher that matches mpi4py's MPI.

A convenience for laptops, workstations and batch scripts, and a guard against the classic
trap of an ``mpiexec`` from another MPI installation (every process then believes it is rank 0
of 1). Plain ``mpiexec`` and ``srun`` remain first-class; this only builds their command line.

What it does:

1. finds an ``mpiexec``: ``--mpiexec PATH`` or ``$MPIEXEC`` if given, else the first of: the
   ``bin/`` beside ``$MPI4PY_LIBMPI``'s library, the one next to this Python (the mpich
   wheel's), ``mpiexec`` and ``mpirun`` on ``PATH``, whose family matches the library;
2. identifies it from ``mpiexec --version`` (MPICH's Hydra, Intel MPI, Open MPI) and compares
   the family with ``MPI.Get_library_version()``, refusing a mismatch with an explanation;
3. adds the flags the family needs: ``--ppn``, ``--hosts`` and ``--hostfile`` in the family's
   words (:func:`mpiflow.core.mpi_settings.placement_args`: Hydra ``-ppn/-hosts/-f``, Open MPI
   ``--map-by ppr:N:node/--host/--hostfile``), hosts that all name this machine started
   without ``ssh`` (Hydra ``-launcher fork``, Intel MPI ``-bootstrap fork``); Open MPI is told
   to oversubscribe when ``-n`` exceeds the cores here and gets its root variables when run as
   root, Intel MPI ``I_MPI_JOB_RESPECT_PROCESS_PLACEMENT=0`` with ``--ppn``, the MPICH wheel
   ``MPIR_CVAR_CH4_NETMOD=ofi`` on several names of this machine (docs/hpc.md);
   ``--tag-output`` becomes ``-prepend-rank`` (Hydra) or ``--tag-output``/``--output tag``
   (Open MPI 4/5);
4. sets ``OMP_NUM_THREADS`` to ``max(1, cores // n)`` unless it is already set, and leaves
   out torchrun's variables that mpiflow set in this process (when it runs inside a job):
   the ranks get theirs from their own launcher, as under a plain ``mpiexec``;
5. runs the job in its own process group (:func:`mpiflow.core.job.run`), forwards
   SIGINT/SIGTERM (and SIGHUP) to that group, stops it after ``--timeout`` seconds (exit
   status 124), and exits with the job's status.

The launcher process itself never starts MPI (``mpiflow/__init__`` runs it before anything
does: :func:`started_as_launcher`): only the job's processes are MPI processes.

Exit status: the job's; 124 after ``--timeout``; 128 + N when the job died of signal N; 2 when
the launcher itself refuses (bad arguments, no matching ``mpiexec``).

Examples:
    $ python -m mpiflow.launch -n 4 --timeout 600 examples/heat2d.py --plot heat.png
    $ python -m mpiflow.launch -n 2 --tag-output -m mpiflow info
    $ python -m mpiflow.launch -n 8 --dry-run train.py     # print the command, run nothing
    $ python -m mpiflow.launch -n 32 --ppn 16 --hostfile nodes.txt train.py
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .core.extras import install_hint
from .core.job import run
from .core.launcher_env import fresh_job_env
from .core.mpi_settings import (
    all_local,
    family_name,
    host_name,
    library_family,
    open_mpi_major,
    placement_args,
    placement_env,
)

__all__ = [
    "Launcher",
    "Placement",
    "build_command",
    "find_launcher",
    "identify_launcher",
    "library_family",
    "main",
    "mpi_library_version",
    "omp_threads",
    "usable_cores",
]

USAGE_STATUS = 2


class LaunchError(RuntimeError):
    """The launcher refuses to start the job (no suitable mpiexec, bad arguments)."""


@dataclass(frozen=True)
class Launcher:
    """An ``mpiexec`` and what it is.

    Attributes:
        path: the executable.
        family: "mpich" (MPICH, MVAPICH: Hydra), "intel" (Intel MPI's Hydra), "openmpi",
            or "unknown".
        version: the version it reports ("" when not found).
    """

    path: str
    family: str
    version: str

    def describe(self) -> str:
        """A short description such as ``/usr/bin/mpiexec (Open MPI 4.1.5)``."""
        what = family_name(self.family)
        return f"{self.path} ({what}{' ' + self.version if self.version else ''})"


def _version_in(text: str, pattern: str) -> str:
    match = re.search(pattern, text)
    return match.group(1) if match else ""


def identify_launcher(path: str, version_output: str) -> Launcher:
    """What ``mpiexec --version`` printed says about the launcher.

    Args:
        path: the launcher's path (kept in the result).
        version_output: its ``--version`` output (stdout and stderr).

    Returns:
        The :class:`Launcher`, with family "unknown" when the output is not recognized.

    Examples:
        >>> identify_launcher("mpiexec", "mpiexec (Open MPI) 5.0.3\\n").family
        'openmpi'
    """
    text = version_output
    if re.search(r"Open MPI|OpenRTE|open-mpi\.org", text):
        return Launcher(path, "openmpi", _version_in(text, r"\((?:Open MPI|OpenRTE)\)\s*(\S+)"))
    if "Intel(R) MPI" in text:
        return Launcher(path, "intel", _version_in(text, r"Version\s+(\S+)"))
    if "HYDRA" in text or "MPICH" in text or "MVAPICH" in text:
        return Launcher(path, "mpich", _version_in(text, r"Version:\s*(\S+)"))
    return Launcher(path, "unknown", "")


def compatible(launcher_family: str, library: str) -> bool:
    """Whether a launcher of one family can start processes of a library of another.

    MPICH, MVAPICH and Intel MPI all start processes with Hydra over the same PMI protocol;
    Open MPI's launcher serves only Open MPI. An unknown side is given the benefit of the
    doubt (mpiflow still checks the world size at import).
    """
    if "unknown" in (launcher_family, library):
        return True
    hydra = {"mpich", "intel"}
    return launcher_family == library or {launcher_family, library} <= hydra


def usable_cores() -> int:
    """The number of CPU cores this process may run on (its affinity mask where known)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def omp_threads(ranks: int, cores: int, environ: Mapping[str, str]) -> str | None:
    """The ``OMP_NUM_THREADS`` to set, or None to leave the user's value alone.

    Examples:
        >>> omp_threads(4, 16, {}), omp_threads(4, 2, {})
        ('4', '1')
        >>> omp_threads(4, 16, {"OMP_NUM_THREADS": "8"}) is None
        True
    """
    if environ.get("OMP_NUM_THREADS"):
        return None
    return str(max(1, cores // max(1, ranks)))


@dataclass(frozen=True)
class Placement:
    """Where the processes go: per node, on which hosts (all optional).

    Attributes:
        ppn: processes per node, or None for the library's default.
        hosts: host names (``name`` or ``name:slots``).
        hostfile: a host file, or None.
        this_host: this machine's name (hosts that all name it run without ``ssh``).
    """

    ppn: int | None = None
    hosts: tuple[str, ...] = ()
    hostfile: str | None = None
    this_host: str = ""

    def on_this_machine(self) -> bool:
        """Whether the job runs here alone (no hosts, or hosts that all name this machine)."""
        return (not self.hosts and not self.hostfile) or (
            not self.hostfile and all_local(self.hosts, self.this_host))

    def simulates_nodes(self) -> bool:
        """Whether the hosts are several names of this machine (a simulated multi-node job):
        ``Placement(hosts=("localhost", "127.0.0.1")).simulates_nodes()`` is True."""
        names = {host_name(h) for h in self.hosts}
        return len(names) > 1 and self.on_this_machine()


def build_command(launcher: Launcher, ranks: int, program: Sequence[str], *, cores: int,
                  tag_output: bool = False, placement: Placement | None = None) -> list[str]:
    """The full command line that starts ``program`` on ``ranks`` processes.

    Args:
        launcher: the ``mpiexec`` to use.
        ranks: the number of processes.
        program: the command each process runs (``[python, script.py, args...]``).
        cores: the cores available here; Open MPI refuses ``ranks > cores`` unless told.
        tag_output: prefix every output line with the rank that wrote it.
        placement: processes per node and hosts (:func:`placement_args` translates them).

    Returns:
        The argument list.

    Examples:
        >>> hydra = Launcher("mpiexec", "mpich", "5.0.2")
        >>> build_command(hydra, 4, ["python", "x.py"], cores=2, tag_output=True)
        ['mpiexec', '-n', '4', '-prepend-rank', 'python', 'x.py']
        >>> ompi = Launcher("mpirun", "openmpi", "5.0.11")
        >>> build_command(ompi, 4, ["python", "x.py"], cores=2,
        ...               placement=Placement(ppn=2, hosts=("localhost", "127.0.0.1")))[3:7]
        ['--map-by', 'ppr:2:node:OVERSUBSCRIBE', '--host', 'localhost:2,127.0.0.1:2']
    """
    where = placement or Placement()
    here = where.on_this_machine()
    cmd = [launcher.path, "-n", str(ranks)]
    cmd += placement_args(launcher.family, launcher.version, ranks=ranks, ppn=where.ppn,
                          hosts=where.hosts, hostfile=where.hostfile,
                          oversubscribe=here and ranks > cores,
                          local_launch=here and bool(where.hosts))
    if tag_output and launcher.family == "openmpi":
        cmd += ["--output", "tag"] if open_mpi_major(launcher.version) >= 5 else ["--tag-output"]
    elif tag_output and launcher.family in ("mpich", "intel"):
        cmd.append("-prepend-rank")  # Hydra: MPICH, MVAPICH, Intel MPI
    return [*cmd, *program]


def _probe(path: str) -> Launcher:
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return Launcher(path, "unknown", "")
    return identify_launcher(path, done.stdout + done.stderr)


def candidate_paths(environ: Mapping[str, str], python: str) -> list[str]:
    """Where to look for ``mpiexec``, best first (existing executables only, no repeats).

    Args:
        environ: the environment (``MPI4PY_LIBMPI``, ``PATH``).
        python: the Python interpreter whose ``bin/`` may hold the mpich wheel's ``mpiexec``.
    """
    found: list[str] = []
    libmpi = environ.get("MPI4PY_LIBMPI", "")
    places = []
    if os.sep in libmpi:
        prefix = os.path.dirname(os.path.dirname(os.path.abspath(libmpi)))
        places += [os.path.join(prefix, "bin", name) for name in ("mpiexec", "mpirun")]
    places.append(os.path.join(os.path.dirname(python), "mpiexec"))
    path = environ.get("PATH", os.defpath)
    places += [p for p in (shutil.which(n, path=path) for n in ("mpiexec", "mpirun")) if p]
    for place in places:
        if os.path.isfile(place) and os.access(place, os.X_OK):
            real = os.path.abspath(place)
            if real not in found:
                found.append(real)
    return found


def find_launcher(library_version: str, explicit: str | None, environ: Mapping[str, str],
                  python: str = sys.executable, family: str | None = None) -> Launcher:
    """The ``mpiexec`` to use for a library, or a :class:`LaunchError` that explains why not.

    Args:
        library_version: ``MPI.Get_library_version()`` of mpi4py's library.
        explicit: a launcher the user named (``--mpiexec``/``$MPIEXEC``), or None.
        environ: the environment.
        python: the interpreter the job will run.
        family: the launchers' family as the user says (``--family``), for a launcher whose
            ``--version`` does not tell (a site's wrapper script); None: from ``--version``.

    Returns:
        The first candidate whose family matches the library (``explicit`` only, if given).
    """
    library_kind = library_family(library_version)
    library = " ".join(library_version.strip().splitlines()[0].split()) if library_version else "?"
    if explicit:
        path = shutil.which(explicit, path=environ.get("PATH", os.defpath)) or explicit
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise LaunchError(f"the launcher {explicit!r} is not an executable file")
        candidates = [path]
    else:
        candidates = candidate_paths(environ, python)
    probed = []
    for candidate in candidates:  # probe one at a time: the first fit wins
        launcher = _probe(candidate)
        if family is not None and launcher.family != family:
            launcher = Launcher(launcher.path, family, "")
        if compatible(launcher.family, library_kind):
            return launcher
        probed.append(launcher)
    kind = {"mpich": "MPICH family", "intel": "Intel MPI", "openmpi": "Open MPI"}
    what = kind.get(library_kind, library_kind)
    lines = [f'mpi4py loaded the MPI library "{library}" ({what}), but']
    if not probed:
        lines.append("no mpiexec was found (not next to this Python, not on PATH).")
    for launcher in probed:
        lines.append(f"  {launcher.describe()} belongs to another MPI;")
    lines += [
        "such a launcher starts N separate worlds of one process each. Either",
        "  * name the launcher of mpi4py's library: --mpiexec PATH (or MPIEXEC=PATH),",
        "  * or make mpi4py load the launcher's library: MPI4PY_LIBMPI=/path/to/libmpi.so",
        "    (see docs/hpc.md), or install the embedded MPI: " + install_hint("mpich") + ".",
    ]
    raise LaunchError("\n".join(lines))


def _program(args: argparse.Namespace, python: str) -> list[str]:
    if args.module:
        return [python, "-m", args.module, *args.args]
    if not args.args:
        raise LaunchError("nothing to run: give a script (script.py args...) or -m module")
    script, *rest = args.args
    if not os.path.exists(script):
        raise LaunchError(f"no such script: {script}")
    return [python, script, *rest]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m mpiflow.launch",
        usage="python -m mpiflow.launch -n N [--ppn N] [--hosts H1,H2 | --hostfile FILE] "
              "[options] (script.py | -m module) [args ...]",
        description="Run a Python program on N MPI processes with the mpiexec that matches "
                    "mpi4py's MPI library. Exit status: the job's, 124 after --timeout.")
    parser.add_argument("-n", "--np", dest="ranks", type=int, required=True, metavar="N",
                        help="number of processes")
    parser.add_argument("--timeout", type=float, default=None, metavar="S",
                        help="stop the job after S seconds and exit with status 124")
    parser.add_argument("--tag-output", action="store_true",
                        help="prefix each output line with the rank that wrote it")
    parser.add_argument("--mpiexec", default=None, metavar="PATH",
                        help="the launcher to use (default: $MPIEXEC, else found automatically)")
    parser.add_argument("--family", default=None, choices=["mpich", "intel", "openmpi"],
                        help="the launcher's MPI family, when its --version does not tell")
    parser.add_argument("--ppn", type=int, default=None, metavar="N",
                        help="processes per node (Hydra -ppn, Open MPI --map-by ppr:N:node)")
    parser.add_argument("--hosts", default=None, metavar="H1,H2",
                        help="comma-separated hosts, each optionally host:slots")
    parser.add_argument("--hostfile", default=None, metavar="FILE",
                        help="a host file: one host per line, repeated per slot (Hydra -f, "
                             "Open MPI --hostfile)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the command and the environment changes, run nothing")
    parser.add_argument("-m", dest="module", default=None, metavar="MODULE",
                        help="run a module, as python -m MODULE")
    parser.add_argument("args", nargs=argparse.REMAINDER,
                        help="the script and its arguments (or the module's arguments)")
    return parser


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse the launcher's options; everything from the script (or ``-m MODULE``) on is kept
    for the program, options included (``launch -n 2 x.py --plot a.png``)."""
    argv = list(argv)
    ours: list[str] = []
    with_value = {"-n", "--np", "--timeout", "--mpiexec", "-m", "--family", "--ppn", "--hosts",
                  "--hostfile"}
    i = 0
    while i < len(argv):
        item = argv[i]
        if item == "--":
            break
        if not item.startswith("-") or item == "-":
            break
        take = 2 if item in with_value else 1
        ours += argv[i:i + take]
        i += take
        if item == "-m":
            break
    rest = argv[i + 1:] if i < len(argv) and argv[i] == "--" else argv[i:]
    args = _parser().parse_args([*ours, "--", *rest] if rest else ours)
    if args.args and args.args[0] == "--":
        args.args = args.args[1:]
    return args


def placement_of(args: argparse.Namespace) -> Placement:
    """The :class:`Placement` the options ask for, checked (a :class:`LaunchError` if not)."""
    if args.ppn is not None and args.ppn < 1:
        raise LaunchError(f"--ppn must be at least 1, got {args.ppn}")
    hosts = tuple(h.strip() for h in (args.hosts or "").split(",") if h.strip())
    if args.hosts is not None and not hosts:
        raise LaunchError("--hosts needs at least one host name")
    if args.hostfile is not None and not os.path.isfile(args.hostfile):
        raise LaunchError(f"no such host file: {args.hostfile}")
    if hosts and args.hostfile:
        raise LaunchError("give --hosts or --hostfile, not both")
    return Placement(args.ppn, hosts, args.hostfile, socket.gethostname())


def main(argv: Sequence[str] | None = None) -> int:
    """The command line entry point; returns the exit status.

    Examples:
        >>> main(["-n", "2", "--timeout", "60", "no_such_job.py"])    # refused, said on stderr
        2
    """
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.ranks < 1:
            raise LaunchError(f"-n must be at least 1, got {args.ranks}")
        if args.timeout is not None and args.timeout <= 0:
            raise LaunchError(f"--timeout must be positive, got {args.timeout:g}")
        placement = placement_of(args)
        program = _program(args, sys.executable)
        explicit = args.mpiexec or os.environ.get("MPIEXEC") or None
        library_version = mpi_library_version()
        launcher = find_launcher(library_version, explicit, os.environ, family=args.family)
    except LaunchError as error:
        print(f"mpiflow.launch: {error}", file=sys.stderr)
        return USAGE_STATUS
    cores = usable_cores()
    as_root = hasattr(os, "geteuid") and os.geteuid() == 0
    cmd = build_command(launcher, args.ranks, program, cores=cores,
                        tag_output=args.tag_output, placement=placement)
    # A new launch: its ranks take torchrun's RANK, LOCAL_RANK... from their own launcher
    # (the backend's hook, import mpiflow), not from the job this may run inside.
    env = fresh_job_env(os.environ)
    per_node = args.ppn if args.ppn is not None else args.ranks
    changes = placement_env(launcher.family, env, ppn=args.ppn, as_root=as_root,
                            simulated_nodes=placement.simulates_nodes(),
                            library_version=library_version)
    # the ranks that share this machine's cores (on a cluster: one node's, as many as here)
    threads = omp_threads(args.ranks if placement.on_this_machine() else per_node, cores, env)
    if threads is not None:
        changes["OMP_NUM_THREADS"] = threads
    env.update(changes)
    if args.dry_run:
        for name, value in changes.items():
            print(f"{name}={value}")
        print(" ".join(_quote(c) for c in cmd))
        return 0
    sys.stdout.flush()
    return run(cmd, env, args.timeout)


def started_as_launcher(argv: Sequence[str], orig_argv: Sequence[str]) -> bool:
    """Whether this process is ``python -m mpiflow.launch``, asked while ``mpiflow`` imports.

    Python sets ``sys.argv[0]`` to ``"-m"`` while it imports the packages of a ``-m`` module;
    ``sys.orig_argv`` names the module. ``mpiflow/__init__`` then runs the launcher at once and
    exits, before anything starts MPI: the launcher only starts the job's processes, and a
    process of its own in MPI would cost a singleton ``MPI_Init`` (a second with Open MPI, a
    failure on some clusters' login nodes).

    Args:
        argv: ``sys.argv``.
        orig_argv: ``sys.orig_argv`` (empty before Python 3.10).

    Returns:
        True only for ``python [options] -m mpiflow.launch ...`` (or ``-mmpiflow.launch``).

    Examples:
        >>> started_as_launcher(["-m", "-n", "2"], ["python", "-m", "mpiflow.launch", "-n", "2"])
        True
        >>> started_as_launcher(["-m", "info"], ["python", "-m", "mpiflow", "info"])
        False
    """
    if list(argv[:1]) != ["-m"]:
        return False
    for i, word in enumerate(orig_argv[1:], 1):
        if word == "-m":
            return orig_argv[i + 1:i + 2] == ["mpiflow.launch"]
        if word.startswith("-m"):
            return word == "-mmpiflow.launch"
    return False


def mpi_library_version() -> str:
    """mpi4py's ``MPI.Get_library_version()``, without initializing MPI where it is not yet.

    MPI allows the call before ``MPI_Init``; with ``mpi4py.rc.initialize`` off, importing
    ``mpi4py.MPI`` loads the library without starting it (a process that imported ``mpiflow``
    has started it already: the answer is the same).
    """
    import mpi4py

    if "mpi4py.MPI" not in sys.modules:
        mpi4py.rc.initialize = False
        mpi4py.rc.finalize = False
    from mpi4py import MPI

    return MPI.Get_library_version().replace("\0", "")


def _quote(word: str) -> str:
    return word if re.fullmatch(r"[\w@%+=:,./-]+", word) else "'" + word.replace("'", "'\\''") + "'"


if __name__ == "__main__":
    sys.exit(main())
