"""Sample inputs of every registered op, for the op sweep (as PyTorch's OpInfo samples).

:data:`SAMPLES` maps an op's name to the input dtypes it is declared to accept and a generator
``samples(dtype, mesh) -> [Sample, ...]``: small operands with uneven sizes (so that 2, 3 and 4
ranks get uneven and empty shards), the same on every rank, and the attributes the op's public
function would pass (``mesh`` is the placement's mesh shape, which ``reshape`` takes). The
values keep away from the points where an op or its gradient is not smooth (zero divisors,
ties of ``maximum``, logs of negatives). :data:`UNSAMPLED` names the ops that cannot be
sampled, with the reason. ``tests/ops/test_sweep.py`` fails for a registered op in neither.

Examples:
    >>> [s.operands[0].shape for s in SAMPLES["sum"][1](numpy.dtype("float64"), (2,))]
    [(5, 3), (5, 3), (5, 3)]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy

from ..core import exact_sum as xs

__all__ = ["SAMPLES", "UNSAMPLED", "Sample", "sample_values"]

Shape = tuple[int, ...]
Mesh = tuple[int, ...]


@dataclass(frozen=True)
class Sample:
    """One call of an op: operands and attributes, the same on every rank.

    Attributes:
        operands: numpy arrays (the sweep makes them tensors, laid out as each signature
            says) and Python numbers (broadcast constants).
        attrs: the op's attributes, as its public function passes them.
        tensor_attrs: attributes that are tensors (``max``'s ``indices``): made local tensors
            beside local operands, global ``B`` ones beside global operands.
        grad: whether the sweep checks the gradients of the floating operands.
        canonical: where one value has several representations (``exact_state``'s integer
            states, whose limbs carry differently by how the sum was split), the function
            of the output array that the sweep compares instead of the array itself.
    """

    operands: tuple[Any, ...]
    attrs: dict[str, Any] = field(default_factory=dict)
    tensor_attrs: dict[str, numpy.ndarray] = field(default_factory=dict)
    grad: bool = True
    canonical: Callable[[numpy.ndarray], numpy.ndarray] | None = None


Generator = Callable[[numpy.dtype, Mesh], list[Sample]]


def _values(shape: Shape, dtype: numpy.dtype, seed: int, domain: str = "any") -> numpy.ndarray:
    """Values of ``dtype``: ``any`` (normal floats, small integers), ``positive`` (in about
    [0.5, 2.5], integers 1..5) or ``nonzero`` (the positive ones with random signs)."""
    rng = numpy.random.default_rng(seed)
    dtype = numpy.dtype(dtype)
    v: numpy.ndarray
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        if domain == "any":
            return rng.integers(-9, 10, size=shape).astype(dtype)
        v = rng.integers(1, 6, size=shape)
    elif dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    elif domain == "any":
        return rng.standard_normal(shape).astype(dtype)
    else:
        v = rng.uniform(0.5, 2.5, size=shape)
    if domain == "nonzero":
        v = v * rng.choice([-1, 1], size=shape)
    return numpy.asarray(v).astype(dtype)


sample_values = _values  # the public name, for the families' sample modules


def _number(dtype: numpy.dtype, value: float) -> Any:
    """A Python number of ``dtype``'s kind."""
    kind = numpy.dtype(dtype).kind
    return bool(value) if kind == "b" else int(value) if kind in "iu" else float(value)


# -- elementwise -------------------------------------------------------------------------------
_POSITIVE = {"log", "log2", "log1p", "sqrt", "rsqrt"}
_NONZERO = {"reciprocal"}


def _unary(name: str) -> Generator:
    domain = "positive" if name in _POSITIVE else "nonzero" if name in _NONZERO else "any"

    def samples(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
        return [Sample((_values((5, 3), dtype, 1, domain),)),
                Sample((_values((7,), dtype, 2, domain),))]

    return samples


_BINARY_DOMAINS = {  # (first operand, second operand)
    "div": ("any", "nonzero"), "floor_divide": ("any", "nonzero"),
    "remainder": ("any", "nonzero"), "pow": ("positive", "positive"),
}


def _binary(name: str) -> Generator:
    first, second = _BINARY_DOMAINS.get(name, ("any", "any"))

    def samples(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
        x = _values((5, 3), dtype, 1, first)
        return [Sample((x, _values((5, 3), dtype, 2, second))),
                Sample((x, _values((3,), dtype, 3, second))),      # broadcast along dim 0
                Sample((_values((5, 1), dtype, 4, first), _values((5, 3), dtype, 5, second))),
                Sample((x, _number(dtype, 2)))]                   # a Python number

    return samples


def _where(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    cond = _values((5, 3), numpy.dtype(bool), 1)
    return [Sample((cond, _values((5, 3), dtype, 2), _values((3,), dtype, 3))),
            Sample((cond, _values((5, 3), dtype, 4), _number(dtype, 0)))]


# -- reductions --------------------------------------------------------------------------------
_DIMS = (((0,), False), ((1,), True), ((0, 1), False))


def _reduce(**extra: Any) -> Generator:
    def samples(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
        x = _values((5, 3), dtype, 1)
        return [Sample((x,), {"dims": dims, "keepdim": keep, **extra}) for dims, keep in _DIMS]

    return samples


def _mean(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = _values((5, 3), dtype, 1)
    return [Sample((x,), {"dims": dims, "keepdim": keep, "out": None,
                          "count": int(numpy.prod([x.shape[d] for d in dims]))})
            for dims, keep in _DIMS]


def _prod(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = _values((5, 3), dtype, 1, "nonzero")  # magnitudes near 1: no overflow, no zero
    return [Sample((x,), {"dims": dims, "keepdim": keep, "out": None}) for dims, keep in _DIMS]


def _extreme(largest: bool) -> Generator:
    def samples(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
        x = _values((5, 3), dtype, 1)
        return [Sample((x,), {"dims": dims, "keepdim": keep, "largest": largest,
                              "partial": dtype.kind in "iuf"}) for dims, keep in _DIMS]

    return samples


def _extreme_at(largest: bool) -> Generator:
    """``max``/``min`` with a dim: the values, with the indices (a tensor) as an attribute."""
    def samples(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
        x = _values((5, 3), dtype, 1)
        find = numpy.argmax if largest else numpy.argmin
        out = []
        for dim, keep in ((0, False), (1, True)):
            out.append(Sample((x,), {"dims": (dim,), "keepdim": keep, "largest": largest,
                                     "partial": dtype.kind in "iuf"},
                              {"indices": find(x, axis=dim, keepdims=keep)}))
        return out

    return samples


def _arg(largest: bool) -> Generator:
    def samples(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
        x = _values((5, 3), dtype, 1)
        return [Sample((x,), {"dims": (0,), "keepdim": False, "largest": largest}),
                Sample((x,), {"dims": (1,), "keepdim": True, "largest": largest}),
                Sample((x,), {"dims": (0, 1), "keepdim": False, "largest": largest})]

    return samples


def _logical(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = _values((5, 3), dtype, 1)
    return [Sample((x,), {"dims": dims, "keepdim": keep}) for dims, keep in _DIMS]


def _softmax(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = _values((5, 3), dtype, 1)
    return [Sample((x,), {"dims": (1,), "log": False}), Sample((x,), {"dims": (0,), "log": True})]


def _logsumexp(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = _values((5, 3), dtype, 1)
    return [Sample((x,), {"dims": dims, "keepdim": keep}) for dims, keep in _DIMS]


def _cumsum(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = _values((5, 3), dtype, 1)
    return [Sample((x,), {"dims": (0,), "out": None}), Sample((x,), {"dims": (1,), "out": None})]


def _sort(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    # Ties (integers from a few values) check stability; NaN sorts last (first descending).
    x = _values((13,), dtype, 3)
    if dtype.kind in "iu":
        x = x % 3
    if dtype.kind == "f":
        x[4] = numpy.nan
    m = _values((7, 3), dtype, 4)
    nan = dtype.kind == "f"  # no gradient through NaN (central differences give NaN)
    return [Sample((x,), {"dim": 0, "descending": False}, grad=not nan),
            Sample((x,), {"dim": 0, "descending": True}, grad=not nan),
            Sample((m,), {"dim": 0, "descending": True}),
            Sample((m,), {"dim": 1, "descending": False})]


def _put_along(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = _values((5, 3), numpy.dtype(numpy.float64), 1)
    out = []
    for dim, keep in ((0, False), (1, True)):
        indices = numpy.argmax(x, axis=dim, keepdims=keep)
        g = _values(indices.shape, dtype, 2)
        out.append(Sample((g, indices), {"dim": dim, "keepdim": keep, "size": x.shape}))
    # a sort's gradient: a permutation along dim 0 (a distributed scatter where it is split),
    # and a top k's: 3 of 7 rows
    order = numpy.argsort(_values((7, 3), numpy.dtype(numpy.float64), 3), axis=0)
    out.append(Sample((_values((7, 3), dtype, 4), order), {"dim": 0, "keepdim": True,
                                                            "size": (7, 3)}))
    out.append(Sample((_values((3, 3), dtype, 5), order[:3]), {"dim": 0, "keepdim": True,
                                                                "size": (7, 3)}))
    return out


# -- shapes ------------------------------------------------------------------------------------
def _reshape(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_values((6, 4), dtype, 1),), {"size": (24,), "mesh": mesh}),
            Sample((_values((6, 4), dtype, 2),), {"size": (3, 2, 4), "mesh": mesh}),
            Sample((_values((5, 3), dtype, 3),), {"size": (3, 5), "mesh": mesh})]


def _permute(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_values((5, 3, 2), dtype, 1),), {"perm": (2, 0, 1)}),
            Sample((_values((5, 3), dtype, 2),), {"perm": (1, 0)})]


def _squeeze(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_values((5, 1, 3), dtype, 1),), {"dims": (1,)}),
            Sample((_values((1, 7, 1), dtype, 2),), {"dims": (0, 2)})]


def _unsqueeze(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_values((5, 3), dtype, 1),), {"dim": 1}),
            Sample((_values((5, 3), dtype, 2),), {"dim": 0})]


def _cat(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_values((5, 3), dtype, 1), _values((2, 3), dtype, 2)), {"dim": 0}),
            Sample((_values((5, 3), dtype, 3), _values((5, 2), dtype, 4),
                    _values((5, 1), dtype, 5)), {"dim": 1})]


def _stack(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_values((5, 3), dtype, 1), _values((5, 3), dtype, 2)), {"dim": 1}),
            Sample((_values((7,), dtype, 3), _values((7,), dtype, 4)), {"dim": 0})]


def _narrow(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_values((7, 3), dtype, 1),), {"dim": 0, "start": 2, "stop": 5}),
            Sample((_values((5, 4), dtype, 2),), {"dim": 1, "start": 1, "stop": 4})]


def _flip(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_values((5, 3), dtype, 1),), {"dims": (0,)}),
            Sample((_values((5, 3, 2), dtype, 2),), {"dims": (1, 2)})]


