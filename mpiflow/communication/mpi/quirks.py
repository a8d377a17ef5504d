"""Where the MPI library's built-in reductions differ from numpy's: found by a probe, once.

MPI leaves the arithmetic of its predefined ops to the library, and libraries differ: Open
MPI's vector kernels saturate 8- and 16-bit integer sums (``uint8`` 200 + 200 gives 255, numpy
and torch wrap to 144) from about 16 elements on, while its scalar loop and MPICH wrap; NaN and
signed zeros follow each library's C code. mpiflow promises numpy's values on every library,
so before it hands a (dtype, op) pair to the library it probes that pair once per process:
:func:`probe` reduces a few hundred elements covering the dtype's edge values (its minimum and
maximum, -1, 0, 1; for floats NaN, the infinities and both zeros) with ``MPI_Reduce_local``,
which runs the library's reduction kernels and no communication, and compares the result with
the numpy ufunc's. A pair the library gets right is used natively (the fast paths hand it the
buffer: no cost); a pair it refuses or gets wrong gets mpiflow's own user-defined op
(:mod:`.datatypes`). :func:`library_quirks` probes every pair for ``python -m mpiflow info``.

Examples:
    >>> probe(numpy.dtype("int32"), MPI.SUM, numpy.add).native
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy
from mpi4py import MPI

__all__ = ["PROBE_SIZE", "Probe", "describe_quirks", "library_quirks", "probe"]

PROBE_SIZE = 257  # past every library's vector width, with a scalar remainder


@dataclass(frozen=True)
class Probe:
    """What the library did with one (dtype, op) pair.

    ``verdict`` is ``"native"`` (numpy's values), ``"refused"`` (the library has no such
    reduction) or ``"differs"``; ``example`` shows the first element that differs, as
    ``"int8 add(-128, -128) gives -128, numpy 0"`` (empty unless it differs).
    """

    verdict: str
    example: str = ""

    @property
    def native(self) -> bool:
        return self.verdict == "native"


def _edge_values(dtype: numpy.dtype) -> numpy.ndarray:
    """The values a kernel is most likely to get wrong, in ``dtype``."""
    if dtype.kind == "b":
        return numpy.array([False, True])
    if dtype.kind in "iu":
        info = numpy.iinfo(dtype)
        values = [info.min, info.max, info.min + 1, info.max - 1, 0, 1, 2, 3, 100]
        if dtype.kind == "i":
            values += [-1, -2, -100]
        return numpy.array(values, dtype=dtype)
    if dtype.kind == "c":
        # Finite parts only: with an infinity or a NaN in a part, C99's complex product
        # (Annex G) and numpy's are both defensible and differ, on every library.
        real = numpy.array([0.0, -0.0, 1.0, -1.5, 3.0], dtype=dtype.char.lower())
        return (real[:, None] + 1j * real[None, :]).reshape(-1).astype(dtype)
    finfo = numpy.finfo(dtype)
    return numpy.array([numpy.nan, numpy.inf, -numpy.inf, 0.0, -0.0, 1.0, -1.5, 3.0,
                        finfo.max, -finfo.max, finfo.tiny], dtype=dtype)


def _operands(dtype: numpy.dtype) -> tuple[numpy.ndarray, numpy.ndarray]:
    """Two arrays of :data:`PROBE_SIZE` elements holding every pair of edge values."""
    values = _edge_values(dtype)
    n = len(values)
    index = numpy.arange(PROBE_SIZE)
    return values[index % n], values[(index // n) % n]


def _same(x: numpy.ndarray, y: numpy.ndarray) -> numpy.ndarray:
    """Elementwise: the same value, a NaN for a NaN, and the same sign of zero."""
    if x.dtype.kind == "c":
        return _same(x.real, y.real) & _same(x.imag, y.imag)
    if x.dtype.kind != "f":
        return numpy.asarray(x == y)
    both_nan = numpy.isnan(x) & numpy.isnan(y)
    return both_nan | ((x == y) & (numpy.signbit(x) == numpy.signbit(y)))


# (dtype, the op's handle, ufunc) -> probe; an MPI.Op is not hashable, its handle is.
_cache: dict[tuple[numpy.dtype, int, Any], Probe] = {}


def probe(dtype: numpy.dtype, mpi_op: MPI.Op, ufunc: Any) -> Probe:
    """Whether the library's ``mpi_op`` on ``dtype`` gives ``ufunc``'s values (cached).

    Args:
        dtype: the numpy dtype.
        mpi_op: the predefined MPI op (``MPI.SUM``...).
        ufunc: the numpy ufunc it must match (``numpy.add``...).

    Returns:
        The :class:`Probe`; ``.native`` when the library may be used as it is.

    Examples:
        >>> probe(numpy.dtype("float64"), MPI.PROD, numpy.multiply).verdict
        'native'
    """
    key = (dtype, mpi_op.handle, ufunc)
    found = _cache.get(key)
    if found is not None:
        return found
    if MPI.Is_finalized():  # MPICH would abort the process at the probe's first MPI call
        raise RuntimeError("MPI is finalized: mpiflow cannot communicate after MPI.Finalize() "
                           f"(a reduction of {dtype})")
    a, b = _operands(dtype)
    with numpy.errstate(all="ignore"):
        want = ufunc(a, b)
    got = b.copy()
    try:
        mpi_op.Reduce_local(a, got)
    except (MPI.Exception, NotImplementedError, KeyError, ValueError, TypeError):
        found = Probe("refused")
    else:
        wrong = numpy.flatnonzero(~_same(got, want))
        if wrong.size:
            i = wrong[0]
            found = Probe("differs", f"{dtype} {ufunc.__name__}({a[i]}, {b[i]}) gives "
                                     f"{got[i]}, numpy {want[i]}")
        else:
            found = Probe("native")
    if mpi_op.is_predefined:  # a user-defined op's handle may be reused once it is freed
        _cache[key] = found
    return found


_PAIRS = (  # (name, MPI op, numpy ufunc, dtype kinds it applies to)
    ("SUM", MPI.SUM, numpy.add, "iufc"),
    ("PRODUCT", MPI.PROD, numpy.multiply, "iufc"),
    ("MAX", MPI.MAX, numpy.maximum, "iuf"),
    ("MIN", MPI.MIN, numpy.minimum, "iuf"),
    ("BAND", MPI.BAND, numpy.bitwise_and, "iu"),
    ("BOR", MPI.BOR, numpy.bitwise_or, "iu"),
    ("BXOR", MPI.BXOR, numpy.bitwise_xor, "iu"),
    ("SUM", MPI.LOR, numpy.logical_or, "b"),
    ("PRODUCT", MPI.LAND, numpy.logical_and, "b"),
)
_DTYPES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
           "float16", "float32", "float64", "complex64", "complex128")


def library_quirks() -> list[tuple[str, str, Probe]]:
    """Probe every predefined reduction of the common dtypes; list those that differ.

    Returns:
        ``(op name, dtype name, probe)`` for each pair the library computes differently from
        numpy (a refused pair is not a quirk: mpiflow's own op runs it, as documented).

    Examples:
        >>> [(op, dtype) for op, dtype, _ in library_quirks()]    # doctest: +SKIP
        [('SUM', 'int8'), ('SUM', 'uint8'), ('SUM', 'int16'), ('SUM', 'uint16')]   # Open MPI 5
    """
    found = []
    for name, mpi_op, ufunc, kinds in _PAIRS:
        for dtype_name in _DTYPES:
            dtype = numpy.dtype(dtype_name)
            if dtype.kind in kinds:
                result = probe(dtype, mpi_op, ufunc)
                if result.verdict == "differs":
                    found.append((name, dtype_name, result))
    return found


def describe_quirks(quirks: list[tuple[str, str, Probe]]) -> str:
    """One line for ``info``: each op with the dtypes it differs on, or ``none found``.

    Examples:
        >>> describe_quirks([])
        'none found'
    """
    if not quirks:
        return "none found"
    by_op: dict[str, list[str]] = {}
    for op, dtype, _ in quirks:
        by_op.setdefault(op, []).append(dtype)
    parts = [f"{op} of {', '.join(dtypes)}" for op, dtypes in by_op.items()]
    return f"{'; '.join(parts)} (e.g. {quirks[0][2].example}); mpiflow's own op runs these"
