"""Each MPI family's launcher options and settings (mpiflow.core.mpi_settings): pure tests."""

from __future__ import annotations

import pytest

from mpiflow.core.mpi_settings import (
    all_local,
    job_launcher,
    library_family,
    mpi_settings,
    mpich_netmods,
    placement_args,
    placement_env,
)


@pytest.mark.parametrize(("text", "family"), [
    ("MPICH Version:      5.0.2\nMPICH Release date: ...", "mpich"),
    ("Open MPI v5.0.11, package: Open MPI user@localhost Distribution, ident: 5.0.11", "openmpi"),
    ("Intel(R) MPI Library 2021.18.1 for Linux* OS\n", "intel"),
    ("MPI VERSION    : CRAY MPICH version 8.1.27.26 (ANL base 3.4a2)", "mpich"),
    ("MVAPICH2 Version      :\t2.3.7", "mpich"), ("", "unknown"),
])
def test_library_family(text: str, family: str) -> None:
    assert library_family(text) == family


@pytest.mark.parametrize(("family", "version", "kwargs", "want"), [
    ("mpich", "5.0.2", {}, []),
    ("mpich", "5.0.2", {"ppn": 2, "hosts": ["a", "b"]}, ["-ppn", "2", "-hosts", "a,b"]),
    ("mpich", "5.0.2", {"hostfile": "f"}, ["-f", "f"]),
    ("mpich", "5.0.2", {"hosts": ["localhost", "127.0.0.1"], "local_launch": True},
     ["-hosts", "localhost,127.0.0.1", "-launcher", "fork"]),
    ("mpich", "5.0.2", {"local_launch": True}, []),           # no hosts: nothing to fork to
    ("intel", "2021.18", {"ppn": 1, "hosts": ["a:2", "b"], "local_launch": True},
     ["-ppn", "1", "-hosts", "a:2,b", "-bootstrap", "fork"]),
    ("openmpi", "5.0.11", {"ppn": 3}, ["--map-by", "ppr:3:node"]),
    ("openmpi", "5.0.11", {"oversubscribe": True}, ["--map-by", ":OVERSUBSCRIBE"]),
    ("openmpi", "5.0.11", {"ranks": 5, "hosts": ["a", "b:4"]}, ["--host", "a:3,b:4"]),
    ("openmpi", "5.0.11", {"ppn": 2, "hostfile": "f", "oversubscribe": True},
     ["--map-by", "ppr:2:node:OVERSUBSCRIBE", "--hostfile", "f"]),
    ("openmpi", "4.1.5", {"ppn": 2, "hosts": ["a"], "oversubscribe": True},
     ["--map-by", "ppr:2:node", "--host", "a:2", "--oversubscribe"]),
])
def test_placement_args(family: str, version: str, kwargs: dict, want: list[str]) -> None:
    assert placement_args(family, version, **kwargs) == want


def test_placement_args_refuses_a_bad_ppn() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        placement_args("mpich", "5.0.2", ppn=0)


