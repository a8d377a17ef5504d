"""Boxing: redistribute a global tensor between layouts (sbp and placement), OneFlow style.

- :mod:`.shards` (pure): which part of the logical value each rank holds;
- :mod:`.plan` (pure, cached): the cheapest list of steps between two layouts, and the
  per-axis conversion cost that op layout choices weigh;
- :mod:`.execute`: :func:`redistribute` runs a plan on this rank.

Examples:
    >>> import mpiflow as flow
    >>> from mpiflow.boxing import Layout, plan_redistribution
    >>> p = flow.placement("cpu", [0])
    >>> plan_redistribution((4,), 8, Layout(p, flow.sbp.partial_sum), Layout(p, flow.sbp.broadcast))
    (AllReduce(axis=0, op=SUM),)
"""

from ..layouts.layout import Layout
from ..layouts.plan import Plan, conversion_cost, plan_redistribution, transfer_cost
from ..layouts.shards import local_shape, scatter_value, shard_slices
from ..layouts.steps import (
    AllGather,
    AllReduce,
    AllToAll,
    LocalSlice,
    ReduceScatter,
    Step,
    ToPartial,
    Transfer,
)
from .execute import array_module, line_communicator, redistribute

__all__ = [
    "AllGather",
    "AllReduce",
    "AllToAll",
    "Layout",
    "LocalSlice",
    "Plan",
    "ReduceScatter",
    "Step",
    "ToPartial",
    "Transfer",
    "array_module",
    "conversion_cost",
    "line_communicator",
    "local_shape",
    "plan_redistribution",
    "redistribute",
    "scatter_value",
    "shard_slices",
    "transfer_cost",
]
