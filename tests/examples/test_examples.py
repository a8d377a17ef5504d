"""The examples run at every rank count (in this process, collectively)."""

from __future__ import annotations

import pathlib
import runpy

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.mpi
@pytest.mark.parametrize("name", ["hello.py", "global_tensors.py"])
def test_example_runs(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(EXAMPLES / name), run_name="__main__")


def test_train_reaches_95_percent_at_4_ranks_and_agrees_with_1() -> None:
    pytest.importorskip("sklearn", reason="the examples extra (scikit-learn) is not installed")
    from helpers import run_job

    script = str(EXAMPLES / "train.py")
    code = f"import sys; sys.argv = ['train.py', '--no-progress']; exec(open({script!r}).read())"
    results = {}
    for ranks in (1, 4):
        job = run_job(ranks, code, timeout=300)
        assert job.returncode == 0, job.stderr
        last = job.stdout.strip().splitlines()[-1]
        assert last.startswith("final test accuracy"), job.stdout
        results[ranks] = float(last.split()[-1])
    assert results[4] >= 0.95
    assert abs(results[4] - results[1]) <= 0.02


@pytest.mark.mpi
def test_global_train_data_and_model_parallel_agree() -> None:
    pytest.importorskip("sklearn", reason="the examples extra (scikit-learn) is not installed")
    import sys

    sys.path.insert(0, str(EXAMPLES))
    try:
        import global_train
    finally:
        sys.path.pop(0)
    results = global_train.main(["--epochs", "2"])
    (loss_d, acc_d), (loss_m, acc_m) = results["data"], results["model"]
    assert abs(loss_d - loss_m) < 1e-4 and acc_d == acc_m
    assert acc_d > 0.7  # after two epochs; five reach about 0.95


@pytest.mark.parametrize(("name", "ranks", "expect"), [
    ("seed_mpi_send_recv.py", 2, "Rank-1 has recieved the following tensor from Rank-0"),
    ("seed_mpi_sync.py", 4, "all ranks hold the same weights"),
])
def test_seed_programs_run(name: str, ranks: int, expect: str) -> None:
    if name == "seed_mpi_sync.py":
        pytest.importorskip("sklearn", reason="the examples extra (scikit-learn) is not installed")
    from helpers import run_job

    job = run_job(ranks, (EXAMPLES / name).read_text(), timeout=120)
    assert job.returncode == 0, job.stderr
    assert expect in job.stdout
