"""Every ``ReduceOp`` on every torch dtype through ``mpiflow.distributed``, against torch's own
reduction of every rank's data; bfloat16 reduces as numbers (through float32, rounded once),
never as its bits.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from collective_helpers import ODD, RANK, WORLD
from torch_tensor_helpers import (
    DTYPES,
    LAST,
    every,
    name,
    reduce_expected,
    same,
    supports,
    tdata,
    torch,
)

import mpiflow.comm as comm
import mpiflow.distributed as dist
from mpiflow.distributed import ReduceOp

pytestmark = pytest.mark.mpi


# -- every ReduceOp on every dtype --------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=name)
@pytest.mark.parametrize("op", list(ReduceOp), ids=lambda op: op.name)
def test_all_reduce_ops(op: ReduceOp, dtype: Any) -> None:
    x = tdata((ODD,), dtype, RANK)
    if not supports(op, dtype):
        # raised on every rank before anything is sent: the next collective still matches
        with pytest.raises(TypeError, match=op.name):
            dist.all_reduce(x, op=op)
        same(x, tdata((ODD,), dtype, RANK))
        with pytest.raises(TypeError, match=op.name):
            dist.reduce(x, LAST, op=op)
        with pytest.raises(TypeError, match=op.name):
            dist.reduce_scatter_tensor(x[:1], torch.cat([x[:1]] * WORLD), op=op)
        check = torch.ones(1)
        dist.all_reduce(check)
        same(check, torch.full((1,), float(WORLD)))
        return
    ptr = x.data_ptr()
    dist.all_reduce(x, op=op)
    same(x, reduce_expected(op, every((ODD,), dtype)),
         exact=not (op is ReduceOp.AVG and dtype.is_complex))
    assert x.data_ptr() == ptr


@pytest.mark.parametrize("op", [ReduceOp.SUM, ReduceOp.AVG, ReduceOp.PRODUCT, ReduceOp.MIN,
                                ReduceOp.MAX], ids=lambda op: op.name)
def test_reduce_scatter_tensor_bfloat16_ops(op: ReduceOp) -> None:
    inp = tdata((WORLD, 5), torch.bfloat16, RANK)
    out = torch.zeros(5, dtype=torch.bfloat16)
    dist.reduce_scatter_tensor(out, inp.reshape(-1), op=op)
    same(out, reduce_expected(op, every((WORLD, 5), torch.bfloat16))[RANK])


# -- bfloat16 reduces as numbers, rounded once --------------------------------------------------


def test_bfloat16_ones_sum_to_world_size() -> None:
    x = torch.ones(4 * WORLD + 1, dtype=torch.bfloat16)
    dist.all_reduce(x)
    same(x, torch.full_like(x, WORLD))  # as int16 bits, 1 + 1 would be 1.7e38


def test_bfloat16_sum_is_rounded_once() -> None:
    # 1 + 2^-8 + 2^-8 + ...: each partial sum rounded to bfloat16 (8 bits) would stay 1; the
    # float32 sum rounded once is 1 + (WORLD - 1) * 2^-8, rounded to bfloat16 once.
    values = [torch.tensor([1.0, -3.0, 2.0 ** -8])] + [
        torch.tensor([2.0 ** -8, 2.0 ** -9, 1.0 + 2.0 ** -7]) for _ in range(WORLD - 1)]
    expected = torch.stack(values).sum(0).to(torch.bfloat16)
    x = values[RANK].to(torch.bfloat16)
    assert torch.equal(x.float(), values[RANK])  # every input is exact in bfloat16
    dist.all_reduce(x)
    same(x, expected)
    y = values[RANK].to(torch.bfloat16)
    comm.all_reduce(y)
    same(y, expected)
    if WORLD >= 3:  # where one rounding and a rounding per step differ
        stepwise = functools.reduce(lambda a, b: (a + b).to(torch.bfloat16),
                                    [v.to(torch.bfloat16) for v in values])
        assert not torch.equal(stepwise, expected)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=name)
def test_half_precision_avg_min_max_product(dtype: Any) -> None:
    # values whose sums and products are exact in float16: only AVG's division rounds
    base = [torch.tensor([0.125 * (r + 1), -(r + 1.5), 3.0 - r]) for r in range(WORLD)]
    for op in (ReduceOp.AVG, ReduceOp.MIN, ReduceOp.MAX, ReduceOp.PRODUCT):
        x = base[RANK].to(dtype)
        dist.all_reduce(x, op=op)
        same(x, reduce_expected(op, [b.to(dtype) for b in base]))


