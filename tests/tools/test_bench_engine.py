"""The engine suite of ``python -m mpiflow.bench``: its models (mpiflow and PyTorch doing the
same arithmetic), the result figures and goals, the table, and a tiny in-process run."""

from __future__ import annotations

import numpy
import pytest

import mpiflow as flow
from mpiflow.bench import engine
from mpiflow.bench.engine import (
    EngineResult,
    MemoryRow,
    OpRow,
    StepRow,
    format_engine,
    run_engine,
)
from mpiflow.bench.engine_models import MODELS, build_step, param_count
from mpiflow.bench.metrics import Timings
from mpiflow.bench.plan import Settings
from mpiflow.bench.suites import OPTIONAL_SUITES, expand_suites

TINY = Settings(ops=(), sizes=(8,), iters=2, warmup=1, rounds=2, min_iters=1)


def test_engine_is_an_optional_suite() -> None:
    assert "engine" in OPTIONAL_SUITES
    assert "engine" not in expand_suites(["all"])
    assert expand_suites(["engine", "osu"]) == ("osu", "engine")


def test_param_counts() -> None:
    assert param_count("small") == 64 * 128 + 128 + 128 * 64 + 64 + 64 * 10 + 10
    assert param_count("1m") == 1050112
    assert set(MODELS) >= {"small", "1m", "tiny"}


def test_op_row_figures_and_goals() -> None:
    row = OpRow("add", Timings(engine.OP_SIDES, ((1e-6, 1e-6), (3e-6, 3e-6), (30e-6, 30e-6))))
    assert row.local_over_us == pytest.approx(2.0)
    assert row.global_over_us == pytest.approx(27.0)
    data = row.to_json()
    assert data["local_goal_met"] and not data["global_goal_met"]


def test_step_row_ratio_and_goal() -> None:
    t = Timings(engine.STEP_SIDES, ((3e-3, 3e-3), (2e-3, 2e-3), (2e-3, 2e-3)))
    row = StepRow("1m", "sgd", 10, t)
    assert row.goal == engine.LARGE_GOAL and row.ratio() == pytest.approx(1.5)
    assert row.to_json()["goal_met"] is False
    assert StepRow("small", "sgd", 10, t).goal == engine.SMALL_GOAL
    no_torch = StepRow("small", "adam", 10, Timings(engine.STEP_SIDES[:2], t.batches[:2]))
    assert no_torch.ratio() is None and no_torch.to_json()["goal_met"] is None


def test_memory_row() -> None:
    assert MemoryRow("1m", "sgd", 11, 10).ratio == pytest.approx(1.1)
    assert MemoryRow("1m", "sgd", 11, 10).to_json()["goal_met"] is True
    assert MemoryRow("1m", "sgd", None, 10).ratio is None
    assert MemoryRow("1m", "sgd", 5, 0).ratio is None


def test_table_shows_every_row_and_verdict() -> None:
    ops = (OpRow("add", Timings(engine.OP_SIDES, ((1e-6,), (3e-6,), (4e-6,)))),)
    steps = (StepRow("small", "sgd", 17226,
                     Timings(engine.STEP_SIDES, ((5e-4,), (5e-4,), (2e-4,)))),)
    memory = (MemoryRow("1m", "adam", 17 << 20, 22 << 20),)
    for markdown in (False, True):
        text = format_engine(EngineResult(1, ops, steps, memory), markdown)
        assert "add" in text and "2.50x" in text and "NOT met" in text
        assert "0.77x" in text and "17.0" in text
    assert "| op (64x64 f32) |" in format_engine(EngineResult(1, ops, steps, memory), True)


def test_mpiflow_and_torch_models_start_equal() -> None:
    pytest.importorskip("torch")
    import torch

    from mpiflow.bench.engine_models import _mpiflow_parts, _torch_copy

    ours = _mpiflow_parts((4, 3, 2))
    theirs = _torch_copy(ours, (4, 3, 2))
    x = numpy.random.default_rng(0).standard_normal((5, 4), dtype=numpy.float32)
    numpy.testing.assert_allclose(ours(flow.tensor(x)).numpy(),
                                  theirs(torch.from_numpy(x)).detach().numpy(), rtol=1e-6)


def test_the_lenet_models_start_equal_and_count_their_parameters() -> None:
    pytest.importorskip("torch")
    import torch

    from mpiflow.bench.engine_models import _mpiflow_parts, _torch_copy

    ours = _mpiflow_parts(None)
    theirs = _torch_copy(ours, None)
    assert sum(p.numel() for p in ours.parameters()) == param_count("lenet")
    x = numpy.random.default_rng(0).standard_normal((2, 1, 28, 28), dtype=numpy.float32)
    numpy.testing.assert_allclose(ours(flow.tensor(x)).numpy(),
                                  theirs(torch.from_numpy(x)).detach().numpy(), rtol=1e-4,
                                  atol=1e-5)
    assert StepRow("lenet", "sgd", 1, Timings(engine.STEP_SIDES, ((1.0,),) * 3)).goal == \
        engine.LENET_GOAL


def test_steps_run() -> None:
    for lib in ("mpiflow",) + (("torch",) if engine.torch_available() else ()):
        for optimizer in ("sgd", "adam"):
            build_step(lib, "tiny", optimizer)()
    build_step("mpiflow", "tiny", "adam", foreach=True)()
    build_step("mpiflow", "lenet", "sgd")()
    with pytest.raises(ValueError, match="unknown library"):
        build_step("jax", "tiny", "sgd")


@pytest.mark.mpi
def test_engine_suite_in_process() -> None:
    result = run_engine(TINY, ops=("add", "relu"), models=("small",), optimizers=("sgd",),
                        memory=False)
    assert [r.name for r in result.ops] == ["add", "relu"]
    assert all(r.timings.time(s) > 0 for r in result.ops for s in engine.OP_SIDES)
    assert len(result.steps) == 1 and result.steps[0].params == param_count("small")
    assert "engine" in format_engine(result)
    assert result.to_json()["ranks"] == flow.env.get_world_size()
