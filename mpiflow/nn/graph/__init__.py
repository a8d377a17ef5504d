"""OneFlow's graph mode: :class:`Graph`, traced once into a plan that later calls replay.

``flow.nn.Graph`` (:mod:`.graph`), its ``config`` (:mod:`.config`), the block proxies and their
settings (:mod:`.block`: ``GraphModule``, ``activation_checkpointing``), the tracer
(:mod:`.trace`: :func:`trace_function`), the plan and its replay (:mod:`.plan`), the memory of
a replay (:mod:`.memory`). See docs/graph.md.

Examples:
    >>> from mpiflow.nn.graph import trace_function
    >>> plan, y = trace_function(lambda x: x + 1, (flow.zeros(2),))
    >>> plan.run((flow.ones(2),))
    tensor([2., 2.])
"""

from .block import Block, GraphModule
from .config import GraphConfig
from .graph import Graph
from .plan import Plan
from .trace import trace_function

__all__ = ["Block", "Graph", "GraphConfig", "GraphModule", "Plan", "trace_function"]
