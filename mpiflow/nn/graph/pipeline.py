"""Pipeline stages of an ``nn.Graph``: micro-batches flowing from stage to stage (GPipe).

OneFlow's pipeline parallelism: the layers of a model are placed on different placements
(``module.to_global(placement=P0)``, ``P1``, ...), the activations are moved between them with
``to_global(placement=...)`` inside ``build()``, each stage's block is marked with
``block.to(GraphModule).set_stage(stage_id, placement)`` (or OneFlow's older
``block.config.set_stage(...)`` / ``block.config.stage_id = i``) and
``config.set_gradient_accumulation_steps(n)`` cuts each call's batch into ``n`` micro-batches.

Eager mode runs micro-batch after micro-batch: the forward of micro-batch ``i + 1`` starts when
the backward of ``i`` is over, so one stage computes while the others wait. A graph with stages
replays its plan as a **GPipe** schedule (:meth:`~mpiflow.nn.graph.plan.Plan.run_pipelined`):
the forward steps of every micro-batch, then the backward steps of every micro-batch. Every
rank runs the same sequence of steps (a rank outside an op's placement skips the kernel and
takes part in the moves), so stage ``s`` computes micro-batch ``i + 1`` while stage ``s + 1``
computes micro-batch ``i``: with ``M`` micro-batches on ``S`` stages of equal cost a step
takes ``(M + S - 1) / M`` of the ideal (every stage busy all the time) instead of ``S``. The
gradients accumulate in micro-batch order and each micro-batch runs the same kernels on the
same operands, so the results are the bits of the eager program.

With a ``placement``, a staged block's global inputs on another placement are moved to it
before its forward (their sbp kept), as OneFlow does; with none, the program moves them itself.

Examples:
    >>> import mpiflow.nn as nn
    >>> from mpiflow.nn.graph import Block, GraphModule
    >>> block = Block("stage0", nn.Linear(2, 2))
    >>> block.to(GraphModule).set_stage(0, flow.placement("cpu", [0]))
    >>> is_pipelined([block.to(nn.Module)])
    True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ...layouts.placement import Placement
from ...tensors.tensor import Tensor
from ..modules.module import Module
from .block import graph_module_of

__all__ = ["is_pipelined", "stage_placement", "to_stage"]


def is_pipelined(modules: Iterable[Module]) -> bool:
    """Whether any of ``modules`` was put on a pipeline stage."""
    for m in modules:
        settings = graph_module_of(m)
        if settings is not None and (settings.stage_id is not None
                                     or settings.stage_placement is not None):
            return True
    return False


def stage_placement(module: Module) -> Placement | None:
    """The placement ``set_stage`` gave ``module``, if any."""
    settings = graph_module_of(module)
    return None if settings is None else settings.stage_placement


def to_stage(forward: Callable[..., Any], placement: Placement) -> Callable[..., Any]:
    """``forward`` with its global tensor arguments on another placement moved to
    ``placement`` first (``to_global(placement)``, the sbp kept).

    Examples:
        >>> p0 = flow.placement("cpu", [0])
        >>> f = to_stage(lambda x: x.placement, p0)
        >>> f(flow.ones(2).to_global(p0, flow.sbp.broadcast)) == p0
        True
    """

    def run(*args: Any, **kwargs: Any) -> Any:
        moved = [_moved(a, placement) for a in args]
        return forward(*moved, **{k: _moved(v, placement) for k, v in kwargs.items()})

    return run


def _moved(value: Any, placement: Placement) -> Any:
    if (isinstance(value, Tensor) and value.is_global and value.placement != placement
            and len(value.sbp) == placement.ndim):
        return value.to_global(placement=placement)
    return value
