"""Discrete Fourier transforms with torch's API (``torch.fft``), on local and global tensors.

Every function takes torch's arguments (``n``/``s``, ``dim``, ``norm``: ``"backward"`` (the
default), ``"ortho"``, ``"forward"``) and returns torch's dtypes: complex64 from float32 (and
from integers, as float32), complex128 from float64; the real results the other way.

On a global tensor split along a dim that is not transformed, each rank transforms its own
columns: no communication, the layout is kept. Split along a transformed dim, the transform
is distributed and never gathered: the split moves to a dim already transformed (slab and
pencil decompositions, one all-to-all per mesh axis that splits a transformed dim), so that,
for example, ``fft2`` of an ``S(0)`` matrix returns ``S(1)`` and ``ifft2`` of that returns
``S(0)`` again, with one all-to-all each. A 1-D array split along its only dim keeps its
split: a distributed six-step FFT (three all-to-alls). See ``docs/science.md`` ("FFT") for
the layout each function returns.

Examples:
    >>> x = flow.tensor([1.0, 2.0, 3.0, 4.0])
    >>> flow.fft.fft(x).tolist()
    [(10+0j), (-2+2j), (-2+0j), (-2-2j)]
    >>> flow.fft.irfft(flow.fft.rfft(x), n=4).tolist()
    [1.0, 2.0, 3.0, 4.0]
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy

from .dtypes import as_dtype
from .layouts.placement import Placement
from .ops import pointwise as pw
from .ops.layout_rules import wrap_dim
from .ops.shifts import roll
from .ops.spectral import c2c, c2r, r2c
from .tensors.creation import arange
from .tensors.tensor import Tensor

__all__ = ["fft", "fft2", "fftfreq", "fftn", "fftshift", "hfft", "ifft", "ifft2", "ifftn",
           "ifftshift", "ihfft", "irfft", "irfft2", "irfftn", "rfft", "rfft2", "rfftfreq",
           "rfftn"]

NORMS = ("backward", "ortho", "forward")
Dims = int | Sequence[int] | None


# -- arguments -------------------------------------------------------------------------------------
def _norm(norm: str | None) -> str:
    if norm is None:
        return "backward"
    if norm not in NORMS:
        raise ValueError(f'Invalid normalization mode: "{norm}" (expected "backward", '
                         '"ortho" or "forward")')
    return norm


def _points(n: int) -> int:
    n = operator.index(n)
    if n < 1:
        raise ValueError(f"Invalid number of data points ({n}) specified")
    return n


def _float(input: Tensor, name: str, *, real: bool) -> Tensor:
    """``input`` with a floating (or, unless ``real``, complex) dtype: integers and bools as
    float32 (torch's default dtype), as torch promotes them."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}: expected a tensor, got {type(input).__name__}")
    kind = input.dtype.numpy.kind
    if kind in "biu":
        return pw.cast(input, numpy.float32)
    if kind == "c" and real:
        raise TypeError(f"{name} expects a real input tensor, but got {input.dtype}")
    if input.dtype.numpy.itemsize < 4 or str(input.dtype).endswith("bfloat16"):
        raise TypeError(f"{name}: unsupported dtype {input.dtype} (float32 and float64, or "
                        "complex64 and complex128)")
    return input


def _one(input: Tensor, n: int | None, dim: int) -> tuple[tuple[int], tuple[int]]:
    d = wrap_dim(operator.index(dim), input.ndim)
    return (d,), (_points(input.shape[d] if n is None else n),)


def _many(input: Tensor, s: Sequence[int] | None, dim: Dims, name: str
          ) -> tuple[tuple[int, ...], list[int | None]]:
    """torch's ``fftn`` arguments: the dims (``dim``; else the last ``len(s)``; else all)
    and the sizes asked for along them (None or -1: the input's)."""
    if dim is not None:
        dims = [dim] if isinstance(dim, int) else list(dim)
        dims = [wrap_dim(operator.index(d), input.ndim) for d in dims]
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"{name}: FFT dims must be unique, got {dims}")
    if s is not None:
        s = [operator.index(n) for n in ([s] if isinstance(s, int) else s)]
        if dim is None:
            if len(s) > input.ndim:
                raise RuntimeError(f"{name}: got shape with {len(s)} values but input tensor "
                                   f"only has {input.ndim} dimensions.")
            dims = list(range(input.ndim - len(s), input.ndim))
        elif len(s) != len(dims):
            raise RuntimeError(f"{name}: when given, dim and shape arguments must have the "
                               f"same length, got {len(dims)} and {len(s)}")
        return tuple(dims), [None if n == -1 else n for n in s]
    if dim is None:
        dims = list(range(input.ndim))
    return tuple(dims), [None] * len(dims)


