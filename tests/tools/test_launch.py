"""python -m mpiflow.launch: launcher identification and command building (pure),
and real jobs started through it; none is marked ``mpi``, so all run once, in the 1-rank session."""

from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest
from helpers import MPIEXEC, job_env
from mpi4py import MPI

from mpiflow.core.mpi_settings import mpich_netmods
from mpiflow.launch import (
    Launcher,
    LaunchError,
    Placement,
    build_command,
    compatible,
    find_launcher,
    identify_launcher,
    library_family,
    omp_threads,
    parse_args,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The library these tests run on (the suite runs on MPICH, Open MPI and Intel MPI wheels).
LIBRARY = MPI.Get_library_version()
FAMILY = library_family(LIBRARY)

HYDRA = """HYDRA build details:
    Version:                                 5.0.2
    Release Date:                            Fri Sep 25 20:45:26 UTC 2026
    Process Manager:                         pmi
    Launchers available:                     ssh rsh fork slurm ll lsf sge manual persist
"""
OPENMPI4 = "mpiexec (OpenRTE) 4.1.5\n\nReport bugs to http://www.open-mpi.org/community/help/\n"
OPENMPI5 = "mpiexec (Open MPI) 5.0.3\n\nReport bugs to https://www.open-mpi.org/community/help/\n"
INTEL = ("Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619 (id: c2e19c2f3e)\n"
         "Copyright 2003-2023, Intel Corporation.\n")
LIB_MPICH = "MPICH Version:      5.0.2\nMPICH Release date: Fri Sep 25 20:45:26 UTC 2026\n"
LIB_OPENMPI = "Open MPI v4.1.5, package: Open MPI builder Distribution, ident: 4.1.5, Feb 23, 2023"
LIB_INTEL = "Intel(R) MPI Library 2021.10 for Linux* OS\n"
LIB_CRAY = "MPI VERSION    : CRAY MPICH version 8.1.27.26 (ANL base 3.4a2)\n"


# -- pure parts ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "family", "version"), [
    (HYDRA, "mpich", "5.0.2"),
    (OPENMPI4, "openmpi", "4.1.5"),
    (OPENMPI5, "openmpi", "5.0.3"),
    (INTEL, "intel", "2021.10"),
    ("srun: unrecognized option", "unknown", ""),
])
def test_identify_launcher(text: str, family: str, version: str) -> None:
    launcher = identify_launcher("/x/mpiexec", text)
    assert (launcher.path, launcher.family, launcher.version) == ("/x/mpiexec", family, version)


@pytest.mark.parametrize(("text", "family"), [
    (LIB_MPICH, "mpich"), (LIB_OPENMPI, "openmpi"), (LIB_INTEL, "intel"), (LIB_CRAY, "mpich"),
    ("MVAPICH2 Version      :	2.3.7", "mpich"), ("Some MPI 1.0", "unknown"),
])
def test_library_family(text: str, family: str) -> None:
    assert library_family(text) == family


@pytest.mark.parametrize(("launcher", "library", "ok"), [
    ("mpich", "mpich", True), ("intel", "mpich", True), ("mpich", "intel", True),
    ("openmpi", "openmpi", True), ("openmpi", "mpich", False), ("mpich", "openmpi", False),
    ("intel", "openmpi", False), ("unknown", "openmpi", True), ("mpich", "unknown", True),
])
def test_compatible(launcher: str, library: str, ok: bool) -> None:
    assert compatible(launcher, library) is ok


PROGRAM = ["python", "x.py", "--flag"]


SIMULATED = Placement(ppn=2, hosts=("localhost", "127.0.0.1"))
CLUSTER = Placement(ppn=16, hosts=("n1", "n2"), this_host="login1")


@pytest.mark.parametrize(("where", "simulated"), [
    (SIMULATED, True), (CLUSTER, False), (Placement(hosts=("localhost",)), False),
    (Placement(hosts=("localhost:2", "localhost:2")), False), (Placement(), False),
    (Placement(hosts=("vm", "127.0.0.1"), this_host="vm"), True),
])
def test_simulated_nodes_are_several_names_of_this_machine(where: Placement,
                                                           simulated: bool) -> None:
    assert where.simulates_nodes() is simulated


