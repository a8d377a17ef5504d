"""The graph suite: the steps it times train the same model, and its table."""

from __future__ import annotations

import pytest

from mpiflow.bench.graph import GraphResult, GraphRow, build_graph_steps, format_graph
from mpiflow.bench.legacy_job import build_job_steps
from mpiflow.bench.metrics import Timings
from mpiflow.bench.suites import OPTIONAL_SUITES, expand_suites


def test_graph_is_a_named_suite() -> None:
    assert "graph" in OPTIONAL_SUITES
    assert expand_suites(["graph"]) == ("graph",)
    assert "graph" not in expand_suites(["all"])


@pytest.mark.mpi
@pytest.mark.timeout(60)
def test_eager_and_graph_steps_run() -> None:
    eager, graph = build_graph_steps("small")
    for _ in range(3):
        eager()
        graph()


@pytest.mark.mpi
@pytest.mark.timeout(60)
def test_the_legacy_job_steps_run_eager_and_traced() -> None:
    from mpiflow.compatible import single_client as flow

    eager, traced = build_job_steps(batch=2)
    try:
        for _ in range(2):
            eager()
            traced()
    finally:
        flow.enable_eager_execution(False)
        flow.clear_default_session()


def test_format_marks_the_goals() -> None:
    slow = Timings(("eager", "graph"), ((1e-3, 1e-3), (9e-4, 9e-4)))
    text = format_graph(GraphResult(2, (GraphRow("small", 10, slow), GraphRow("1m", 10, slow))),
                        markdown=True)
    assert "| small | 10 | 1.000 | 0.900 | 0.90x | <=0.7x NOT met |" in text
    assert "| 1m | 10 | 1.000 | 0.900 | 0.90x | <=1x met |" in text
    assert "global: B parameters, S(0) batch" in text


@pytest.mark.mpi(min_size=2)
@pytest.mark.timeout(60)
def test_pipeline_steps_run() -> None:
    from mpiflow.bench.pipeline import build_pipeline_steps

    for step in build_pipeline_steps():
        step()
        step()


def test_pipeline_row_reports_the_bubble() -> None:
    from mpiflow.bench.pipeline import PipelineResult

    slow = Timings(("eager", "graph"), ((1e-3, 1e-3), (9e-4, 9e-4)))
    result = GraphResult(2, (GraphRow("small", 10, slow),), None,
                         PipelineResult(0.015, 0.021, (0.010, 0.008)))
    text = format_graph(result)
    assert "step 15.000 ms" in text and "10.000 ms: 1.50x" in text and "(2.10x)" in text
    assert "stages alone: 10.000 + 8.000 ms" in text
    assert result.to_json()["pipeline"]["bubble"] == pytest.approx(1.5)


def test_zero_row_reports_states_and_gradients_per_rank() -> None:
    slow = Timings(("eager", "graph"), ((1e-3, 1e-3), (9e-4, 9e-4)))
    mib = 2**20
    result = GraphResult(2, (GraphRow("small", 10, slow),),
                         (8 * mib, 4 * mib, 4 * mib, 4 * mib, 2 * mib, 4 * mib, 2 * mib))
    text = format_graph(result)
    assert "optimizer states 8.00 MiB unsharded, 4.00 MiB stage 1 (0.50x), 4.00 MiB stage 2" \
        in text
    assert "gradients 4.00 MiB unsharded, 2.00 MiB stage 2 (0.50x)" in text
    assert "parameters held between steps, per rank: 4.00 MiB unsharded, 2.00 MiB stage 3 " \
        "(0.50x)" in text
    assert result.to_json()["zero_state_bytes"]["param_zero3"] == 2 * mib


def test_zero_step_row_reports_the_stages_against_no_zero() -> None:
    slow = Timings(("eager", "graph"), ((1e-3, 1e-3), (9e-4, 9e-4)))
    zero = Timings(("stage0", "stage2", "stage3"), ((0.010, 0.010), (0.011, 0.011),
                                                    (0.012, 0.012)))
    result = GraphResult(2, (GraphRow("small", 10, slow),), None, None, zero)
    text = format_graph(result)
    assert "Adam step: 10.000 ms without, 11.000 ms stage 2 (1.10x), 12.000 ms stage 3 " \
        "(1.20x; 1.09x stage 2's)" in text
    assert result.to_json()["zero_step"]["stage3_vs_stage0"] == pytest.approx(1.2)
