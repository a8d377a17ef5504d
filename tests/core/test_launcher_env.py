"""torchrun's variables from each MPI launcher's own (mpiflow.core.launcher_env): pure tests."""

from __future__ import annotations

import pytest

from mpiflow.core.launcher_env import MARKER, launcher_values, slurm_tasks_on_node, torchrun_env

# Rank 5 of 8, third on its node of 4, on node 1: as each launcher announces it.
LAUNCHER_ENVS = {
    "hydra": {"PMI_RANK": "5", "PMI_SIZE": "8", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "4",
              "PMI_FD": "9", "HYDI_CONTROL_FD": "7"},
    "intel": {"PMI_RANK": "5", "PMI_SIZE": "8", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "4",
              "I_MPI_HYDRA_TOPOLIB": "hwloc"},
    "openmpi": {"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "8",
                "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "4",
                "OMPI_COMM_WORLD_NODE_RANK": "1", "PMIX_RANK": "5"},
    "mvapich": {"MV2_COMM_WORLD_RANK": "5", "MV2_COMM_WORLD_SIZE": "8",
                "MV2_COMM_WORLD_LOCAL_RANK": "1", "MV2_COMM_WORLD_LOCAL_SIZE": "4"},
    "jsrun": {"JSM_NAMESPACE_RANK": "5", "JSM_NAMESPACE_SIZE": "8",
              "JSM_NAMESPACE_LOCAL_RANK": "1", "JSM_NAMESPACE_LOCAL_SIZE": "4"},
    "pals": {"PALS_RANKID": "5", "PALS_LOCAL_RANKID": "1", "PALS_LOCAL_SIZE": "4",
             "PALS_NODEID": "1", "PMI_RANK": "5", "PMI_SIZE": "8"},
    "pmix": {"PMIX_RANK": "5", "PMIX_SIZE": "8", "PMIX_LOCAL_RANK": "1", "PMIX_LOCAL_SIZE": "4"},
    "slurm": {"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_STEP_NUM_TASKS": "8",
              "SLURM_LOCALID": "1", "SLURM_NODEID": "1", "SLURM_STEP_ID": "0",
              "SLURM_STEP_TASKS_PER_NODE": "4(x2)", "SLURM_TASKS_PER_NODE": "4(x2)"},
}
# Launchers that announce the node's index (GROUP_RANK); the others leave it to MPI.
WITH_NODE = {"pals", "slurm"}