# -- casts, copies, expand ---------------------------------------------------------------------
def _cast(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = _values((5, 3), dtype, 1)
    targets = [numpy.dtype(numpy.float32), numpy.dtype(numpy.float64), numpy.dtype(numpy.int64)]
    return [Sample((x,), {"dtype": t, "source": dtype}) for t in targets if t != dtype]


def _clone(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_values((5, 3), dtype, 1),))]


def _expand(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_values((3, 1), dtype, 1),), {"size": (5, 3, 4)}),
            Sample((_values((5, 1), dtype, 2),), {"size": (5, 3)})]


# -- indexing ----------------------------------------------------------------------------------
_BASIC = (((5, 4, 3), (slice(None), slice(1, None, 2), 1)),
          ((5, 3), (None, Ellipsis, slice(None, None, -1))))


def _basic_index(shape: Shape, items: tuple[Any, ...]) -> tuple[Any, ...]:
    from .indexing import expand_basic

    return expand_basic(items, shape)


def _getitem(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_values(shape, dtype, i),), {"index": _basic_index(shape, items)})
            for i, (shape, items) in enumerate(_BASIC)]


def _getitem_grad(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    out = []
    for i, (shape, items) in enumerate(_BASIC):
        index = _basic_index(shape, items)
        g = _values(numpy.empty(shape)[(*index, Ellipsis)].shape, dtype, i)
        out.append(Sample((g,), {"index": index, "size": shape}))
    return out


_ADVANCED = (numpy.array([0, 2, 2, 4]), numpy.array([True, False, True]))


def _index(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_values((5, 3), dtype, 1),), {"index": (_ADVANCED[0],)}),
            Sample((_values((5, 3), dtype, 2),), {"index": (slice(None), _ADVANCED[1])})]


