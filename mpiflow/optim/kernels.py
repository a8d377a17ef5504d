"""The optimizers' update math on arrays, in place: one function per algorithm.

Each works on whole arrays of one dtype (numpy or CuPy): one parameter's, or the flat buffer
of many (:mod:`._flat`). The operations and their order are those of the tensor formulation
the optimizers had before (e.g. Adam's ``v = v * beta2 + (g * g) * (1 - beta2)``), with the
Python-number factors applied as weak scalars, so an element comes out bitwise the same
whichever way it is updated: per parameter, over a flat buffer, or through mpiflow ops.
Temporaries are limited to what the math needs (one or two arrays of the parameter's size);
parameters, momenta and moments are updated with ``out=``.

Examples:
    >>> import numpy
    >>> from mpiflow.optim.kernels import sgd_update
    >>> p, g = numpy.ones(2, numpy.float32), numpy.full(2, 0.5, numpy.float32)
    >>> sgd_update(p, g, None, lr=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0,
    ...            nesterov=False, maximize=False)
    >>> p.tolist()
    [0.949999988079071, 0.949999988079071]
"""

from __future__ import annotations

import math
from typing import Any

import numpy

from ..core.array_module import array_module

__all__ = ["adam_update", "sgd_update"]


def _effective_grad(xp: Any, p: Any, g: Any, maximize: bool, weight_decay: float) -> Any:
    """``-g`` if maximizing, plus ``p * weight_decay`` (new arrays: ``g`` is never changed)."""
    if maximize:
        g = xp.negative(g)
    if weight_decay != 0:
        decay = xp.multiply(p, weight_decay)
        g = xp.add(g, decay, out=decay)
    return g


def _sgd_block(p: Any, g: Any, buf: Any, *, lr: float, momentum: float, dampening: float,
               weight_decay: float, nesterov: bool, maximize: bool, scratch: Any = None,
               out_buf: Any = None) -> Any:
    """:func:`sgd_update` on one piece; ``out_buf`` receives a first step's new buffer."""
    xp = array_module(p)
    g = _effective_grad(xp, p, g, maximize, weight_decay)
    if momentum != 0:
        if buf is None:
            if out_buf is None:
                buf = g.copy()
            else:
                xp.copyto(out_buf, g)
                buf = out_buf
        else:
            xp.multiply(buf, momentum, out=buf)
            xp.add(buf, xp.multiply(g, 1.0 - dampening), out=buf)
        if nesterov:
            step = xp.multiply(buf, momentum)
            g = xp.add(g, step, out=step)
        else:
            g = buf
    if scratch is not None and g is buf:
        scratch = None  # the momentum buffer is kept: never scale it in place
    xp.subtract(p, xp.multiply(g, lr, out=scratch), out=p)
    return buf


def _adam_block(p: Any, g: Any, exp_avg: Any, exp_avg_sq: Any, max_exp_avg_sq: Any, *,
                step: int, lr: float, beta1: float, beta2: float, eps: float,
                weight_decay: float, decoupled: bool, maximize: bool, scratch: Any = None
                ) -> None:
    """:func:`adam_update` on one piece."""
    xp = array_module(p)
    if decoupled:
        xp.multiply(p, 1.0 - lr * weight_decay, out=p)
        g = _effective_grad(xp, p, g, maximize, 0.0)
    else:
        g = _effective_grad(xp, p, g, maximize, weight_decay)
    # lerp(m, g, 1 - beta1) = m + (1 - beta1) * (g - m), as PyTorch's lerp_
    t = xp.subtract(g, exp_avg, out=scratch)
    xp.multiply(t, 1.0 - beta1, out=t)
    xp.add(exp_avg, t, out=exp_avg)
    xp.multiply(exp_avg_sq, beta2, out=exp_avg_sq)
    xp.multiply(g, g, out=t)
    xp.multiply(t, 1.0 - beta2, out=t)
    xp.add(exp_avg_sq, t, out=exp_avg_sq)
    step_size = lr / (1.0 - beta1 ** step)
    bias_correction2_sqrt = math.sqrt(1.0 - beta2 ** step)
    second = exp_avg_sq
    if max_exp_avg_sq is not None:
        second = xp.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
    denom = xp.sqrt(second, out=t)
    xp.divide(denom, bias_correction2_sqrt, out=denom)
    xp.add(denom, eps, out=denom)
    update = xp.divide(exp_avg, denom, out=denom)
    xp.multiply(update, step_size, out=update)
    xp.subtract(p, update, out=p)


CHUNK_BYTES = 256 << 10
"""Large numpy arrays are updated in pieces of this many bytes each: every operation of the
update then runs on data still in the CPU's cache (Adam's thirteen passes over a 4 MB
parameter take about two thirds of the time this way). Elementwise math gives the same bits
in any piece size."""


