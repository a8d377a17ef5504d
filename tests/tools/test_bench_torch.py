"""python -m mpiflow.bench --suite torch: its options, tables and goals, and real 2-rank jobs.

The pure tests need neither torch nor more than one rank; the jobs (unmarked, so they run in
the 1-rank session only: they start their own ``mpiexec``) need torch and are skipped, with the
reason, where it is missing.
"""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import run_job

from mpiflow.bench.cli import build_parser, settings_from_args
from mpiflow.bench.metrics import Timings
from mpiflow.bench.plan import SUITES, Settings
from mpiflow.bench.suites import ALL_RUNNERS, OPTIONAL_SUITES, SUITE_RUNNERS, expand_suites
from mpiflow.bench.torch_report import format_torch
from mpiflow.bench.torch_suite import (
    DDP_SIDES,
    SIDES,
    TORCH_OPS,
    DDPStepResult,
    TorchOpResult,
    TorchResult,
    TorchRow,
    TorchSettings,
    goal_checks,
    torch_settings,
)

HAVE_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAVE_TORCH,
                                 reason="PyTorch is not installed (pip install torch)")
MiB = 1 << 20
ALL = (*TORCH_OPS, "ddp")


# -- options ----------------------------------------------------------------------------------

def test_torch_is_an_optional_suite() -> None:
    assert "torch" in OPTIONAL_SUITES and "torch" not in SUITES
    assert expand_suites(["all"]) == SUITES  # all: the suites that need nothing more
    assert expand_suites(["torch", "osu", "torch"]) == ("osu", "torch")
    assert expand_suites(["all", "torch"]) == (*SUITES, "torch")
    assert set(ALL_RUNNERS) == set(SUITE_RUNNERS) | set(OPTIONAL_SUITES)
    assert ALL_RUNNERS["torch"].check is not None


def test_torch_options() -> None:
    parse = build_parser().parse_args
    plain = settings_from_args(parse(["--suite", "ddp"]))
    assert type(plain) is Settings  # the torch options only come with the torch suite
    s = settings_from_args(parse(["--suite", "torch", "--quick"]))
    assert isinstance(s, TorchSettings) and s.suites == ("torch",) and s.ops == ()
    assert s.torch_ops == ALL and s.sizes == (8, 1024, 128 << 10, MiB)
    assert (s.torch_ddp_features, s.torch_ddp_width, s.torch_ddp_batch, s.torch_threads) == (
        512, 1024, 32, 1)
    s = settings_from_args(parse(["--suite", "torch", "--torch-ops", "ddp,broadcast",
                                  "all_reduce", "--torch-ddp-width", "8", "--torch-threads", "2",
                                  "--max-bytes", "64", "--factor", "8"]))
    assert s.torch_ops == ("all_reduce", "broadcast", "ddp")  # in the suite's order
    assert s.torch_ddp_width == 8 and s.torch_threads == 2 and s.sizes == (8, 64)
    assert settings_from_args(parse(["--suite", "torch", "--torch-ops", "all"])).torch_ops == ALL
    with pytest.raises(ValueError, match="unknown torch operation 'allreduce'"):
        settings_from_args(parse(["--suite", "torch", "--torch-ops", "allreduce"]))
    with pytest.raises(ValueError, match="add torch to --suite"):
        settings_from_args(parse(["--torch-ops", "all_reduce"]))
    with pytest.raises(ValueError, match="--torch-ddp-batch must be positive"):
        settings_from_args(parse(["--suite", "torch", "--torch-ddp-batch", "0"]))
    # Settings from elsewhere (run_suite) take the defaults; the others are kept.
    again = torch_settings(s, torch_ddp_batch=4)
    assert again.torch_ops == s.torch_ops and again.torch_ddp_width == 8
    assert again.torch_ddp_batch == 4 and again.sizes == (8, 64)


# -- tables and goals -------------------------------------------------------------------------

def _row(op: str, size: int, backend_us: float, raw_us: float, gloo_us: float,
         nranks: int = 2) -> TorchRow:
    times = tuple((t * 1e-6, 2 * t * 1e-6) for t in (backend_us, raw_us, gloo_us))
    # The backend beside gloo (second phase) a little slower than beside raw mpi4py.
    beside_gloo = Timings(("backend", "gloo"), (tuple(1.25 * t for t in times[0]), times[2]))
    return TorchRow(op, size, size, 10, 2, nranks, 1.0, Timings(SIDES, times), beside_gloo)