def _index_grad(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_values((4, 3), dtype, 1),), {"index": (_ADVANCED[0],), "size": (5, 3)}),
            Sample((_values((5, 2), dtype, 2),), {"index": (slice(None), _ADVANCED[1]),
                                                  "size": (5, 3)})]


# -- products ----------------------------------------------------------------------------------
def _matmul(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    shapes: Sequence[tuple[Shape, Shape]] = (((5, 3), (3, 4)), ((3, 5, 2), (3, 2, 4)),
                                             ((2, 5, 3), (3, 4)), ((3,), (3, 5)), ((5, 3), (3,)))
    return [Sample((_values(a, dtype, 2 * i), _values(b, dtype, 2 * i + 1)))
            for i, (a, b) in enumerate(shapes)]


def _outer(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_values((5,), dtype, 1), _values((3,), dtype, 2)))]


def _linear(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x, w, b = _values((5, 3), dtype, 1), _values((4, 3), dtype, 2), _values((4,), dtype, 3)
    return [Sample((x, w, b)), Sample((_values((2, 5, 3), dtype, 4), w))]


# -- windows -----------------------------------------------------------------------------------
_CONV = {"stride": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1), "groups": 1}
_CONV_CASES: tuple[tuple[Shape, Shape, dict[str, Any]], ...] = (
    ((5, 4, 6, 5), (6, 4, 3, 2), {}),
    ((5, 4, 7, 6), (6, 4, 3, 3), {"stride": (2, 1), "padding": (1, 1, 2, 2),
                                  "dilation": (1, 2)}),
    ((5, 4, 5, 5), (6, 2, 3, 3), {"padding": (1, 2, 1, 1), "groups": 2}),
)


