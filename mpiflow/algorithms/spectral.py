"""Distributed 1-D FFTs along a split axis: the six-step algorithm, and Bluestein's for primes.

A transform of length ``n = R * C`` along an axis held in consecutive parts (rank ``r`` holds
``counts[r]`` rows) never gathers it. Viewing the input as a ``R x C`` matrix ``A`` (row-major:
element ``j = C a + b``) and the output as a ``C x R`` one (``k = k_a + R k_b``)::

    X[k_a + R k_b] = sum_b w_C^(b k_b) w_n^(b k_a) sum_a A[a, b] w_R^(a k_a)

so that (Bailey's six steps, with the first and last transposes fused with the re-chunking):

1. an all-to-all gives each rank whole columns of ``A`` (each rank sends its rows, the
   partial first and last ones padded with zeros, which the receiver adds up);
2. a local FFT of length ``R`` down the columns, times the twiddles ``w_n^(b k_a)``;
3. an all-to-all gives each rank whole rows ``k_a``;
4. a local FFT of length ``C`` along them: the output matrix, ranks holding its columns;
5. an all-to-all sends each rank the output rows ``k_b`` covering the part it wants.

Three all-to-alls; each element moves three times. Each rank packs its blocks transposed
(tile by tile), so that every local FFT runs along contiguous memory (a strided FFT down
columns costs two to four times as much here). Zeros appended to the input (``n`` beyond
the input's length) are never sent; outputs beyond what the output counts ask for (``rfft``'s
other half) are never received. ``R`` is the largest divisor of ``n`` up to its square root; a
prime ``n`` (``R == 1``) goes through Bluestein's algorithm: the transform is a cyclic
convolution of length ``m >= 2n - 1`` (a power of two), three six-step transforms of length
``m``, nine all-to-alls. Real transforms are complex ones: ``rfft`` keeps the first
``n // 2 + 1`` outputs (its output counts), ``irfft`` first builds the Hermitian spectrum with
one :func:`~.exchange.fetch` (each rank fetches its part and the mirrored part, conjugated).

Examples:
    >>> from mpiflow.communication.mpi.group import world_comm as comm
    >>> n = 12
    >>> counts = balanced(n, comm.size)
    >>> lo, hi = offsets(counts)[comm.rank:comm.rank + 2]
    >>> x = numpy.arange(n, dtype=complex)
    >>> got = fft_along(x[lo:hi], comm, 0, counts, n, counts)
    >>> bool(numpy.allclose(got, numpy.fft.fft(x)[lo:hi]))
    True
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy

from ..communication import Communicator
from ..core.array_module import array_module
from .exchange import fetch, front, unfront
from .fftlocal import library, plain, scale
from .pencil import all_to_all, scratch
from .ranges import Range, balanced, offsets

__all__ = ["factor", "fft_along", "irfft_along", "rfft_along"]

Shape = tuple[int, ...]


def factor(n: int) -> int:
    """The largest divisor of ``n`` not above its square root (1 for a prime).

    Examples:
        >>> factor(2 ** 22), factor(12), factor(13)
        (2048, 3, 1)
    """
    for r in range(math.isqrt(n), 1, -1):
        if n % r == 0:
            return r
    return 1


def _as_rows(xp: Any, local: Any, axis: int) -> tuple[Any, tuple[int, ...]]:
    """``local`` with ``axis`` first, flattened to ``(rows, width)``, and the other dims."""
    rows = front(xp, local, axis)
    inner = tuple(rows.shape[1:])
    return rows.reshape(rows.shape[0], math.prod(inner)), inner


def _back(xp: Any, rows: Any, inner: tuple[int, ...], axis: int) -> Any:
    return unfront(xp, rows.reshape(rows.shape[0], *inner), axis)


@functools.lru_cache(maxsize=8)
def _twiddles(n: int, r: int, lo: int, hi: int, sign: int, factor_: float, dtype: Any
              ) -> numpy.ndarray:
    """``factor_ * exp(sign 2 pi i (b k_a mod n) / n)`` for ``lo <= b < hi`` (rows) and
    ``k_a < r`` (columns), reduced mod ``n`` before the exponential, so that large ``n`` loses
    no accuracy."""
    b = numpy.arange(lo, hi, dtype=numpy.int64)[:, None]
    k = numpy.arange(r, dtype=numpy.int64)[None, :]
    out = numpy.exp((sign * 2j * numpy.pi / n) * ((k * b) % n))
    return (out * factor_).astype(dtype)


def _on(xp: Any, array: numpy.ndarray) -> Any:
    return array if xp is numpy else xp.asarray(array)


TILE = 64  # a transposing copy goes tile by tile: both sides stay in the cache


def _transpose_into(xp: Any, dst: Any, src: Any) -> None:
    """``dst[w, i, j] = src[w, j, i]`` (``dst`` contiguous), tile by tile for large blocks
    (a plain strided copy of a large transpose misses the cache on every element)."""
    _, m, k = dst.shape
    if xp is not numpy or m * k <= 4 * TILE * TILE:
        dst[...] = src.swapaxes(1, 2)
        return
    for i in range(0, m, TILE):
        for j in range(0, k, TILE):
            dst[:, i:i + TILE, j:j + TILE] = src[:, j:j + TILE, i:i + TILE].swapaxes(1, 2)


def _swap_all(xp: Any, comm: Communicator, blocks: Sequence[Any], recv_shapes: Sequence[Shape],
              even: bool, dtype: Any) -> list[Any]:
    """Send ``blocks[q]`` (``(w, a, b)`` views) to rank ``q`` transposed (``(w, b, a)``);
    return the blocks received, each ``recv_shapes[r]``, as views of one buffer (one
    all-to-all)."""
    send_counts = [math.prod(blk.shape) for blk in blocks]
    recv_counts = [math.prod(shape) for shape in recv_shapes]
    send = scratch(xp, sum(send_counts), dtype)
    at = 0
    for blk, count in zip(blocks, send_counts):
        w, a, b = blk.shape
        _transpose_into(xp, send[at:at + count].reshape(w, b, a), blk)
        at += count
    recv = scratch(xp, sum(recv_counts), dtype, slot=1)  # copied out by the caller
    all_to_all(comm, send, send_counts, recv, recv_counts, even)
    out, at = [], 0
    for shape, count in zip(recv_shapes, recv_counts):
        out.append(recv[at:at + count].reshape(shape))
        at += count
    return out


def _six_step(x: Any, comm: Communicator, counts: Sequence[int], valid: int, n: int,
              out_counts: Sequence[int], sign: int, factor_: float) -> Any:
    """``factor_`` times the plain transform (``sign`` -1: forward) of length ``n`` (with
    ``R = factor(n) > 1``) of the rows ``x`` (``(counts[me], width)``; rows from ``valid`` on
    count as zeros, as do rows past the input), the output rows ``out_counts[me]``.

    Inside, the arrays are ``(width, ., .)`` with the transformed dim last (contiguous: the
    local FFTs run along it); each all-to-all transposes its blocks as it packs them."""
    xp = array_module(x)
    me, p = comm.rank, comm.size
    width, dtype = x.shape[1], x.dtype
    r = factor(n)
    c = n // r
    starts = offsets(counts)
    # 1: my rows of A (the partial first and last padded with zeros); each rank gets whole
    # columns, transposed: (w, b, a)
    spans = []
    for q in range(p):
        lo, hi = min(starts[q], valid, n), min(starts[q + 1], valid, n)
        spans.append((lo // c, -(-hi // c)) if hi > lo else (0, 0))
    lo, hi = min(starts[me], valid, n), min(starts[me + 1], valid, n)
    a0, a1 = spans[me]
    flat = x[:hi - lo].T  # (w, elements)
    if lo == a0 * c and hi == a1 * c:
        mine = flat.reshape(width, a1 - a0, c)
    else:
        mine = xp.zeros((width, a1 - a0, c), dtype=dtype)
        mine.reshape(width, -1)[:, lo - a0 * c:hi - a0 * c] = flat
    cols = balanced(c, p)
    cstart = offsets(cols)
    got = _swap_all(xp, comm, [mine[:, :, cstart[q]:cstart[q + 1]] for q in range(p)],
                    [(width, cols[me], s1 - s0) for s0, s1 in spans],
                    len({s1 - s0 for s0, s1 in spans}) == 1 and len(set(cols)) == 1, dtype)
    columns = xp.zeros((width, cols[me], r), dtype=dtype)
    for (s0, s1), block in zip(spans, got):
        if s1 > s0:  # the first and last rows of a part may be shared with a neighbour
            columns[:, :, s0] += block[:, :, 0]
            columns[:, :, s0 + 1:s1 - 1] = block[:, :, 1:-1]
            if s1 - s0 > 1:
                columns[:, :, s1 - 1] += block[:, :, -1]
    # 2: along the columns, then the twiddles (with the norm's factor)
    columns = plain(xp, columns, sign, overwrite=True)
    columns *= _on(xp, _twiddles(n, r, cstart[me], cstart[me + 1], sign, factor_,
                                 numpy.dtype(dtype)))
    # 3: whole rows k_a, transposed: (w, k_a, b); 4: along them
    rows = balanced(r, p)
    rstart = offsets(rows)
    got = _swap_all(xp, comm, [columns[:, :, rstart[q]:rstart[q + 1]] for q in range(p)],
                    [(width, rows[me], cols[q]) for q in range(p)],
                    len(set(rows)) == 1 and len(set(cols)) == 1, dtype)
    turned = xp.empty((width, rows[me], c), dtype=dtype)
    for q, block in enumerate(got):
        turned[:, :, cstart[q]:cstart[q + 1]] = block
    turned = plain(xp, turned, sign, overwrite=True)  # [w, k_a, k_b]
    # 5: each rank the output rows k_b covering its part, transposed: (w, k_b, k_a)
    ostarts = offsets(out_counts)
    wants = []
    for q in range(p):
        o0, o1 = ostarts[q], ostarts[q + 1]
        wants.append((o0 // r, -(-o1 // r)) if o1 > o0 else (0, 0))
    w0, w1 = wants[me]
    got = _swap_all(xp, comm, [turned[:, :, b0:b1] for b0, b1 in wants],
                    [(width, w1 - w0, rows[q]) for q in range(p)],
                    len({b1 - b0 for b0, b1 in wants}) == 1 and len(set(rows)) == 1, dtype)
    out = xp.empty((width, w1 - w0, r), dtype=dtype)
    for q, block in enumerate(got):
        out[:, :, rstart[q]:rstart[q + 1]] = block
    o0 = ostarts[me] - w0 * r
    return xp.ascontiguousarray(out.reshape(width, -1)[:, o0:o0 + out_counts[me]].T)


def _chirp(n: int, lo: int, hi: int, sign: int) -> numpy.ndarray:
    """``exp(sign pi i j^2 / n)`` for ``lo <= j < hi``."""
    return _chirp_at(n, numpy.arange(lo, hi, dtype=numpy.int64), sign)


def _chirp_at(n: int, j: numpy.ndarray, sign: int) -> numpy.ndarray:
    """``exp(sign pi i j^2 / n)`` (``j^2`` reduced mod ``2n`` first: no accuracy lost)."""
    return numpy.exp((sign * 1j * numpy.pi / n) * ((j * j) % (2 * n)))


def _bluestein(x: Any, comm: Communicator, counts: Sequence[int], valid: int, n: int,
               out_counts: Sequence[int], sign: int, factor_: float) -> Any:
    """As :func:`_six_step`, for any ``n``: a cyclic convolution of length ``m``, a power of
    two at least ``2n - 1``, by three six-step transforms."""
    xp = array_module(x)
    me, p = comm.rank, comm.size
    m = 1 << (2 * n - 2).bit_length()
    starts = offsets(counts)
    lo, hi = min(starts[me], valid, n), min(starts[me + 1], valid, n)
    a = x[:hi - lo] * _on(xp, _chirp(n, lo, hi, sign).astype(x.dtype))[:, None]
    whole = balanced(m, p)
    clipped = [min(starts[q + 1], valid, n) - min(starts[q], valid, n) for q in range(p)]
    spectrum = _six_step(a, comm, clipped, n, m, whole, -1, 1.0)
    # the kernel b_t = conj(w_t) for |t| < n, cyclically, and its spectrum
    b0, b1 = offsets(whole)[me:me + 2]
    t = numpy.arange(b0, b1, dtype=numpy.int64)
    j = numpy.where(t < n, t, numpy.where(t > m - n, m - t, 0))
    kernel = numpy.where((t < n) | (t > m - n), _chirp_at(n, j, -sign), 0)
    kernel_rows = _on(xp, kernel.astype(x.dtype)[:, None])
    kspectrum = _six_step(kernel_rows, comm, whole, m, m, whole, -1, 1.0)
    spectrum *= kspectrum
    conv = _six_step(spectrum, comm, whole, m, m, out_counts, 1, 1.0 / m)
    o0 = offsets(out_counts)[me]
    return conv * _on(xp, (_chirp(n, o0, o0 + out_counts[me], sign) * factor_).astype(
        x.dtype))[:, None]


def _transform(x: Any, comm: Communicator, counts: Sequence[int], n: int,
               out_counts: Sequence[int], sign: int, factor_: float) -> Any:
    """The plain transform of the ``(rows, width)`` parts ``x``, times ``factor_``."""
    xp = array_module(x)
    if x.shape[1] == 0 or n == 0:  # nothing to move (the same on every rank)
        return xp.zeros((out_counts[comm.rank], x.shape[1]), dtype=x.dtype)
    if n == 1:  # one element: itself, resized (the first rank's row 0)
        return _six_step_one(x, comm, counts, out_counts, factor_)
    if factor(n) == 1:
        return _bluestein(x, comm, counts, n, n, out_counts, sign, factor_)
    return _six_step(x, comm, counts, n, n, out_counts, sign, factor_)


def _six_step_one(x: Any, comm: Communicator, counts: Sequence[int],
                  out_counts: Sequence[int], factor_: float) -> Any:
    """A transform of length 1: row 0 times ``factor_``, moved to where it is wanted."""
    wants: list[list[Range]] = [[(0, min(1, k))] for k in out_counts]
    got = fetch(x, comm, 0, counts, wants) if sum(counts) else \
        array_module(x).zeros((out_counts[comm.rank], x.shape[1]), dtype=x.dtype)
    return got * factor_


def _check(local: Any, comm: Communicator, axis: int, counts: Sequence[int], n: int,
           out_counts: Sequence[int], out_n: int) -> None:
    if len(counts) != comm.size or len(out_counts) != comm.size:
        raise ValueError(f"one count per rank of {comm.size}: {list(counts)}, "
                         f"{list(out_counts)}")
    if local.shape[axis] != counts[comm.rank]:
        raise ValueError(f"this rank holds {local.shape[axis]} rows along axis {axis}, the "
                         f"counts say {counts[comm.rank]}")
    if n < 1 or sum(out_counts) > out_n:
        raise ValueError(f"a transform of length {n} (at least 1) has {out_n} outputs, not "
                         f"{sum(out_counts)}")


def fft_along(local: Any, comm: Communicator, axis: int, counts: Sequence[int], n: int,
              out_counts: Sequence[int], *, forward: bool = True, norm: str = "backward"
              ) -> Any:
    """The complex FFT of length ``n`` along a split axis (collective; three all-to-alls).

    Args:
        local: this rank's part (complex), ``counts[me]`` rows along ``axis``.
        comm: the ranks holding the axis, in its order.
        axis: the split axis; the other axes are transformed independently.
        counts: rows per rank; the axis (``sum(counts)`` long) is cut or padded with zeros
            to ``n`` first.
        n: the transform's length.
        out_counts: output rows per rank (they may add up to less than ``n``: the first
            outputs).
        forward: the sign of the exponent (-1 forward), as ``fft``/``ifft``.
        norm: "backward", "ortho" or "forward".

    Returns:
        This rank's ``out_counts[me]`` outputs along ``axis``.
    """
    _check(local, comm, axis, counts, n, out_counts, n)
    xp = array_module(local)
    factor_ = scale(norm, n, forward)
    if comm.size == 1:
        lib = library(xp)
        out = (lib.fft if forward else lib.ifft)(local, n=n, axis=axis, norm=norm)
        return xp.take(out, xp.arange(out_counts[0]), axis=axis) if out_counts[0] < n else out
    rows, inner = _as_rows(xp, local, axis)
    got = _transform(rows, comm, counts, n, out_counts, -1 if forward else 1, factor_)
    return _back(xp, got, inner, axis)


def rfft_along(local: Any, comm: Communicator, axis: int, counts: Sequence[int], n: int,
               out_counts: Sequence[int], *, norm: str = "backward") -> Any:
    """The real FFT of length ``n`` along a split axis: the first ``n // 2 + 1`` outputs of
    the complex one (``out_counts`` add up to that), complex of ``local``'s precision."""
    half = n // 2 + 1
    _check(local, comm, axis, counts, n, out_counts, half)
    complex_type = numpy.result_type(local.dtype, numpy.complex64)
    return fft_along(local.astype(complex_type), comm, axis, counts, n, out_counts, norm=norm)


