"""Shared pieces of the tests of ``mpiflow.distributed`` and ``mpiflow.comm``.

Every rank computes the full expected value locally from :func:`helpers.rank_data` of every
rank, so a test needs no communication of its own to know the right answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy
import pytest
from helpers import rank_data

import mpiflow.distributed as dist
from mpiflow.distributed import ReduceOp, Work

RANK = dist.get_rank()
WORLD = dist.get_world_size()
ODD = 3 * WORLD + 1  # an element count no rank count divides evenly

DTYPES = [numpy.dtype(c) for c in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "longdouble", "complex64", "complex128", "clongdouble",
)]
OPS = list(ReduceOp)
# Shapes every collective must handle: 0-d, empty, an odd element count, and 2-d.
SHAPES = [(), (0,), (ODD,), (2, ODD), (0, 3)]
LAYOUTS = ["C", "strided", "F"]


def ids(values: list[Any]) -> list[str]:
    """Readable pytest ids for dtypes, ops and shapes."""
    out = []
    for v in values:
        if isinstance(v, ReduceOp):
            out.append(v.name)
        elif isinstance(v, tuple):
            out.append("x".join(map(str, v)) if v else "0d")
        else:
            out.append(str(v))
    return out


def supports(op: ReduceOp, dtype: numpy.dtype) -> bool:
    """Whether ``op`` is defined for ``dtype`` (PyTorch's rules)."""
    kind = numpy.dtype(dtype).kind
    if op is ReduceOp.AVG:
        return kind != "b"  # integers as torch's NCCL backend: the sum truncated toward zero
    if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR):
        return kind in "biu"
    if op in (ReduceOp.MIN, ReduceOp.MAX):
        return kind != "c"
    return True


VALID_PAIRS = [(d, op) for d in DTYPES for op in OPS if supports(op, d)]
INVALID_PAIRS = [(d, op) for d in DTYPES for op in OPS if not supports(op, d)]


def pair_id(pair: tuple[numpy.dtype, ReduceOp]) -> str:
    return f"{pair[0]}-{pair[1].name}"


def all_data(shape: tuple[int, ...], dtype: Any, salt: int = 0,
             ranks: list[int] | None = None) -> list[numpy.ndarray]:
    """``rank_data`` of every rank (of ``ranks``, by default the world), in rank order."""
    return [rank_data(shape, dtype, r, salt) for r in (range(WORLD) if ranks is None else ranks)]


_NUMERIC = {
    ReduceOp.SUM: numpy.add, ReduceOp.AVG: numpy.add, ReduceOp.PRODUCT: numpy.multiply,
    ReduceOp.MIN: numpy.minimum, ReduceOp.MAX: numpy.maximum, ReduceOp.BAND: numpy.bitwise_and,
    ReduceOp.BOR: numpy.bitwise_or, ReduceOp.BXOR: numpy.bitwise_xor,
}


def reduce_expected(op: ReduceOp, arrays: list[numpy.ndarray]) -> numpy.ndarray:
    """numpy's reduction of ``arrays`` with ``op``, in their own dtype.

    bool follows PyTorch: SUM/MAX/BOR are "any", PRODUCT/MIN/BAND are "all", BXOR is "xor".
    """
    dt = arrays[0].dtype
    stack = numpy.stack(arrays)
    if dt.kind == "b":
        if op in (ReduceOp.SUM, ReduceOp.MAX, ReduceOp.BOR):
            return stack.any(axis=0)
        if op in (ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.BAND):
            return stack.all(axis=0)
        assert op is ReduceOp.BXOR
        return numpy.logical_xor.reduce(stack, axis=0)
    out = _NUMERIC[op].reduce(stack, axis=0, dtype=dt)
    out = numpy.asarray(out, dtype=dt)
    if op is ReduceOp.AVG and dt.kind in "iu":  # C's division: truncated toward zero
        out = numpy.asarray(numpy.sign(out) * (numpy.abs(out) // len(arrays)), dtype=dt)
    elif op is ReduceOp.AVG:
        out = numpy.asarray(out / len(arrays), dtype=dt)
    return out


def assert_same(actual: Any, expected: Any) -> None:
    """Equal values, shape and dtype (values shown on failure)."""
    actual = numpy.asarray(actual)
    expected = numpy.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    numpy.testing.assert_array_equal(actual, expected)


def as_layout(data: numpy.ndarray, layout: str) -> numpy.ndarray:
    """A view holding ``data`` in ``layout``: "C", "strided" (every other element of a bigger
    array) or "F" (a transposed Fortran-order array)."""
    if layout == "C":
        return data.copy()
    if layout == "strided":
        base = numpy.zeros((*data.shape, 2), dtype=data.dtype)
        view = base[..., 0]
        view[...] = data
        return view
    assert layout == "F"
    return numpy.asfortranarray(data) if data.ndim >= 2 else data.T.copy().T


class Out:
    """An output array in ``layout``. For "strided" it is ``big[..., ::2]`` of a bigger array
    whose other elements (``OUTSIDE``) must stay untouched by a collective writing the view."""

    OUTSIDE = 9

    def __init__(self, shape: tuple[int, ...], dtype: Any, layout: str, fill: Any = 7) -> None:
        dt = numpy.dtype(dtype)
        self.outside: numpy.ndarray | None = None
        if layout == "strided":
            last = shape[-1] if shape else 1
            self.base = numpy.full((*shape[:-1], 2 * last), self.OUTSIDE, dtype=dt)
            self.view = self.base[..., ::2] if shape else self.base[0, ...]
            self.outside = self.base[..., 1::2]
        elif layout == "F":
            self.base = numpy.empty(shape[::-1], dtype=dt).T
            self.view = self.base
        else:
            assert layout == "C"
            self.base = self.view = numpy.empty(shape, dtype=dt)
        self.view[...] = fill

    def check_untouched(self) -> None:
        if self.outside is not None:
            expected = numpy.full(self.outside.shape, self.OUTSIDE, self.outside.dtype)
            numpy.testing.assert_array_equal(self.outside, expected)


def finish(ret: Work | None, async_op: bool) -> None:
    """Check what a collective returned, and wait for it when it was asynchronous."""
    if async_op:
        assert isinstance(ret, Work), ret
        assert ret.wait() is True
        assert ret.is_completed()
    else:
        assert ret is None, ret


def wait_completed(work: Work, seconds: float = 30.0) -> None:
    """Poll ``is_completed()`` until it is True (failing after ``seconds``)."""
    deadline = time.monotonic() + seconds
    while not work.is_completed():
        assert time.monotonic() < deadline, "is_completed() never became True"
        time.sleep(0.0005)


def ring(send: Callable[[int], None], recv: Callable[[int], None]) -> None:
    """Send to the next rank and receive from the previous one with blocking calls; even ranks
    send first, odd ranks receive first, so no rank count deadlocks."""
    nxt, prv = (RANK + 1) % WORLD, (RANK - 1) % WORLD
    if RANK % 2 == 0:
        send(nxt)
        recv(prv)
    else:
        recv(prv)
        send(nxt)


# MPI tests that need at least 2 or 3 ranks (pytest-mpi skips them, with the reason, below that)
needs_two = pytest.mark.mpi(min_size=2)
needs_three = pytest.mark.mpi(min_size=3)
