"""python -m mpiflow.bench: the pure rules, the cases against raw mpi4py, and a real run."""

from __future__ import annotations

import json
import math
from itertools import pairwise
from pathlib import Path

import numpy
import pytest
from helpers import rank_data, run_job

from mpiflow.bench import cases as bench_cases
from mpiflow.bench.cases import CASES, BenchCase, register, select
from mpiflow.bench.cli import QUICK, build_parser, settings_from_args
from mpiflow.bench.metrics import (
    ALL_REDUCE_FACTOR,
    GOALS,
    ONE_FACTOR,
    SPREAD_FACTOR,
    Layout,
    Row,
    bandwidth,
    chunked_layout,
    combine,
    gather_layout,
    scatter_layout,
    summarize,
    whole_layout,
)
from mpiflow.bench.plan import (
    KNEE_BYTES,
    Settings,
    format_bytes,
    iterations,
    message_sizes,
    parse_bytes,
)
from mpiflow.bench.report import format_summary, format_table, results_json
from mpiflow.bench.runner import make_context, run, time_batch
from mpiflow.communication.mpi.group import world_comm

RANK, SIZE = world_comm.rank, world_comm.size
MiB = 1 << 20
ALL_OPS = ("all_reduce", "all_reduce_out_of_place", "all_reduce_best", "all_gather",
           "reduce_scatter", "broadcast", "all_to_all", "send_recv")


# -- sizes and iterations --------------------------------------------------------------------

@pytest.mark.parametrize(("text", "value"), [("8", 8), ("64K", 65536), ("1MiB", MiB),
                                             ("64 MiB", 64 * MiB), ("2kb", 2048), ("1G", 1 << 30)])
def test_parse_bytes(text: str, value: int) -> None:
    assert parse_bytes(text) == value


@pytest.mark.parametrize("text", ["", "-8", "8 bits", "1.5M", "M"])
def test_parse_bytes_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="byte count"):
        parse_bytes(text)


def test_format_bytes() -> None:
    assert [format_bytes(n) for n in (8, 1536, 1024, 64 * MiB, 1 << 30)] == [
        "8 B", "1536 B", "1 KiB", "64 MiB", "1 GiB"]


def test_message_sizes_powers_of_two_and_four() -> None:
    twos = message_sizes(8, 64 * MiB)
    assert twos[0] == 8 and twos[-1] == 64 * MiB and len(twos) == 24
    assert all(b == 2 * a for a, b in pairwise(twos))
    assert message_sizes(8, 2048, 4) == [8, 32, 128, 512, 2048]
    assert message_sizes(8, 1000, 4) == [8, 32, 128, 512, 1000]  # the maximum is always run
    assert message_sizes(8, 8) == [8]


@pytest.mark.parametrize(("lo", "hi", "factor"), [(0, 8, 2), (16, 8, 2), (8, 64, 1)])
def test_message_sizes_rejects(lo: int, hi: int, factor: int) -> None:
    with pytest.raises(ValueError):
        message_sizes(lo, hi, factor)


def test_iterations_fall_with_size_to_the_floor() -> None:
    sizes = message_sizes(8, 64 * MiB)
    counts = [iterations(s, 2000, 10) for s in sizes]
    assert all(c == 2000 for s, c in zip(sizes, counts, strict=True) if s <= KNEE_BYTES)
    assert all(a >= b for a, b in pairwise(counts))
    assert iterations(2 * KNEE_BYTES, 2000, 10) == 1000
    assert counts[-1] == 10
    assert iterations(64 * MiB, 5, 10) == 5  # never above the base
    assert iterations(8, 0) == 0


def test_settings_iterations() -> None:
    s = Settings(ops=("all_reduce",), sizes=(8,), iters=100, warmup=10, min_iters=3)
    assert s.timed_iterations(8) == 100 and s.timed_iterations(64 * MiB) == 3
    assert s.warmup_iterations(8) == 10 and s.warmup_iterations(64 * MiB) == 2


# -- layouts, bandwidths, goals ----------------------------------------------------------------