def _pieces(arrays: list[Any]) -> list[list[Any]] | None:
    """The arrays (None kept) cut into pieces of :data:`CHUNK_BYTES`, or None where cutting
    does not apply (small, not C-contiguous numpy arrays of one size)."""
    first = arrays[0]
    if not isinstance(first, numpy.ndarray) or first.nbytes < 2 * CHUNK_BYTES:
        return None
    flat: list[Any] = []
    for a in arrays:
        if a is None:
            flat.append(None)
            continue
        if (not isinstance(a, numpy.ndarray) or a.size != first.size
                or not a.flags.c_contiguous):
            return None
        flat.append(a.reshape(-1))
    step = max(1, CHUNK_BYTES // first.itemsize)
    return [[None if a is None else a[i:i + step] for a in flat]
            for i in range(0, first.size, step)]


def sgd_update(p: Any, g: Any, buf: Any, *, lr: float, momentum: float, dampening: float,
               weight_decay: float, nesterov: bool, maximize: bool, scratch: Any = None
               ) -> Any:
    """One SGD step of ``p`` in place; returns the momentum buffer (new on the first step).

    Args:
        p: the parameter's array, updated in place.
        g: its gradient (read only, unless it is also ``scratch``).
        buf: the momentum buffer from the last step, None on the first (or without momentum).
        lr: as :class:`~mpiflow.optim.SGD`.
        momentum: as :class:`~mpiflow.optim.SGD`.
        dampening: as :class:`~mpiflow.optim.SGD`.
        weight_decay: as :class:`~mpiflow.optim.SGD`.
        nesterov: as :class:`~mpiflow.optim.SGD`.
        maximize: as :class:`~mpiflow.optim.SGD`.
        scratch: an array like ``p`` for the last temporary (``g * lr``), else one is allocated;
            it may be ``g`` itself where the caller owns ``g`` (a gathered copy).

    Returns:
        The momentum buffer to keep (None without momentum).
    """
    options: dict[str, Any] = {"lr": lr, "momentum": momentum, "dampening": dampening,
               "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize}
    first = momentum != 0 and buf is None
    if first:
        buf = array_module(p).empty_like(p)
    pieces = _pieces([p, g, buf, scratch])
    if pieces is None:
        return _sgd_block(p, g, None if first else buf, scratch=scratch, out_buf=buf,
                          **options)
    for p_i, g_i, buf_i, scratch_i in pieces:
        _sgd_block(p_i, g_i, None if first else buf_i, scratch=scratch_i, out_buf=buf_i,
                   **options)
    return buf


def adam_update(p: Any, g: Any, exp_avg: Any, exp_avg_sq: Any, max_exp_avg_sq: Any, *,
                step: int, lr: float, beta1: float, beta2: float, eps: float,
                weight_decay: float, decoupled: bool, maximize: bool, scratch: Any = None
                ) -> None:
    """One Adam (or AdamW, ``decoupled``) step of ``p`` and its moments, in place.

    Args:
        p: the parameter's array, updated in place.
        g: its gradient (read only).
        exp_avg: the first moment, updated in place.
        exp_avg_sq: the second moment, updated in place.
        max_exp_avg_sq: AMSGrad's running maximum (updated in place), or None.
        step: this step's number, from 1.
        lr: as :class:`~mpiflow.optim.Adam`.
        beta1: as :class:`~mpiflow.optim.Adam`.
        beta2: as :class:`~mpiflow.optim.Adam`.
        eps: as :class:`~mpiflow.optim.Adam`.
        weight_decay: as :class:`~mpiflow.optim.Adam`.
        decoupled: AdamW's decay ``p *= 1 - lr * weight_decay`` instead of an L2 term.
        maximize: as :class:`~mpiflow.optim.Adam`.
        scratch: an array like ``p`` to use as the one temporary (else one is allocated,
            of one piece's size where the arrays are cut into pieces).
    """
    options: dict[str, Any] = {"step": step, "lr": lr, "beta1": beta1, "beta2": beta2, "eps": eps,
               "weight_decay": weight_decay, "decoupled": decoupled, "maximize": maximize}
    pieces = _pieces([p, g, exp_avg, exp_avg_sq, max_exp_avg_sq, scratch])
    if pieces is None:
        _adam_block(p, g, exp_avg, exp_avg_sq, max_exp_avg_sq, scratch=scratch, **options)
        return
    temp = None if scratch is not None else numpy.empty_like(pieces[0][0])
    for p_i, g_i, m_i, v_i, vmax_i, scratch_i in pieces:
        if scratch_i is None:
            assert temp is not None
            scratch_i = temp[:p_i.size]
        _adam_block(p_i, g_i, m_i, v_i, vmax_i, scratch=scratch_i, **options)
