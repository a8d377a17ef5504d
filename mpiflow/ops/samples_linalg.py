"""Sample inputs of the linear-algebra ops for the op sweep (merged into
:data:`mpiflow.ops.samples.SAMPLES`).

The matrices are well conditioned (diagonally dominant where an op inverts, positive-definite
where it factors a Hermitian matrix) and their singular values and eigenvalues distinct, so
that the factors are unique up to the signs the ops fix and the gradients smooth. The shapes
are uneven: a tall ``7 x 3`` matrix gives 2, 3 and 4 ranks uneven row splits (and shards with
fewer rows than columns), a batch of 3 uneven batch splits. Where a gradient rule gives
torch's symmetric gradient of an op that reads one triangle (``eigvalsh``, ``cholesky``),
finite differences disagree by design: those samples ask for no gradient, and
``tests/ops/test_linalg_grads.py`` compares them with torch's.

Examples:
    >>> [s.operands[0].shape for s in SAMPLES["qr"][1](numpy.dtype("float64"), (2,))]
    [(7, 3), (7, 3), (3, 4, 2)]
"""

from __future__ import annotations

from typing import Any

import numpy

from .samples import Sample, sample_values

__all__ = ["SAMPLES"]

F64, F32, C128 = "float64", "float32", "complex128"
Mesh = tuple[int, ...]


def _matrix(shape: tuple[int, ...], dtype: numpy.dtype, seed: int) -> numpy.ndarray:
    return sample_values(shape, dtype, seed)


def _dominant(shape: tuple[int, ...], dtype: numpy.dtype, seed: int) -> numpy.ndarray:
    """A square (batch of) matrix with a dominant diagonal: well conditioned."""
    a = _matrix(shape, dtype, seed)
    n = shape[-1]
    return (a + (n + 1) * numpy.eye(n)).astype(dtype)


def _spd(shape: tuple[int, ...], dtype: numpy.dtype, seed: int) -> numpy.ndarray:
    """Hermitian positive-definite with distinct eigenvalues."""
    a = _matrix(shape, dtype, seed)
    n = shape[-1]
    h = a @ numpy.conj(numpy.swapaxes(a, -1, -2)) + numpy.diag(numpy.arange(1.0, n + 1))
    return h.astype(dtype)


def _qr(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    tall = _matrix((7, 3), dtype, 1)
    return [Sample((tall,), {"mode": "reduced"}), Sample((tall,), {"mode": "r"}),
            Sample((_matrix((3, 4, 2), dtype, 2),), {"mode": "complete"})]


def _svd(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_matrix((7, 3), dtype, 3),), {"full_matrices": False}),
            Sample((_matrix((3, 7), dtype, 4),), {"full_matrices": False}),
            Sample((_matrix((3, 4, 2), dtype, 5),), {"full_matrices": True})]


def _svdvals(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_matrix((7, 3), dtype, 6),), {"tall": True}),
            Sample((_matrix((2, 5), dtype, 7),), {"tall": False}),
            Sample((_matrix((3, 4, 2), dtype, 8),), {"tall": True})]


def _eigh(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_spd((4, 4), dtype, 9),), {"UPLO": "L"}),
            Sample((_spd((3, 3, 3), dtype, 10),), {"UPLO": "U"})]


def _eigvalsh(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample(s.operands, s.attrs, grad=False) for s in _eigh(dtype, mesh)]


def _solve_ex(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_dominant((5, 5), dtype, 11), _matrix((5, 2), dtype, 12))),
            Sample((_dominant((3, 4, 4), dtype, 13), _matrix((3, 4, 1), dtype, 14)))]


def _square(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_dominant((5, 5), dtype, 15),)),
            Sample((_dominant((3, 4, 4), dtype, 16),))]


def _cholesky_ex(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_spd((5, 5), dtype, 17),), {"upper": False}, grad=False),
            Sample((_spd((3, 4, 4), dtype, 18),), {"upper": True}, grad=False)]


def _cholesky_grad(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    factor = numpy.linalg.cholesky(_spd((5, 5), dtype, 19))
    batch = numpy.linalg.cholesky(_spd((3, 4, 4), dtype, 20))
    return [Sample((factor, _matrix((5, 5), dtype, 21)), {"upper": False}, grad=False),
            Sample((numpy.conj(numpy.swapaxes(batch, -1, -2)).copy(),
                    _matrix((3, 4, 4), dtype, 22)), {"upper": True}, grad=False)]


def _lstsq(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    eps = float(numpy.finfo(numpy.dtype(dtype)).eps)
    attrs: dict[str, Any] = {"driver": "gelsd", "rcond": eps * 7}
    return [Sample((_matrix((7, 3), dtype, 23), _matrix((7, 2), dtype, 24)), attrs),
            Sample((_matrix((3, 5), dtype, 25), _matrix((3, 2), dtype, 26)),
                   {"driver": "gelsy", "rcond": eps * 5}),
            Sample((_matrix((2, 6, 2), dtype, 27), _matrix((2, 6, 1), dtype, 28)),
                   {"driver": "gels", "rcond": eps * 6})]


def _real_abs(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_matrix((5, 3), dtype, 29),))]


#: op name -> (the input dtypes it accepts, its sample generator).
_DIAGONALS = (((7, 5), 0, 0, 1), ((7, 5), 2, 0, 1), ((7, 5), -3, 0, 1), ((5, 7), 1, 1, 0),
              ((3, 6, 4), -1, 1, 2), ((6, 3, 5), 1, 2, 0))


def _diagonal_attrs(shape: tuple[int, ...], offset: int, d1: int, d2: int) -> dict[str, Any]:
    return {"offset": offset, "dim1": d1, "dim2": d2, "sizes": (shape[d1], shape[d2])}


def _diagonal(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_matrix(shape, dtype, 20 + i),), _diagonal_attrs(shape, *rest))
            for i, (shape, *rest) in enumerate(_DIAGONALS)]


def _diagonal_grad(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    from .diagonals import diagonal_length

    out = []
    for i, (shape, offset, d1, d2) in enumerate(_DIAGONALS):
        others = tuple(n for k, n in enumerate(shape) if k not in (d1, d2))
        g = (*others, diagonal_length(shape[d1], shape[d2], offset))
        out.append(Sample((_matrix(g, dtype, 30 + i),), _diagonal_attrs(shape, offset, d1, d2)))
    return out


SAMPLES: dict[str, tuple[tuple[str, ...], Any]] = {
    "diagonal": ((F64, "int64"), _diagonal),
    "diagonal_grad": ((F64,), _diagonal_grad),
    "qr": ((F64, F32, C128), _qr),
    "svd": ((F64, C128), _svd),
    "svdvals": ((F64, F32), _svdvals),
    "eigh": ((F64, C128), _eigh),
    "eigvalsh": ((F64,), _eigvalsh),
    "solve_ex": ((F64, F32), _solve_ex),
    "inv_ex": ((F64, C128), _square),
    "det": ((F64,), _square),
    "slogdet": ((F64, C128), _square),
    "cholesky_ex": ((F64, C128), _cholesky_ex),
    "cholesky_grad": ((F64,), _cholesky_grad),
    "lstsq": ((F64, F32), _lstsq),
    "real_abs": ((F64, C128), _real_abs),
}
