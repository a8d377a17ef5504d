"""Sample inputs of the sorting-and-statistics ops (selection, quantiles, sets, counting,
searching), merged into :data:`mpiflow.ops.samples.SAMPLES`.

Ties (integers of a few values) check that a split input picks the same index as a whole one;
NaN checks the NaN rules (and turns the gradient check off: central differences through NaN
give NaN). Sizes are uneven (13 and 7 rows), so that 3 ranks split them unevenly and 4 leave
empty parts where the results are short.

Examples:
    >>> len(SAMPLES["topk"][1](numpy.dtype("float64"), (2,)))
    4
"""

from __future__ import annotations

from typing import Any

import numpy

__all__ = ["SAMPLES"]

F64, F32, I64 = "float64", "float32", "int64"


def _line(dtype: numpy.dtype, seed: int, nan: bool = False) -> numpy.ndarray:
    """13 values: ties where integers, a NaN where asked and floating."""
    x = sample_values((13,), dtype, seed)
    if dtype.kind in "iu":
        x = x % 3
    if nan and dtype.kind == "f":
        x[4] = x[9] = numpy.nan
    return x


def _topk(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    m = sample_values((7, 3), dtype, 4)
    return [Sample((_line(dtype, 3),), {"dim": 0, "k": 4, "largest": True}),
            Sample((_line(dtype, 5, nan=True),), {"dim": 0, "k": 5, "largest": False},
                   grad=dtype.kind != "f"),
            Sample((m,), {"dim": 0, "k": 3, "largest": True}),
            Sample((m,), {"dim": 1, "k": 2, "largest": False})]


def _kthvalue(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    m = sample_values((7, 3), dtype, 4)
    return [Sample((_line(dtype, 3),), {"dim": 0, "keepdim": False, "rule": "k", "k": 6}),
            Sample((_line(dtype, 5, nan=True),), {"dim": 0, "keepdim": True, "rule": "k",
                                                   "k": 13}, grad=dtype.kind != "f"),
            Sample((m,), {"dim": 0, "keepdim": False, "rule": "k", "k": 2}),
            Sample((m,), {"dim": 1, "keepdim": True, "rule": "k", "k": 3})]


def _median(rule: str) -> Any:
    def samples(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
        m = sample_values((7, 3), dtype, 4)
        if dtype.kind == "f":
            m[2, 1] = m[5, 1] = m[1, 2] = numpy.nan
        return [Sample((_line(dtype, 3),), {"dim": 0, "keepdim": False, "rule": rule}),
                Sample((m,), {"dim": 0, "keepdim": True, "rule": rule},
                       grad=dtype.kind != "f"),
                Sample((m,), {"dim": 1, "keepdim": False, "rule": rule},
                       grad=dtype.kind != "f")]

    return samples


def _median_all(rule: str) -> Any:
    def samples(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
        return [Sample((sample_values((7, 3), dtype, 6),), {"rule": rule}),
                Sample((_line(dtype, 7, nan=True),), {"rule": rule}, grad=False)]

    return samples


def _mode(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    m = sample_values((7, 3), dtype, 4)
    if dtype.kind in "iu":
        m = m % 3
    return [Sample((_line(dtype, 3),), {"dim": 0, "keepdim": False}),
            Sample((m,), {"dim": 0, "keepdim": True}),
            Sample((m,), {"dim": 1, "keepdim": False})]


def _quantile(ignore_nan: bool) -> Any:
    def samples(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
        m = sample_values((7, 3), dtype, 4)
        nan = m.copy()
        nan[2, 1] = nan[5, 1] = numpy.nan
        base = {"scalar": False, "ignore_nan": ignore_nan}
        return [Sample((_line(dtype, 3),), {**base, "q": (0.0, 0.3, 1.0), "dim": None,
                                             "keepdim": False, "interpolation": "linear"}),
                Sample((m,), {**base, "q": (0.5,), "scalar": True, "dim": 0, "keepdim": True,
                              "interpolation": "midpoint"}),
                Sample((m,), {**base, "q": (0.25, 0.6), "dim": 1, "keepdim": False,
                              "interpolation": "nearest"}),
                Sample((nan,), {**base, "q": (0.4,), "dim": 0, "keepdim": False,
                                "interpolation": "lower"}, grad=False)]

    return samples


def _extrema(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((sample_values((7, 3), dtype, 1),)),
            Sample((_line(dtype, 2, nan=True),))]


def _count_nonzero(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    m = sample_values((7, 3), dtype, 1)
    m[m > 0.5] = 0
    return [Sample((m,), {"dims": (0,)}), Sample((m,), {"dims": (1,)}),
            Sample((m,), {"dims": (0, 1)})]


def _bincount(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = numpy.random.default_rng(3).integers(0, 6, 13).astype(dtype)
    w = sample_values((13,), numpy.dtype(numpy.float64), 4)
    return [Sample((x,), {"length": 6}), Sample((x, w), {"length": 8})]


def _histc(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((sample_values((7, 3), dtype, 1),), {"bins": 5, "low": -1.0, "high": 1.5}),
            Sample((_line(dtype, 2, nan=True),), {"bins": 4, "low": -2.0, "high": 2.0})]


def _histogram(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = sample_values((7, 3), dtype, 1)
    edges = numpy.array([-1.5, -0.2, 0.0, 0.7, 2.0], dtype=dtype)
    return [Sample((x, edges)),
            Sample((x, edges, numpy.abs(sample_values((7, 3), dtype, 2))), grad=False)]


def _searchsorted(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    seq = numpy.sort(_line(dtype, 3))
    values = sample_values((7, 3), dtype, 4)
    if dtype.kind in "iu":
        values = values % 4
    rows = numpy.sort(sample_values((4, 6), dtype, 5), axis=1)
    unsorted = sample_values((9,), dtype, 6)
    return [Sample((seq, values), {"right": False, "out_int32": False}),
            Sample((seq, values[:, 0]), {"right": True, "out_int32": True}),
            Sample((rows, sample_values((4, 5), dtype, 7)), {"right": False,
                                                             "out_int32": False}),
            Sample((unsorted, values, numpy.argsort(unsorted, kind="stable")),
                   {"right": True, "out_int32": False})]


def _flat_sort(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_line(dtype, 3, nan=True),)), Sample((sample_values((7, 3), dtype, 4),))]


def _runs_input(dtype: numpy.dtype) -> numpy.ndarray:
    """Runs of equal values (a NaN run of two where floating: two runs, NaN differs)."""
    x = numpy.repeat(sample_values((6,), dtype, 8), [3, 1, 2, 4, 1, 2])
    if dtype.kind == "f":
        x[7:9] = numpy.nan
    return x


def _run_starts(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_runs_input(dtype),)),
            Sample((numpy.sort(sample_values((7, 3), dtype, 4) % 3, axis=None).reshape(7, 3),))]


def _run_ids(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    starts = numpy.random.default_rng(2).random(13) < 0.4
    starts[0] = True
    return [Sample((starts,)), Sample((starts[:12].reshape(4, 3),))]


def _unique_runs(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = _runs_input(dtype)
    starts = numpy.ones(13, dtype=bool)
    starts[1:] = x[1:] != x[:-1]
    flags = numpy.random.default_rng(5).random((7, 3)) < 0.3
    return [Sample((x, starts), {"size": int(starts.sum())}),
            Sample((sample_values((7, 3), dtype, 4), flags), {"size": int(flags.sum())})]


def _unique_inverse(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    rng = numpy.random.default_rng(6)
    ids = numpy.sort(rng.integers(0, 5, 21)).astype(dtype)
    return [Sample((ids, rng.permutation(21)), {"size": (7, 3)}),
            Sample((ids[:13], rng.permutation(13)), {"size": (13,)})]


def _isin(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    # quarters: partial sums of them are exact, so equal values stay equal however summed
    m = numpy.round(sample_values((7, 3), dtype, 4) * 4) / 4
    test = numpy.concatenate([m[::3, 1], sample_values((5,), dtype, 5)])
    if dtype.kind in "iu":
        m, test = m % 5, test % 4
    return [Sample((m, test), {"invert": False}),
            Sample((m[:, 0], test.reshape(2, -1)), {"invert": True}),
            Sample((m[0, 0].copy(), test), {"invert": False})]


def _sort_values(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    m = sample_values((7, 3), dtype, 4)
    return [Sample((_line(dtype, 3, nan=True),), {"dim": 0, "descending": False}),
            Sample((_line(dtype, 5, nan=True),), {"dim": 0, "descending": True}),
            Sample((m,), {"dim": 0, "descending": True}),
            Sample((m,), {"dim": 1, "descending": False})]


#: op name -> (the input dtypes it accepts, its sample generator).
SAMPLES: dict[str, tuple[tuple[str, ...], Any]] = {
    "sort_values": ((F64, I64), _sort_values),
    "topk": ((F64, I64), _topk),
    "kthvalue": ((F64, I64), _kthvalue),
    "median": ((F64, I64), _median("median")),
    "nanmedian": ((F64, F32), _median("nanmedian")),
    "median_all": ((F64, I64), _median_all("median")),
    "nanmedian_all": ((F64,), _median_all("nanmedian")),
    "mode": ((F64, I64), _mode),
    "quantile": ((F64, F32), _quantile(False)),
    "nanquantile": ((F64,), _quantile(True)),
    "extrema": ((F64, I64), _extrema),
    "count_nonzero": ((F64, I64), _count_nonzero),
    "bincount": ((I64,), _bincount),
    "histc": ((F64, F32), _histc),
    "histogram": ((F64, F32), _histogram),
    "searchsorted": ((F64, I64), _searchsorted),
    "flat_sort": ((F64, I64), _flat_sort),
    "flat_argsort": ((F64, I64), _flat_sort),
    "run_starts": ((F64, I64), _run_starts),
    "run_ids": (("bool",), _run_ids),
    "unique_runs": ((F64, I64), _unique_runs),
    "unique_inverse": ((I64,), _unique_inverse),
    "isin": ((F64, I64), _isin),
}

# Last: samples.py imports this module at its end, so that whichever of the two is imported
# first, the other finds what it needs (the generators read these names when called).
from .samples import Mesh, Sample, sample_values  # noqa: E402
