"""python -m mpiflow.bench beyond the OSU tables: redistribution, gradient sync, the DDP step,
checkpoints, --plot and --device cuda. Pure rules first, then tiny collective runs."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import numpy
import pytest

from mpiflow import cuda
from mpiflow.bench.cases import select
from mpiflow.bench.cli import build_parser, main, settings_from_args
from mpiflow.bench.metrics import Timings, paired_ratio
from mpiflow.bench.plan import GRAD_RANGES, REDIST_SIZES, SUITES, Settings, parse_range
from mpiflow.bench.plot import bandwidth_series, series_from_json, write_plot
from mpiflow.bench.plot import main as plot_main
from mpiflow.bench.redistribution import (
    CONVERSIONS,
    RedistRow,
    _values,
    build_conversion,
    run_redistribution,
    tensor_shape,
)
from mpiflow.bench.report import (
    approx_bytes,
    format_checkpoint,
    format_count,
    format_ddp,
    format_grad_sync,
    format_redistribution,
    format_watchdog,
    results_json,
)
from mpiflow.bench.runner import make_context, measure_interleaved
from mpiflow.bench.suites import ALL_RUNNERS, SUITE_RUNNERS, expand_suites, run_suite
from mpiflow.bench.training import (
    DDP_SIDES,
    GRAD_SIDES,
    DDPResult,
    GradSyncResult,
    build_grad_sync,
    param_sizes,
    run_ddp,
    run_grad_sync,
)
from mpiflow.communication.mpi.group import world_comm
from mpiflow.cuda import CudaUnavailableError

RANK, SIZE = world_comm.rank, world_comm.size
MiB = 1 << 20
TINY = Settings(ops=(), sizes=(8,), iters=2, warmup=1, rounds=2, min_iters=1,
                redist_sizes=(4096,), grad_tensors=5, grad_ranges=((16, 256),), ddp_layers=2,
                ddp_width=8, ddp_batch=4, checkpoint_bytes=64 << 10, checkpoint_repeat=1)


def _same_everywhere(value: object) -> bool:
    return all(other == value for other in world_comm.mpi_comm.allgather(value))


# -- pure: shapes, sizes, options ---------------------------------------------------------------

def test_tensor_shapes_divide_by_the_ranks_or_not() -> None:
    assert tensor_shape(MiB, 4, 2) == (256, 1024)
    assert tensor_shape(MiB, 4, 2, even=False) == (257, 1025)
    assert tensor_shape(64 * MiB, 4, 4) == (16384, 1024)
    for n in (1, 2, 3, 4, 5):
        rows, cols = tensor_shape(MiB, 4, n)
        assert rows % n == 0 and cols % n == 0 and abs(rows * cols * 4 - MiB) < 0.02 * MiB
        urows, ucols = tensor_shape(MiB, 4, n, even=False)
        assert (urows, ucols) == (rows + 1, cols + 1)
        if n > 1:
            assert urows % n and ucols % n
    assert tensor_shape(8, 4, 4) == (4, 1024)  # at least one row per rank


def test_conversions() -> None:
    assert [c.name for c in CONVERSIONS] == ["S(0)->B", "P->B", "P->S(0)", "S(0)->S(1)"]
    assert [c.raw_call(True) for c in CONVERSIONS][:3] == [
        "Allgather", "Allreduce", "Reduce_scatter_block"]
    assert CONVERSIONS[0].raw_call(False) == "Allgatherv"


def test_param_sizes_are_log_spaced() -> None:
    sizes = param_sizes(100, 1 << 10, 1 << 20)
    assert len(sizes) == 100 and sizes[0] == 1024 and sizes[-1] == 1 << 20
    assert sizes == sorted(sizes)
    ratios = [b / a for a, b in pairwise(sizes)]
    assert max(ratios) / min(ratios) < 1.01
    assert 55e6 < 4 * sum(sizes) < 70e6  # "a few tens of MB"
    assert param_sizes(1, 4, 8) == [8] and param_sizes(2, 4, 8) == [4, 8]
    with pytest.raises(ValueError):
        param_sizes(0, 1, 2)
    with pytest.raises(ValueError):
        param_sizes(3, 8, 4)


def test_parse_range_and_suites() -> None:
    assert parse_range("1K:1M") == (1024, MiB) and parse_range("256:4096") == (256, 4096)
    for bad in ("1K", "1K:2K:3K", "2K:1K", "0:4", "a:b"):
        with pytest.raises(ValueError):
            parse_range(bad)
    assert expand_suites(["all"]) == SUITES
    assert expand_suites(["ddp", "osu", "ddp"]) == ("osu", "ddp")  # run order, no repeats
    with pytest.raises(ValueError, match="unknown suite"):
        expand_suites(["osu", "ddpp"])
    assert set(SUITE_RUNNERS) == set(SUITES) - {"osu"}


def test_settings_of_the_suites() -> None:
    parse = build_parser().parse_args
    default = settings_from_args(parse([]))
    assert default.suites == ("osu",) and default.redist_sizes == REDIST_SIZES
    assert default.grad_ranges == GRAD_RANGES and default.checkpoint_bytes == 256 * MiB
    s = settings_from_args(parse(["--suite", "redistribution,grad_sync", "ddp",
                                  "--redist-sizes", "64K", "1MiB", "--grad-range", "1K:64K",
                                  "--grad-tensors", "10", "--ddp-width", "64",
                                  "--checkpoint-size", "1MiB"]))
    assert s.suites == ("redistribution", "grad_sync", "ddp") and s.ops == ()
    assert s.redist_sizes == (64 << 10, MiB) and s.grad_ranges == ((1024, 64 << 10),)
    assert s.grad_tensors == 10 and s.ddp_width == 64 and s.checkpoint_bytes == MiB
    assert s.grad_fuse_bytes == 256 << 10 and s.grad_chunk_bytes == 16 << 20
    assert settings_from_args(parse(["--grad-chunk", "4MiB"])).grad_chunk_bytes == 4 << 20
    assert settings_from_args(parse(["--suite", "all"])).suites == SUITES
    with pytest.raises(ValueError, match="--ops picks cases of the osu suite"):
        settings_from_args(parse(["--suite", "ddp", "--ops", "all_reduce"]))
    with pytest.raises(ValueError, match="runs the osu suite only"):
        settings_from_args(parse(["--device", "cuda", "--suite", "all"]))
    with pytest.raises(ValueError,
                       match="--grad-tensors, --grad-fuse, --grad-chunk must be positive"):
        settings_from_args(parse(["--grad-tensors", "0", "--grad-fuse", "0",
                                  "--grad-chunk", "0"]))
    cuda = settings_from_args(parse(["--device", "cuda"]))
    assert cuda.ops == tuple(c.name for c in select(device="cuda"))


def test_cuda_cases_are_registered_for_cuda_only() -> None:
    names = [c.name for c in select(device="cuda")]
    assert len(names) == 10 and {n.split("_", 1)[0] for n in names} == {"cuda", "nccl"}
    assert not any(n.startswith(("cuda_", "nccl_")) for n in (c.name for c in select()))


# -- pure: timings and reports ------------------------------------------------------------------

def test_timings_pair_rounds() -> None:
    t = Timings(("a", "b"), ((2.0, 4.0, 9.0), (1.0, 4.0, 3.0)))
    assert t.time("a") == 2.0 and t.time("b") == 1.0
    assert t.ratio("a", "b") == 2.0  # median of 2, 1, 3
    assert Timings(("a", "b"), ((2.0, 4.0, 9.0), (1.0, 4.0, 3.0)), "median").time("a") == 4.0
    assert t.to_json()["a"]["batches_us"] == [2e6, 4e6, 9e6]
    assert paired_ratio([1.0, 5.0], [1.0, 5.0]) == 1.0
    with pytest.raises(ValueError):
        Timings(("a",), ((1.0,), (2.0,)))
    with pytest.raises(ValueError):
        paired_ratio([1.0], [1.0, 2.0])


def _timings(sides: tuple[str, ...], seconds: tuple[float, ...]) -> Timings:
    return Timings(sides, tuple((s, s * 1.1) for s in seconds))


def _redist_row(ratio: float = 1.2, even: bool = True) -> RedistRow:
    return RedistRow("S(0)->B", (256, 1024) if even else (257, 1025), MiB if even else 1053700,
                     even, "Allgather" if even else "Allgatherv", 10, 2, (("all_gather", 1),),
                     _timings(("mpiflow", "raw"), (ratio * 1e-4, 1e-4)))


def _grad(speedup: float, nranks: int = 4, hi: int = 1 << 20, view: float = 1.0,
          lo: int = 1024) -> GradSyncResult:
    """per_tensor takes ``speedup`` ms, packed 1 ms, bucket_view ``view`` ms, raw_chunked
    0.9 ms."""
    return GradSyncResult(100, lo, hi, 62_000_000, nranks, 10,
                          (("packed", (("all_reduce", 1),)),
                           ("bucket_view", (("all_reduce", 6),)),
                           ("fused_small", (("all_reduce", 41),)),
                           ("per_tensor", (("all_reduce", 100),)),
                           ("raw_per_tensor", ()), ("raw_chunked", ())),
                          _timings(GRAD_SIDES, (1e-3, view * 1e-3, 0.5e-3, speedup * 1e-3,
                                                speedup * 1e-3, 0.9e-3)))


def _ddp() -> DDPResult:
    return DDPResult(8, 1024, 32, 33_587_200, 25.0, 3, 2, 10,
                     _timings(DDP_SIDES, (0.070, 0.075, 0.080, 0.081, 0.060)))


def test_redistribution_table() -> None:
    rows = [_redist_row(1.2), _redist_row(1.5, even=False)]
    assert rows[0].ratio == pytest.approx(1.2) and rows[0].collective_count == 1
    assert rows[0].gbps("raw") == pytest.approx(MiB / 1e-4 / 1e9)
    text = format_redistribution(rows)
    assert "x.to_global(sbp=dst)" in text and "257x1025" in text and "1.005 MiB" in text
    assert "all_gather x1" in text and "one collective per conversion: yes" in text
    assert "worst mpiflow/raw 1.500" in text
    md = format_redistribution(rows, markdown=True).splitlines()
    assert md[0] == "### redistribution" and sum(line.startswith("|") for line in md) == 4
    assert json.loads(json.dumps(rows[1].to_json()))["collectives"] == {"all_gather": 1}


def test_grad_sync_table_and_goals() -> None:
    met, missed = _grad(6.0, view=0.95), _grad(1.5, view=1.0)  # view/bound 1.056 and 1.111
    assert met.speedup == pytest.approx(6.0) and met.view_speedup == pytest.approx(6.0 / 0.95)
    assert met.view_over_bound == pytest.approx(0.95 / 0.9) and met.goal_met is True
    assert missed.goal_met is False and missed.calls("per_tensor") == 100
    assert _grad(9.0, nranks=2).goal_met is None  # the goals are judged at 4 ranks
    assert _grad(9.0, hi=4096).goal_met is None  # a model without a goal
    small_met = _grad(3.0, lo=256, hi=4096, view=0.99)
    small_missed = _grad(3.0, lo=256, hi=4096, view=1.01)
    assert small_met.goal_met is True and small_missed.goal_met is False
    text = format_grad_sync([missed, _grad(20.0, hi=4096), small_met])
    assert "100 tensors, 1Ki..1Mi elements" in text and "100 tensors, 1Ki..4Ki" in text
    assert "1/6/41/100" in text and "bucket_view 1.11x raw_chunked" in text
    assert "goal bucket_view <= 1.1x raw_chunked at 4 ranks: MISSED" in text
    assert "goal bucket_view >= 3x faster than per_tensor at 4 ranks: met" in text
    assert "(packed: 1.50x; bound 1.67x)" in text
    assert missed.fused_speedup == 3.0 and missed.bound == pytest.approx(1.5 / 0.9)
    assert "judged at 4 ranks (here 2)" in format_grad_sync([_grad(9.0, nranks=2)])
    data = json.loads(json.dumps(met.to_json()))
    assert data["goal"] == {"what": "bucket_view <= 1.1x raw_chunked", "ranks": 4,
                            "applies": True, "met": True}


def test_ddp_table() -> None:
    r = _ddp()
    assert r.comm_exposed == pytest.approx(0.020) and r.overlap_saved == pytest.approx(0.010)
    assert r.hidden_fraction == pytest.approx(0.5)
    assert r.overlap_speedup == pytest.approx(0.080 / 0.070)
    assert r.view_speedup == pytest.approx(0.075 / 0.070)
    text = format_ddp(r)
    assert "8 x Linear(1024, 1024)" in text and "overlap saves 10.00 ms (50% of it)" in text
    assert "ddp_copy / ddp = 1.071" in text and "gradient_as_bucket_view=False" in text
    assert json.loads(json.dumps(r.to_json()))["vs_local"]["local"] == 1.0
    flat = DDPResult(1, 8, 4, 288, 25.0, 1, 1, 2,
                     _timings(DDP_SIDES, (1.0, 1.0, 1.0, 1.0, 1.0)))
    assert flat.hidden_fraction is None


def test_checkpoint_table_and_json() -> None:
    result = {"ranks": 2, "bytes": 256 * MiB,
              "seconds": {"parallel_save": 0.5, "gather_save": 1.0, "parallel_load": 0.2,
                          "load_scatter": 0.3},
              "GBps": {"parallel_save": 0.54, "gather_save": 0.27, "parallel_load": 1.3,
                       "load_scatter": 0.9},
              "speedup": {"save": 2.0, "load": 1.5}}
    text = format_checkpoint(result)
    assert "256 MiB" in text and "save x2.00, load x1.50" in text
    data = results_json({"ranks": 2}, {}, {"checkpoint": result})
    assert data["suites"]["checkpoint"]["speedup"]["save"] == 2.0
    assert "suites" not in results_json({"ranks": 2}, {})


def test_watchdog_table() -> None:
    result = {"bytes": 8, "ranks": 2, "iters": 20000, "rounds": 15, "raw_us": 1.0, "on_us": 1.3,
              "off_us": 1.25, "overhead": 0.04, "on_vs_raw": 1.3, "off_vs_raw": 1.25,
              "goal_met": True}
    text = format_watchdog(result)
    assert "watchdog on" in text and "+4.0%" in text and "goal <= 5% at 8 B on 2 ranks: met" in text
    assert format_watchdog(result, markdown=True).startswith("### watchdog")
    paired = format_watchdog({**result, "paired_overhead": 0.02, "goal_met": True})
    assert "paired +2.0% (best rounds +4.0%)" in paired


def test_byte_and_count_formats() -> None:
    assert approx_bytes(MiB) == "1 MiB" and approx_bytes(1053700) == "1.005 MiB"
    assert approx_bytes(100) == "100 B" and approx_bytes(1536) == "1.500 KiB"
    assert approx_bytes(33_587_200) == "32.031 MiB" and approx_bytes(1 << 30) == "1 GiB"
    assert [format_count(n) for n in (256, 1024, 1 << 20, 1000)] == ["256", "1Ki", "1Mi", "1000"]


@pytest.mark.mpi
def test_plot_series_and_png(tmp_path: Path) -> None:
    from mpiflow.bench.metrics import Row

    rows = [Row("all_reduce", s, s, 10, 2, 2, 1.0, (s / 1e10,), (s / 2e10,)) for s in (8, MiB)]
    series = bandwidth_series({"all_reduce": rows[::-1], "send_recv": []},
                              [_redist_row(), _redist_row(even=False)])
    assert [s.title for s in series] == ["all_reduce", "to_global S(0)->B"]
    assert series[0].sizes == (8, MiB) and series[0].mpiflow == pytest.approx((10.0, 10.0))
    assert series[1].sizes == (MiB,) and series[1].extra[0][0] == "257x1025"
    with pytest.raises(ValueError, match="nothing to plot"):
        write_plot(str(tmp_path / "none.png"), [])
    data = json.loads(json.dumps(results_json(
        {"ranks": 2}, {"all_reduce": rows},
        {"redistribution": [_redist_row().to_json(), _redist_row(even=False).to_json()]})))
    again = series_from_json(data)
    assert [s.title for s in again] == [s.title for s in series]
    for a, b in zip(again, series, strict=True):
        assert a.sizes == b.sizes and a.extra == b.extra
        assert a.mpiflow == pytest.approx(b.mpiflow) and a.raw == pytest.approx(b.raw)
    if RANK != 0:
        return  # drawing is not collective; one rank is enough
    pytest.importorskip("matplotlib")
    out = tmp_path / "bw.png"
    write_plot(str(out), series, "title")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (tmp_path / "r.json").write_text(json.dumps(data))
    assert plot_main([str(tmp_path / "r.json"), str(tmp_path / "again.png")]) == 0
    assert (tmp_path / "again.png").read_bytes()[:4] == b"\x89PNG"


# -- collective: tiny runs of every suite -------------------------------------------------------

@pytest.mark.mpi
@pytest.mark.parametrize("conversion", CONVERSIONS, ids=[c.name for c in CONVERSIONS])
@pytest.mark.parametrize("even", [True, False], ids=["even", "uneven"])
def test_conversion_sides_agree(conversion, even: bool) -> None:
    shape = tensor_shape(4096, 4, SIZE, even)
    prepared = build_conversion(conversion, shape)
    flow_out = prepared.mpiflow().to_local().numpy()
    prepared.raw()
    numpy.testing.assert_array_equal(flow_out, prepared.raw_out)
    if conversion.name == "P->B":
        expected = sum(_values(shape, r) for r in range(SIZE))
        numpy.testing.assert_array_equal(prepared.raw_out, expected)


@pytest.mark.mpi
def test_measure_interleaved_rotates_and_reduces() -> None:
    calls: list[str] = []
    groups = [[lambda: calls.append("a"), lambda: calls.append("b"), lambda: calls.append("c")]]
    timer = world_comm.mpi_comm.Dup()
    try:
        times = measure_interleaved(groups, [2], [1], 3, timer)
    finally:
        timer.Free()
    assert times.shape == (1, 3, 3) and (times > 0).all()
    assert "".join(calls) == "abc" + "abc" + "aabbcc" + "abc" + "bbccaa" + "abc" + "ccaabb"
    assert _same_everywhere(times.tolist())


@pytest.mark.mpi
def test_to_global_check_suite_in_process() -> None:
    result = run_suite("to_global_check", TINY)
    assert [r["checked"] for r in result["rows"]][:2] == ["check_meta=True (default)",
                                                         "with the MPIFLOW_DEBUG=1 check"]
    assert len(result["rows"]) == 4 and all(r["ratio"] > 0 for r in result["rows"])
    assert _same_everywhere(result)
    text = ALL_RUNNERS["to_global_check"].format(result, False)
    assert text.startswith("== to_global_check") and "check_meta=False, shape=" in text


@pytest.mark.mpi
def test_redistribution_suite_in_process() -> None:
    rows = run_redistribution(TINY)
    assert [r.conversion for r in rows] == [c.name for c in CONVERSIONS for _ in range(2)]
    assert all(r.collective_count == 1 and r.ratio > 0 for r in rows)
    assert [r.even for r in rows[:2]] == [True, SIZE == 1]
    assert _same_everywhere([r.to_json() for r in rows])


@pytest.mark.mpi
def test_grad_sync_sides_sum_the_same() -> None:
    sizes = [3, 5, 7]
    for side in GRAD_SIDES:
        models, calls = build_grad_sync(sizes, chunk_bytes=8)  # raw_chunked: 2 floats a piece
        grads = [p.grad.numpy() for p in models[side].parameters()]
        for g in grads:
            g[...] = RANK + 1
        calls[side]()
        for g in grads:
            numpy.testing.assert_array_equal(g, SIZE * (SIZE + 1) / 2)
    results = run_grad_sync(TINY)
    assert len(results) == 1 and results[0].tensors == 5 and results[0].calls("packed") == 1
    assert results[0].calls("per_tensor") == 5 and results[0].goal_met is None
    assert results[0].calls("fused_small") == 1  # 5 tiny tensors: one bucket
    assert results[0].calls("bucket_view") == 1  # DDP's buckets: the same one
    assert _same_everywhere(results[0].to_json())


@pytest.mark.mpi
def test_ddp_suite_in_process() -> None:
    result = run_ddp(TINY)
    assert result.timings.sides == DDP_SIDES and result.param_bytes == 2 * (8 * 8 + 8) * 4
    assert all(result.timings.time(s) > 0 for s in DDP_SIDES)
    assert _same_everywhere(result.to_json())


@pytest.mark.mpi
def test_checkpoint_suite_in_process() -> None:
    result = run_suite("checkpoint", TINY)
    assert result["bytes"] == 64 << 10 and result["ranks"] == SIZE
    assert "checkpoint" in format_checkpoint(result)


@pytest.mark.mpi
def test_watchdog_suite_in_process() -> None:
    result = run_suite("watchdog", TINY)
    assert result["ranks"] == SIZE and result["iters"] == 40 and result["raw_us"] > 0
    assert "summary watchdog" in SUITE_RUNNERS["watchdog"].format(result, False)


@pytest.mark.mpi
def test_command_line_in_process(mpi_tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(mpi_tmp_path)
    args = ["--suite", "redistribution,grad_sync", "ddp", "checkpoint", "--iters", "2",
            "--warmup", "1", "--rounds", "2", "--min-iters", "1", "--redist-sizes", "4K",
            "--grad-tensors", "4", "--grad-range", "16:64", "--ddp-layers", "1",
            "--ddp-width", "8", "--ddp-batch", "2", "--checkpoint-size", "16K",
            "--checkpoint-repeat", "1", "--json", f"{out}/r.json", "--markdown"]
    plot = RANK == 0 and _have_matplotlib()
    if world_comm.mpi_comm.bcast(plot, root=0):
        args += ["--plot", f"{out}/bw.png"]
    assert main(args) == 0
    text = capsys.readouterr().out
    world_comm.mpi_comm.Barrier()
    if RANK != 0:
        assert text == ""
        return
    for title in ("### redistribution", "### grad_sync", "### ddp", "### checkpoint"):
        assert title in text
    assert "### all_reduce" not in text  # the osu suite was not asked for
    data = json.loads(Path(out, "r.json").read_text())
    assert data["meta"]["suites"] == ["redistribution", "grad_sync", "ddp", "checkpoint"]
    assert set(data["suites"]) == {"redistribution", "grad_sync", "ddp", "checkpoint"}
    assert data["results"] == {} and len(data["suites"]["redistribution"]) == 8
    if plot:
        assert Path(out, "bw.png").read_bytes()[:4] == b"\x89PNG"


def _have_matplotlib() -> bool:
    from mpiflow.bench.plot import have_matplotlib

    return have_matplotlib()


@pytest.mark.mpi
def test_cuda_device_without_cupy_fails_clearly(capsys: pytest.CaptureFixture[str]) -> None:
    if cuda.is_available():
        pytest.skip("CuPy and a CUDA device are present")
    with pytest.raises(CudaUnavailableError):
        make_context("float32", "cuda")
    assert main(["--device", "cuda", "--quick"]) == 2
    err = capsys.readouterr().err
    if RANK == 0:
        assert "error: --device cuda: CUDA is unavailable:" in err
    else:
        assert err == ""
    with pytest.raises(ValueError, match="not supported"):
        make_context("float32", "tpu")
