"""The graph suite: one training step as an ``nn.Graph`` (a replayed plan) beside eager mode.

``python -m mpiflow.bench --suite graph`` (named, not part of ``all``) builds the MLPs of
:mod:`.engine_models` (64-128-64-10 at batch 16: dispatch-bound; 512-1024-512, 1M parameters,
at batch 32) twice from the same weights, trains one eagerly (``zero_grad``, forward,
cross-entropy, ``backward``, ``step``) and one through a graph whose ``build()`` is the same
forward and backward, and times both in the same interleaved rounds. On one rank the tensors
are local; on several, global: parameters ``B`` and the batch ``S(0)`` over every rank (data
parallel, the gradients' all-reduces planned by the layouts). SGD with momentum 0.9 and
``foreach=True`` on both sides. The goals: the small step at most :data:`SMALL_GOAL` x the
eager step's time, the 1M step at most :data:`LARGE_GOAL` x (no slower). The ``lenet-job`` row
is the OneFlow 0.x LeNet train job of :mod:`.legacy_job`, traced against eager (its goal: no
slower).

The pure parts (the result class and its formatting) need no MPI.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy

from ..nn.graph import Graph
from .legacy_job import JOB_MODEL, build_job_steps
from .metrics import Timings
from .pipeline import PipelineResult, build_pipeline_steps, format_pipeline
from .plan import Settings

__all__ = ["LARGE_GOAL", "SMALL_GOAL", "GraphResult", "GraphRow", "build_graph_steps",
           "build_zero_steps", "format_graph", "run_graph", "zero_state_bytes"]

SMALL_GOAL = 0.7
LARGE_GOAL = 1.0
SIDES = ("eager", "graph")
ZERO_SIDES = ("stage0", "stage2", "stage3")


@dataclass(frozen=True)
class GraphRow:
    """One model: its eager and graph step times."""

    model: str
    params: int
    timings: Timings

    @property
    def goal(self) -> float:
        """The allowed graph/eager ratio."""
        return SMALL_GOAL if self.model == "small" else LARGE_GOAL

    @property
    def ratio(self) -> float:
        """The graph step's time over the eager step's (paired by round)."""
        return self.timings.ratio("graph", "eager")

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "params": self.params, "graph_vs_eager": self.ratio,
                "goal": self.goal, "goal_met": self.ratio <= self.goal,
                "sides": self.timings.to_json()}


@dataclass(frozen=True)
class GraphResult:
    """The rows of one run, its rank count, the per-rank bytes (max over ranks) of the 1M
    model with Adam (:func:`zero_state_bytes`: optimizer states unsharded, ZeRO stage 1,
    stage 2; gradients unsharded, stage 2; parameters held between steps unsharded, stage 3;
    None: not measured), the pipeline row, the 1M model's Adam step at ZeRO stages 0, 2 and 3
    (:func:`build_zero_steps`; at 2 ranks or more)."""

    nranks: int
    rows: tuple[GraphRow, ...]
    zero: tuple[int, ...] | None = None
    pipeline: PipelineResult | None = None
    zero_times: Timings | None = None

    def to_json(self) -> dict[str, Any]:
        return {"nranks": self.nranks, "rows": [r.to_json() for r in self.rows],
                "zero_state_bytes": None if self.zero is None else
                dict(zip(("unsharded", "zero1", "zero2", "grad_unsharded", "grad_zero2",
                          "param_unsharded", "param_zero3"), self.zero)),
                "pipeline": None if self.pipeline is None else self.pipeline.to_json(),
                "zero_step": None if self.zero_times is None else
                {**self.zero_times.to_json(),
                 "stage2_vs_stage0": self.zero_times.ratio("stage2", "stage0"),
                 "stage3_vs_stage0": self.zero_times.ratio("stage3", "stage0"),
                 "stage3_vs_stage2": self.zero_times.ratio("stage3", "stage2")}}


def build_graph_steps(model: str) -> tuple[Callable[[], None], Callable[[], None]]:
    """The eager step and the graph step of ``model`` (a key of ``engine_models.MODELS``),
    from the same weights and batch; global over every rank when there are several.

    Examples:
        >>> eager, graph = build_graph_steps("small")
        >>> eager(); graph()
    """
    from .. import nn, optim
    from ..communication.mpi.group import world_comm
    from ..layouts.placement import Placement
    from ..layouts.sbp import Broadcast, Split
    from ..nn import functional as F
    from ..tensors.creation import tensor
    from .engine_models import MODELS

    widths, batch = MODELS[model]
    size = world_comm.size
    rng = numpy.random.default_rng(0)
    x = tensor(rng.standard_normal((batch * size, widths[0]), dtype=numpy.float32))
    y = tensor(rng.integers(0, widths[-1], batch * size))
    placement = Placement("cpu", list(range(size))) if size > 1 else None
    if placement is not None:
        x = x.to_global(placement, Broadcast()).to_global(placement, Split(0))
        y = y.to_global(placement, Broadcast()).to_global(placement, Split(0))

    def make() -> tuple[Any, Any]:
        from ..tensors.random import manual_seed

        manual_seed(0)
        mods: list[Any] = []
        for i in range(len(widths) - 1):
            mods.append(nn.Linear(widths[i], widths[i + 1]))
            if i < len(widths) - 2:
                mods.append(nn.ReLU())
        net = nn.Sequential(*mods)
        if placement is not None:
            net.to_global(placement, Broadcast())
        return net, optim.SGD(net.parameters(), lr=1e-3, momentum=0.9, foreach=True)

    net, opt = make()

    def eager() -> None:
        opt.zero_grad()
        F.cross_entropy(net(x), y).backward()
        opt.step()

    class Step(nn.Graph):
        def __init__(self) -> None:
            super().__init__()
            self.net, graph_opt = make()
            self.add_optimizer(graph_opt)

        def build(self, inputs: Any, target: Any) -> Any:
            loss = F.cross_entropy(self.net(inputs), target)
            loss.backward()
            return loss

    graph = Step()

    def graph_step() -> None:
        graph(x, y)

    return eager, graph_step


class _AdamStep(Graph):
    """One training step of a model with its optimizer (the ZeRO measurement's graph)."""

    def __init__(self, net: Any, opt: Any) -> None:
        super().__init__()
        self.net = net
        self.add_optimizer(opt)

    def build(self, inputs: Any, target: Any) -> Any:
        from ..nn import functional as F

        loss = F.cross_entropy(self.net(inputs), target)
        loss.backward()
        return loss


def _zero_graphs(model: str, stages: tuple[int, ...]) -> tuple[list[Any], list[Any], Any, Any]:
    """``model``'s Adam step graph at each of ``stages`` (0: no ZeRO) from the same weights,
    their optimizers, and the batch (collective; parameters ``B`` over every rank, batch
    ``S(0)``)."""
    from .. import nn, optim
    from ..communication.mpi.group import world_comm
    from ..layouts.placement import Placement
    from ..layouts.sbp import Broadcast, Split
    from ..tensors.creation import tensor
    from ..tensors.random import manual_seed
    from .engine_models import MODELS

    widths, batch = MODELS[model]
    size = world_comm.size
    placement = Placement("cpu", list(range(size)))
    rng = numpy.random.default_rng(0)
    x = tensor(rng.standard_normal((batch * size, widths[0]), dtype=numpy.float32))
    y = tensor(rng.integers(0, widths[-1], batch * size))
    x, y = (t.to_global(placement, Broadcast()).to_global(placement, Split(0)) for t in (x, y))
    graphs, opts = [], []
    for stage in stages:
        manual_seed(0)
        net = nn.Sequential(*[nn.Linear(a, b) for a, b in itertools.pairwise(widths)])
        net.to_global(placement, Broadcast())
        opt = optim.Adam(net.parameters(), lr=1e-3)
        graph = _AdamStep(net, opt)
        if stage:
            graph.config.enable_zero(True, stage=stage)
        graphs.append(graph)
        opts.append(opt)
    return graphs, opts, x, y


def zero_state_bytes(model: str = "1m") -> tuple[int, int, int, int, int, int, int]:
    """Per-rank bytes after one Adam step of ``model``'s graph (collective; parameters ``B``
    over every rank, batch ``S(0)``): optimizer states unsharded, with ZeRO stage 1, with
    stage 2; gradients unsharded (when the update begins), with stage 2; parameters held
    after the step (between steps: ``graph.param_bytes``) unsharded, with stage 3."""
    from ..nn.graph.zero import state_bytes

    graphs, opts, x, y = _zero_graphs(model, (0, 1, 2, 3))
    states, grads, params = [], [], []
    for graph, opt in zip(graphs, opts):
        graph(x, y)
        states.append(state_bytes(opt))
        grads.append(graph.grad_bytes)
        params.append(graph.param_bytes)
    return states[0], states[1], states[2], grads[0], grads[2], params[0], params[3]


def build_zero_steps(model: str = "1m") -> tuple[Callable[[], None], ...]:
    """The Adam step of ``model``'s graph without ZeRO, with stage 2 and with stage 3, from
    the same weights and batch (collective; traced here, so each call replays).

    Examples:
        >>> steps = build_zero_steps("small")
        >>> for step in steps: step()
    """
    graphs, _, x, y = _zero_graphs(model, (0, 2, 3))

    def stepper(graph: Any) -> Callable[[], None]:
        def step() -> None:
            graph(x, y)
        return step

    for graph in graphs:
        graph(x, y)
    return tuple(stepper(graph) for graph in graphs)


def run_graph(settings: Settings, models: tuple[str, ...] = ("small", "1m", JOB_MODEL)
              ) -> GraphResult:
    """Time the eager and graph steps of each model in interleaved rounds (collective)."""
    from mpi4py import MPI

    from ..communication.mpi.group import world_comm
    from .engine_models import param_count
    from .runner import measure_interleaved

    timer = MPI.COMM_WORLD.Dup()
    try:
        rows = []
        for model in models:
            job = model == JOB_MODEL
            steps = list(build_job_steps() if job else build_graph_steps(model))
            iters = {"small": 100, JOB_MODEL: 4}.get(model, 10)
            times = measure_interleaved([steps], [iters], [max(3, iters // 5)],
                                        settings.rounds, timer)
            params = param_count("lenet" if job else model)
            rows.append(GraphRow(model, params, Timings(SIDES, tuple(
                tuple(times[0, :, i].tolist()) for i in range(len(SIDES))), settings.stat)))
        zero = tuple(timer.allreduce(n, op=MPI.MAX) for n in zero_state_bytes("1m"))
        pipeline = None
        if world_comm.size >= 2:
            times = measure_interleaved([list(build_pipeline_steps())], [5], [3],
                                        settings.rounds, timer)
            eager, step, *stages = (float(numpy.median(times[0, :, i])) for i in range(4))
            pipeline = PipelineResult(step, eager, tuple(stages))
        zero_times = None
        if world_comm.size >= 2:
            times = measure_interleaved([list(build_zero_steps("1m"))], [10], [3],
                                        settings.rounds, timer)
            zero_times = Timings(ZERO_SIDES, tuple(tuple(times[0, :, i].tolist())
                                                   for i in range(len(ZERO_SIDES))),
                                 settings.stat)
        return GraphResult(world_comm.size, tuple(rows), zero, pipeline, zero_times)
    finally:
        timer.Free()


def format_graph(result: GraphResult, markdown: bool = False) -> str:
    """The table and the goals' verdicts.

    Examples:
        >>> t = Timings(SIDES, ((2e-3, 2e-3), (1e-3, 1e-3)))
        >>> print(format_graph(GraphResult(1, (GraphRow("small", 13002, t),))))
        # graph: nn.Graph step vs eager step (1 rank(s), local tensors)
        model  params  eager ms  graph ms  graph/eager        goal
        small   13002     2.000     1.000        0.50x  <=0.7x met
    """
    kind = "local tensors" if result.nranks == 1 else "global: B parameters, S(0) batch"
    lines = [f"# graph: nn.Graph step vs eager step ({result.nranks} rank(s), {kind})"]
    header = ["model", "params", "eager ms", "graph ms", "graph/eager", "goal"]
    rows = []
    for r in result.rows:
        t = r.timings
        rows.append([r.model, str(r.params), f"{t.time('eager') * 1e3:.3f}",
                     f"{t.time('graph') * 1e3:.3f}", f"{r.ratio:.2f}x",
                     f"<={r.goal:g}x " + ("met" if r.ratio <= r.goal else "NOT met")])
    if markdown:
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
    else:
        widths = [max(len(c) for c in col) for col in zip(header, *rows)]
        lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in [header, *rows]]
    if result.zero is not None:
        mib = [n / 2**20 for n in result.zero]
        lines.append(f"ZeRO, 1m model, Adam, per rank (1/N = {1 / result.nranks:.2f}): optimizer "
                     f"states {mib[0]:.2f} MiB unsharded, {mib[1]:.2f} MiB stage 1 "
                     f"({result.zero[1] / result.zero[0]:.2f}x), {mib[2]:.2f} MiB stage 2; "
                     f"gradients {mib[3]:.2f} MiB unsharded, {mib[4]:.2f} MiB stage 2 "
                     f"({result.zero[4] / max(result.zero[3], 1):.2f}x)")
        if len(result.zero) > 5:
            lines.append(f"ZeRO stage 3, parameters held between steps, per rank: "
                         f"{mib[5]:.2f} MiB unsharded, {mib[6]:.2f} MiB stage 3 "
                         f"({result.zero[6] / max(result.zero[5], 1):.2f}x)")
    if result.zero_times is not None:
        t = result.zero_times
        lines.append(f"ZeRO, 1m model, Adam step: {t.time('stage0') * 1e3:.3f} ms without, "
                     f"{t.time('stage2') * 1e3:.3f} ms stage 2 "
                     f"({t.ratio('stage2', 'stage0'):.2f}x), {t.time('stage3') * 1e3:.3f} ms "
                     f"stage 3 ({t.ratio('stage3', 'stage0'):.2f}x; "
                     f"{t.ratio('stage3', 'stage2'):.2f}x stage 2's)")
    if result.pipeline is not None:
        lines.append(format_pipeline(result.pipeline))
    return "\n".join(lines)