def _conv2d(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    out = []
    for i, (x, w, attrs) in enumerate(_CONV_CASES):
        operands = [_values(x, dtype, 3 * i), _values(w, dtype, 3 * i + 1)]
        if i != 1:
            operands.append(_values((w[0],), dtype, 3 * i + 2))
        out.append(Sample(tuple(operands), {**_CONV, **attrs}))
    return out


def _conv_out(x: Shape, w: Shape, attrs: dict[str, Any]) -> Shape:
    a = {**_CONV, **attrs}
    hw = [(x[2 + k] + a["padding"][2 * k] + a["padding"][2 * k + 1]
           - a["dilation"][k] * (w[2 + k] - 1) - 1) // a["stride"][k] + 1 for k in range(2)]
    return (x[0], w[0], *hw)


def _conv2d_input_grad(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_values(_conv_out(x, w, attrs), dtype, 5 * i), _values(w, dtype, 5 * i + 1)),
                   {**_CONV, **attrs, "size": x[2:]})
            for i, (x, w, attrs) in enumerate(_CONV_CASES)]


def _conv2d_weight_grad(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_values(_conv_out(x, w, attrs), dtype, 7 * i), _values(x, dtype, 7 * i + 1)),
                   {**_CONV, **attrs, "kernel": w[2:]})
            for i, (x, w, attrs) in enumerate(_CONV_CASES)]


_POOL = {"kernel": (2, 2), "stride": (2, 2), "padding": (0, 0, 0, 0), "ceil_mode": False}
_MAX_CASES: tuple[dict[str, Any], ...] = (
    {"dilation": (1, 1)},
    {"kernel": (3, 2), "stride": (2, 1), "padding": (1, 1, 1, 0), "dilation": (1, 2),
     "ceil_mode": True},
)
_AVG_CASES: tuple[dict[str, Any], ...] = (
    {"count_include_pad": True, "divisor_override": 0},
    {"kernel": (3, 2), "stride": (2, 1), "padding": (1, 1, 1, 1), "ceil_mode": True,
     "count_include_pad": False, "divisor_override": 0},
    {"padding": (1, 0, 0, 0), "count_include_pad": True, "divisor_override": 3},
)


def _max_pool2d(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    # distinct values: no ties, where the gradient would have a choice
    x = numpy.random.default_rng(1).permutation(5 * 3 * 7 * 6).reshape(5, 3, 7, 6)
    return [Sample((x.astype(dtype) / 10,), {**_POOL, **a}) for a in _MAX_CASES]


def _max_pool2d_grad(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = _max_pool2d(dtype, mesh)[0].operands[0]
    return [Sample((_values((5, 3, 3, 3), dtype, 2), x), {**_POOL, "dilation": (1, 1)}),
            Sample((_values((5, 3, 4, 5), dtype, 3), x), {**_POOL, **_MAX_CASES[1]})]


def _avg_pool2d(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_values((5, 3, 7, 6), dtype, 4 + i),), {**_POOL, **a})
            for i, a in enumerate(_AVG_CASES)]


