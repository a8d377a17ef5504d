"""Reduction operators of the collectives, with their identity elements and dtype rules."""

from __future__ import annotations

import enum
from typing import Any

import numpy

__all__ = ["ReduceOp", "check_reduce_dtype", "divide_in_place"]


class ReduceOp(enum.Enum):
    """A reduction of the collectives, as ``torch.distributed.ReduceOp``.

    Examples:
        >>> float(ReduceOp.SUM.identity(numpy.dtype("float32")))
        0.0
    """

    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"

    # Members are singletons: identity hashing is exact and much cheaper than Enum's
    # name-based hash on the hot path of every reduction.
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"ReduceOp.{self.name}"

    @property
    def is_bitwise(self) -> bool:
        return self in _BITWISE

    def identity(self, dtype: Any) -> Any:
        """Return the value ``v`` such that reducing ``v`` with any ``x`` gives ``x``.

        Args:
            dtype: a numpy dtype (or anything ``numpy.dtype`` accepts).

        Returns:
            A Python or numpy scalar of that dtype's kind.
        """
        dt = numpy.dtype(dtype)
        if self in (ReduceOp.SUM, ReduceOp.AVG, ReduceOp.BOR, ReduceOp.BXOR):
            return dt.type(0)
        if self is ReduceOp.PRODUCT:
            return dt.type(1)
        if self is ReduceOp.BAND:
            return dt.type(True) if dt.kind == "b" else dt.type(~dt.type(0))
        big = self is ReduceOp.MIN
        if dt.kind == "b":
            return dt.type(big)
        if dt.kind in "iu":
            info = numpy.iinfo(dt)
            return dt.type(info.max if big else info.min)
        return dt.type(numpy.inf if big else -numpy.inf)


_BITWISE = frozenset({ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR})


def check_reduce_dtype(op: ReduceOp, dtype: Any) -> None:
    """Raise ``TypeError`` when ``op`` is undefined for ``dtype``, as PyTorch does.

    Args:
        op: the reduction.
        dtype: the numpy dtype of the buffer.
    """
    if not isinstance(op, ReduceOp):
        raise TypeError(f"op must be a mpiflow ReduceOp, got {op!r}")
    kind = numpy.dtype(dtype).kind
    if kind not in "biufc":
        raise TypeError(f"collectives need a numeric or bool dtype, got {numpy.dtype(dtype)}")
    if not numpy.dtype(dtype).isnative:
        raise TypeError(f"collectives need the machine's byte order, got {numpy.dtype(dtype)} "
                        "(convert first: x.astype(x.dtype.newbyteorder('=')))")
    if op is ReduceOp.AVG and kind == "b":
        raise TypeError(
            f"ReduceOp.AVG is undefined for {numpy.dtype(dtype)} (torch's NCCL backend refuses "
            "it too); reduce with SUM (any) or cast first"
        )
    if op in _BITWISE and kind not in "biu":
        raise TypeError(f"{op!r} needs an integer or bool dtype, got {numpy.dtype(dtype)}")
    if op in (ReduceOp.MIN, ReduceOp.MAX) and kind == "c":
        raise TypeError(f"{op!r} is undefined for complex dtype {numpy.dtype(dtype)}")


def divide_in_place(buf: Any, size: int) -> None:
    """Divide the sum in ``buf`` by ``size`` in place: AVG's last step, in ``buf``'s dtype.

    Floating and complex sums are divided exactly as ``buf /= size``. Integer sums are divided
    as NCCL's ``ncclAvg`` does (and so torch's NCCL backend): C's integer division, which
    truncates toward zero (-7 / 2 is -3, not numpy's floor -4).

    Args:
        buf: a numpy (or CuPy) array holding the sum over the ranks.
        size: the number of ranks summed.

    Examples:
        >>> a = numpy.array([7, -7, -8, 5], dtype=numpy.int64)
        >>> divide_in_place(a, 2)
        >>> a.tolist()
        [3, -3, -4, 2]
    """
    if buf.dtype.kind in "fc":
        buf /= size
    elif buf.dtype.kind == "u":
        buf //= size
    else:
        # x - fmod(x, n) is an exact multiple of n between 0 and x (never overflows), so the
        # floor division of it is exact: the quotient truncated toward zero.
        buf -= numpy.fmod(buf, size)  # CuPy arrays take numpy's ufuncs too
        buf //= size