@pytest.mark.parametrize(("launcher", "ranks", "cores", "tag", "where", "want"), [
    (Launcher("mpiexec", "mpich", "5.0.2"), 8, 2, False, None, ["mpiexec", "-n", "8"]),
    (Launcher("mpiexec", "mpich", "5.0.2"), 2, 8, True, None,
     ["mpiexec", "-n", "2", "-prepend-rank"]),
    (Launcher("mpiexec", "intel", "2021.10"), 4, 4, True, None,
     ["mpiexec", "-n", "4", "-prepend-rank"]),
    (Launcher("mpirun", "openmpi", "4.1.5"), 4, 2, True, None,
     ["mpirun", "-n", "4", "--oversubscribe", "--tag-output"]),
    (Launcher("mpirun", "openmpi", "4.1.5"), 2, 2, False, None, ["mpirun", "-n", "2"]),
    (Launcher("mpirun", "openmpi", "5.0.3"), 4, 2, True, None,
     ["mpirun", "-n", "4", "--map-by", ":OVERSUBSCRIBE", "--output", "tag"]),
    (Launcher("mpirun", "openmpi", "5.0.3"), 2, 16, False, None, ["mpirun", "-n", "2"]),
    # a simulated 2-node job on this machine: no ssh, oversubscribed where cores are few
    (Launcher("mpiexec", "mpich", "5.0.2"), 4, 2, False, SIMULATED,
     ["mpiexec", "-n", "4", "-ppn", "2", "-hosts", "localhost,127.0.0.1", "-launcher", "fork"]),
    (Launcher("mpiexec", "intel", "2021.18"), 4, 2, False, SIMULATED,
     ["mpiexec", "-n", "4", "-ppn", "2", "-hosts", "localhost,127.0.0.1", "-bootstrap", "fork"]),
    (Launcher("mpirun", "openmpi", "5.0.11"), 4, 2, False, SIMULATED,
     ["mpirun", "-n", "4", "--map-by", "ppr:2:node:OVERSUBSCRIBE", "--host",
      "localhost:2,127.0.0.1:2"]),
    # two real nodes: the cores here say nothing about theirs, and ssh (or the batch system)
    (Launcher("mpiexec", "mpich", "5.0.2"), 32, 2, False, CLUSTER,
     ["mpiexec", "-n", "32", "-ppn", "16", "-hosts", "n1,n2"]),
    (Launcher("mpirun", "openmpi", "4.1.5"), 32, 2, False, CLUSTER,
     ["mpirun", "-n", "32", "--map-by", "ppr:16:node", "--host", "n1:16,n2:16"]),
    (Launcher("mpirun", "openmpi", "5.0.11"), 8, 2, True, Placement(hostfile="nodes"),
     ["mpirun", "-n", "8", "--hostfile", "nodes", "--output", "tag"]),
    (Launcher("mpiexec", "intel", "2021.18"), 8, 2, False, Placement(ppn=4, hostfile="nodes"),
     ["mpiexec", "-n", "8", "-ppn", "4", "-f", "nodes"]),
])
def test_build_command(launcher: Launcher, ranks: int, cores: int, tag: bool,
                       where: Placement | None, want: list[str]) -> None:
    got = build_command(launcher, ranks, PROGRAM, cores=cores, tag_output=tag, placement=where)
    assert got == [*want, *PROGRAM]


@pytest.mark.parametrize(("ranks", "cores", "environ", "want"), [
    (4, 16, {}, "4"), (3, 16, {}, "5"), (4, 2, {}, "1"), (1, 1, {}, "1"),
    (4, 16, {"OMP_NUM_THREADS": "8"}, None), (2, 8, {"OMP_NUM_THREADS": ""}, "4"),
])
def test_omp_threads(ranks: int, cores: int, environ: dict[str, str], want: str | None) -> None:
    assert omp_threads(ranks, cores, environ) == want


@pytest.mark.parametrize(("argv", "ranks", "module", "args"), [
    (["-n", "2", "x.py", "--plot", "a.png", "-n", "9"], 2, None, ["x.py", "--plot", "a.png",
                                                                  "-n", "9"]),
    (["-n4", "--timeout=5", "-m", "pkg.mod", "-x", "--", "y"], 4, "pkg.mod", ["-x", "--", "y"]),
    (["--tag-output", "-n", "3", "--", "x.py", "-n", "3"], 3, None, ["x.py", "-n", "3"]),
    (["-n", "1", "-m", "mpiflow"], 1, "mpiflow", []),
])
def test_parse_args_keeps_the_programs_options(argv: list[str], ranks: int, module: str | None,
                                               args: list[str]) -> None:
    parsed = parse_args(argv)
    assert (parsed.ranks, parsed.module, parsed.args) == (ranks, module, args)