def _avg_pool2d_grad(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    outs = ((5, 3, 3, 3), (5, 3, 4, 7), (5, 3, 4, 3))
    return [Sample((_values(o, dtype, 8 + i),), {**_POOL, **a, "size": (7, 6)})
            for i, (o, a) in enumerate(zip(outs, _AVG_CASES))]


# -- reproducible sums -------------------------------------------------------------------------
def _state_sums(states: numpy.ndarray) -> numpy.ndarray:
    """The sums that integer states stand for, rounded once to float64."""
    return xs.state_values(states, numpy.float64)


def _exact_state(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    x = _values((5, 3), dtype, 1)
    pairs = dtype.kind == "c"
    return [Sample((x,), {"dims": dims, "keepdim": keep, "pairs": pairs}, canonical=_state_sums)
            for dims, keep in _DIMS]


def _exact_round(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    """States of float64 sums over dim 1 of a (5, 3) value (rounded back to float64)."""
    x = _values((5, 3), numpy.dtype(numpy.float64), 1)
    states = xs.rows_state(numpy.ascontiguousarray(x)).reshape(5, xs.STATE_SIZE)
    return [Sample((states.astype(dtype),), {"pairs": False, "divisor": 1, "nan_as_zero": False,
                                             "out": numpy.dtype(numpy.float64)}),
            Sample((states.astype(dtype),), {"pairs": False, "divisor": 3, "nan_as_zero": False,
                                             "out": numpy.dtype(numpy.float32)})]


def _conj(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_values((5, 3), dtype, 1),))]


def _product_error(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    return [Sample((_values((5, 3), dtype, 1), _values((5, 3), dtype, 2)))]


# -- nn's fused ops ----------------------------------------------------------------------------
def _embedding(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    # (padding_idx: a row that gets no gradient; unused here, so that finite differences agree)
    index = numpy.array([[1, 3, 2], [3, 3, 2]])
    return [Sample((numpy.array([1, 3, 0, 3, 2]), _values((4, 3), dtype, 1)),
                   {"padding_idx": -1}),
            Sample((index, _values((4, 5), dtype, 2)), {"padding_idx": 0})]


def _embedding_backward(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    index = numpy.array([1, 3, 0, 3, 2])
    return [Sample((_values((5, 3), dtype, 1), index), {"rows": 4, "padding_idx": -1}),
            Sample((_values((5, 3), dtype, 2), index), {"rows": 4, "padding_idx": 3})]


def _cross_entropy(dtype: numpy.dtype, mesh: Mesh) -> list[Sample]:
    target = numpy.array([1, 0, 3, -100, 2])
    return [Sample((_values((5, 4), dtype, 1), target),
                   {"ignore_index": -100, "reduction": reduction})
            for reduction in ("mean", "sum")]


# -- the table ---------------------------------------------------------------------------------
F64, F32, I64, BOOL = "float64", "float32", "int64", "bool"
C128, C64 = "complex128", "complex64"
_FLOATING_UNARY = ("exp", "expm1", "log", "log1p", "log2", "sqrt", "rsqrt", "reciprocal", "sin",
                   "cos", "tanh", "sigmoid", "gelu", "erf")
_UNARY_DTYPES: dict[str, tuple[str, ...]] = {
    **{name: (F64, F32, I64) for name in _FLOATING_UNARY},
    **{name: (F64, F32, I64) for name in ("neg", "abs", "sign", "square", "relu")},
    **{name: (F64, F32) for name in ("floor", "ceil", "round")},
    "logical_not": (BOOL, F64, I64), "bitwise_not": (BOOL, I64),
    **{name: (F64, F32) for name in ("isnan", "isinf", "isfinite")},
}
_BINARY_DTYPES: dict[str, tuple[str, ...]] = {
    **{name: (F64, F32, I64) for name in ("add", "sub", "mul", "maximum", "minimum")},
    **{name: (F64, F32, I64) for name in ("div", "atan2")},
    **{name: (F64, I64) for name in ("floor_divide", "remainder", "pow")},
    **{name: (F64, I64) for name in ("lt", "le", "gt", "ge")},
    **{name: (F64, I64, BOOL) for name in ("eq", "ne")},
    **{name: (BOOL, F64, I64) for name in ("logical_and", "logical_or", "logical_xor")},
    **{name: (BOOL, I64) for name in ("bitwise_and", "bitwise_or", "bitwise_xor")},
}

#: op name -> (the input dtypes it accepts, its sample generator).
SAMPLES: dict[str, tuple[tuple[str, ...], Generator]] = {
    **{name: (dtypes, _unary(name)) for name, dtypes in _UNARY_DTYPES.items()},
    **{name: (dtypes, _binary(name)) for name, dtypes in _BINARY_DTYPES.items()},
    "where": ((F64, I64), _where),
    "sum": ((F64, F32, I64, BOOL), _reduce(out=None)),
    "mean": ((F64, F32), _mean),
    "prod": ((F64, I64), _prod),
    "amax": ((F64, I64, BOOL), _extreme(True)),
    "amin": ((F64, I64, BOOL), _extreme(False)),
    "max": ((F64, I64), _extreme_at(True)),
    "min": ((F64, I64), _extreme_at(False)),
    "argmax": ((F64, I64), _arg(True)),
    "argmin": ((F64, I64), _arg(False)),
    "all": ((BOOL, F64), _logical),
    "any": ((BOOL, F64), _logical),
    "softmax": ((F64, F32), _softmax),
    "logsumexp": ((F64, F32, I64), _logsumexp),
    "cumsum": ((F64, I64), _cumsum),
    "sort": ((F64, I64), _sort),
    "put_along": ((F64,), _put_along),
    "reshape": ((F64, I64, BOOL), _reshape),
    "permute": ((F64, I64), _permute),
    "squeeze": ((F64, I64), _squeeze),
    "unsqueeze": ((F64, I64), _unsqueeze),
    "cat": ((F64, I64), _cat),
    "stack": ((F64, I64), _stack),
    "narrow": ((F64, I64), _narrow),
    "flip": ((F64, I64), _flip),
    "cast": ((F64, F32, I64), _cast),
    "clone": ((F64, I64, BOOL), _clone),
    "expand": ((F64, I64), _expand),
    "getitem": ((F64, I64), _getitem),
    "getitem_grad": ((F64,), _getitem_grad),
    "index": ((F64, I64), _index),
    "index_grad": ((F64,), _index_grad),
    "matmul": ((F64, F32, I64), _matmul),
    "outer": ((F64, I64), _outer),
    "linear": ((F64, F32), _linear),
    "conv2d": ((F64, F32), _conv2d),
    "conv2d_input_grad": ((F64, F32), _conv2d_input_grad),
    "conv2d_weight_grad": ((F64, F32), _conv2d_weight_grad),
    "max_pool2d": ((F64, F32), _max_pool2d),
    "max_pool2d_grad": ((F64,), _max_pool2d_grad),
    "avg_pool2d": ((F64, F32), _avg_pool2d),
    "avg_pool2d_grad": ((F64,), _avg_pool2d_grad),
    "exact_state": ((F64, F32, C128), _exact_state),
    "exact_round": ((I64,), _exact_round),
    "conj": ((C128, C64), _conj),
    "product_error": ((F64,), _product_error),
    "embedding": ((F64, F32), _embedding),
    "embedding_backward": ((F64,), _embedding_backward),
    "cross_entropy": ((F64, F32), _cross_entropy),
}

#: op name -> why it has no samples (none so far: every op is swept).
UNSAMPLED: dict[str, str] = {}

from .samples_indexing import SAMPLES as _INDEXING  # noqa: E402 - scans, windows, gathers
from .samples_linalg import SAMPLES as _LINALG  # noqa: E402 - factorizations and solvers
from .samples_more import SAMPLES as _MORE  # noqa: E402 - more elementwise ops, slices
from .samples_spectral import SAMPLES as _SPECTRAL  # noqa: E402 - the FFT ops
from .samples_stats import SAMPLES as _STATS  # noqa: E402 - sorting and statistics

SAMPLES.update(_INDEXING)
SAMPLES.update(_MORE)
SAMPLES.update(_STATS)
SAMPLES.update(_SPECTRAL)
SAMPLES.update(_LINALG)