def test_bus_factors_are_nccl_tests() -> None:
    for n in (1, 2, 3, 4, 8):
        assert ALL_REDUCE_FACTOR(n) == pytest.approx(2 * (n - 1) / n)
        assert SPREAD_FACTOR(n) == pytest.approx((n - 1) / n)
        assert ONE_FACTOR(n) == 1.0
    factors = {c.name: c.bus_factor for c in select()}
    assert factors == {"all_reduce": ALL_REDUCE_FACTOR,
                       "all_reduce_out_of_place": ALL_REDUCE_FACTOR,
                       "all_reduce_best": ALL_REDUCE_FACTOR, "all_gather": SPREAD_FACTOR,
                       "reduce_scatter": SPREAD_FACTOR, "broadcast": ONE_FACTOR,
                       "all_to_all": SPREAD_FACTOR, "send_recv": ONE_FACTOR}


def test_layouts() -> None:
    assert whole_layout(64, 4, 3) == Layout(0, 16, 64)
    assert whole_layout(2, 4, 1) == Layout(0, 1, 4)  # at least one element
    assert gather_layout(64, 4, 2) == Layout(8, 16, 64)
    assert scatter_layout(64, 4, 2) == Layout(16, 8, 64)
    assert chunked_layout(64, 4, 2) == Layout(16, 16, 64)
    assert gather_layout(64, 4, 3) == Layout(5, 15, 60)  # a multiple of the ranks
    assert gather_layout(8, 4, 4) == Layout(1, 4, 16)


def _row(size: int, flow_us: float, raw_us: float, op: str = "x", stat: str = "min") -> Row:
    return Row(op, size, size, 10, 2, 2, 1.0, (flow_us * 1e-6, 2 * flow_us * 1e-6),
               (raw_us * 1e-6, 2 * raw_us * 1e-6), stat)


def test_row_bandwidths_and_ratio() -> None:
    row = Row("all_reduce", MiB, MiB, 10, 2, 4, ALL_REDUCE_FACTOR(4), (2e-3, 1e-3), (1e-3, 4e-3))
    assert row.mpiflow_time == 1e-3 and row.raw_time == 1e-3 and row.time_ratio == 1.0
    assert row.ratio == pytest.approx((2.0 + 0.25) / 2)  # the median of the paired ratios
    # A machine that slows down between rounds shifts both sides of a round alike.
    drift = Row("x", 8, 8, 1, 1, 2, 1.0, (1.0, 5.0, 9.0), (1.0, 5.0, 9.0))
    assert drift.ratio == 1.0
    assert row.algbw("raw") == pytest.approx(MiB / 1e-3 / 1e9)
    assert row.busbw("mpiflow") == pytest.approx(row.algbw("mpiflow") * 1.5)
    median = Row("x", 8, 8, 1, 1, 2, 1.0, (1.0, 2.0, 9.0), (1.0, 1.0, 1.0), "median")
    assert median.ratio == 2.0
    assert bandwidth(10**9, 1.0) == 1.0 and bandwidth(8, 0.0) == 0.0
    assert combine([3.0, 1.0, 2.0], "median") == 2.0
    with pytest.raises(ValueError):
        combine([1.0], "mean")


def test_summary_and_goals() -> None:
    rows = [_row(8, 1.2, 1.0), _row(1024, 1.5, 1.0), _row(MiB, 104.0, 100.0),
            _row(4 * MiB, 110.0, 100.0)]
    s = summarize("x", rows)
    assert s.small is rows[1] and s.large is rows[3]
    latency, bandwidth_goal = s.goals
    assert latency.goal is GOALS[0] and latency.worst is rows[0] and latency.met is True
    assert bandwidth_goal.worst is rows[3] and bandwidth_goal.met is False
    assert summarize("x", rows[1:2]).goals[0].met is None  # 8 B not measured


# -- reports -------------------------------------------------------------------------------------

