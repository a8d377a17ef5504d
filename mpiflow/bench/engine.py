"""The engine suite: what one op and one training step cost in mpiflow, beside numpy and PyTorch.

``python -m mpiflow.bench --suite engine`` (named, not part of ``all``; PyTorch optional) runs
on every rank and reports rank 0's view (the max over ranks of each batch); run it at one rank
for the single-process figures. Three tables:

* **per-op overhead**: an elementwise op on a small (64x64 float32) tensor three ways: the
  numpy call on the arrays, the local mpiflow op, and the op on global tensors whose layouts
  need no redistribution (``S(0) + S(0)`` over every rank). The goals: the local op at most
  :data:`LOCAL_GOAL_US` above numpy, the global one at most :data:`GLOBAL_GOAL_US` above the
  local one.
* **training steps**: the MLPs of :mod:`.engine_models` (64-128-64-10 at batch 16, and
  512-1024-512, 1M parameters, at batch 32; cross-entropy), SGD (momentum 0.9) and Adam, as mpiflow,
  mpiflow with ``foreach=True`` and PyTorch on the CPU with one thread; and the LeNet of
  OneFlow's distributed-training guide at batch 32 (two 5x5 convolutions, max pooling, two
  dense layers). The goals: the small step within :data:`SMALL_GOAL` x PyTorch, the 1M step
  within :data:`LARGE_GOAL` x, the LeNet step within :data:`LENET_GOAL` x.
* **memory**: how far the resident set peaks during training above where it stood before the
  model was built (parameters, gradients, optimizer state, activations, temporaries), less the
  same figure for a 2x2 model (the library's one-time start-up: PyTorch's is about 80 MB),
  each side in fresh processes (Linux; see :func:`.engine_models.measure_step_memory`). The
  goal: at most :data:`MEMORY_GOAL` x PyTorch's.

The pure parts (the result classes, their figures and formatting) need no MPI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy

from .metrics import Timings
from .plan import Settings

__all__ = [
    "GLOBAL_GOAL_US",
    "LARGE_GOAL",
    "LENET_GOAL",
    "LOCAL_GOAL_US",
    "MEMORY_GOAL",
    "SMALL_GOAL",
    "EngineResult",
    "MemoryRow",
    "OpRow",
    "StepRow",
    "format_engine",
    "run_engine",
    "torch_available",
]

LOCAL_GOAL_US = 8.0
GLOBAL_GOAL_US = 20.0
SMALL_GOAL = 2.0
LARGE_GOAL = 1.25
LENET_GOAL = 2.0
MEMORY_GOAL = 1.2
OP_SIDES = ("numpy", "local", "global")
STEP_SIDES = ("mpiflow", "foreach", "torch")


def torch_available() -> bool:
    """Whether PyTorch can be imported (the torch columns are left out without it)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass(frozen=True)
class OpRow:
    """One elementwise op, three ways (seconds per call in ``timings``)."""

    name: str
    timings: Timings

    @property
    def local_over_us(self) -> float:
        """Microseconds the local op takes beyond the numpy call."""
        return (self.timings.time("local") - self.timings.time("numpy")) * 1e6

    @property
    def global_over_us(self) -> float:
        """Microseconds the global op takes beyond the local one."""
        return (self.timings.time("global") - self.timings.time("local")) * 1e6

    def to_json(self) -> dict[str, Any]:
        return {"op": self.name, "local_over_numpy_us": self.local_over_us,
                "global_over_local_us": self.global_over_us,
                "local_goal_met": self.local_over_us <= LOCAL_GOAL_US,
                "global_goal_met": self.global_over_us <= GLOBAL_GOAL_US,
                "sides": self.timings.to_json()}


@dataclass(frozen=True)
class StepRow:
    """One model and optimizer, as mpiflow, mpiflow foreach and (maybe) PyTorch."""

    model: str
    optimizer: str
    params: int
    timings: Timings

    @property
    def goal(self) -> float:
        """The allowed mpiflow/PyTorch ratio for this model."""
        return {"small": SMALL_GOAL, "lenet": LENET_GOAL}.get(self.model, LARGE_GOAL)

    def ratio(self, side: str = "mpiflow") -> float | None:
        """``side``'s time over PyTorch's (paired by round), None without PyTorch."""
        if "torch" not in self.timings.sides:
            return None
        return self.timings.ratio(side, "torch")

    def to_json(self) -> dict[str, Any]:
        ratio = self.ratio()
        return {"model": self.model, "optimizer": self.optimizer, "params": self.params,
                "vs_torch": ratio, "foreach_vs_torch": self.ratio("foreach"),
                "goal": self.goal, "goal_met": None if ratio is None else ratio <= self.goal,
                "sides": self.timings.to_json()}