# -- finding and running (starts processes) --------------------------------------------------------
def fake_mpiexec(folder: pathlib.Path, output: str) -> str:
    path = folder / "mpiexec"
    path.write_text(f"#!/bin/sh\ncat <<'EOF'\n{output}EOF\n")
    path.chmod(0o755)
    return str(path)


def test_find_launcher_prefers_the_one_beside_python(tmp_path: pathlib.Path) -> None:
    found = find_launcher(LIBRARY, None, {"PATH": ""}, python=sys.executable)
    assert found.family == FAMILY
    assert found.path == os.path.abspath(MPIEXEC)


def test_find_launcher_skips_a_foreign_one_and_refuses_when_none_fits(
        tmp_path: pathlib.Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    foreign = fake_mpiexec(bin_dir, OPENMPI4)
    python = str(tmp_path / "python")            # no mpiexec beside this one
    environ = {"PATH": str(bin_dir)}
    with pytest.raises(LaunchError) as caught:
        find_launcher(LIB_MPICH, None, environ, python=python)
    message = str(caught.value)
    assert foreign in message and "Open MPI" in message and "MPI4PY_LIBMPI" in message
    assert find_launcher(LIB_OPENMPI, None, environ, python=python).path == foreign


def test_find_launcher_looks_beside_mpi4py_libmpi_first(tmp_path: pathlib.Path) -> None:
    site = tmp_path / "site"
    (site / "bin").mkdir(parents=True)
    hydra = fake_mpiexec(site / "bin", HYDRA)
    environ = {"PATH": "", "MPI4PY_LIBMPI": str(site / "lib" / "libmpi.so.12")}
    assert find_launcher(LIB_MPICH, None, environ, python=sys.executable).path == hydra


def launch(*args: str, timeout: float = 120, env: dict[str, str] | None = None
           ) -> subprocess.CompletedProcess[str]:
    """Run ``python -m mpiflow.launch args`` as a fresh job (no variables of ours leak in)."""
    full_env = job_env()
    full_env.pop("MPIEXEC", None)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "mpiflow.launch", *args], capture_output=True,
                          text=True, timeout=timeout, env=full_env, cwd=ROOT)


def script(tmp_path: pathlib.Path, body: str) -> str:
    path = tmp_path / "job.py"
    path.write_text(body)
    return str(path)


def test_a_job_that_succeeds_exits_0() -> None:
    done = launch("-n", "2", "--timeout", "60", "examples/hello.py")
    assert done.returncode == 0, done.stderr
    assert "2 rank(s)" in done.stdout and "all checks passed" in done.stdout


def test_a_failing_job_gives_its_status(tmp_path: pathlib.Path) -> None:
    raising = script(tmp_path, "import mpiflow\nif mpiflow.env.get_rank() == 1:\n"
                               "    raise ValueError('boom')\nmpiflow.distributed.barrier()\n")
    done = launch("-n", "2", "--timeout", "60", raising)
    assert done.returncode != 0
    assert "[rank 1] ValueError: boom" in done.stderr
    exiting = script(tmp_path, "import sys\nsys.exit(3)\n")
    assert launch("-n", "1", "--timeout", "60", exiting).returncode == 3


def test_timeout_stops_the_job_with_124(tmp_path: pathlib.Path) -> None:
    sleeper = script(tmp_path, "import time, mpiflow\ntime.sleep(120)\n")
    start = time.monotonic()
    done = launch("-n", "2", "--timeout", "3", sleeper, timeout=60)
    assert done.returncode == 124
    assert "--timeout 3" in done.stderr
    assert time.monotonic() - start < 30


def test_a_module_and_tagged_output() -> None:
    done = launch("-n", "2", "--timeout", "60", "--tag-output", "-m", "mpiflow", "info")
    assert done.returncode == 0, done.stderr
    tag = "[1,0]<stdout>:" if FAMILY == "openmpi" else "[0]"    # PRRTE's tag, Hydra's
    assert any(line.startswith(tag) and "MPI library" in line
               for line in done.stdout.splitlines()), done.stdout


