"""How a (dtype, ReduceOp) pair becomes an MPI reduction, with a fallback where MPI lacks one.

MPI libraries differ in which reductions they define: MPICH reduces float16 natively, other
libraries may not, and bool needs logical rather than arithmetic ops. Each pair is probed once
with ``MPI_Reduce_local``; when the library refuses, a user-defined MPI op that runs the numpy
ufunc on the raw bytes takes over, so results are exact in the buffer's own dtype everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy
from mpi4py import MPI

from .reduce_op import ReduceOp, check_reduce_dtype

__all__ = ["ReducePlan", "reduce_plan"]

_MPI_OPS = {
    ReduceOp.SUM: MPI.SUM,
    ReduceOp.AVG: MPI.SUM,
    ReduceOp.PRODUCT: MPI.PROD,
    ReduceOp.MIN: MPI.MIN,
    ReduceOp.MAX: MPI.MAX,
    ReduceOp.BAND: MPI.BAND,
    ReduceOp.BOR: MPI.BOR,
    ReduceOp.BXOR: MPI.BXOR,
}
# bool follows PyTorch/Gloo: sum and max are "any", product and min are "all".
_MPI_BOOL_OPS = {
    ReduceOp.SUM: MPI.LOR,
    ReduceOp.PRODUCT: MPI.LAND,
    ReduceOp.MIN: MPI.LAND,
    ReduceOp.MAX: MPI.LOR,
    ReduceOp.BAND: MPI.LAND,
    ReduceOp.BOR: MPI.LOR,
    ReduceOp.BXOR: MPI.LXOR,
}
_UFUNCS = {
    ReduceOp.SUM: numpy.add,
    ReduceOp.AVG: numpy.add,
    ReduceOp.PRODUCT: numpy.multiply,
    ReduceOp.MIN: numpy.minimum,
    ReduceOp.MAX: numpy.maximum,
    ReduceOp.BAND: numpy.bitwise_and,
    ReduceOp.BOR: numpy.bitwise_or,
    ReduceOp.BXOR: numpy.bitwise_xor,
}
_BOOL_UFUNCS = {
    ReduceOp.SUM: numpy.logical_or,
    ReduceOp.PRODUCT: numpy.logical_and,
    ReduceOp.MIN: numpy.logical_and,
    ReduceOp.MAX: numpy.logical_or,
    ReduceOp.BAND: numpy.logical_and,
    ReduceOp.BOR: numpy.logical_or,
    ReduceOp.BXOR: numpy.logical_xor,
}


@dataclass(frozen=True)
class ReducePlan:
    """The MPI op and datatype that reduce one dtype, and whether to divide by size afterwards.

    ``datatype`` is None when mpi4py's own typing of the buffer is right (the native case);
    otherwise it is a contiguous byte type the user-defined ``op`` understands.
    """

    op: MPI.Op
    datatype: MPI.Datatype | None
    average: bool

    def spec(self, buf: Any, count: int | None = None) -> Any:
        """Return the mpi4py buffer specification of ``buf`` for this reduction.

        Args:
            buf: the contiguous array.
            count: elements per rank where mpi4py wants a block count (the send buffer of
                ``Reduce_scatter_block``); the whole buffer by default.
        """
        if self.datatype is None:
            return buf
        return [buf, buf.size if count is None else count, self.datatype]


def _native_works(dtype: numpy.dtype, op: MPI.Op) -> bool:
    one = numpy.ones(2, dtype=dtype)
    try:
        op.Reduce_local(one.copy(), one)
    except (MPI.Exception, NotImplementedError, KeyError, ValueError, TypeError):
        return False
    return True


def _ufunc_op(dtype: numpy.dtype, ufunc: Any) -> MPI.Op:
    def apply(inmem: Any, inoutmem: Any, datatype: MPI.Datatype) -> None:
        a = numpy.frombuffer(inmem, dtype=dtype)
        b = numpy.frombuffer(inoutmem, dtype=dtype)
        ufunc(a, b, out=b)

    return MPI.Op.Create(apply, commute=True)


_plans: dict[tuple[numpy.dtype, ReduceOp], ReducePlan] = {}
_byte_types: dict[int, MPI.Datatype] = {}


def reduce_plan(dtype: Any, op: ReduceOp) -> ReducePlan:
    """Return (and cache) how to reduce arrays of ``dtype`` with ``op`` over MPI.

    Args:
        dtype: a numpy dtype.
        op: the reduction.

    Raises:
        TypeError: ``op`` is undefined for ``dtype`` (e.g. AVG on integers).

    Examples:
        >>> reduce_plan(numpy.float32, ReduceOp.SUM).op == MPI.SUM
        True
    """
    dt = numpy.dtype(dtype)
    key = (dt, op)
    plan = _plans.get(key)
    if plan is not None:
        return plan
    check_reduce_dtype(op, dt)
    is_bool = dt.kind == "b"
    mpi_op = (_MPI_BOOL_OPS if is_bool else _MPI_OPS)[op]
    average = op is ReduceOp.AVG
    if _native_works(dt, mpi_op):
        plan = ReducePlan(mpi_op, None, average)
    else:
        bytes_type = _byte_types.get(dt.itemsize)
        if bytes_type is None:
            bytes_type = MPI.BYTE.Create_contiguous(dt.itemsize).Commit()
            _byte_types[dt.itemsize] = bytes_type
        ufunc = (_BOOL_UFUNCS if is_bool else _UFUNCS)[op]
        plan = ReducePlan(_ufunc_op(dt, ufunc), bytes_type, average)
    _plans[key] = plan
    return plan