@dataclass(frozen=True)
class MemoryRow:
    """Peak resident-set growth over a few training steps (bytes; None: not measured)."""

    model: str
    optimizer: str
    mpiflow: int | None
    torch: int | None

    @property
    def ratio(self) -> float | None:
        if self.mpiflow is None or not self.torch:
            return None
        return self.mpiflow / self.torch

    def to_json(self) -> dict[str, Any]:
        ratio = self.ratio
        return {"model": self.model, "optimizer": self.optimizer, "mpiflow_bytes": self.mpiflow,
                "torch_bytes": self.torch, "ratio": ratio, "goal": MEMORY_GOAL,
                "goal_met": None if ratio is None else ratio <= MEMORY_GOAL}


@dataclass(frozen=True)
class EngineResult:
    """The three tables of the engine suite."""

    nranks: int
    ops: tuple[OpRow, ...]
    steps: tuple[StepRow, ...]
    memory: tuple[MemoryRow, ...]

    def to_json(self) -> dict[str, Any]:
        return {"ranks": self.nranks, "ops": [r.to_json() for r in self.ops],
                "steps": [r.to_json() for r in self.steps],
                "memory": [r.to_json() for r in self.memory]}


# -- measuring ------------------------------------------------------------------------------------
def _op_calls(name: str) -> list[Callable[[], Any]]:
    """The numpy, local and global calls of op ``name`` on 64x64 float32 operands."""
    from ..layouts.placement import Placement
    from ..layouts.sbp import Split
    from ..tensors.creation import tensor

    rng = numpy.random.default_rng(0)
    a = rng.standard_normal((64, 64), dtype=numpy.float32)
    b = rng.standard_normal((64, 64), dtype=numpy.float32)
    ta, tb = tensor(a), tensor(b)
    from ..communication.mpi.group import world_comm

    everywhere = Placement("cpu", list(range(world_comm.size)))
    ga = tensor(a, placement=everywhere, sbp=(Split(0),))
    gb = tensor(b, placement=everywhere, sbp=(Split(0),))
    sa, sb = ga.to_local().numpy(), gb.to_local().numpy()
    if name == "add":
        return [lambda: numpy.add(sa, sb), lambda: ta + tb, lambda: ga + gb]
    if name == "mul_scalar":
        return [lambda: numpy.multiply(sa, 0.5), lambda: ta * 0.5, lambda: ga * 0.5]
    if name == "relu":
        from ..ops.pointwise import relu

        zero = numpy.zeros((), dtype=numpy.float32)
        return [lambda: numpy.maximum(sa, zero), lambda: relu(ta), lambda: relu(ga)]
    raise ValueError(f"unknown op {name!r}")


def _memory(lib: str, model: str, optimizer: str) -> int | None:
    """The memory training ``model`` takes beyond training the ``tiny`` model (the library's
    one-time start-up), by :func:`.engine_models.measure_step_memory` in fresh processes, or
    None where that fails (not Linux, no PyTorch)."""
    full = _probe(lib, model, optimizer)
    base = _probe(lib, "tiny", optimizer)
    return None if full is None or base is None else max(0, full - base)