def test_omp_num_threads_and_arguments_reach_the_job(tmp_path: pathlib.Path) -> None:
    show = script(tmp_path, "import os, sys, mpiflow\nif mpiflow.env.get_rank() == 0:\n"
                            "    print(os.environ['OMP_NUM_THREADS'], sys.argv[1:])\n")
    done = launch("-n", "3", "--timeout", "60", show, "-n", "--plot", "a b")
    assert done.returncode == 0, done.stderr
    cores = len(os.sched_getaffinity(0))
    assert done.stdout.strip() == f"{max(1, cores // 3)} ['-n', '--plot', 'a b']"
    done = launch("-n", "2", "--timeout", "60", show, env={"OMP_NUM_THREADS": "7"})
    assert done.stdout.strip() == "7 []"


def test_dry_run_prints_the_command() -> None:
    done = launch("-n", "3", "--dry-run", "examples/hello.py", "--x")
    assert done.returncode == 0, done.stderr
    flags = ""
    if FAMILY == "openmpi" and len(os.sched_getaffinity(0)) < 3:
        flags = " --map-by :OVERSUBSCRIBE"
    assert done.stdout.strip().splitlines()[-1] == (
        f"{os.path.abspath(MPIEXEC)} -n 3{flags} {sys.executable} examples/hello.py --x")
    if FAMILY == "openmpi" and os.geteuid() == 0:
        assert "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" in done.stdout or (
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM" in os.environ)


def test_the_launcher_does_not_start_mpi_itself() -> None:
    # The job's processes start MPI; the launcher's own MPI_Init would cost a singleton start
    # (a second with Open MPI) or fail on a login node. mpiflow.runtime is what starts it.
    full_env = job_env()
    full_env.pop("MPIEXEC", None)
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "mpiflow.launch", "-n", "2",
                           "--dry-run", "examples/hello.py"], capture_output=True, text=True,
                          timeout=60, env=full_env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:")}
    assert "mpiflow.runtime" not in imported and "mpiflow.communication" not in imported
    assert "mpi4py.MPI" in imported  # loaded for the library's version, not started
    # Imported as a module (not run by -m), mpiflow is whole: MPI started, the faces there.
    done = subprocess.run([sys.executable, "-c", "import mpiflow.launch, mpiflow; "
                           "print(mpiflow.Tensor.__name__, mpiflow.env.get_world_size())"],
                          capture_output=True, text=True, timeout=60, env=full_env, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.split() == ["Tensor", "1"], done.stderr


def test_refusals_exit_2(tmp_path: pathlib.Path) -> None:
    foreign = fake_mpiexec(tmp_path, HYDRA if FAMILY == "openmpi" else OPENMPI5)
    done = launch("-n", "2", "--mpiexec", foreign, "examples/hello.py")
    assert done.returncode == 2
    assert "belongs to another MPI" in done.stderr
    assert ("MPICH (Hydra) 5.0.2" if FAMILY == "openmpi" else "Open MPI 5.0.3") in done.stderr
    done = launch("-n", "2", "no/such/script.py")
    assert done.returncode == 2 and "no such script" in done.stderr
    done = launch("-n", "0", "examples/hello.py")
    assert done.returncode == 2
    assert launch("-n", "2").returncode == 2


SIMULATED_FLAGS = {
    "mpich": "-ppn 2 -hosts localhost,127.0.0.1 -launcher fork",
    "intel": "-ppn 2 -hosts localhost,127.0.0.1 -bootstrap fork",
    "openmpi": "--map-by ppr:2:node{over} --host localhost:2,127.0.0.1:2",
}


def test_dry_run_translates_ppn_and_hosts_for_the_library() -> None:
    done = launch("-n", "4", "--ppn", "2", "--hosts", "localhost,127.0.0.1", "--dry-run",
                  "examples/hello.py")
    assert done.returncode == 0, done.stderr
    over = ":OVERSUBSCRIBE" if len(os.sched_getaffinity(0)) < 4 else ""
    flags = SIMULATED_FLAGS[FAMILY].format(over=over)
    assert done.stdout.strip().splitlines()[-1] == (
        f"{os.path.abspath(MPIEXEC)} -n 4 {flags} {sys.executable} examples/hello.py")
    if FAMILY == "intel":
        assert "I_MPI_JOB_RESPECT_PROCESS_PLACEMENT=0" in done.stdout
    # the mpich wheel (UCX first, libfabric beside it) talks between these "nodes" over ofi
    netmods = mpich_netmods(LIBRARY)
    wheel_like = FAMILY == "mpich" and netmods[:1] == ("ucx",) and "ofi" in netmods
    told = "MPIR_CVAR_CH4_NETMOD" in job_env()
    assert ("MPIR_CVAR_CH4_NETMOD=ofi" in done.stdout) is (wheel_like and not told), done.stdout
    if wheel_like:
        kept = launch("-n", "4", "--ppn", "2", "--hosts", "localhost,127.0.0.1", "--dry-run",
                      "examples/hello.py", env={"MPIR_CVAR_CH4_NETMOD": "ucx"})
        assert "MPIR_CVAR_CH4_NETMOD" not in kept.stdout  # the user's choice stands
        one = launch("-n", "4", "--dry-run", "examples/hello.py")
        assert "MPIR_CVAR_CH4_NETMOD" not in one.stdout  # one node: shared memory alone


def test_dry_run_passes_a_hostfile(tmp_path: pathlib.Path) -> None:
    hostfile = tmp_path / "nodes"
    hostfile.write_text("node1\nnode1\nnode2\nnode2\n")        # PBS's node file format
    done = launch("-n", "4", "--hostfile", str(hostfile), "--dry-run", "examples/hello.py")
    assert done.returncode == 0, done.stderr
    option = "--hostfile" if FAMILY == "openmpi" else "-f"
    assert f" {option} {hostfile} " in done.stdout


@pytest.mark.parametrize(("options", "message"), [
    (["--ppn", "0"], "--ppn must be at least 1"),
    (["--hosts", ","], "--hosts needs at least one host"),
    (["--hostfile", "no/such/file"], "no such host file"),
    (["--hosts", "a", "--hostfile", "setup.cfg"], "not both"),
])
def test_bad_placements_are_refused(options: list[str], message: str) -> None:
    done = launch("-n", "2", *options, "examples/hello.py")
    assert done.returncode == 2 and message in done.stderr, done.stderr


@pytest.mark.skipif(FAMILY == "openmpi", reason="PRRTE takes localhost and 127.0.0.1 for one "
                    "node (docs/hpc.md, 'Several nodes on one machine')")
def test_a_simulated_two_node_job_through_the_launcher() -> None:
    """The documented command: 4 ranks, 2 per node, on two names of this machine."""
    done = launch("-n", "4", "--ppn", "2", "--hosts", "localhost,127.0.0.1", "--timeout", "100",
                  "-m", "mpiflow", "info")
    assert done.returncode == 0, done.stderr
    assert re.search(r"^nodes +: 2$", done.stdout, re.M), done.stdout
    assert re.search(r"^ranks on this node +: 2$", done.stdout, re.M), done.stdout
    launcher = {"mpich": "MPICH Hydra mpiexec", "intel": "Intel MPI Hydra mpiexec"}[FAMILY]
    assert re.search(rf"^launcher +: {launcher}", done.stdout, re.M), done.stdout


def test_ctrl_c_is_forwarded_and_the_job_ends(tmp_path: pathlib.Path) -> None:
    sleeper = script(tmp_path, "import time, mpiflow\nmpiflow.distributed.barrier()\n"
                               "if mpiflow.env.get_rank() == 0:\n"
                               "    print('ready', flush=True)\ntime.sleep(120)\n")
    env = job_env()
    proc = subprocess.Popen([sys.executable, "-m", "mpiflow.launch", "-n", "2", "--timeout",
                             "90", sleeper], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=ROOT)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.5)                       # let both ranks reach their sleep
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code not in (0, 124)
    if FAMILY != "openmpi":  # Hydra forwards SIGINT to the ranks; PRRTE terminates them
        assert "KeyboardInterrupt" in (proc.stderr.read() if proc.stderr else "")


