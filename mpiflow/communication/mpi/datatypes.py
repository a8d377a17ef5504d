"""How a (dtype, ReduceOp) pair becomes an MPI reduction, with a fallback where MPI lacks one.

MPI libraries differ in which reductions they define and in how they compute them: MPICH
reduces float16 natively, other libraries may not; Open MPI's vector kernels saturate 8- and
16-bit integer sums where numpy wraps; bool needs logical rather than arithmetic ops. Each
pair is probed once (:func:`.quirks.probe`: ``MPI_Reduce_local`` on the dtype's edge values,
compared with numpy); when the library refuses it or gives other values, a user-defined MPI op
that runs the numpy ufunc on the raw bytes takes over, so results are numpy's, exact in the
buffer's own dtype, on every library. A pair the library gets right costs nothing more.

MAX and MIN of floating dtypes never use MPI's own ops: those are not NaN-propagating (C's
``a > b ? a : b``) and depend on operand order, which differs between ranks inside one
``Allreduce``, so ranks got different answers (issue #18). They run :func:`_float_extremum`
instead, which is NaN-propagating as ``numpy.maximum``/``numpy.minimum`` and bit-for-bit
commutative and associative (``-0.0 < +0.0``; two NaNs combine by OR-ing their bits), so every
rank gets the same bits whatever the reduction tree. Their plans carry a byte datatype, which
keeps them off the fast paths (those only take the pairs that need no datatype).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy
from mpi4py import MPI

from ...core.reduce_op import ReduceOp, check_reduce_dtype
from .quirks import probe

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


def _ufunc_op(dtype: numpy.dtype, ufunc: Any) -> MPI.Op:
    def apply(inmem: Any, inoutmem: Any, datatype: MPI.Datatype) -> None:
        a = numpy.frombuffer(inmem, dtype=dtype)
        b = numpy.frombuffer(inoutmem, dtype=dtype)
        ufunc(a, b, out=b)

    return MPI.Op.Create(apply, commute=True)


_CHUNK = 1 << 15  # elements per pass of _float_extremum
_scratch = threading.local()  # per thread (ops may run in several): dtype -> scratch arrays


def _scratch_for(dtype: numpy.dtype) -> tuple[Any, Any, Any]:
    """This thread's reusable temporaries for one chunk of ``dtype`` (allocated once: fresh
    pages for every call cost more than the reduction itself)."""
    cache = getattr(_scratch, "cache", None)
    if cache is None:
        cache = _scratch.cache = {}
    found = cache.get(dtype)
    if found is None:
        found = cache[dtype] = (numpy.empty(_CHUNK, dtype), numpy.empty(_CHUNK, bool),
                                numpy.empty(_CHUNK, bool))
    return found


def _float_extremum(a: Any, b: Any, is_max: bool, bits: numpy.dtype) -> None:
    """``b[...] = max(a, b)`` (or min), NaN-propagating, and the same bits in either order.

    ``numpy.maximum`` picks an operand by position where the values are unordered or equal:
    two NaNs (which payload wins), and ``+0.0`` against ``-0.0``. Here those pairs combine by
    their bits instead: two NaNs by OR (a NaN still), and zeros by AND for MAX (``+0.0`` unless
    both are ``-0.0``) and OR for MIN, which is commutative and associative.
    """
    ufunc = numpy.maximum if is_max else numpy.minimum
    n = a.size
    if n <= 1024:  # small: fresh temporaries are cheap, and fewer calls are
        out = ufunc(a, b)
        special = numpy.isnan(out)
        special |= out == 0
        if special.any():
            _fix_unordered(a, b, out, special, is_max, bits)
        b[...] = out
        return
    out_all, special_all, zero_all = _scratch_for(a.dtype)
    for start in range(0, n, _CHUNK):
        stop = min(start + _CHUNK, n)
        ac, bc = a[start:stop], b[start:stop]
        out = out_all[:stop - start]
        special, zero = special_all[:stop - start], zero_all[:stop - start]
        ufunc(ac, bc, out=out)
        # Only a NaN or a zero result can depend on the operand order.
        numpy.isnan(out, out=special)
        numpy.equal(out, 0, out=zero)
        special |= zero
        if special.any():
            _fix_unordered(ac, bc, out, special, is_max, bits)
        bc[...] = out


def _fix_unordered(a: Any, b: Any, out: Any, special: Any, is_max: bool,
                   bits: numpy.dtype) -> None:
    """Set ``out`` where ``special`` (a NaN or zero result) from the bits of ``a`` and ``b``.

    ``bits`` is the unsigned integer of the dtype's size, or uint64 for a long double (16
    bytes), whose elements are then two words each.
    """
    where = numpy.flatnonzero(special)
    av, bv = a[where], b[where]
    words = a.dtype.itemsize // bits.itemsize

    def as_bits(x: Any) -> Any:
        return x.view(bits).reshape(-1, words)

    ai, bi, oi = as_bits(av), as_bits(bv), as_bits(out[where])
    a_nan, b_nan = numpy.isnan(av)[:, None], numpy.isnan(bv)[:, None]
    tie = (ai & bi) if is_max else (ai | bi)
    fixed = numpy.where((av == bv)[:, None], tie, oi)   # +0.0 against -0.0
    fixed = numpy.where(a_nan, ai, fixed)               # one NaN: that NaN, as it is
    fixed = numpy.where(b_nan, bi, fixed)
    fixed = numpy.where(a_nan & b_nan, ai | bi, fixed)
    out[where] = fixed.reshape(-1).view(a.dtype)


def _extremum_op(dtype: numpy.dtype, is_max: bool) -> MPI.Op:
    bits = numpy.dtype(f"u{dtype.itemsize}" if dtype.itemsize <= 8 else "u8")

    def apply(inmem: Any, inoutmem: Any, datatype: MPI.Datatype) -> None:
        _float_extremum(numpy.frombuffer(inmem, dtype=dtype),
                        numpy.frombuffer(inoutmem, dtype=dtype), is_max, bits)

    return MPI.Op.Create(apply, commute=True)


def _byte_type(itemsize: int) -> MPI.Datatype:
    bytes_type = _byte_types.get(itemsize)
    if bytes_type is None:
        bytes_type = MPI.BYTE.Create_contiguous(itemsize).Commit()
        _byte_types[itemsize] = bytes_type
    return bytes_type


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
    if dt.kind == "f" and op in (ReduceOp.MAX, ReduceOp.MIN):
        plan = ReducePlan(_extremum_op(dt, op is ReduceOp.MAX), _byte_type(dt.itemsize), False)
    else:
        ufunc = (_BOOL_UFUNCS if is_bool else _UFUNCS)[op]
        if probe(dt, mpi_op, ufunc).native:
            plan = ReducePlan(mpi_op, None, average)
        else:
            plan = ReducePlan(_ufunc_op(dt, ufunc), _byte_type(dt.itemsize), average)
    _plans[key] = plan
    return plan