def _sizes(input: Tensor, dims: Sequence[int], asked: Sequence[int | None]) -> tuple[int, ...]:
    return tuple(_points(input.shape[d] if n is None else n) for d, n in zip(dims, asked))


def _half_sizes(input: Tensor, dims: Sequence[int], asked: Sequence[int | None]
                ) -> tuple[int, ...]:
    """Output sizes of an inverse real transform: the last defaults to ``2 * (m - 1)``."""
    if not dims:
        raise RuntimeError("irfftn must transform at least one axis")
    last = asked[-1]
    out = _sizes(input, dims[:-1], asked[:-1])
    return (*out, _points(2 * (input.shape[dims[-1]] - 1) if last is None else last))


def _out(result: Tensor, out: Tensor | None) -> Tensor:
    if out is None:
        return result
    out.copy_(result)
    return out


# -- one dim ---------------------------------------------------------------------------------------
def fft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
        out: Tensor | None = None) -> Tensor:
    """The 1-D discrete Fourier transform along ``dim`` (torch's ``fft.fft``).

    Args:
        input: a tensor (real inputs are transformed as complex).
        n: the signal length: ``dim`` is cut or padded with zeros to it first.
        dim: the dim to transform.
        norm: "backward" (no scaling), "ortho" (``1/sqrt(n)``) or "forward" (``1/n``).
        out: a tensor to write the result into.

    Returns:
        A complex tensor. Split along ``dim`` (``S(dim)``), it moves to a split of another
        dim of the array (one all-to-all); a 1-D array stays ``S(0)`` (a six-step FFT).

    Examples:
        >>> flow.fft.fft(flow.tensor([0.0, 1.0]), n=4).tolist()
        [(1+0j), -1j, (-1+0j), 1j]
    """
    input = _float(input, "fft", real=False)
    dims, sizes = _one(input, n, dim)
    return _out(c2c(input, dims, sizes, _norm(norm), True), out)


def ifft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
         out: Tensor | None = None) -> Tensor:
    """The inverse of :func:`fft` (``norm="backward"`` scales by ``1/n``).

    Examples:
        >>> flow.fft.ifft(flow.tensor([4.0, 0.0])).tolist()
        [(2+0j), (2+0j)]
    """
    input = _float(input, "ifft", real=False)
    dims, sizes = _one(input, n, dim)
    return _out(c2c(input, dims, sizes, _norm(norm), False), out)


def rfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
         out: Tensor | None = None) -> Tensor:
    """The FFT of a real input, its ``n // 2 + 1`` non-negative frequencies (the others are
    their conjugates).

    Split along ``dim``, the half spectrum is split as a 1-D array would be: along another
    dim after one all-to-all, or (1-D) along ``dim`` itself, balanced over ``n // 2 + 1``.

    Examples:
        >>> flow.fft.rfft(flow.tensor([1.0, 2.0, 3.0, 4.0])).tolist()
        [(10+0j), (-2+2j), (-2+0j)]
    """
    input = _float(input, "rfft", real=True)
    dims, sizes = _one(input, n, dim)
    return _out(r2c(input, dims, sizes, _norm(norm), True), out)


def irfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
          out: Tensor | None = None) -> Tensor:
    """The inverse of :func:`rfft`: ``n`` (default ``2 * (m - 1)``) real values from the
    non-negative frequencies (the imaginary parts of the zero and Nyquist ones are ignored).

    Examples:
        >>> flow.fft.irfft(flow.tensor([10.0, -2 + 2j, -2.0]), n=4).tolist()
        [1.0, 2.0, 3.0, 4.0]
    """
    input = _float(input, "irfft", real=False)
    d = wrap_dim(operator.index(dim), input.ndim)
    size = _points(2 * (input.shape[d] - 1) if n is None else n)
    return _out(c2r(input, (d,), (size,), _norm(norm), False), out)


def hfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
         out: Tensor | None = None) -> Tensor:
    """The FFT of a Hermitian-symmetric signal given by its first half: ``n`` (default
    ``2 * (m - 1)``) real values; ``norm="backward"`` does not scale.

    Examples:
        >>> flow.fft.hfft(flow.tensor([1.0, 2.0, 3.0])).tolist()
        [8.0, -2.0, 0.0, -2.0]
    """
    input = _float(input, "hfft", real=False)
    d = wrap_dim(operator.index(dim), input.ndim)
    size = _points(2 * (input.shape[d] - 1) if n is None else n)
    return _out(c2r(input, (d,), (size,), _norm(norm), True), out)


def ihfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
          out: Tensor | None = None) -> Tensor:
    """The inverse of :func:`hfft`: the ``n // 2 + 1`` first values of the inverse FFT of a
    real signal.

    Examples:
        >>> y = flow.fft.ihfft(flow.tensor([8.0, -2.0, 0.0, -2.0]))
        >>> y.dtype, bool(numpy.allclose(y.numpy(), [1, 2, 3]))
        (mpiflow.complex64, True)
    """
    input = _float(input, "ihfft", real=True)
    dims, sizes = _one(input, n, dim)
    return _out(r2c(input, dims, sizes, _norm(norm), False), out)


# -- several dims ----------------------------------------------------------------------------------
def fftn(input: Tensor, s: Sequence[int] | None = None, dim: Dims = None,
         norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """The N-D FFT along ``dim`` (default: the last ``len(s)`` dims, else all).

    Args:
        input: a tensor.
        s: signal sizes along the dims (-1: the input's); each dim is cut or padded first.
        dim: the dims to transform (distinct).
        norm: "backward", "ortho" or "forward", over the product of the sizes.
        out: a tensor to write the result into.

    Returns:
        A complex tensor. A split of a transformed dim moves to another transformed dim
        (``S(0)`` -> ``S(1)`` for a matrix, one all-to-all per splitting mesh axis).

    Examples:
        >>> flow.fft.fftn(flow.ones(2, 2)).tolist()
        [[(4+0j), 0j], [0j, 0j]]
    """
    input = _float(input, "fftn", real=False)
    dims, asked = _many(input, s, dim, "fftn")
    return _out(c2c(input, dims, _sizes(input, dims, asked), _norm(norm), True), out)


def ifftn(input: Tensor, s: Sequence[int] | None = None, dim: Dims = None,
          norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """The inverse of :func:`fftn`.

    Examples:
        >>> flow.fft.ifftn(flow.tensor([[4.0, 0.0], [0.0, 0.0]])).tolist()
        [[(1+0j), (1+0j)], [(1+0j), (1+0j)]]
    """
    input = _float(input, "ifftn", real=False)
    dims, asked = _many(input, s, dim, "ifftn")
    return _out(c2c(input, dims, _sizes(input, dims, asked), _norm(norm), False), out)


def rfftn(input: Tensor, s: Sequence[int] | None = None, dim: Dims = None,
          norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """The N-D FFT of a real input: the last of ``dim`` keeps ``s[-1] // 2 + 1``
    frequencies (transformed first), the others all.

    Examples:
        >>> flow.fft.rfftn(flow.ones(2, 4)).shape
        mpiflow.Size([2, 3])
    """
    input = _float(input, "rfftn", real=True)
    dims, asked = _many(input, s, dim, "rfftn")
    if not dims:
        raise RuntimeError("rfftn must transform at least one axis")
    return _out(r2c(input, dims, _sizes(input, dims, asked), _norm(norm), True), out)


def irfftn(input: Tensor, s: Sequence[int] | None = None, dim: Dims = None,
           norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """The inverse of :func:`rfftn`: the last of ``dim`` gives ``s[-1]`` (default
    ``2 * (m - 1)``) real values (transformed last).

    Examples:
        >>> flow.fft.irfftn(flow.fft.rfftn(flow.ones(2, 4))).tolist()
        [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]
    """
    input = _float(input, "irfftn", real=False)
    dims, asked = _many(input, s, dim, "irfftn")
    return _out(c2r(input, dims, _half_sizes(input, dims, asked), _norm(norm), False), out)


def fft2(input: Tensor, s: Sequence[int] | None = None, dim: Dims = (-2, -1),
         norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """:func:`fftn` along the last two dims (``dim``): ``S(0)`` of a matrix gives ``S(1)``.

    Examples:
        >>> flow.fft.fft2(flow.ones(2, 2)).tolist()
        [[(4+0j), 0j], [0j, 0j]]
    """
    return fftn(input, s, dim, norm, out=out)


def ifft2(input: Tensor, s: Sequence[int] | None = None, dim: Dims = (-2, -1),
          norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """:func:`ifftn` along the last two dims: ``S(1)`` of a matrix gives ``S(0)``.

    Examples:
        >>> flow.fft.ifft2(flow.fft.fft2(flow.ones(2, 2))).tolist()
        [[(1+0j), (1+0j)], [(1+0j), (1+0j)]]
    """
    return ifftn(input, s, dim, norm, out=out)


def rfft2(input: Tensor, s: Sequence[int] | None = None, dim: Dims = (-2, -1),
          norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """:func:`rfftn` along the last two dims: ``S(0)`` of a matrix gives the half spectrum
    split along its last dim, ``S(1)``.

    Examples:
        >>> flow.fft.rfft2(flow.ones(2, 2)).tolist()
        [[(4+0j), 0j], [0j, 0j]]
    """
    return rfftn(input, s, dim, norm, out=out)


def irfft2(input: Tensor, s: Sequence[int] | None = None, dim: Dims = (-2, -1),
           norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """:func:`irfftn` along the last two dims: the half spectrum split along its last dim
    (``S(1)``) gives ``S(0)``.

    Examples:
        >>> flow.fft.irfft2(flow.fft.rfft2(flow.ones(2, 2))).tolist()
        [[1.0, 1.0], [1.0, 1.0]]
    """
    return irfftn(input, s, dim, norm, out=out)


# -- helpers -------------------------------------------------------------------------------------
def fftfreq(n: int, d: float = 1.0, *, out: Tensor | None = None, dtype: Any = None,
            layout: Any = None, device: Any = None, requires_grad: bool = False,
            placement: Placement | None = None, sbp: Any = None) -> Tensor:
    """The sample frequencies of an FFT of length ``n`` with sample spacing ``d``:
    ``[0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (d * n)``.

    Args:
        n: the FFT's length.
        d: the sample spacing.
        dtype: a floating dtype (default float32, torch's default).
        placement: with ``sbp``, make a global tensor (each rank computes its own elements).
        sbp: the global tensor's layout.

    Examples:
        >>> flow.fft.fftfreq(4).tolist()
        [0.0, 0.25, -0.5, -0.25]
    """
    n = operator.index(n)
    k = arange(n, placement=placement, sbp=sbp, device=device)
    k = pw.where(pw.ge(k, (n + 1) // 2), pw.sub(k, n), k)
    return _freq(k, n, d, dtype, requires_grad, out)


def rfftfreq(n: int, d: float = 1.0, *, out: Tensor | None = None, dtype: Any = None,
             layout: Any = None, device: Any = None, requires_grad: bool = False,
             placement: Placement | None = None, sbp: Any = None) -> Tensor:
    """The sample frequencies of :func:`rfft` of length ``n``: ``[0, 1, ..., n // 2] /
    (d * n)``.

    Examples:
        >>> flow.fft.rfftfreq(4).tolist()
        [0.0, 0.25, 0.5]
    """
    n = operator.index(n)
    k = arange(n // 2 + 1, placement=placement, sbp=sbp, device=device)
    return _freq(k, n, d, dtype, requires_grad, out)


def _freq(k: Tensor, n: int, d: float, dtype: Any, requires_grad: bool, out: Tensor | None
          ) -> Tensor:
    target = numpy.float32 if dtype is None else as_dtype(dtype).numpy
    if numpy.dtype(target).kind not in "fc":
        raise TypeError(f"fftfreq: a floating dtype, not {dtype}")
    # in float64 first, as torch computes the step
    result = pw.cast(pw.div(pw.cast(k, numpy.float64), float(n) * float(d)), target)
    if requires_grad:
        result = result.requires_grad_()
    return _out(result, out)


def _shift(input: Tensor, dim: Dims, sign: int) -> Tensor:
    dims = list(range(input.ndim)) if dim is None else (
        [dim] if isinstance(dim, int) else list(dim))
    dims = [wrap_dim(operator.index(d), input.ndim) for d in dims]
    if not dims:
        return input
    shifts = [input.shape[d] // 2 if sign > 0 else (input.shape[d] + 1) // 2 for d in dims]
    return roll(input, shifts, dims)


def fftshift(input: Tensor, dim: Dims = None) -> Tensor:
    """The zero frequency moved to the middle: ``input`` rolled by ``n // 2`` along ``dim``
    (default all). Along a split dim each rank fetches its rotated range (one all-to-all).

    Examples:
        >>> flow.fft.fftshift(flow.fft.fftfreq(4)).tolist()
        [-0.5, -0.25, 0.0, 0.25]
    """
    return _shift(input, dim, 1)


def ifftshift(input: Tensor, dim: Dims = None) -> Tensor:
    """The inverse of :func:`fftshift` (rolled by ``(n + 1) // 2``).

    Examples:
        >>> flow.fft.ifftshift(flow.fft.fftshift(flow.fft.fftfreq(5))).tolist() == \\
        ...     flow.fft.fftfreq(5).tolist()
        True
    """
    return _shift(input, dim, -1)

