"""The examples run at every rank count (in this process, collectively)."""

from __future__ import annotations

import itertools
import pathlib
import re
import runpy

import numpy
import pytest

import mpiflow as flow

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()


def _run(name: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The lines the example prints on this rank (rank 0 prints, the others nothing)."""
    runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    out = capsys.readouterr().out
    if RANK != 0:
        assert out == ""
    return out.splitlines()


@pytest.mark.mpi
@pytest.mark.node_layout
def test_hello_reports_the_ranks_and_the_collectives_results(
        capsys: pytest.CaptureFixture[str]) -> None:
    lines = _run("hello.py", capsys)
    if RANK != 0:
        return
    head = re.fullmatch(r"mpiflow \S+: (\d+) rank\(s\) on (\d+) node\(s\)", lines[0])
    assert head is not None, lines
    assert int(head.group(1)) == SIZE and int(head.group(2)) == flow.env.get_node_size()
    where = [re.fullmatch(r"  rank (\d+): host (\S+), local rank (\d+)", line)
             for line in lines[1:1 + SIZE]]
    assert all(where), lines
    assert [int(m.group(1)) for m in where] == list(range(SIZE))
    # every node has one local rank 0, and its ranks are numbered 0, 1, ... on it
    local = [int(m.group(3)) for m in where]
    assert local.count(0) == flow.env.get_node_size(), local
    assert all(b in (0, a + 1) for a, b in itertools.pairwise(local)), local
    summed = (numpy.arange(4) * SIZE * (SIZE + 1) / 2).tolist()
    assert lines[1 + SIZE:] == [
        f"  all_reduce         -> {summed}",
        f"  gathered (r, r^2)  -> {[[r, r * r] for r in range(SIZE)]}",
        f"  local work meanwhile: {sum(i * i for i in range(10_000))}",
        "all checks passed"]


@pytest.mark.mpi
def test_global_tensors_reports_the_layouts_and_numpys_sum(
        capsys: pytest.CaptureFixture[str]) -> None:
    flow.manual_seed(7)
    lines = _run("global_tensors.py", capsys)
    # the same draws again (every rank draws the whole of a global randn): a + b in numpy
    flow.manual_seed(7)
    placement = flow.placement("cpu", list(range(SIZE)))
    flow.randn(4, 5, placement=placement, sbp=flow.sbp.split(0))
    flow.randn(2, 5)
    a = flow.randn(4, 4, placement=placement, sbp=flow.sbp.split(0)).numpy()
    b = flow.randn(4, 4, placement=placement, sbp=flow.sbp.split(1)).numpy()
    if RANK != 0:
        return
    described = re.fullmatch(r"x: mpiflow\.Size\(\[4, 5\]\) \(mpiflow\.sbp\.split\(dim=0\),\); "
                             r"z = a \+ b: mpiflow\.Size\(\[4, 4\]\) \(mpiflow\.sbp\.(.+),\); "
                             r"local part mpiflow\.Size\(\[(\d+), (\d+)\]\)", lines[0])
    assert described is not None, lines
    mine = len(numpy.array_split(numpy.arange(4), SIZE)[0])  # rank 0's rows (or columns)
    part = {"split(dim=0)": (mine, 4), "split(dim=1)": (4, mine), "broadcast": (4, 4)}
    assert part[described.group(1)] == (int(described.group(2)), int(described.group(3))), lines
    assert lines[1].startswith("checksum ")
    numpy.testing.assert_allclose(float(lines[1].split()[1]), (a + b).sum(), rtol=1e-5)


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


def test_seed_send_recv_delivers_the_tensor() -> None:
    from helpers import run_job

    job = run_job(2, (EXAMPLES / "seed_mpi_send_recv.py").read_text(), timeout=120)
    assert job.returncode == 0, job.stderr
    out = job.stdout  # the two ranks' lines may interleave: each prints a sentence, a tensor
    assert "Rank-0 has sent the following tensor to Rank-1" in out, out
    assert "Rank-1 has recieved the following tensor from Rank-0" in out, out
    assert out.count("tensor([ 1., -1.])") == 2, out  # rank 1 holds what rank 0 sent


def test_seed_sync_trains_with_falling_losses_and_equal_weights() -> None:
    pytest.importorskip("sklearn", reason="the examples extra (scikit-learn) is not installed")
    from helpers import run_job

    job = run_job(4, (EXAMPLES / "seed_mpi_sync.py").read_text(), timeout=120)
    assert job.returncode == 0, job.stderr
    lines = job.stdout.strip().splitlines()
    assert lines[-1] == "all ranks hold the same weights", job.stdout
    losses = [float(line.split()[-1]) for line in lines if line.startswith("epoch ")]
    assert len(losses) == 3, job.stdout
    # each epoch's last batch: from about 2 (ln 10 = 2.3 is a uniform guess) to below 1
    assert losses[0] > losses[1] > losses[2] and losses[2] < 1.0, losses