def irfft_along(local: Any, comm: Communicator, axis: int, counts: Sequence[int], n: int,
                out_counts: Sequence[int], *, norm: str = "backward") -> Any:
    """The inverse real FFT along a split axis: ``n`` real outputs (``out_counts``) from the
    first ``n // 2 + 1`` entries of a Hermitian spectrum (the axis cut or padded with zeros
    to that; the other half is their mirror image, conjugated). One fetch builds the whole
    spectrum, the inverse complex FFT follows."""
    _check(local, comm, axis, counts, n, out_counts, n)
    xp = array_module(local)
    if comm.size == 1:
        return library(xp).irfft(local, n=n, axis=axis, norm=norm)
    rows, inner = _as_rows(xp, local, axis)
    have, half, me = sum(counts), n // 2 + 1, comm.rank
    parts = balanced(n, comm.size)
    starts = offsets(parts)
    wants: list[list[Range]] = []
    for q in range(comm.size):
        lo, hi = starts[q], starts[q + 1]
        direct = (lo, max(lo, min(hi, half, have)))
        m0 = max(lo, half)  # mirrored: k in [m0, hi) takes j = n - k while j < have
        mirrored = (max(n - hi + 1, 0), max(max(n - hi + 1, 0), min(n - m0 + 1, have)))
        wants.append([r for r in (direct, mirrored) if r[1] > r[0]] if hi > lo else [])
    got = fetch(rows, comm, 0, counts, wants)
    lo, hi = starts[me], starts[me + 1]
    full = xp.zeros((hi - lo, rows.shape[1]), dtype=numpy.result_type(rows.dtype,
                                                                       numpy.complex64))
    kept = max(0, min(hi, half, have) - lo)
    full[:kept] = got[:kept]
    mirrored = got[kept:]
    if mirrored.shape[0]:
        # rows j = j0 .. j1-1 (increasing) belong at k = n - j (decreasing)
        j0 = max(n - hi + 1, 0)
        k_last = n - j0
        k_first = k_last - mirrored.shape[0] + 1
        full[k_first - lo:k_last - lo + 1] = xp.conj(mirrored[::-1])
    spectrum = _transform(full, comm, parts, n, out_counts, 1, scale(norm, n, False))
    return _back(xp, xp.ascontiguousarray(spectrum.real), inner, axis)
