"""Sample inputs of the scans, windows, moments, selections and gathers (merged into
:data:`mpiflow.ops.samples.SAMPLES`).

Sizes are uneven (5 and 7 rows: 2, 3 and 4 ranks get uneven and empty shards); values keep away
from ties where an op's gradient would have a choice (``cummax``, ``cdist``).

Examples:
    >>> sorted(SAMPLES)[:3]
    ['cdist', 'cdist_grad', 'cummax']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy

if TYPE_CHECKING:
    from .samples import Sample

__all__ = ["SAMPLES"]

Mesh = tuple[int, ...]


# (imported at the call: :mod:`.samples` imports this module at its end, to merge the table)
def _sample(*args: Any, **kwargs: Any) -> Sample:
    from .samples import Sample

    return Sample(*args, **kwargs)


def sample_values(*args: Any, **kwargs: Any) -> numpy.ndarray:
    from .samples import sample_values as values

    return values(*args, **kwargs)


Generator = Callable[[numpy.dtype, Mesh], "list[Sample]"]
F64, F32, I64, BOOL = "float64", "float32", "int64", "bool"


def _distinct(shape: tuple[int, ...], dtype: numpy.dtype, seed: int) -> numpy.ndarray:
    """Values without ties (a permutation), scaled for floats."""
    x = numpy.random.default_rng(seed).permutation(int(numpy.prod(shape))).reshape(shape)
    return (x / 4.0 - 2.0).astype(dtype) if dtype.kind == "f" else x.astype(dtype)


# -- scans -------------------------------------------------------------------------------------
def _cumprod(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = sample_values((5, 3), dtype, 1, "nonzero")  # no zero: central differences stay exact
    return [_sample((x,), {"dims": (0,), "out": None}), _sample((x,), {"dims": (1,), "out": None})]


def _cum_extreme(largest: bool) -> Generator:
    def samples(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
        x = _distinct((7, 3), dtype, 2)
        ties = sample_values((7,), dtype, 3) // (3 if dtype.kind != "f" else 1)
        return [_sample((x,), {"dim": 0, "largest": largest}),
                _sample((x,), {"dim": 1, "largest": largest}),
                _sample((numpy.round(ties).astype(dtype),), {"dim": 0, "largest": largest},
                       grad=False)]

    return samples


def _logcumsumexp(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = sample_values((5, 3), dtype, 4)
    return [_sample((x,), {"dims": (0,)}), _sample((x,), {"dims": (1,), "reverse": True})]


# -- gathers -----------------------------------------------------------------------------------
def _indices(shape: tuple[int, ...], n: int, seed: int) -> numpy.ndarray:
    return numpy.random.default_rng(seed).integers(-n, n, size=shape)


def _take_along(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = sample_values((5, 3), dtype, 1)
    return [_sample((x, _indices((7, 3), 5, 2)), {"dim": 0, "n": 5}),
            _sample((x, _indices((5, 2), 3, 3)), {"dim": 1, "n": 3})]


def _scatter_along(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [_sample((sample_values((7, 3), dtype, 1), _indices((7, 3), 5, 2)),
                   {"dim": 0, "size": (5, 3)}),
            _sample((sample_values((5, 2), dtype, 2), _indices((5, 2), 3, 3)),
                   {"dim": 1, "size": (5, 3)})]


def _take(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = sample_values((5, 3), dtype, 1)
    return [_sample((x, _indices((7,), 5, 2)), {"dim": 0, "n": 5}),
            _sample((x, _indices((2, 3), 5, 3)), {"dim": 0, "n": 5}),
            _sample((x, _indices((4,), 3, 4)), {"dim": 1, "n": 3})]


def _take_grad(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [_sample((sample_values((7, 3), dtype, 1), _indices((7,), 5, 2)),
                   {"dim": 0, "size": (5, 3)}),
            _sample((sample_values((2, 3, 3), dtype, 2), _indices((2, 3), 5, 3)),
                   {"dim": 0, "size": (5, 3)}),
            _sample((sample_values((5, 4), dtype, 3), _indices((4,), 3, 4)),
                   {"dim": 1, "size": (5, 3)})]


# -- windows -----------------------------------------------------------------------------------
def _roll(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = sample_values((7, 3), dtype, 1)
    return [_sample((x,), {"shift": 3, "dim": 0}), _sample((x,), {"shift": -8, "dim": 0}),
            _sample((x,), {"shift": 1, "dim": 1})]


_PADS = (("constant", 1, 2, 0.0), ("constant", -2, 3, 2.0), ("reflect", 2, 3, 0.0),
         ("replicate", 3, 1, 0.0), ("circular", 2, 4, 0.0))


def _pad(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = sample_values((7, 3), dtype, 1)
    out = [_sample((x,), {"dim": 0, "before": b, "after": a, "mode": m, "value": v})
           for m, b, a, v in _PADS]
    return [*out, _sample((x,), {"dim": 1, "before": 1, "after": 2, "mode": "reflect",
                                "value": 0.0})]


def _pad_grad(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    out = []
    for m, b, a, v in _PADS:
        g = sample_values((7 + b + a, 3), dtype, 2)
        out.append(_sample((g,), {"dim": 0, "before": b, "after": a, "mode": m, "value": v}))
    return out


def _diff(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = sample_values((7, 3), dtype, 1)
    plain = {"pads": (0, 0), "start": 0, "has": (False, False)}
    return [_sample((x,), {"n": 1, "dim": 0, "size": 7, "stop": 6, **plain}),
            _sample((x,), {"n": 3, "dim": 1, "size": 3, "stop": 0, **plain}),
            _sample((x, sample_values((2, 3), dtype, 2), sample_values((1, 3), dtype, 3)),
                   {"n": 2, "dim": 0, "size": 7, "pads": (0, 0), "start": 0, "stop": 8,
                    "has": (True, True)}),
            _sample((x,), {"n": 2, "dim": 0, "size": 7, "pads": (3, 2), "start": 1, "stop": 9,
                          "has": (False, False)})]


# -- moments, selections, distances, reshapes ----------------------------------------------------
def _moments(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = sample_values((5, 3), dtype, 1)
    return [_sample((x,), {"dims": (0,), "keepdim": False, "correction": 1}),
            _sample((x,), {"dims": (1,), "keepdim": True, "correction": 0}),
            _sample((x,), {"dims": (0, 1), "keepdim": False, "correction": 1})]


def _mask(shape: tuple[int, ...], seed: int) -> numpy.ndarray:
    return numpy.random.default_rng(seed).random(shape) < 0.5


def _masked_rows(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = sample_values((7, 3), dtype, 1)
    rows, cells = _mask((7,), 2), _mask((7, 3), 3)
    return [_sample((x, rows), {"total": int(rows.sum())}),
            _sample((x, cells), {"total": int(cells.sum())})]


def _masked_place(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    rows, cells = _mask((7,), 2), _mask((7, 3), 3)
    return [_sample((sample_values((int(rows.sum()), 3), dtype, 1), rows),
                   {"size": (7, 3), "total": int(rows.sum())}),
            _sample((sample_values((int(cells.sum()),), dtype, 2), cells),
                   {"size": (7, 3), "total": int(cells.sum())})]


def _nonzero(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = sample_values((7, 3), dtype, 1)
    x = x * _mask((7, 3), 4) if dtype.kind != "b" else x
    return [_sample((x,), {"total": int(numpy.count_nonzero(x)), "size": (7, 3)}, grad=False),
            _sample((x[:, 0].copy(),), {"total": int(numpy.count_nonzero(x[:, 0])),
                                      "size": (7,)}, grad=False)]


def _cdist(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    a, b = sample_values((5, 3), dtype, 1), sample_values((7, 3), dtype, 2)
    return [_sample((a, b), {"p": p}) for p in (2.0, 1.0, float("inf"), 3.0)] + [
        _sample((sample_values((2, 5, 3), dtype, 3), sample_values((2, 4, 3), dtype, 4)),
               {"p": 2.0})]


def _eighths(dtype: numpy.dtype) -> tuple[numpy.ndarray, numpy.ndarray]:
    """Points in eighths (exact under the sweep's partial parts) whose largest coordinate
    difference is unique for every pair: ``inf``'s gradient compares with the distance."""
    for seed in range(100):
        rng = numpy.random.default_rng(seed)
        a = rng.integers(-16, 16, (5, 3)) / 4.0
        b = rng.integers(-16, 16, (7, 3)) / 4.0 + 0.125
        diff = numpy.sort(numpy.abs(a[:, None, :] - b[None, :, :]), axis=-1)
        if (diff[..., -1] > diff[..., -2]).all():
            return a.astype(dtype), b.astype(dtype)
    raise AssertionError("no points without ties")  # pragma: no cover


def _cdist_grad(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    out = []
    for p in (2.0, 1.0, float("inf"), 0.5):
        a, b = sample_values((5, 3), dtype, 1), sample_values((7, 3), dtype, 2)
        if numpy.isinf(p):
            a, b = _eighths(dtype)
        diff = numpy.abs(a[:, None, :] - b[None, :, :])
        d = (diff.max(-1) if numpy.isinf(p) else (diff ** p).sum(-1) ** (1 / p)).astype(dtype)
        out.append(_sample((sample_values((5, 7), dtype, 3), a, b, d), {"p": p}))
    return out


def _rechunk(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [_sample((sample_values((5, 3), dtype, 1),), {"size": (15,), "source": (5, 3)}),
            _sample((sample_values((7, 2), dtype, 2),), {"size": (2, 7), "source": (7, 2)}),
            _sample((sample_values((3, 4), dtype, 3),), {"size": (1, 6, 2), "source": (3, 4)})]


#: op name -> (the input dtypes it accepts, its sample generator).
SAMPLES: dict[str, tuple[tuple[str, ...], Generator]] = {
    "cumprod": ((F64, I64), _cumprod),
    "cummax": ((F64, I64), _cum_extreme(True)),
    "cummin": ((F64, I64), _cum_extreme(False)),
    "logcumsumexp": ((F64, F32), _logcumsumexp),
    "take_along": ((F64, I64), _take_along),
    "scatter_along": ((F64,), _scatter_along),
    "take": ((F64, I64), _take),
    "take_grad": ((F64,), _take_grad),
    "roll": ((F64, I64), _roll),
    "pad": ((F64, I64), _pad),
    "pad_grad": ((F64,), _pad_grad),
    "diff": ((F64, I64), _diff),
    "moments": ((F64, F32), _moments),
    "masked_rows": ((F64, I64), _masked_rows),
    "masked_place": ((F64,), _masked_place),
    "nonzero": ((F64, I64, BOOL), _nonzero),
    "cdist": ((F64, F32), _cdist),
    "cdist_grad": ((F64,), _cdist_grad),
    "rechunk": ((F64, I64, BOOL), _rechunk),
}