def test_placement_env_keeps_the_users_values() -> None:
    assert placement_env("openmpi", {}, as_root=True) == {
        "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    assert placement_env("openmpi", {}, as_root=False) == {}
    assert placement_env("mpich", {}, ppn=2, as_root=True) == {}
    assert placement_env("intel", {}, ppn=None) == {}
    assert placement_env("intel", {"I_MPI_JOB_RESPECT_PROCESS_PLACEMENT": "1"}, ppn=2) == {}


WHEEL = "MPICH Version:      5.0.2\nMPICH Device:       ch4:ucx ofi\nMPICH configure: ..."


@pytest.mark.parametrize(("version", "netmods"), [
    (WHEEL, ("ucx", "ofi")), ("MPICH Device:       ch4:ofi\n", ("ofi",)),
    ("MPICH Device:       ch3:nemesis\n", ()), ("Open MPI v5.0.11", ()),
])
def test_mpich_netmods(version: str, netmods: tuple) -> None:
    assert mpich_netmods(version) == netmods


@pytest.mark.parametrize(("kwargs", "want"), [
    ({"simulated_nodes": True, "library_version": WHEEL}, {"MPIR_CVAR_CH4_NETMOD": "ofi"}),
    ({"simulated_nodes": False, "library_version": WHEEL}, {}),  # real nodes: UCX's network
    ({"simulated_nodes": True, "library_version": "MPICH Device:  ch4:ofi\n"}, {}),
    ({"simulated_nodes": True, "library_version": "MPICH Device:  ch4:ucx\n"}, {}),
])
def test_placement_env_gives_simulated_nodes_mpichs_ofi(kwargs: dict, want: dict) -> None:
    assert placement_env("mpich", {}, ppn=2, **kwargs) == want
    assert placement_env("mpich", {"MPIR_CVAR_CH4_NETMOD": "ucx"}, ppn=2, **kwargs) == {}
    assert placement_env("intel", {}, **kwargs) == {}


@pytest.mark.parametrize(("hosts", "this_host", "local"), [
    (["localhost", "127.0.0.1"], "", True), (["127.0.0.2:2"], "", True),
    (["vm", "localhost"], "vm.example.org", True), (["vm2", "localhost"], "vm", False),
    ([], "vm", False),
])
def test_all_local(hosts: list[str], this_host: str, local: bool) -> None:
    assert all_local(hosts, this_host) is local


def test_mpi_settings_picks_the_familys_and_leaves_the_launchers_out() -> None:
    environ = {
        "OMPI_MCA_btl": "^openib", "OMPI_MCA_PREFIXES": "mca,opal", "OMPI_MCA_num_procs": "2",
        "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe", "PMIX_RANK": "0",
        "I_MPI_FABRICS": "shm:ofi", "I_MPI_INFO_NP": "1", "I_MPI_PIN_MAPPING": "1:0 0",
        "FI_PROVIDER": "tcp", "MPIR_CVAR_CH4_NETMOD": "ofi", "UCX_TLS": "rc,sm", "HOME": "/",
        "HYDRA_BSTRAP_PROXY_ID": "0",
    }
    assert mpi_settings("openmpi", environ) == {
        "OMPI_MCA_btl": "^openib", "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe",
        "UCX_TLS": "rc,sm"}
    assert mpi_settings("intel", environ) == {
        "FI_PROVIDER": "tcp", "I_MPI_FABRICS": "shm:ofi", "UCX_TLS": "rc,sm"}
    assert mpi_settings("mpich", environ) == {
        "FI_PROVIDER": "tcp", "MPIR_CVAR_CH4_NETMOD": "ofi", "UCX_TLS": "rc,sm"}
    assert set(mpi_settings("unknown", environ)) == {
        "OMPI_MCA_btl", "PRTE_MCA_rmaps_default_mapping_policy", "I_MPI_FABRICS", "FI_PROVIDER",
        "MPIR_CVAR_CH4_NETMOD", "UCX_TLS"}


@pytest.mark.parametrize(("environ", "family", "want"), [
    ({"PMI_RANK": "1", "PMI_SIZE": "2"}, "mpich", "MPICH Hydra mpiexec"),
    ({"PMI_RANK": "1", "PMI_SIZE": "2"}, "intel", "Intel MPI Hydra mpiexec"),
    ({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "PMIX_RANK": "0"}, "openmpi",
     "Open MPI / PRRTE mpirun"),
    ({"SLURM_PROCID": "3", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "4", "SLURM_JOB_ID": "42"},
     "mpich", "Slurm srun (in Slurm job 42)"),
    ({"SLURM_JOB_ID": "42"}, "mpich", "none (a single process, no launcher)"),
])
def test_job_launcher(environ: dict[str, str], family: str, want: str) -> None:
    assert job_launcher(environ, family) == want