def _probe(lib: str, model: str, optimizer: str) -> int | None:
    """:func:`.engine_models.measure_step_memory` in a fresh process (outside the MPI job:
    the launcher's variables are left out), or None where it fails."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PMI_", "HYDRA_", "MPIR_", "PMIX_", "OMPI_"))}
    env.update(OMP_NUM_THREADS="1", MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    try:
        out = subprocess.run([sys.executable, "-m", "mpiflow.bench.engine_models", lib, model,
                              optimizer], env=env, capture_output=True, text=True, timeout=300,
                             check=True)
        return int(json.loads(out.stdout.strip().splitlines()[-1])["bytes"])
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, IndexError):
        return None


def run_engine(settings: Settings, ops: tuple[str, ...] = ("add", "mul_scalar", "relu"),
               models: tuple[str, ...] = ("small", "1m", "lenet"),
               optimizers: tuple[str, ...] = ("sgd", "adam"), memory: bool = True
               ) -> EngineResult:
    """Measure the three tables (collective: every rank times, rank 0's memory probe runs).

    Each table's sides are timed in ``settings.rounds`` interleaved rounds; the op batches are
    ``20 * settings.iters`` calls (micro-seconds each), the step batches enough steps for
    about 50 ms.
    """
    from mpi4py import MPI

    from ..communication.mpi.group import world_comm
    from .engine_models import build_step, param_count
    from .runner import measure_interleaved

    have_torch = torch_available()
    timer = MPI.COMM_WORLD.Dup()
    try:
        op_rows = []
        for name in ops:
            calls = _op_calls(name)
            times = measure_interleaved([calls], [20 * settings.iters], [2 * settings.iters],
                                        settings.rounds, timer)
            op_rows.append(OpRow(name, Timings(OP_SIDES, tuple(
                tuple(times[0, :, i].tolist()) for i in range(len(OP_SIDES))), settings.stat)))
        step_rows = []
        sides = STEP_SIDES if have_torch else STEP_SIDES[:2]
        for model in models:
            for optimizer in optimizers:
                steps = [build_step("mpiflow", model, optimizer),
                         build_step("mpiflow", model, optimizer, foreach=True)]
                if have_torch:
                    steps.append(build_step("torch", model, optimizer))
                iters = {"small": 100, "lenet": 5}.get(model, 10)
                times = measure_interleaved([steps], [iters], [max(2, iters // 5)],
                                            settings.rounds, timer)
                step_rows.append(StepRow(model, optimizer, param_count(model), Timings(
                    sides, tuple(tuple(times[0, :, i].tolist()) for i in range(len(sides))),
                    settings.stat)))
        memory_rows = []
        if memory:
            for model in models:
                for optimizer in optimizers:
                    row = None
                    if world_comm.rank == 0:
                        row = MemoryRow(model, optimizer, _memory("mpiflow", model, optimizer),
                                        _memory("torch", model, optimizer) if have_torch
                                        else None)
                    memory_rows.append(timer.bcast(row, root=0))
    finally:
        timer.Free()
    return EngineResult(world_comm.size, tuple(op_rows), tuple(step_rows), tuple(memory_rows))


# -- reporting ------------------------------------------------------------------------------------
def _mark(met: bool | None) -> str:
    return "-" if met is None else ("met" if met else "NOT met")


def _fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _table(header: list[str], rows: list[list[str]], markdown: bool) -> list[str]:
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return lines + ["| " + " | ".join(r) + " |" for r in rows]
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    return ["  ".join(str(c).rjust(w) for c, w in zip(r, widths)) for r in [header, *rows]]


def format_engine(result: EngineResult, markdown: bool = False) -> str:
    """The three tables and the goals' verdicts."""
    lines = [f"# engine: per-op overhead, training steps, memory ({result.nranks} rank(s))"]
    rows = []
    for r in result.ops:
        t = r.timings
        rows.append([r.name, f"{t.time('numpy') * 1e6:.2f}", f"{t.time('local') * 1e6:.2f}",
                     f"{t.time('global') * 1e6:.2f}", f"{r.local_over_us:+.2f}",
                     f"{r.global_over_us:+.2f}",
                     _mark(r.local_over_us <= LOCAL_GOAL_US
                           and r.global_over_us <= GLOBAL_GOAL_US)])
    lines += _table(["op (64x64 f32)", "numpy us", "local us", "global S0 us",
                     "local-numpy us", "global-local us",
                     f"goal (<={LOCAL_GOAL_US:g}, <={GLOBAL_GOAL_US:g})"], rows, markdown)
    rows = []
    for s in result.steps:
        t = s.timings
        torch_ms = f"{t.time('torch') * 1e3:.3f}" if "torch" in t.sides else "-"
        ratio = s.ratio()
        rows.append([s.model, s.optimizer, str(s.params), f"{t.time('mpiflow') * 1e3:.3f}",
                     f"{t.time('foreach') * 1e3:.3f}", torch_ms, _fmt_ratio(ratio),
                     _fmt_ratio(s.ratio("foreach")),
                     f"<={s.goal:g}x " + _mark(None if ratio is None else ratio <= s.goal)])
    if rows:
        lines.append("")
        lines += _table(["model", "optim", "params", "mpiflow ms", "foreach ms", "torch ms",
                         "mpiflow/torch", "foreach/torch", "goal"], rows, markdown)
    if result.memory:
        lines.append("")
        rows = []
        for m in result.memory:
            rows.append([m.model, m.optimizer,
                         "-" if m.mpiflow is None else f"{m.mpiflow / 2**20:.1f}",
                         "-" if m.torch is None else f"{m.torch / 2**20:.1f}",
                         _fmt_ratio(m.ratio),
                         f"<={MEMORY_GOAL:g}x " + _mark(None if m.ratio is None
                                                        else m.ratio <= MEMORY_GOAL)])
        lines += _table(["model", "optim", "mpiflow MiB", "torch MiB", "ratio", "goal"], rows,
                        markdown)
        lines.append("memory: peak resident set over 5 training steps (after 2) above the "
                     "resident set before the model was built, less the same for a 2x2 model "
                     "(the library's start-up); each side in a fresh process, large buffers "
                     "mapped one by one (MALLOC_MMAP_THRESHOLD_=65536)")
    return "\n".join(lines)