# -- batch job templates ---------------------------------------------------------------------------
TEMPLATES = sorted((ROOT / "scripts").glob("slurm-*.sh")) + sorted(
    (ROOT / "scripts").glob("pbs-*.sh"))


def test_there_are_slurm_and_pbs_templates() -> None:
    names = {path.name for path in TEMPLATES}
    for system in ("slurm", "pbs"):
        assert {f"{system}-one-node.sh", f"{system}-multi-node.sh",
                f"{system}-module-mpi.sh"} <= names


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.name)
def test_template_is_valid_bash_and_documented(path: pathlib.Path) -> None:
    done = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    lines = path.read_text().splitlines()
    assert lines[0] == "#!/bin/bash"
    directive = "#SBATCH " if path.name.startswith("slurm") else "#PBS "
    first_command = next(i for i, line in enumerate(lines)
                         if line.strip() and not line.startswith("#"))
    directives = [i for i, line in enumerate(lines) if line.startswith(directive)]
    assert directives and max(directives) < first_command, "directives must come first"
    assert "set -euo pipefail" in lines
    assert path.name in (ROOT / "docs" / "hpc.md").read_text()


def test_a_launch_inside_a_job_does_not_pass_on_its_torchrun_variables(
        tmp_path: pathlib.Path) -> None:
    """Run from rank 1 of a 2-node job, whose RANK... mpiflow set (the marker names them and
    the process that set them): the new job's ranks get their own, none of the outer job's."""
    # One write per line (the two ranks' output is merged), read back by pattern.
    show = script(tmp_path, "import os, sys\nbefore = os.environ.get('GROUP_RANK')\n"
                            "import mpiflow\nenv = os.environ.get\n"
                            "sys.stdout.write(f\"{before} {env('RANK')} {env('GROUP_RANK')} "
                            "{env('WORLD_SIZE')}\\n\")\n")
    outer = {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "GROUP_RANK": "1",
             "MPIFLOW_LAUNCHER_ENV": "RANK=1,WORLD_SIZE=4,LOCAL_RANK=1,GROUP_RANK=1,PID=1"}
    done = launch("-n", "2", "--timeout", "60", show, env=outer)
    assert done.returncode == 0, done.stderr
    seen = sorted(" ".join(m) for m in re.findall(r"(None|\d+) (\d+) (\d+) (\d+)", done.stdout))
    assert seen == ["None 0 0 2", "None 1 0 2"], done.stdout


