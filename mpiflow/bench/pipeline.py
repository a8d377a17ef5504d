"""The graph suite's pipeline row: 4 micro-batches on 2 stages, against the ideal (the bubble).

An MLP is cut in two stages of about equal cost (stage 0: 512-1024-512 with ReLUs on rank 0;
stage 1: 512-1024-512-10 on rank 1), trained with SGD on a batch of 4 x 64 rows, 4
micro-batches per step. Three sides, timed in the same interleaved rounds:

- ``pipeline``: the ``nn.Graph`` with ``set_stage`` and 4 accumulation steps (GPipe replay);
- ``eager``: the same program in eager mode, micro-batch after micro-batch;
- ``ideal``: each stage's compute alone: rank ``s`` replays a graph of stage ``s``'s forward
  and backward (and its SGD step) over the same 4 micro-batches, its tensors global on
  placement ``[s]`` as in the pipeline (the same kernels), with no other stage to wait for;
  the max over ranks is the time a step would take if the stages never waited.

``pipeline / ideal`` is the bubble (GPipe's theory with equal stages: ``(M + S - 1) / M`` =
1.25x); ``eager / ideal`` is about ``S`` = 2x. Needs 2 ranks (ranks beyond 1 only take part
in the moves).

Examples:
    >>> r = PipelineResult(0.0125, 0.0200, (0.0100, 0.0095))
    >>> print(format_pipeline(r))
    pipeline, 2 stages x 4 micro-batches (GPipe): step 12.500 ms, ideal (slowest stage's
      compute alone) 10.000 ms: 1.25x (GPipe with equal stages: 1.25x); eager, micro-batch
      after micro-batch: 20.000 ms (2.00x); stages alone: 10.000 + 9.500 ms
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy

__all__ = ["MICRO", "STAGES", "PipelineResult", "build_pipeline_steps", "format_pipeline"]

MICRO, STAGES, ROWS = 4, 2, 64
WIDTHS = ((512, 1024, 512), (512, 1024, 512, 10))


@dataclass(frozen=True)
class PipelineResult:
    """Seconds per step: the pipelined graph, eager, each stage's compute alone."""

    step: float
    eager: float
    stages: tuple[float, ...]

    @property
    def ideal(self) -> float:
        """The slowest stage's compute alone: a step if no stage ever waited."""
        return max(self.stages)

    @property
    def bubble(self) -> float:
        """The pipelined step's time over the ideal."""
        return self.step / self.ideal

    def to_json(self) -> dict[str, Any]:
        return {"stages": STAGES, "micro_batches": MICRO, "schedule": "GPipe",
                "step_s": self.step, "ideal_s": self.ideal, "eager_s": self.eager,
                "stage_s": list(self.stages),
                "bubble": self.bubble, "gpipe_theory": (MICRO + STAGES - 1) / MICRO,
                "eager_vs_ideal": self.eager / self.ideal}


def format_pipeline(r: PipelineResult) -> str:
    """The step, the ideal, the bubble ratio, eager's ratio."""
    stages = " + ".join(f"{t * 1e3:.3f}" for t in r.stages)
    return (f"pipeline, {STAGES} stages x {MICRO} micro-batches (GPipe): step "
            f"{r.step * 1e3:.3f} ms, ideal (slowest stage's\n  compute alone) "
            f"{r.ideal * 1e3:.3f} ms: {r.bubble:.2f}x (GPipe with equal stages: "
            f"{(MICRO + STAGES - 1) / MICRO:.2f}x); eager, micro-batch\n  after micro-batch: "
            f"{r.eager * 1e3:.3f} ms ({r.eager / r.ideal:.2f}x); stages alone: {stages} ms")


