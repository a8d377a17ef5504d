"""Helpers of the torch-tensor tests: rank data as torch tensors, torch's expected results, and
output layouts (strided views, out-of-place targets) whose in-place writes are checked."""

from __future__ import annotations

import functools
from typing import Any

import numpy
import pytest
from collective_helpers import ODD, RANK, WORLD
from helpers import rank_data

from mpiflow.distributed import ReduceOp

torch = pytest.importorskip("torch")


DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.uint8, torch.bool, torch.complex64]
NEXT, PREV = (RANK + 1) % WORLD, (RANK - 1) % WORLD
LAST = WORLD - 1  # the src/dst of rooted operations: not rank 0, where WORLD > 1
SHAPE = (3, ODD)
SUM = ReduceOp.SUM




def name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def tdata(shape: tuple[int, ...], dtype: Any, rank: int, salt: int = 0) -> Any:
    """``rank_data`` as a torch tensor of ``dtype`` (bfloat16 from float32: small integers,
    exact in every dtype here)."""
    wide = numpy.float32 if dtype is torch.bfloat16 else torch.empty(0, dtype=dtype).numpy().dtype
    return torch.from_numpy(rank_data(shape, wide, rank, salt).copy()).to(dtype)


def every(shape: tuple[int, ...], dtype: Any, salt: int = 0,
          ranks: list[int] | None = None) -> list[Any]:
    return [tdata(shape, dtype, r, salt) for r in (range(WORLD) if ranks is None else ranks)]


def reduce_expected(op: ReduceOp, tensors: list[Any]) -> Any:
    """torch's reduction of ``tensors``, in their dtype; bool as PyTorch's gloo reduces it (sum
    and max are "any", product and min "all"), bfloat16 computed in float32 and rounded once."""
    dtype = tensors[0].dtype
    stack = torch.stack(tensors)
    if dtype is torch.bool:
        if op in (ReduceOp.SUM, ReduceOp.MAX, ReduceOp.BOR):
            return stack.any(0)
        if op in (ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.BAND):
            return stack.all(0)
        return functools.reduce(torch.logical_xor, tensors)
    if dtype is torch.bfloat16:
        stack = stack.float()
    bitwise = {ReduceOp.BAND: torch.bitwise_and, ReduceOp.BOR: torch.bitwise_or,
               ReduceOp.BXOR: torch.bitwise_xor}
    if op in bitwise:
        return functools.reduce(bitwise[op], tensors)
    result = {
        ReduceOp.SUM: lambda: stack.sum(0),
        ReduceOp.AVG: lambda: stack.sum(0) / len(tensors) if stack.is_floating_point()
        or stack.is_complex() else torch.div(stack.sum(0), len(tensors), rounding_mode="trunc"),
        ReduceOp.PRODUCT: lambda: stack.prod(0),
        ReduceOp.MIN: lambda: stack.amin(0),
        ReduceOp.MAX: lambda: stack.amax(0),
    }[op]()
    return result.to(dtype)


def supports(op: ReduceOp, dtype: Any) -> bool:
    """Whether ``op`` is defined for ``dtype`` (PyTorch's rules, as mpiflow's for numpy)."""
    if op is ReduceOp.AVG:
        return dtype != torch.bool  # integers: the sum truncated toward zero, as NCCL
    if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR):
        return not (dtype.is_floating_point or dtype.is_complex)
    if op in (ReduceOp.MIN, ReduceOp.MAX):
        return not dtype.is_complex
    return True


def same(got: Any, expected: Any, exact: bool = True) -> None:
    """Equal dtype, shape and values (shown on failure)."""
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    if exact:
        assert torch.equal(got, expected), f"\n{got}\n!=\n{expected}"
    else:  # complex AVG: numpy and torch may divide complex numbers differently in the last bit
        assert torch.allclose(got, expected, rtol=1e-6, atol=0), f"\n{got}\n!~\n{expected}"


class TOut:
    """An output tensor in ``layout``: "C", "strided" (``base[..., ::2]`` of a bigger tensor whose
    other elements must stay ``OUTSIDE``) or "T" (a transposed tensor)."""

    OUTSIDE = 9

    def __init__(self, shape: tuple[int, ...], dtype: Any, layout: str = "C",
                 fill: int = 7) -> None:
        self.outside = None
        if layout == "strided":
            base = torch.full((*shape[:-1], 2 * shape[-1]), self.OUTSIDE, dtype=dtype)
            self.view, self.outside = base[..., ::2], base[..., 1::2]
        elif layout == "T":
            self.view = torch.full(shape[::-1], fill, dtype=dtype).t()
        else:
            self.view = torch.full(shape, fill, dtype=dtype)
        self.view.fill_(fill)
        self.ptr = self.view.data_ptr()
        self.strides = self.view.stride()

    def check(self, expected: Any) -> None:
        """The view holds ``expected``, in the same memory, and nothing else changed."""
        same(self.view, expected)
        assert self.view.data_ptr() == self.ptr and self.view.stride() == self.strides
        if self.outside is not None:
            same(self.outside, torch.full(self.outside.shape, self.OUTSIDE,
                                          dtype=self.outside.dtype))


def layout_of(t: Any, layout: str) -> Any:
    """An input holding ``t`` in ``layout`` (see :class:`TOut`)."""
    out = TOut(tuple(t.shape), t.dtype, layout)
    out.view.copy_(t)
    return out.view



__all__ = [
    "DTYPES",
    "LAST",
    "NEXT",
    "PREV",
    "SHAPE",
    "SUM",
    "TOut",
    "every",
    "layout_of",
    "name",
    "reduce_expected",
    "same",
    "supports",
    "tdata",
    "torch",
]