def _result(nranks: int = 2, ddp_bound_ms: float = 2.8) -> TorchResult:
    reduce = TorchOpResult("all_reduce", "dist.all_reduce(t)", "comm.Allreduce(...)",
                           "2(n-1)/n",
                           (_row("all_reduce", 8, 2.0, 1.0, 30.0, nranks),
                            _row("all_reduce", 1024, 8.0, 1.0, 30.0, nranks),
                            _row("all_reduce", MiB, 105.0, 100.0, 400.0, nranks),
                            _row("all_reduce", 4 * MiB, 120.0, 100.0, 1200.0, nranks)))
    send = TorchOpResult("send_recv", "dist.send(t, peer); dist.recv(t, peer)", "comm.Send",
                         "1", ())
    ddp = DDPStepResult(4, 8, 2, 76, nranks, 5,
                        Timings(DDP_SIDES, ((3e-3, 4e-3), (9e-3, 1e-2), (1e-3, 1e-3),
                                            (ddp_bound_ms * 1e-3, 3.8e-3), (1.5e-3, 1.6e-3),
                                            (2.9e-3, 3.9e-3), (3.1e-3, 4.1e-3))))
    return TorchResult("2.x", 1, nranks, 2, "min", (reduce, send), ddp)


def test_rows_and_goals() -> None:
    result = _result()
    rows = result.ops[0].rows
    assert rows[0].vs_raw == 2.0 and rows[0].gloo_vs_backend == 12.0  # 30 / (1.25 x 2)
    assert rows[0].busbw("raw") == pytest.approx(8 / 1e-6 / 1e9)
    checks = goal_checks(result)
    assert [c.met for c in checks] == [True, False, True]  # 8 B, >= 1 MiB (1.2 at 4 MiB), DDP
    assert checks[1].value == pytest.approx(1.2) and checks[1].where == "4 MiB"
    assert checks[2].value == pytest.approx((3 / 2.8 + 4 / 3.8) / 2)  # paired, the median
    slow = goal_checks(_result(ddp_bound_ms=2.0))[2]
    assert slow.met is False
    # Judged at 2 ranks only; without the DDP step or the sizes, not measured.
    assert [c.met for c in goal_checks(_result(nranks=4))] == [None, None, None]
    bare = TorchResult("2.x", 1, 2, 1, "min", (), None)
    assert [(c.value, c.met) for c in goal_checks(bare)] == [(None, None)] * 3
    data = json.loads(json.dumps(result.to_json()))
    assert data["ops"]["all_reduce"]["rows"][0]["backend_vs_raw"] == 2.0
    assert data["ops"]["all_reduce"]["rows"][0]["gloo_pass"]["gloo"]["time_us"] == pytest.approx(30)
    assert data["ddp"]["gloo_vs_backend"] == pytest.approx(2.75)
    assert data["ddp"]["backend_vs_bound"] == pytest.approx((3 / 2.8 + 4 / 3.8) / 2)
    # DDP's own cost: reducer - local per round (0.5, 0.6 ms), the median; the floor adds it
    # to the bound, round by round.
    assert data["ddp"]["reducer_cost_us"] == pytest.approx(550)
    assert data["ddp"]["backend_vs_floor"] == pytest.approx((3 / 3.3 + 4 / 4.4) / 2)
    assert [g["met"] for g in data["goals"]] == [True, False, True]


def test_tables() -> None:
    text = format_torch(_result())
    assert "== torch all_reduce" in text and "vs gloo `dist.all_reduce(t, group=gloo)`" in text
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:1] == ["size"])
    assert lines[header].split() == ["size", "iters", "backend", "us", "GB/s", "raw", "us",
                                     "GB/s", "gloo", "us", "GB/s", "backend/raw",
                                     "gloo/backend", "goal"]
    cells = [lines[header + k].split() for k in range(1, 5)]
    assert [c[9] for c in cells] == ["2.000", "8.000", "1.050", "1.200"]
    assert cells[0][10] == "12.000"  # gloo/backend, from the second phase
    assert [" ".join(c[11:]) for c in cells] == ["ok (<= 3)", "", "ok (<= 1.1)", "MISS (<= 1.1)"]
    assert "skipped: needs 2 ranks" in text and "torch threads per rank: 1" in text
    assert "summary torch ddp:" in text and "gloo/backend = 2.750" in text
    assert "backend/bound = 1.062" in text
    assert ("DDP's own cost (reducer - local) 0.550 ms, backend/(bound + DDP's own cost) = "
            "0.909") in text
    at = lines.index("== torch ddp")
    assert lines[at + 2].split()[-4:] == ["vs", "local", "vs", "bound"]
    table = {line.split()[0]: line.split()[-3:] for line in lines[at + 3:at + 3 + len(DDP_SIDES)]}
    assert table["reducer"] == ["1.500", "1.550", "0.478"]  # vs bound: paired (1.5/2.8, 1.6/3.8)
    assert lines[-1].startswith("goals (at 2 ranks): all_reduce 8 B: backend/raw <= 3: 2.000 "
                                "at 8 B met;")
    assert lines[-1].endswith("DDP step: backend/bound <= 1.1: 1.062 met")
    assert "judged at 2 ranks (here 4)" in format_torch(_result(nranks=4))
    md = format_torch(_result(), markdown=True).splitlines()
    assert md[0] == "### torch" and "### torch all_reduce" in md and "### torch ddp" in md
    i = md.index("### torch all_reduce")
    assert md[i + 4].startswith("| size | iters | backend us |") and md[i + 5].startswith("| ---:")
    assert md[2].startswith("- torch 2.x, 2 rank(s)") and md[-1].startswith("- goals (at 2 ranks)")


