"""Check gradient rules against central finite differences, on local and global tensors.

``gradcheck`` compares the analytic gradient of ``sum(fn(*inputs) * weights)`` (random fixed
weights, so every output element counts with a different factor) with finite differences of
the same scalar, in float64. Global inputs are perturbed in their *logical* value: the global
tensor is rebuilt from the perturbed whole value with the same placement and sbp, and every
rank runs the same perturbations in the same order, so ``fn``'s collectives match up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy

from ..layouts.sbp import Broadcast
from ..ops import pointwise as pw
from ..tensors.creation import tensor
from ..tensors.tensor import Tensor
from .graph import no_grad

__all__ = ["GradcheckError", "gradcheck"]


class GradcheckError(RuntimeError):
    """An analytic gradient differs from its finite-difference estimate."""


def _float64_leaf(t: Tensor) -> Tensor:
    """A float64 copy of ``t`` (same layout) that is a leaf with ``t``'s ``requires_grad``."""
    with no_grad():
        copy = pw.cast(t.detach().clone(), "float64")
    return Tensor(copy._data, copy._placement, copy._sbp, copy.shape,
                  requires_grad=t.requires_grad)


def _rebuilt(like: Tensor, value: numpy.ndarray, sbp: Any = None) -> Tensor:
    """A tensor holding the whole ``value``, laid out as ``like`` or by ``sbp`` (no
    communication)."""
    if not like.is_global:
        return tensor(value)
    sbp = like.sbp if sbp is None else sbp
    if value.ndim == 0:  # built as one element: a 0-d value would get a (1,) shard
        return tensor(value.reshape(1), placement=like.placement, sbp=sbp).reshape(())
    return tensor(value, placement=like.placement, sbp=sbp)


def _outputs(result: Any) -> list[Tensor]:
    items = list(result) if isinstance(result, (tuple, list)) else [result]
    return [t for t in items if isinstance(t, Tensor) and t.dtype.is_floating_point]


def _weights(outputs: Sequence[Tensor], seed: int) -> list[numpy.ndarray]:
    rng = numpy.random.default_rng(seed)  # the same weights on every rank
    return [rng.uniform(0.5, 1.5, tuple(t.shape)) * rng.choice([-1.0, 1.0], tuple(t.shape))
            for t in outputs]


def _value(fn: Callable[..., Any], args: Sequence[Any], weights: Sequence[numpy.ndarray]
           ) -> float:
    with no_grad():
        outputs = _outputs(fn(*args))
        return float(sum(numpy.sum(t.numpy().astype(numpy.float64) * w)
                         for t, w in zip(outputs, weights)))


def gradcheck(fn: Callable[..., Any], inputs: Any, eps: float = 1e-6, atol: float = 1e-5,
              rtol: float = 1e-3, *, seed: int = 0) -> bool:
    """Compare the gradients autograd computes for ``fn`` with central finite differences.

    Collective when ``fn`` or an input is global: every rank must call it with the same
    arguments. Inputs that are local tensors are perturbed on each rank independently, so a
    ``fn`` that combines local inputs across ranks (``to_global`` of a local input) is not
    checked correctly; give such inputs as global tensors.

    Args:
        fn: a function of the inputs returning a tensor or a tuple of tensors (non-floating
            outputs are ignored).
        inputs: a tensor or a sequence of tensors and other arguments. Tensors that require
            grad are checked; floating tensors are copied to float64 first (same layout), so
            ``fn`` runs in float64 where it keeps its inputs' dtype; integer and bool tensors
            (indices, masks) are passed as they are.
        eps: the finite-difference step.
        atol, rtol: an element passes when ``|analytic - numeric| <= atol + rtol * |numeric|``.
        seed: seeds the random weights of the outputs.

    Returns:
        True when every element agrees.

    Raises:
        ValueError: no input tensor requires grad.
        GradcheckError: a mismatch (on every rank), naming the input, the element of the worst
            difference, and both values.

    Examples:
        >>> x = flow.tensor([1.0, 2.0], dtype=flow.float64, requires_grad=True)
        >>> gradcheck(lambda t: (t * t).sum(), [x])
        True
    """
    items = list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]
    # floating tensors in float64; integer and bool ones (indices, masks) stay as they are
    args = [_float64_leaf(a) if isinstance(a, Tensor) and a.dtype.is_floating_point else a
            for a in items]
    checked = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
    if not checked:
        raise ValueError("gradcheck: no input tensor requires grad")
    weights = _backward(fn, args, seed)
    plain = [a.detach() if isinstance(a, Tensor) else a for a in args]
    for i in checked:
        x = args[i]
        analytic = (numpy.zeros(tuple(x.shape)) if x.grad is None
                    else numpy.asarray(x.grad.numpy(), dtype=numpy.float64))
        base = x.detach().numpy().astype(numpy.float64)  # the whole value (collective)
        numeric = numpy.zeros(base.shape)
        for j in numpy.ndindex(*base.shape):
            values = []
            for step in (eps, -eps):
                moved = base.copy()
                moved[j] += step
                values.append(_value(fn, [*plain[:i], _rebuilt(x, moved), *plain[i + 1:]],
                                     weights))
            numeric[j] = (values[0] - values[1]) / (2 * eps)
        _compare(i, x, analytic, numeric, atol, rtol)
    return True


def _backward(fn: Callable[..., Any], args: Sequence[Any], seed: int) -> list[numpy.ndarray]:
    """Run ``sum(fn(*args) * weights).backward()``; returns the weights of the outputs."""
    outputs = _outputs(fn(*args))
    weights = _weights(outputs, seed)
    terms = [(t * _weights_like(t, w)).sum()
             for t, w in zip(outputs, weights) if t.requires_grad]
    if terms:
        loss = terms[0]
        for term in terms[1:]:
            loss = loss + term
        loss.backward()
    return weights


def _weights_like(t: Tensor, w: numpy.ndarray) -> Tensor:
    """The weights as a tensor beside ``t``: local, or global and broadcast on its placement."""
    return _rebuilt(t, w, (Broadcast(),) * t.placement.ndim if t.is_global else None)


def _compare(i: int, x: Tensor, analytic: numpy.ndarray, numeric: numpy.ndarray, atol: float,
             rtol: float) -> None:
    error = numpy.abs(analytic - numeric) - (atol + rtol * numpy.abs(numeric))
    error = numpy.where(error <= 0, error, numpy.nan_to_num(error, nan=numpy.inf))
    bad = error > 0  # NaN counts as a mismatch (as inf)
    if not bad.any():
        return
    worst = numpy.unravel_index(int(numpy.argmax(error)), error.shape)
    layout = (f" (global, placement={x.placement!r}, sbp={x.sbp})" if x.is_global else "")
    raise GradcheckError(
        f"gradcheck: the gradient of input {i} of shape {tuple(x.shape)}{layout} differs from "
        f"finite differences at {int(bad.sum())} of {bad.size} elements; worst at index "
        f"{tuple(int(k) for k in worst)}: analytic {float(analytic[worst])!r}, numerical "
        f"{float(numeric[worst])!r} (atol={atol}, rtol={rtol})\nanalytic:\n{analytic}\nnumerical:\n"
        f"{numeric}")