def _layers(widths: tuple[int, ...], last_relu: bool) -> Any:
    from .. import nn

    layers: list[Any] = []
    for i, (a, b) in enumerate(itertools.pairwise(widths)):
        layers.append(nn.Linear(a, b))
        if last_relu or i < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def build_pipeline_steps() -> tuple[Callable[[], None], ...]:
    """The eager step, the pipelined graph's step, and stage 0's and stage 1's compute alone
    (each run by its rank, the other ranks doing nothing) (collective; at least 2 ranks)."""
    from .. import nn, optim
    from ..communication.mpi.group import world_comm
    from ..layouts.placement import Placement
    from ..layouts.sbp import Broadcast
    from ..nn import functional as F
    from ..nn.graph import Graph, GraphModule
    from ..random import manual_seed
    from ..tensors.creation import ones_like, tensor

    rank = world_comm.rank
    places = [Placement("cpu", [s]) for s in range(STAGES)]
    rng = numpy.random.default_rng(0)
    x_np = rng.standard_normal((MICRO * ROWS, WIDTHS[0][0]), dtype=numpy.float32)
    y_np = rng.integers(0, WIDTHS[1][-1], MICRO * ROWS)
    x = tensor(x_np).to_global(places[0], Broadcast())
    y = tensor(y_np).to_global(places[1], Broadcast())

    def model() -> Any:
        manual_seed(0)
        stages = nn.ModuleList([_layers(WIDTHS[0], True), _layers(WIDTHS[1], False)])
        for stage, place in zip(stages, places):
            stage.to_global(place, Broadcast())
        return stages

    eager_model = model()
    eager_opt = optim.SGD(eager_model.parameters(), lr=1e-3)

    def eager() -> None:
        for i in range(MICRO):
            part = slice(i * ROWS, (i + 1) * ROWS)
            h = eager_model[0](x[part]).to_global(places[1], Broadcast())
            loss = F.cross_entropy(eager_model[1](h), y[part])
            loss.backward(ones_like(loss) * (1 / MICRO))
        eager_opt.step()
        eager_opt.zero_grad()

    piped = model()

    class Pipeline(Graph):
        def __init__(self) -> None:
            super().__init__()
            self.stages = piped
            for s in range(STAGES):
                self.stages[s].to(GraphModule).set_stage(s, places[s])
            self.add_optimizer(optim.SGD(piped.parameters(), lr=1e-3))
            self.config.set_gradient_accumulation_steps(MICRO)

        def build(self, x: Any, y: Any) -> Any:
            loss = F.cross_entropy(self.stages[1](self.stages[0](x)), y)
            loss.backward()
            return loss

    pipeline = Pipeline()

    def pipelined() -> None:
        pipeline(x, y)

    alone = _stage_alone(rank)

    def only(stage: int) -> Callable[[], None]:
        return alone if rank == stage else (lambda: None)

    return eager, pipelined, only(0), only(1)


def _stage_alone(rank: int) -> Callable[[], None]:
    """Rank ``s < STAGES``: stage ``s``'s forward, backward and SGD step over the micro-batches
    as a graph of global tensors on placement ``[s]`` (the pipeline's kernels: global ops on a
    one-rank placement take no collective, so the rank runs it alone); other ranks: nothing."""
    from .. import optim
    from ..layouts.placement import Placement
    from ..layouts.sbp import Broadcast
    from ..nn import functional as F
    from ..nn.graph import Graph
    from ..random import manual_seed
    from ..tensors.creation import tensor

    if rank >= STAGES:
        return lambda: None
    place = Placement("cpu", [rank])
    manual_seed(0)
    stage = _layers(WIDTHS[rank], rank == 0)
    stage.to_global(place, Broadcast())
    rng = numpy.random.default_rng(rank)

    def on_stage(array: numpy.ndarray) -> Any:
        return tensor(array).to_global(place, Broadcast(), check_meta=False)

    x = on_stage(rng.standard_normal((MICRO * ROWS, WIDTHS[rank][0]), dtype=numpy.float32))
    other = on_stage(rng.standard_normal((MICRO * ROWS, WIDTHS[0][-1]), dtype=numpy.float32)
                     if rank == 0 else rng.integers(0, WIDTHS[1][-1], MICRO * ROWS))

    class Alone(Graph):
        def __init__(self) -> None:
            super().__init__()
            self.stage = stage
            self.add_optimizer(optim.SGD(stage.parameters(), lr=1e-3))
            self.config.set_gradient_accumulation_steps(MICRO)

        def build(self, x: Any, other: Any) -> Any:
            out = self.stage(x)
            if rank == 0:  # the gradient stage 1 would send back
                out.backward(other)
                return out.sum()
            loss = F.cross_entropy(out, other)
            loss.backward()
            return loss

    alone = Alone()
    return lambda: alone(x, other)