MODULE_TEMPLATES = ["slurm-module-mpi.sh", "pbs-module-mpi.sh"]


def _template_part(name: str, start: str, end: str) -> str:
    text = (ROOT / "scripts" / name).read_text()
    first = text.index(start)
    return text[first:text.index(end, first) + len(end)]


@pytest.mark.parametrize("name", MODULE_TEMPLATES)
def test_module_templates_name_the_library_without_starting_mpi(name: str) -> None:
    """The templates' own line, run with this Python: it names the library mpi4py loads."""
    line = _template_part(name, 'LIBRARY="$(', "')\"")
    env = job_env({"PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"})
    done = subprocess.run(["bash", "-c", f"{line}\necho \"$LIBRARY\""], capture_output=True,
                          text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == LIBRARY.replace("\0", "").strip().splitlines()[0].strip()


@pytest.mark.parametrize(("library", "srun_mpi", "pmi_library"), [
    (LIB_OPENMPI, "pmix", ""), (LIB_INTEL, "pmi2", "/usr/lib64/libpmi2.so"),
    (LIB_MPICH, "", ""), (LIB_CRAY, "", ""),
])
def test_slurm_module_template_picks_the_pmi_plugin_per_library(
        library: str, srun_mpi: str, pmi_library: str) -> None:
    block = _template_part("slurm-module-mpi.sh", 'case "$LIBRARY" in', "esac")
    done = subprocess.run(["bash", "-c", f"{block}\necho \"$SRUN_MPI|${{I_MPI_PMI_LIBRARY:-}}\""],
                          capture_output=True, text=True, timeout=30,
                          env={"LIBRARY": library.splitlines()[0], "PATH": os.defpath})
    assert done.stdout.strip() == f"{srun_mpi}|{pmi_library}", done.stderr


@pytest.mark.parametrize(("library", "options"), [
    (LIB_OPENMPI, "-x PATH -x MPI4PY_LIBMPI -x LD_LIBRARY_PATH -x OMP_NUM_THREADS"),
    (LIB_INTEL, "-genvall -f nodes"), (LIB_MPICH, "-genvall -f nodes"),
])
def test_pbs_module_template_passes_the_environment_per_library(library: str,
                                                                options: str) -> None:
    block = _template_part("pbs-module-mpi.sh", 'case "$LIBRARY" in', "esac")
    done = subprocess.run(["bash", "-c", f'{block}\necho "${{EXPORT[*]}}"'], capture_output=True,
                          text=True, timeout=30, env={"LIBRARY": library.splitlines()[0],
                                                      "PBS_NODEFILE": "nodes",
                                                      "PATH": os.defpath})
    assert done.stdout.strip() == options, done.stderr