@pytest.mark.mpi
def test_each_round_runs_the_sides_in_another_order() -> None:
    from mpi4py import MPI

    from mpiflow.bench.torch_suite import _interleaved

    calls: list[str] = []

    def side(name: str, spin: int) -> Callable[[], None]:
        def call() -> None:
            calls.append(name)
            sum(range(spin))

        return call

    sides = {"a": side("a", 0), "b": side("b", 20000), "c": side("c", 0)}
    timer = MPI.COMM_WORLD.Dup()
    try:
        times = _interleaved([sides], ("a", "b", "c"), [3], [1], 6, timer)
    finally:
        timer.Free()
    assert times.shape == (1, 6, 3)
    assert (times[0, :, 1] > times[0, :, 0]).all() and (times[0, :, 1] > times[0, :, 2]).all()
    # Warm-up once per side, then per round: one untimed call and 3 timed ones of each side,
    # the sides in the round's order; the 6 rounds visit the 6 orders.
    rounds = calls[3:]
    orders = {"".join(rounds[12 * r:12 * r + 3]) for r in range(6)}
    assert len(rounds) == 6 * 12 and orders == {"abc", "acb", "bac", "bca", "cab", "cba"}


# -- jobs ---------------------------------------------------------------------------------------

_ARGS = ["--suite", "torch", "--quick", "--max-bytes", "64", "--rounds", "1", "--iters", "5",
         "--warmup", "1", "--torch-ddp-features", "4", "--torch-ddp-width", "8",
         "--torch-ddp-batch", "2"]


def test_without_torch_it_says_so() -> None:
    code = ("import sys; sys.modules['torch'] = None\n"  # import torch now fails
            "import mpiflow.bench.cli as cli, mpiflow.bench.torch_suite\n"
            "sys.exit(cli.main(['--suite', 'torch', '--quick']))")
    job = run_job(2, code, timeout=60)
    assert job.returncode == 2, job.stderr
    assert job.stderr.count("python -m mpiflow.bench: error: --suite torch needs PyTorch") == 1
    assert job.stdout == ""  # nothing ran


@needs_torch
@pytest.mark.timeout(300)
def test_torch_suite_job(tmp_path: Path) -> None:
    out = tmp_path / "torch.json"
    code = (f"import runpy, sys; sys.argv = ['mpiflow.bench', *{_ARGS!r}, '--json', "
            f"{str(out)!r}]; runpy.run_module('mpiflow.bench', run_name='__main__')")
    job = run_job(2, code, timeout=240, env={"OMP_NUM_THREADS": "1"})
    assert job.returncode == 0, job.stderr
    lines = job.stdout.splitlines()
    assert sum(line == "== torch" for line in lines) == 1  # rank 0 only
    assert "torch threads per rank: 1" in job.stdout
    for op in TORCH_OPS:
        at = lines.index(f"== torch {op}")
        assert lines[at + 2].split()[:3] == ["size", "iters", "backend"]
        table = [line.split() for line in lines[at + 3:at + 5]]
        assert [c[0] + " " + c[1] for c in table] == ["8 B", "64 B"], (op, table)
        for cells in table:
            numbers = [float(c) for c in cells[2:11]]  # iters, 3 x (us, GB/s), 2 ratios
            assert all(math.isfinite(n) and n >= 0 for n in numbers), (op, cells)
            assert all(numbers[k] > 0 for k in (0, 1, 3, 5, 7, 8)), (op, cells)  # times, ratios
    at = lines.index("== torch ddp")
    assert "Linear(4, 8), ReLU, Linear(8, 4) (76 parameters" in lines[at + 1]
    ddp = {line.split()[0]: line for line in lines[at + 3:at + 3 + len(DDP_SIDES)]}
    assert set(ddp) == set(DDP_SIDES)
    assert all(float(line.split()[-3]) > 0 for line in ddp.values())  # ms per step
    for op in TORCH_OPS:
        assert any(line.startswith(f"summary torch {op}: worst backend/raw") for line in lines)
    assert any(line.startswith("summary torch ddp:") for line in lines)
    assert lines[-1].startswith("goals (at 2 ranks): all_reduce 8 B: backend/raw <= 3: ")
    data = json.loads(out.read_text())["suites"]["torch"]
    assert data["ranks"] == 2 and data["threads"] == 1 and list(data["ops"]) == list(TORCH_OPS)
    assert all(len(o["rows"]) == 2 for o in data["ops"].values())
    assert data["ddp"]["params"] == 76 and data["ddp"]["gloo_vs_backend"] > 0
    assert data["ddp"]["backend_vs_bound"] > 0
    assert [g["met"] is None for g in data["goals"]] == [False, True, False]  # no 1 MiB row


