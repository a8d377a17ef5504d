"""Rules the linear-algebra ops share: argument checks, batch layouts, the gather limit, and
the agreement of every rank on a data-dependent failure.

**What stays distributed, what is gathered.** A matrix split along a batch dim is factored
where it lies (each rank its own matrices). A tall matrix (``m >= n``) split by rows
(``S(-2)``) is factored by TSQR (:mod:`mpiflow.algorithms.tsqr`): only ``n x n`` blocks move,
and its ``Q`` (or ``U``) stays split by rows; a wide one split by columns likewise through its
transpose. Any other split matrix (a square one to ``solve``, ``inv``, ``det``, ``cholesky``
or ``eigh``, a ``Q`` of ``mode="complete"``) is gathered onto every rank, as the kernel needs
it whole: the ops refuse, on every rank and before any communication, to gather more than
:data:`GATHER_LIMIT` elements (of the input or of a result that would then be whole on every
rank).

**Failures.** A singular or indefinite matrix is found by the kernel on the rank that holds
it; the kernels return torch's ``info`` codes instead of raising, and :func:`agree` gathers
those codes (a few integers) so that every rank raises the same :class:`LinAlgError`.

Examples:
    >>> matrix_shape("qr", (3, 4, 2))
    (4, 2)
    >>> GATHER_LIMIT
    67108864
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy

from ..core.errors import LinAlgError
from ..layouts.sbp import Broadcast, Split
from ..tensors.tensor import Tensor
from .engine import Signature

__all__ = ["GATHER_LIMIT", "LinAlgError", "agree", "batch_splits", "check_floating",
           "check_gather", "from_root", "matrix_shape", "real_dtype", "square"]

GATHER_LIMIT = 8192 * 8192
"""The most elements a dense factorization gathers onto every rank (512 MiB of float64):
beyond it the op raises instead of running out of memory on every rank at once. A tall
matrix split by rows is never gathered (TSQR); its ``R`` (``n x n``) must fit this limit."""

B = Broadcast()
Shape = tuple[int, ...]


def matrix_shape(name: str, shape: Shape) -> tuple[int, int]:
    """``(m, n)`` of a batch of matrices ``(*, m, n)``.

    Raises:
        ValueError: fewer than 2 dims.
    """
    if len(shape) < 2:
        raise ValueError(f"linalg.{name}: the input must have at least 2 dimensions "
                         f"(a batch of matrices (*, m, n)), got shape {shape}")
    return shape[-2], shape[-1]


def square(name: str, shape: Shape) -> int:
    """``n`` of a batch of square matrices ``(*, n, n)``.

    Raises:
        ValueError: not 2-D or not square.
    """
    m, n = matrix_shape(name, shape)
    if m != n:
        raise ValueError(f"linalg.{name}: A must be batches of square matrices, but they are "
                         f"{m} by {n} matrices")
    return n


def check_floating(name: str, *tensors: Tensor) -> None:
    """Refuse integer and bool inputs (torch's linalg takes floating and complex ones).

    Raises:
        TypeError: a tensor of another kind.
    """
    for t in tensors:
        if t.dtype.numpy.kind not in "fc":
            raise TypeError(f"linalg.{name}: expected a floating point or complex tensor, got "
                            f"{t.dtype} (cast it first, e.g. .double())")


def real_dtype(dtype: numpy.dtype) -> numpy.dtype:
    """The real dtype of the same precision (float64 for complex128)."""
    return numpy.dtype(numpy.empty(0, dtype).real.dtype)


def batch_splits(shape: Shape, outputs: Sequence[bool]) -> list[Signature]:
    """``S(d) -> (S(d) or B, ...)`` for each batch dim ``d`` of a matrix op of one input:
    each rank factors its own matrices. ``outputs`` says, per output, whether it has the
    batch dims (an empty ``Q`` of ``mode="r"`` has not: B)."""
    sigs: list[Signature] = []
    for d in range(len(shape) - 2):
        out = tuple(Split(d) if batched else B for batched in outputs)
        sigs.append(((Split(d),), out if len(out) > 1 else out[0]))
    return sigs


def from_root(comm: Any, xp: Any, value: Any, shape: Sequence[int], dtype: Any) -> Any:
    """``value`` of the communicator's rank 0, on every rank (the others pass None): a
    small result computed once, so that every rank holds the same bits of it."""
    buf = (xp.array(value, dtype=dtype, order="C") if comm.rank == 0
           else xp.empty(tuple(shape), dtype=dtype))
    comm.broadcast(buf, 0)
    return buf


def _split(t: Tensor) -> bool:
    return t.is_global and any(isinstance(s, Split) for s in t.sbp)


def check_gather(name: str, tensors: Sequence[Tensor], elements: int, hint: str = "") -> None:
    """Refuse a gather of more than :data:`GATHER_LIMIT` elements, the same on every rank.

    Called where an op would bring split ``tensors`` whole onto every rank (or make a result
    of ``elements`` elements whole on every rank); a no-op for local tensors and for inputs
    that are not split.

    Raises:
        ValueError: too large, saying why and what stays distributed instead.
    """
    if not any(_split(t) for t in tensors) or elements <= GATHER_LIMIT:
        return
    shapes = ", ".join(str(tuple(t.shape)) for t in tensors)
    raise ValueError(
        f"linalg.{name}: the input of shape {shapes} is split across ranks, and this "
        f"factorization needs it (or its result, {elements} elements) whole on every rank, "
        f"more than mpiflow.linalg.GATHER_LIMIT = {GATHER_LIMIT} elements. Tall matrices "
        "(m >= n) split by rows stay distributed (TSQR), as do batches split along a batch "
        f"dim{'; ' + hint if hint else ''}")


def agree(name: str, info: Tensor, what: str) -> None:
    """Raise :class:`LinAlgError` on every rank if any ``info`` code is non-zero.

    ``info`` holds one code per matrix (torch's ``*_ex`` convention: 0 for success), laid out
    like the batch; gathering it moves a few integers, and every rank then sees the same
    codes, so every rank raises, or none.

    Raises:
        LinAlgError: the first failing matrix, with its code, and ``what`` failed.
    """
    codes = numpy.asarray(info.numpy())  # collective where info is split: a few integers
    bad = numpy.flatnonzero(codes.reshape(-1))
    if bad.size == 0:
        return
    first = int(bad[0])
    where = "" if codes.ndim == 0 else f"(Batch element {first}): "  # flat, as torch
    code = int(codes.reshape(-1)[first])
    raise LinAlgError(f"linalg.{name}: {where}{what.format(code=code)}")
