"""OneFlow's test_module_to_global_or_local.py (modules), run on mpiflow at 2 ranks.

``Module.to_global`` keeps shared parameters shared and the same objects; ``Module.to_local``
gives each rank its shard. One deliberate difference (docs/migration.md): OneFlow's
``Module.to_global`` of *local* tensors with a split sbp takes each rank's local tensor as its
shard (as ``Tensor.to_global`` does), while mpiflow's takes the first rank's tensor as the
whole value and splits it, so that a freshly built module computes what the local one did.
"""

from __future__ import annotations

import numpy
import pytest
from oneflow_case import RANK, SIZE, exactly

import mpiflow as flow

pytestmark = pytest.mark.mpi

P = flow.placement("cpu", ranks=[0, 1]) if SIZE >= 2 else None
B = flow.sbp.broadcast
S = flow.sbp.split(0)


@exactly(2)
def test_module_to_global() -> None:
    class ReuseVarModule(flow.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear1 = flow.nn.Linear(3, 4)
            self.linear2 = flow.nn.Linear(3, 4)
            self.linear2.weight = self.linear1.weight

    m = ReuseVarModule()
    assert m.linear1.weight is m.linear2.weight
    assert m.linear1.weight.device == flow.device("cpu", RANK)
    assert m.linear1.bias is not m.linear2.bias
    assert m.linear1.bias.device == flow.device("cpu", RANK)
    m.to_global(placement=P, sbp=B)
    assert m.linear1.weight is m.linear2.weight
    assert m.linear1.weight.placement == P and m.linear1.weight.sbp[0] == B
    assert m.linear1.bias is not m.linear2.bias
    assert m.linear1.bias.placement == P and m.linear1.bias.sbp[0] == B


@exactly(2)
def test_module_to_local() -> None:
    class ToLocalModule(flow.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = flow.nn.Linear(3, 4, False)

    m = ToLocalModule()
    flow.nn.init.uniform_(m.linear.weight)
    m.to_global(placement=P, sbp=B)
    origin = m.linear.weight.numpy()
    m.to_global(placement=P, sbp=S)
    numpy.testing.assert_array_equal(m.linear.weight.numpy(), origin)
    # weight S(0): each rank keeps its rows
    m.to_local()
    assert m.linear.weight.is_local
    numpy.testing.assert_array_equal(m.linear.weight.numpy(), origin[:2] if RANK == 0
                                     else origin[2:])
    # local to global from split(0): the local rows are the shards, as OneFlow's
    m.to_global(placement=P, sbp=S)
    numpy.testing.assert_array_equal(m.linear.weight.numpy(), origin)
    # weight B
    m.to_global(placement=P, sbp=B)
    assert not m.linear.weight.is_local
    numpy.testing.assert_array_equal(m.linear.weight.numpy(), origin)
    m.to_local()
    assert m.linear.weight.is_local
    numpy.testing.assert_array_equal(m.linear.weight.numpy(), origin)


@exactly(2)
def test_module_to_global_of_local_shards() -> None:
    """Module.to_global(P, S(0)) of local tensors takes each rank's tensor as its shard."""
    m = flow.nn.Linear(3, 4, False)
    with flow.no_grad():
        m.weight.fill_(float(RANK + 1))
    m.to_global(placement=P, sbp=S)
    assert m.weight.shape == (8, 3)
    numpy.testing.assert_array_equal(m.weight.numpy(), [[1.0] * 3] * 4 + [[2.0] * 3] * 4)