@pytest.mark.parametrize("launcher", sorted(LAUNCHER_ENVS))
def test_each_launcher_gives_torchruns_variables(launcher: str) -> None:
    env = LAUNCHER_ENVS[launcher]
    got = torchrun_env(env)
    expected = {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4"}
    if launcher in WITH_NODE:
        expected["GROUP_RANK"] = "1"
    assert {k: v for k, v in got.items() if k != MARKER} == expected
    assert sorted(item.partition("=")[0] for item in got[MARKER].split(",")) == sorted(expected)


def test_no_launcher_and_a_slurm_batch_script_set_nothing() -> None:
    assert launcher_values({"PATH": "/bin"}) is None
    batch = {"SLURM_PROCID": "0", "SLURM_NTASKS": "8", "SLURM_LOCALID": "0", "SLURM_NODEID": "0"}
    assert torchrun_env(batch) == {}
    assert torchrun_env({**batch, "SLURM_STEP_ID": "batch"}) == {}


def test_mpiexec_inside_a_slurm_allocation_is_the_mpi_launchers() -> None:
    # Hydra's proxies are started by srun: their SLURM_PROCID is the node's, not the rank's.
    env = {**LAUNCHER_ENVS["slurm"], "SLURM_PROCID": "1", "PMI_RANK": "6", "PMI_SIZE": "8",
           "MPI_LOCALRANKID": "2", "MPI_LOCALNRANKS": "4"}
    values = launcher_values(env)
    assert values is not None and values.launcher.startswith("MPICH")
    assert (values.rank, values.local_rank) == (6, 2)


def test_values_already_set_are_kept() -> None:
    env = {**LAUNCHER_ENVS["hydra"], "LOCAL_RANK": "3", "RANK": ""}
    got = torchrun_env(env)
    assert "LOCAL_RANK" not in got and got["RANK"] == "5"


def test_torchrun_started_processes_are_left_alone() -> None:
    env = {**LAUNCHER_ENVS["hydra"], "TORCHELASTIC_RUN_ID": "none", "RANK": "0"}
    assert torchrun_env(env) == {}


def test_values_inherited_from_a_rank_are_replaced() -> None:
    parent = {"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"}
    inherited = torchrun_env(parent)
    assert inherited["RANK"] == "1" and inherited["GROUP_RANK"] == "0"
    # A job started from rank 1 (a nested mpiexec -n 3) inherits RANK=1, WORLD_SIZE=2, ...
    child = {**inherited, "PMI_RANK": "2", "PMI_SIZE": "3", "MPI_LOCALRANKID": "2",
             "MPI_LOCALNRANKS": "3", "WORLD_SIZE": "2"}
    got = torchrun_env(child)
    assert (got["RANK"], got["WORLD_SIZE"], got["LOCAL_RANK"]) == ("2", "3", "2")
    # ...but a value the user changed since is the user's.
    assert "RANK" not in torchrun_env({**child, "RANK": "7"})


def test_mpis_own_view_fills_what_the_launcher_does_not_say() -> None:
    from mpiflow.core.launcher_env import LauncherValues

    got = torchrun_env({"PMIX_RANK": "3"}, LauncherValues("MPI", 3, 4, 1, 2, 1))
    assert (got["WORLD_SIZE"], got["LOCAL_RANK"], got["LOCAL_WORLD_SIZE"], got["GROUP_RANK"]) \
        == ("4", "1", "2", "1")


def test_inconsistent_or_malformed_values_are_not_guessed() -> None:
    got = torchrun_env({"PMI_RANK": "4", "PMI_SIZE": "2", "MPI_LOCALRANKID": "x"})
    assert got["RANK"] == "4" and "WORLD_SIZE" not in got and "LOCAL_RANK" not in got


@pytest.mark.parametrize(("spec", "node", "tasks"), [
    ("4", 0, 4), ("2(x3),1", 2, 2), ("2(x3),1", 3, 1), ("2(x3),1", 4, None), ("2(x", 0, None),
])
def test_slurm_tasks_per_node(spec: str, node: int, tasks: int | None) -> None:
    assert slurm_tasks_on_node(spec, node) == tasks


def test_a_launch_drops_the_values_another_process_set_and_keeps_its_own() -> None:
    from mpiflow.core.launcher_env import apply_torchrun_env

    # Rank 1 of a 2-node job (GROUP_RANK=1, set by mpiflow in process 100) starts a
    # one-node mpiexec -n 2: Hydra says nothing of the node, so GROUP_RANK=1 must go.
    parent = {"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "1"}
    apply_torchrun_env(parent, pid=100)
    parent["GROUP_RANK"] = "1"
    parent[MARKER] = parent[MARKER].replace("PID=100", "GROUP_RANK=1,PID=100")
    child = {**parent, "PMI_RANK": "0"}
    del child["MPI_LOCALNRANKS"]  # and it says nothing of the node's size either
    apply_torchrun_env(child, pid=200)
    assert (child["RANK"], child["WORLD_SIZE"], child["LOCAL_RANK"]) == ("0", "2", "0")
    assert "GROUP_RANK" not in child and "LOCAL_WORLD_SIZE" not in child
    assert child[MARKER].endswith(",PID=200") and "GROUP_RANK" not in child[MARKER]
    # The same process again (the hook, then import mpiflow): what it set itself stays.
    child["GROUP_RANK"] = "0"
    child[MARKER] = child[MARKER].replace("PID=200", "GROUP_RANK=0,PID=200")
    apply_torchrun_env(child, pid=200)
    assert child["GROUP_RANK"] == "0"
    # A plain subprocess of a rank (no launcher at all) keeps none of them...
    plain = {k: v for k, v in child.items() if not k.startswith(("PMI_", "MPI_"))}
    apply_torchrun_env(plain, pid=300)
    assert not {"RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK", MARKER} & set(plain)
    # ...but a value a user changed since is the user's.
    plain = {**{k: v for k, v in child.items() if not k.startswith(("PMI_", "MPI_"))},
             "RANK": "7"}
    apply_torchrun_env(plain, pid=300)
    assert plain["RANK"] == "7" and "WORLD_SIZE" not in plain


def test_a_fresh_job_env_has_none_of_the_recorded_values() -> None:
    from mpiflow.core.launcher_env import fresh_job_env

    env = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "3", "PATH": "/bin",
           MARKER: "RANK=1,WORLD_SIZE=2,LOCAL_RANK=1,PID=5"}
    assert fresh_job_env(env) == {"LOCAL_RANK": "3", "PATH": "/bin"}
    assert fresh_job_env({"RANK": "1"}) == {"RANK": "1"}  # a user's own