_SIDES_AGREE = r"""
import torch, torch.distributed as dist
from mpi4py import MPI
import mpiflow.torch
from mpiflow.bench.torch_suite import (DDP_SIDES, SIDES, TORCH_OPS, Env, build_ddp_steps,
                                       build_op, init_groups)

gloo, made = init_groups(dist)
comm = MPI.COMM_WORLD.Dup()
env = Env(torch, dist, comm, gloo, comm.rank, comm.size)
for name in TORCH_OPS:
    got = {}
    for side in SIDES:
        prepared, layout = build_op(env, name, 64)
        src = prepared.recv if prepared.send is None else prepared.send
        src.copy_(torch.arange(src.numel(), dtype=torch.float32) % 5 + 1 + 10 * comm.rank)
        prepared.sides[side]()
        got[side] = prepared.recv.clone()
    assert got["backend"].abs().sum() > 0, name
    for side in SIDES:
        assert torch.equal(got[side], got["backend"]), (name, side, got)
    if name == "all_reduce":
        assert torch.equal(got["raw"], sum(torch.arange(16.0) % 5 + 1 + 10 * r
                                           for r in range(comm.size)))
steps, params, models = build_ddp_steps(env, 4, 8, 2)
assert params == 76 and set(steps) == set(DDP_SIDES)
for side in DDP_SIDES:
    steps[side]()
after = {side: torch.cat([p.detach().reshape(-1) for p in models[side].parameters()])
         for side in DDP_SIDES}
# One SGD step on every rank's own data: the sides that average the gradients over the ranks
# agree with the bound (raw all-reduces); the one whose hook communicates nothing with local.
for side in ("backend", "gloo", "bucket_view", "overlap"):
    assert torch.allclose(after[side], after["bound"], rtol=0, atol=1e-7), side
assert torch.equal(after["reducer"], after["local"])
assert comm.size == 1 or not torch.allclose(after["local"], after["bound"], rtol=0, atol=1e-7)
comm.Free()
dist.destroy_process_group(gloo)
assert made
dist.destroy_process_group()
print("sides agree", flush=True)
"""


@needs_torch
@pytest.mark.timeout(200)
def test_the_three_sides_agree() -> None:
    job = run_job(2, _SIDES_AGREE, timeout=150, env={"OMP_NUM_THREADS": "1"})
    assert job.returncode == 0, job.stderr
    assert job.stdout.count("sides agree") == 2  # on both ranks


# -- torch.distributed on CUDA tensors (mpiflow.bench.torch_cuda) -----------------------------

def test_torch_cuda_sizes_and_table() -> None:
    from mpiflow.bench import torch_cuda

    assert torch_cuda.sizes(8, 64 << 20, 4)[:3] == [8, 32, 128]
    assert torch_cuda.sizes(8, 64 << 20, 4)[-2:] == [32 << 20, 64 << 20]
    result = {"ranks": 2, "gpu": "GPU", "torch": "2.x", "sides": ["mpiflow", "staged"],
              "nccl_left_out": "ranks share a GPU, which NCCL refuses",
              "ops": {"all_reduce": [{"bytes": 8, "us": {"mpiflow": 30.0, "staged": 20.0},
                                      "busbw_GBps": {"mpiflow": 0.0, "staged": 0.0}}]}}
    text = torch_cuda.markdown(result)
    assert "(nccl side left out: ranks share a GPU, which NCCL refuses)" in text
    assert "| 8 | 30.0 | 20.0 | 1.50 | 0.00 |" in text


def test_torch_cuda_says_why_it_cannot_run(capsys: pytest.CaptureFixture[str]) -> None:
    from mpiflow.bench import torch_cuda

    problem = torch_cuda.torch_cuda_problem()
    if problem is None:
        pytest.skip("this machine has a CUDA device: the suite would run")
    assert torch_cuda.main(["--max-bytes", "64"]) == 2
    assert problem in capsys.readouterr().err
    with pytest.raises(SystemExit):
        torch_cuda.main(["--ops", "no_such_op"])