def test_tables_and_summary() -> None:
    rows = [_row(8, 1.2, 1.0), _row(MiB, 110.0, 100.0)]
    text = format_table("all_reduce", "dist.all_reduce(buf)", "comm.Allreduce", "2(n-1)/n", rows)
    lines = text.splitlines()
    assert "all_reduce" in lines[0] and "2(n-1)/n" in lines[1]
    assert lines[2].split()[:3] == ["size", "iters", "mpiflow"]
    assert lines[3].split()[:2] == ["8", "B"] and lines[3].endswith("ok")
    assert "1.100" in lines[4] and "MISS" in lines[4]
    md = format_table("all_reduce", "a", "b", "1", rows, markdown=True).splitlines()
    assert md[0] == "### all_reduce"
    table = [line for line in md if line.startswith("|")]
    assert len(table) == 4 and table[1].startswith("| ---:")
    assert "skipped" in format_table("send_recv", "a", "b", "1", [])
    summary = format_summary({"all_reduce": rows})
    assert summary.startswith("summary all_reduce:") and "1.200 met" in summary
    assert "1.100 MISSED" in summary
    assert format_summary({"all_reduce": rows}, markdown=True).count("\n") == 2


def test_results_json() -> None:
    rows = [_row(8, 1.2, 1.0), _row(MiB, 110.0, 100.0)]
    data = json.loads(json.dumps(results_json({"ranks": 2}, {"all_reduce": rows})))
    assert data["meta"] == {"ranks": 2}
    first = data["results"]["all_reduce"][0]
    assert first["size"] == 8 and math.isclose(first["ratio"], 1.2)
    assert math.isclose(first["time_ratio"], 1.2)
    assert len(first["mpiflow"]["batches_us"]) == 2
    assert data["summary"]["all_reduce"]["goals"][1]["met"] is False


def test_a_row_against_the_faster_raw_form() -> None:
    best = Row("all_reduce_best", MiB, MiB, 10, 2, 2, 1.0, (2e-3, 2e-3), (1e-3, 1e-3), "min",
               "out-of-place", (4e-3, 4e-3))
    plain = _row(MiB, 110.0, 100.0)
    text = format_table("all_reduce_best", "a", "b", "1", [best]).splitlines()
    assert text[2].split()[-2:] == ["raw", "form"] and text[3].endswith("out-of-place")
    md = [line for line in format_table("all_reduce_best", "a", "b", "1", [best],
                                        markdown=True).splitlines() if line.startswith("|")]
    assert md[1].endswith("| :--- | :--- |") and md[2].endswith("| out-of-place |")
    assert "raw form" not in format_table("all_reduce", "a", "b", "1", [plain])
    data = results_json({}, {"all_reduce_best": [best], "all_reduce": [plain]})["results"]
    assert data["all_reduce_best"][0]["raw"]["form"] == "out-of-place"
    assert data["all_reduce_best"][0]["raw"]["other_form_batches_us"] == [4000.0, 4000.0]
    assert "form" not in data["all_reduce"][0]["raw"]


# -- command line and registry -----------------------------------------------------------------

def test_settings_from_the_command_line() -> None:
    parse = build_parser().parse_args
    full = settings_from_args(parse([]))
    assert full.ops == ALL_OPS and full.sizes[0] == 8 and full.sizes[-1] == 64 * MiB
    quick = settings_from_args(parse(["--quick", "--ops", "all_reduce,broadcast"]))
    assert quick.ops == ("all_reduce", "broadcast") and quick.iters == QUICK["iters"]
    assert quick.sizes == (8, 1024, 128 * 1024, MiB)
    custom = settings_from_args(parse(["--ops", "send_recv", "all_to_all", "--min-bytes", "1K",
                                       "--max-bytes", "1MiB", "--factor", "4", "--iters", "5",
                                       "--dtype", "float64", "--stat", "median"]))
    assert custom.ops == ("send_recv", "all_to_all") and custom.sizes[:2] == (1024, 4096)
    assert custom.iters == 5 and custom.dtype == "float64" and custom.stat == "median"
    assert settings_from_args(parse(["--ops", "all"])).ops == ALL_OPS
    with pytest.raises(ValueError, match="unknown benchmark"):
        settings_from_args(parse(["--ops", "all_reduse"]))
    with pytest.raises(ValueError, match="--iters"):
        settings_from_args(parse(["--iters", "0"]))


def test_registry() -> None:
    assert tuple(c.name for c in select()) == ALL_OPS
    assert select(["broadcast"])[0] is CASES["broadcast"]
    with pytest.raises(ValueError, match="does not run on"):
        select(["broadcast"], device="cuda")
    extra = BenchCase("noop", "other", "f()", "g()", whole_layout, ONE_FACTOR,
                      CASES["broadcast"].build)
    register(extra)
    try:
        assert select(["noop"]) == [extra]
        with pytest.raises(ValueError, match="already registered"):
            register(extra)
    finally:
        del bench_cases.CASES["noop"]


def test_time_batch_with_a_fake_clock() -> None:
    ticks = iter([10.0, 14.0])
    calls: list[int] = []
    assert time_batch(lambda: calls.append(1), 4, lambda: None, lambda: next(ticks)) == 1.0
    assert len(calls) == 4


# -- collective: every rank runs these ---------------------------------------------------------

@pytest.mark.mpi
@pytest.mark.parametrize("name", [pytest.param(c.name, marks=pytest.mark.mpi(min_size=c.min_ranks))
                                  for c in select()])  # every CPU case
def test_mpiflow_and_raw_do_the_same(name: str) -> None:
    case = CASES[name]
    ctx = make_context("float32")
    layout = case.layout(96, 4, SIZE)
    prepared = case.build(ctx, layout)
    results = []
    calls = [prepared.mpiflow, prepared.raw]
    if prepared.raw_other is not None:  # all_reduce_best: both raw forms
        calls.append(prepared.raw_other)
    assert len(calls) == 2 + bool(case.raw_forms)
    for call in calls:
        if prepared.send is not None:
            prepared.send[...] = rank_data(prepared.send.shape, numpy.float32, RANK)
        prepared.recv[...] = rank_data(prepared.recv.shape, numpy.float32, RANK, salt=1)
        if name in ("all_reduce_out_of_place", "all_reduce_best"):  # out of place: send -> recv
            prepared.send[...] = prepared.recv
        call()
        results.append(prepared.recv.copy())
    for other in results[1:]:
        numpy.testing.assert_array_equal(results[0], other)
    if name.startswith("all_reduce"):
        expected = sum(rank_data(results[0].shape, numpy.float32, r, salt=1) for r in range(SIZE))
        numpy.testing.assert_array_equal(results[0], expected)


@pytest.mark.mpi
def test_run_in_process() -> None:
    settings = Settings(ops=ALL_OPS, sizes=(8, 256), iters=2, warmup=1, rounds=2, min_iters=1)
    seen: list[str] = []
    results = run(settings, lambda case, rows: seen.append(case.name))
    assert tuple(seen) == ALL_OPS
    expected = ALL_OPS if SIZE >= 2 else ALL_OPS[:-1]
    assert tuple(results) == expected
    for rows in results.values():
        assert [r.size for r in rows] == [8, 256]
        for r in rows:
            assert r.nranks == SIZE and r.iters == 2 and len(r.mpiflow_s) == 2
            assert r.mpiflow_time > 0 and r.raw_time > 0 and r.ratio > 0
            if r.op == "all_reduce_best":  # the raw side is the faster of the two forms
                assert r.raw_form in ("in-place", "out-of-place") and len(r.other_raw_s) == 2
                assert r.raw_time <= min(r.other_raw_s)
            else:
                assert r.raw_form == "" and r.other_raw_s == ()
    # The times are reduced over the ranks, so every rank holds the same rows.
    every = world_comm.mpi_comm.allgather(results)
    assert all(other == results for other in every)


# -- a real job -------------------------------------------------------------------------------

def test_command_line_quick_run(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    code = ("import runpy, sys; sys.argv = ['mpiflow.bench', '--quick', '--ops', 'all_reduce', "
            f"'--json', {str(out)!r}]; runpy.run_module('mpiflow.bench', run_name='__main__')")
    job = run_job(2, code, timeout=120)
    assert job.returncode == 0, job.stderr
    lines = job.stdout.splitlines()
    assert sum(line.startswith("== all_reduce") for line in lines) == 1  # rank 0 only
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["size", "iters"])
    assert "ratio" in lines[header]
    table = lines[header + 1:header + 5]
    assert [line.split()[0] + " " + line.split()[1] for line in table] == [
        "8 B", "1 KiB", "128 KiB", "1 MiB"]
    assert all(float(line.split()[9]) > 0 for line in table)  # the ratio column
    assert any(line.startswith("summary all_reduce: worst mpiflow/raw") for line in lines)
    data = json.loads(out.read_text())
    assert data["meta"]["ranks"] == 2 and len(data["results"]["all_reduce"]) == 4
