# mypy: disable-error-code="empty-body"
"""Typed declarations of the methods bound to Tensor by other modules; generated.

``python -m mpiflow._declare`` writes this module from the bind tables (a test fails when it is
stale). ``Tensor`` derives from :class:`BoundMethods` for type checkers only; at run time the
methods are attached by :func:`mpiflow.tensors.tensor.bind` and this module is not imported.
The bodies are docstrings only (hence the empty-body switch above).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import builtins
    from collections.abc import Sequence
    from typing import Any, Self

    from numpy import ndarray as _ndarray

    from mpiflow.layouts.placement import Placement

__all__ = ["BoundMethods"]


class BoundMethods:
    """The methods bound to Tensor by the layers above it, declared."""

    # mpiflow.array_api.array_object
    def __array_namespace__(self, /, *, api_version: str | None = None) -> Any:
        """The array API namespace of mpiflow's tensors, :mod:`mpiflow.array_api` (local and global
        tensors alike)."""
    def to_device(self, device: Any, /, *, stream: Any = None) -> Self:
        """This array on ``device``: "cpu"/"cuda" change the memory kind (the layout kept); a
        placement, or a global array's ``.device``, lays the value out there by the default rule (a
        local array: each rank keeps its part of it); a local array's ``.device`` gives a global
        array's whole value on every rank (collective). The array itself where it is there
        already."""

    # mpiflow.autograd.graph
    def backward(self, gradient: Self | None = None, retain_graph: builtins.bool = False) -> None:
        """Compute the gradients of ``tensor`` with respect to every leaf that requires grad."""

    # mpiflow.ops.deterministic_sum
    def nansum(self, dim: Any = None, keepdim: builtins.bool = False, *, dtype: Any = None) -> Self:
        """The sum over ``dim`` (all by default) with NaNs counted as zeros."""
    def vdot(self, other: Self) -> Self:
        """The dot product of two 1-D tensors, conjugating the first (as ``torch.vdot``)."""

    # mpiflow.ops.diagonals
    def diagonal(self, offset: builtins.int = 0, dim1: builtins.int = 0,
                 dim2: builtins.int = 1) -> Self:
        """The ``offset``-th diagonal of dims ``dim1`` and ``dim2`` (torch's ``diagonal``)."""
    def trace(self) -> Self:
        """The sum of the main diagonal of a matrix (torch's ``trace``)."""

    # mpiflow.ops.gathers
    def take_along_dim(self, indices: Self, dim: builtins.int | None = None) -> Self:
        """Values of ``input`` at ``indices`` along ``dim`` (torch's ``take_along_dim``)."""

    # mpiflow.ops.histograms
    def bincount(self, weights: Self | None = None, minlength: builtins.int = 0) -> Self:
        """How many times each non-negative integer occurs in ``input`` (summing ``weights``)."""
    def count_nonzero(self, dim: Any = None) -> Self:
        """How many elements are not zero, over ``dim`` (an int, a tuple, or None for all)."""
    def histc(self, bins: builtins.int = 100, min: builtins.float = 0,
              max: builtins.float = 0) -> Self:
        """A histogram of ``bins`` equal bins between ``min`` and ``max`` (torch's ``histc``)."""
    def histogram(self, bins: Any, *, range: tuple[builtins.float, builtins.float] | None = None,
                  weight: Self | None = None, density: builtins.bool = False) -> Any:
        """A histogram of ``input`` (torch's ``histogram``)."""

    # mpiflow.ops.indexing
    def __getitem__(self, index: Any) -> Self:
        """``input[index]``, numpy's indexing (``Tensor.__getitem__``)."""
    def __setitem__(self, index: Any, value: Any) -> None:
        """``target[index] = value`` in place (``Tensor.__setitem__``), numpy's semantics."""

    # mpiflow.ops.join
    def chunk(self, chunks: builtins.int, dim: builtins.int = 0) -> tuple[Self, ...]:
        """``input`` cut along ``dim`` into at most ``chunks`` pieces of ``ceil(n / chunks)`` (the
        last may be smaller, and fewer pieces may come back), as ``torch.chunk``."""
    def split(self, split_size_or_sections: builtins.int | Sequence[builtins.int],
              dim: builtins.int = 0) -> tuple[Self, ...]:
        """``tensor`` cut along ``dim`` into pieces of one size (the last may be smaller) or of the
        given sizes, as ``torch.split``."""

    # mpiflow.ops.linalg
    def __matmul__(self, other: Self) -> Self:
        """The matrix product with numpy/PyTorch semantics (1-D operands, broadcast batches)."""
    def __rmatmul__(self, other: Any) -> Self:
        """``other @ self`` for an ``other`` that is not a Tensor (a nested list, an array)."""
    def bmm(self, mat2: Self) -> Self:
        """Batched products ``(b, n, k) @ (b, k, m)``; batch sizes must be equal."""
    def dot(self, other: Self) -> Self:
        """The dot product of two 1-D tensors of the same length (a 0-d tensor)."""
    def matmul(self, other: Self) -> Self:
        """The matrix product with numpy/PyTorch semantics (1-D operands, broadcast batches)."""
    def mm(self, mat2: Self) -> Self:
        """The product of two matrices ``(n, k) @ (k, m)`` (no broadcasting)."""
    def mv(self, vec: Self) -> Self:
        """The product of a matrix ``(n, k)`` and a vector ``(k,)``: a vector ``(n,)``."""
    def norm(self, p: Any = "fro", dim: builtins.int | Sequence[builtins.int] | None = None,
             keepdim: builtins.bool = False, *, dtype: Any = None) -> Self:
        """The vector ``p``-norm over ``dim`` (all by default); ``"fro"``/2 is the Frobenius
        norm."""
    def outer(self, vec2: Self) -> Self:
        """The outer product of two vectors ``(n,)`` and ``(m,)``: ``(n, m)``."""

    # mpiflow.ops.methods
    def __iadd__(self, other: Any) -> Self:
        """``self = add(self, other)`` in place; returns self."""
    def __imul__(self, other: Any) -> Self:
        """``self = mul(self, other)`` in place; returns self."""
    def __invert__(self) -> Self:
        """``~self``: logical not of a bool tensor, bitwise not of an integer one."""
    def __ipow__(self, other: Any) -> Self:
        """``self = pow(self, other)`` in place; returns self."""
    def __isub__(self, other: Any) -> Self:
        """``self = sub(self, other)`` in place; returns self."""
    def __itruediv__(self, other: Any) -> Self:
        """``self = div(self, other)`` in place; returns self."""
    def __pos__(self) -> Self:
        """``+self``: self."""
    def __radd__(self, other: Any) -> Self:
        """``add(other, self)``: the reflected operator."""
    def __rand__(self, other: Any) -> Self:
        """``bitwise_and(other, self)``: the reflected operator."""
    def __rfloordiv__(self, other: Any) -> Self:
        """``floor_divide(other, self)``: the reflected operator."""
    def __rmod__(self, other: Any) -> Self:
        """``remainder(other, self)``: the reflected operator."""
    def __rmul__(self, other: Any) -> Self:
        """``mul(other, self)``: the reflected operator."""
    def __ror__(self, other: Any) -> Self:
        """``bitwise_or(other, self)``: the reflected operator."""
    def __rpow__(self, other: Any) -> Self:
        """``pow(other, self)``: the reflected operator."""
    def __rsub__(self, other: Any) -> Self:
        """``sub(other, self)``: the reflected operator."""
    def __rtruediv__(self, other: Any) -> Self:
        """``div(other, self)``: the reflected operator."""
    def __rxor__(self, other: Any) -> Self:
        """``bitwise_xor(other, self)``: the reflected operator."""
    def add_(self, other: Any, **kwargs: Any) -> Self:
        """``self = add(self, other, alpha=...)`` in place; returns self."""
    def clamp_(self, min: Any = None, max: Any = None) -> Self:
        """Clamp in place to ``[min, max]``; returns self."""
    def div_(self, other: Any) -> Self:
        """``self = div(self, other)`` in place; returns self."""
    def mul_(self, other: Any) -> Self:
        """``self = mul(self, other)`` in place; returns self."""
    def sub_(self, other: Any, **kwargs: Any) -> Self:
        """``self = sub(self, other, alpha=...)`` in place; returns self."""

    # mpiflow.ops.moments
    def corrcoef(self) -> Self:
        """The Pearson correlation coefficients of the variables (rows) of ``input`` (torch's
        ``corrcoef``): ``cov`` divided by the outer product of the deviations, clipped to ``[-1,
        1]``."""
    def cov(self, *, correction: builtins.int = 1, fweights: Self | None = None,
            aweights: Self | None = None) -> Self:
        """The covariance matrix of the variables (rows) of ``input`` over its observations
        (columns), torch's ``cov``."""

    # mpiflow.ops.pointwise
    def __abs__(self) -> Self:
        """Elementwise ``abs``."""
    def __add__(self, other: Any) -> Self:
        """Elementwise ``add`` of two tensors (or a tensor and a number), broadcasting."""
    def __and__(self, other: Any) -> Self:
        """Elementwise ``bitwise_and`` of two tensors (or a tensor and a number), broadcasting."""
    def __eq__(self, other: Any) -> Self:  # type: ignore[override]
        """Elementwise ``eq`` of two tensors (or a tensor and a number), broadcasting."""
    def __floordiv__(self, other: Any) -> Self:
        """Elementwise ``floor_divide`` of two tensors (or a tensor and a number), broadcasting."""
    def __ge__(self, other: Any) -> Self:
        """Elementwise ``ge`` of two tensors (or a tensor and a number), broadcasting."""
    def __gt__(self, other: Any) -> Self:
        """Elementwise ``gt`` of two tensors (or a tensor and a number), broadcasting."""
    def __le__(self, other: Any) -> Self:
        """Elementwise ``le`` of two tensors (or a tensor and a number), broadcasting."""
    def __lt__(self, other: Any) -> Self:
        """Elementwise ``lt`` of two tensors (or a tensor and a number), broadcasting."""
    def __mod__(self, other: Any) -> Self:
        """Elementwise ``remainder`` of two tensors (or a tensor and a number), broadcasting."""
    def __mul__(self, other: Any) -> Self:
        """Elementwise ``mul`` of two tensors (or a tensor and a number), broadcasting."""
    def __ne__(self, other: Any) -> Self:  # type: ignore[override]
        """Elementwise ``ne`` of two tensors (or a tensor and a number), broadcasting."""
    def __neg__(self) -> Self:
        """Elementwise ``neg``."""
    def __or__(self, other: Any) -> Self:
        """Elementwise ``bitwise_or`` of two tensors (or a tensor and a number), broadcasting."""
    def __pow__(self, other: Any) -> Self:
        """Elementwise ``pow`` of two tensors (or a tensor and a number), broadcasting."""
    def __sub__(self, other: Any) -> Self:
        """Elementwise ``sub`` of two tensors (or a tensor and a number), broadcasting."""
    def __truediv__(self, other: Any) -> Self:
        """Elementwise ``div`` of two tensors (or a tensor and a number), broadcasting."""
    def __xor__(self, other: Any) -> Self:
        """Elementwise ``bitwise_xor`` of two tensors (or a tensor and a number), broadcasting."""
    def abs(self) -> Self:
        """Elementwise ``abs``."""
    def add(self, other: Any, *, alpha: Any = 1) -> Self:
        """``input + alpha * other``, elementwise, broadcasting (tensors or numbers)."""
    def atan2(self, other: Any) -> Self:
        """Elementwise ``atan2`` of two tensors (or a tensor and a number), broadcasting."""
    def bitwise_and(self, other: Any) -> Self:
        """Elementwise ``bitwise_and`` of two tensors (or a tensor and a number), broadcasting."""
    def bitwise_not(self) -> Self:
        """Elementwise ``bitwise_not``."""
    def bitwise_or(self, other: Any) -> Self:
        """Elementwise ``bitwise_or`` of two tensors (or a tensor and a number), broadcasting."""
    def bitwise_xor(self, other: Any) -> Self:
        """Elementwise ``bitwise_xor`` of two tensors (or a tensor and a number), broadcasting."""
    def ceil(self) -> Self:
        """Elementwise ``ceil``."""
    def clamp(self, min: Any = None, max: Any = None) -> Self:
        """Limit ``input`` to ``[min, max]`` (either bound may be None, a number or a tensor,
        broadcasting); where ``min > max`` the result is ``max``, as in PyTorch."""
    def clip(self, min: Any = None, max: Any = None) -> Self:
        """Limit ``input`` to ``[min, max]`` (either bound may be None, a number or a tensor,
        broadcasting); where ``min > max`` the result is ``max``, as in PyTorch."""
    def clone(self) -> Self:
        """A copy of ``input`` with its own memory and the same layout."""
    def copy_(self, value: Any) -> Self:
        """Write ``value`` (tensor or number, broadcast to ``target``'s shape) into ``target``."""
    def cos(self) -> Self:
        """Elementwise ``cos``."""
    def div(self, other: Any) -> Self:
        """Elementwise ``div`` of two tensors (or a tensor and a number), broadcasting."""
    def divide(self, other: Any) -> Self:
        """Elementwise ``div`` of two tensors (or a tensor and a number), broadcasting."""
    def eq(self, other: Any) -> Self:
        """Elementwise ``eq`` of two tensors (or a tensor and a number), broadcasting."""
    def erf(self) -> Self:
        """Elementwise ``erf``."""
    def exp(self) -> Self:
        """Elementwise ``exp``."""
    def expand(self, *size: Any) -> Self:
        """``input`` broadcast to ``size`` (-1 keeps a dimension), as a new tensor."""
    def expm1(self) -> Self:
        """Elementwise ``expm1``."""
    def fill_(self, value: Any) -> Self:
        """Set every element of ``target`` to the number ``value``."""
    def floor(self) -> Self:
        """Elementwise ``floor``."""
    def floor_divide(self, other: Any) -> Self:
        """Elementwise ``floor_divide`` of two tensors (or a tensor and a number), broadcasting."""
    def ge(self, other: Any) -> Self:
        """Elementwise ``ge`` of two tensors (or a tensor and a number), broadcasting."""
    def gelu(self) -> Self:
        """Elementwise ``gelu``."""
    def gt(self, other: Any) -> Self:
        """Elementwise ``gt`` of two tensors (or a tensor and a number), broadcasting."""
    def isfinite(self) -> Self:
        """Elementwise ``isfinite``."""
    def isinf(self) -> Self:
        """Elementwise ``isinf``."""
    def isnan(self) -> Self:
        """Elementwise ``isnan``."""
    def le(self, other: Any) -> Self:
        """Elementwise ``le`` of two tensors (or a tensor and a number), broadcasting."""
    def log(self) -> Self:
        """Elementwise ``log``."""
    def log1p(self) -> Self:
        """Elementwise ``log1p``."""
    def log2(self) -> Self:
        """Elementwise ``log2``."""
    def logical_and(self, other: Any) -> Self:
        """Elementwise ``logical_and`` of two tensors (or a tensor and a number), broadcasting."""
    def logical_not(self) -> Self:
        """Elementwise ``logical_not``."""
    def logical_or(self, other: Any) -> Self:
        """Elementwise ``logical_or`` of two tensors (or a tensor and a number), broadcasting."""
    def logical_xor(self, other: Any) -> Self:
        """Elementwise ``logical_xor`` of two tensors (or a tensor and a number), broadcasting."""
    def lt(self, other: Any) -> Self:
        """Elementwise ``lt`` of two tensors (or a tensor and a number), broadcasting."""
    def maximum(self, other: Any) -> Self:
        """Elementwise ``maximum`` of two tensors (or a tensor and a number), broadcasting."""
    def minimum(self, other: Any) -> Self:
        """Elementwise ``minimum`` of two tensors (or a tensor and a number), broadcasting."""
    def mul(self, other: Any) -> Self:
        """Elementwise ``mul`` of two tensors (or a tensor and a number), broadcasting."""
    def multiply(self, other: Any) -> Self:
        """Elementwise ``mul`` of two tensors (or a tensor and a number), broadcasting."""
    def ne(self, other: Any) -> Self:
        """Elementwise ``ne`` of two tensors (or a tensor and a number), broadcasting."""
    def neg(self) -> Self:
        """Elementwise ``neg``."""
    def negative(self) -> Self:
        """Elementwise ``neg``."""
    def pow(self, other: Any) -> Self:
        """Elementwise ``pow`` of two tensors (or a tensor and a number), broadcasting."""
    def reciprocal(self) -> Self:
        """Elementwise ``reciprocal``."""
    def relu(self) -> Self:
        """Elementwise ``relu``."""
    def remainder(self, other: Any) -> Self:
        """Elementwise ``remainder`` of two tensors (or a tensor and a number), broadcasting."""
    def round(self) -> Self:
        """Elementwise ``round``."""
    def rsqrt(self) -> Self:
        """Elementwise ``rsqrt``."""
    def sigmoid(self) -> Self:
        """Elementwise ``sigmoid``."""
    def sign(self) -> Self:
        """Elementwise ``sign``."""
    def sin(self) -> Self:
        """Elementwise ``sin``."""
    def sqrt(self) -> Self:
        """Elementwise ``sqrt``."""
    def square(self) -> Self:
        """Elementwise ``square``."""
    def sub(self, other: Any, *, alpha: Any = 1) -> Self:
        """``input - alpha * other``, elementwise, broadcasting (tensors or numbers)."""
    def subtract(self, other: Any, *, alpha: Any = 1) -> Self:
        """``input - alpha * other``, elementwise, broadcasting (tensors or numbers)."""
    def tanh(self) -> Self:
        """Elementwise ``tanh``."""
    def to(self, *args: Any, **kwargs: Any) -> Self:
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)`` or ``to(other_tensor)``."""
    def true_divide(self, other: Any) -> Self:
        """Elementwise ``div`` of two tensors (or a tensor and a number), broadcasting."""
    def where(self, input: Any, other: Any) -> Self:
        """``input`` where ``condition`` holds, else ``other`` (broadcasting)."""
    def zero_(self) -> Self:
        """Set every element of ``target`` to zero."""

    # mpiflow.ops.pointwise_more
    def __iand__(self, other: Any) -> Self:
        """``self = bitwise_and(self, other)`` in place (in self's dtype)."""
    def __ifloordiv__(self, other: Any) -> Self:
        """``self = floor_divide(self, other)`` in place (in self's dtype)."""
    def __ilshift__(self, other: Any) -> Self:
        """``self = bitwise_left_shift(self, other)`` in place (in self's dtype)."""
    def __imod__(self, other: Any) -> Self:
        """``self = remainder(self, other)`` in place (in self's dtype)."""
    def __ior__(self, other: Any) -> Self:
        """``self = bitwise_or(self, other)`` in place (in self's dtype)."""
    def __irshift__(self, other: Any) -> Self:
        """``self = bitwise_right_shift(self, other)`` in place (in self's dtype)."""
    def __ixor__(self, other: Any) -> Self:
        """``self = bitwise_xor(self, other)`` in place (in self's dtype)."""
    def __lshift__(self, other: Any) -> Self:
        """``input << other`` for integers."""
    def __rlshift__(self, other: Any) -> Self:
        """``other << self``: the reflected operator."""
    def __rrshift__(self, other: Any) -> Self:
        """``other >> self``: the reflected operator."""
    def __rshift__(self, other: Any) -> Self:
        """``input >> other`` for integers (arithmetic for signed ones)."""
    def acos(self) -> Self:
        """Elementwise arc cosine (radians); integers give float32."""
    def acosh(self) -> Self:
        """Elementwise inverse hyperbolic cosine."""
    def allclose(self, other: Any, rtol: builtins.float = 1e-05, atol: builtins.float = 1e-08,
                 equal_nan: builtins.bool = False) -> builtins.bool:
        """Whether :func:`isclose` holds everywhere: a Python bool."""
    def angle(self) -> Self:
        """The argument of complex values; 0 or pi for real ones."""
    def arccos(self) -> Self:
        """Elementwise arc cosine (radians); integers give float32."""
    def arccosh(self) -> Self:
        """Elementwise inverse hyperbolic cosine."""
    def arcsin(self) -> Self:
        """Elementwise arc sine (radians)."""
    def arcsinh(self) -> Self:
        """Elementwise inverse hyperbolic sine."""
    def arctan(self) -> Self:
        """Elementwise arc tangent (radians)."""
    def arctanh(self) -> Self:
        """Elementwise inverse hyperbolic tangent."""
    def asin(self) -> Self:
        """Elementwise arc sine (radians)."""
    def asinh(self) -> Self:
        """Elementwise inverse hyperbolic sine."""
    def atan(self) -> Self:
        """Elementwise arc tangent (radians)."""
    def atanh(self) -> Self:
        """Elementwise inverse hyperbolic tangent."""
    def bitwise_left_shift(self, other: Any) -> Self:
        """``input << other`` for integers."""
    def bitwise_right_shift(self, other: Any) -> Self:
        """``input >> other`` for integers (arithmetic for signed ones)."""
    def clamp_max(self, max: Any) -> Self:
        """``input`` limited from above by ``max`` (a number or a tensor)."""
    def clamp_min(self, min: Any) -> Self:
        """``input`` limited from below by ``min`` (a number or a tensor)."""
    def conj(self) -> Self:
        """The complex conjugate (a real tensor is returned as it is, as PyTorch's view)."""
    def conj_physical(self) -> Self:
        """The complex conjugate (a real tensor is returned as it is, as PyTorch's view)."""
    def copysign(self, other: Any) -> Self:
        """The magnitude of ``input`` with the sign of ``other``."""
    def cosh(self) -> Self:
        """Elementwise hyperbolic cosine."""
    def exp2(self) -> Self:
        """Elementwise ``2 ** x``."""
    def fix(self) -> Self:
        """Elementwise rounding toward zero (integers are returned as they are, in their dtype)."""
    def float_power(self, other: Any) -> Self:
        """``input ** exponent`` computed in float64 (complex128 for complex operands)."""
    def fmod(self, other: Any) -> Self:
        """C's remainder: the sign of the dividend (``remainder`` has the divisor's)."""
    def hypot(self, other: Any) -> Self:
        """``sqrt(input**2 + other**2)`` elementwise, without overflow."""
    def imag(self) -> Self:
        """The imaginary part (zeros for a real tensor)."""
    def isclose(self, other: Any, rtol: builtins.float = 1e-05, atol: builtins.float = 1e-08,
                equal_nan: builtins.bool = False) -> Self:
        """Whether ``|input - other| <= atol + rtol * |other|``, elementwise (infinities equal
        themselves; NaN equals NaN only with ``equal_nan``)."""
    def isneginf(self) -> Self:
        """Whether each element is negative infinity."""
    def isposinf(self) -> Self:
        """Whether each element is positive infinity."""
    def isreal(self) -> Self:
        """Whether each element has a zero imaginary part."""
    def log10(self) -> Self:
        """Elementwise base-10 logarithm."""
    def logaddexp(self, other: Any) -> Self:
        """``log(exp(input) + exp(other))`` elementwise, stably."""
    def logaddexp2(self, other: Any) -> Self:
        """``log2(2**input + 2**other)`` elementwise, stably."""
    def nan_to_num(self, nan: builtins.float = 0.0, posinf: builtins.float | None = None,
                   neginf: builtins.float | None = None) -> Self:
        """NaN replaced by ``nan``, infinities by ``posinf``/``neginf`` (default: the dtype's
        largest and lowest finite values); integer tensors are returned copied."""
    def nextafter(self, other: Any) -> Self:
        """The next floating-point value after ``input`` toward ``other``."""
    def positive(self) -> Self:
        """``+input``: the tensor itself (PyTorch returns its input)."""
    def real(self) -> Self:
        """The real part (a real tensor's own values, copied)."""
    def signbit(self) -> Self:
        """Whether the sign bit is set (True for -0.0), elementwise."""
    def sinh(self) -> Self:
        """Elementwise hyperbolic sine."""
    def tan(self) -> Self:
        """Elementwise tangent."""
    def trunc(self) -> Self:
        """Elementwise rounding toward zero (integers are returned as they are, in their dtype)."""

    # mpiflow.ops.quantiles
    def nanquantile(self, q: Any, dim: builtins.int | None = None, keepdim: builtins.bool = False,
                    *, interpolation: str = "linear") -> Self:
        """:func:`quantile` of the values that are not NaN (NaN where all are)."""
    def quantile(self, q: Any, dim: builtins.int | None = None, keepdim: builtins.bool = False, *,
                 interpolation: str = "linear") -> Self:
        """The ``q``-th quantiles of ``input`` along ``dim`` (of all elements where None)."""

    # mpiflow.ops.ranking
    def kthvalue(self, k: builtins.int, dim: builtins.int = -1,
                 keepdim: builtins.bool = False) -> Any:
        """The ``k``-th smallest element along ``dim`` (NaN largest) and its index."""
    def median(self, dim: builtins.int | None = None, keepdim: builtins.bool = False) -> Any:
        """The median: the lower of the two middle values (torch's ``median``; NaN if any is
        NaN)."""
    def mode(self, dim: builtins.int = -1, keepdim: builtins.bool = False) -> Any:
        """The most frequent value along ``dim`` (the smallest of those) and the index of its last
        occurrence (torch's ``mode``)."""
    def nanmedian(self, dim: builtins.int | None = None, keepdim: builtins.bool = False) -> Any:
        """:func:`median` of the values that are not NaN (NaN where all are)."""
    def topk(self, k: builtins.int, dim: builtins.int = -1, largest: builtins.bool = True,
             sorted: builtins.bool = True) -> Any:
        """The ``k`` largest (or smallest) elements along ``dim``, in order, and their indices."""

    # mpiflow.ops.reduction
    def all(self, dim: builtins.int | Sequence[builtins.int] | None = None,
            keepdim: builtins.bool = False) -> Self:
        """Whether every element over ``dim`` (all by default) is true (non-zero)."""
    def amax(self, dim: builtins.int | Sequence[builtins.int] | None = None,
             keepdim: builtins.bool = False) -> Self:
        """The largest element over ``dim`` (all by default, as ``dim=()``); NaN propagates."""
    def amin(self, dim: builtins.int | Sequence[builtins.int] | None = None,
             keepdim: builtins.bool = False) -> Self:
        """The smallest element over ``dim`` (all by default); see :func:`amax`."""
    def any(self, dim: builtins.int | Sequence[builtins.int] | None = None,
            keepdim: builtins.bool = False) -> Self:
        """Whether some element over ``dim`` (all by default) is true (non-zero)."""
    def argmax(self, dim: builtins.int | None = None, keepdim: builtins.bool = False) -> Self:
        """The index (int64) of the first largest element along ``dim``, or of the flattened
        input."""
    def argmin(self, dim: builtins.int | None = None, keepdim: builtins.bool = False) -> Self:
        """The index (int64) of the first smallest element along ``dim``."""
    def max(self, dim: Any = None, keepdim: builtins.bool = False) -> Any:
        """``max(x)``: the largest element (0-d); ``max(x, dim, keepdim)``: ``(values,
        indices)``."""
    def mean(self, dim: builtins.int | Sequence[builtins.int] | None = None,
             keepdim: builtins.bool = False, *, dtype: Any = None) -> Self:
        """The mean over ``dim`` (all by default), divided by the logical element count."""
    def min(self, dim: Any = None, keepdim: builtins.bool = False) -> Any:
        """``min(x)``: the smallest element; ``min(x, dim, keepdim)``: ``(values, indices)``."""
    def prod(self, dim: builtins.int | Sequence[builtins.int] | None = None,
             keepdim: builtins.bool = False, *, dtype: Any = None) -> Self:
        """The product of the elements over ``dim`` (all by default); integers give int64."""
    def std(self, dim: builtins.int | Sequence[builtins.int] | None = None,
            unbiased: builtins.bool | None = None, keepdim: builtins.bool = False, *,
            correction: builtins.int | None = None) -> Self:
        """The standard deviation over ``dim``: ``sqrt(var(...))``."""
    def sum(self, dim: builtins.int | Sequence[builtins.int] | None = None,
            keepdim: builtins.bool = False, *, dtype: Any = None) -> Self:
        """The sum of the elements over ``dim`` (all by default); bool and integers give int64."""
    def var(self, dim: builtins.int | Sequence[builtins.int] | None = None,
            unbiased: builtins.bool | None = None, keepdim: builtins.bool = False, *,
            correction: builtins.int | None = None) -> Self:
        """The variance over ``dim``: ``sum((x - mean)**2) / (n - correction)``."""

    # mpiflow.ops.scans
    def cummax(self, dim: builtins.int) -> Any:
        """The running maximum along ``dim`` and where it was reached (torch's ``cummax``)."""
    def cummin(self, dim: builtins.int) -> Any:
        """The running minimum along ``dim`` and where it was reached (torch's ``cummin``; see
        :func:`cummax`)."""
    def cumprod(self, dim: builtins.int, *, dtype: Any = None) -> Self:
        """Running products along ``dim``; bool and integers give int64 unless ``dtype`` is
        given."""
    def cumsum(self, dim: builtins.int, *, dtype: Any = None) -> Self:
        """Running sums along ``dim``; bool and integers give int64 unless ``dtype`` is given."""
    def logcumsumexp(self, dim: builtins.int) -> Self:
        """``log(cumsum(exp(input)))`` along ``dim``, computed without overflow."""

    # mpiflow.ops.selection
    def masked_select(self, mask: Self) -> Self:
        """The elements of ``input`` where ``mask`` is true, as a 1-D tensor (torch's
        ``masked_select``; the two broadcast together)."""
    def nonzero(self, *, as_tuple: builtins.bool = False) -> Any:
        """The indices of the non-zero elements of ``input`` (torch's ``nonzero``)."""

    # mpiflow.ops.sets
    def unique(self, sorted: builtins.bool = True, return_inverse: builtins.bool = False,
               return_counts: builtins.bool = False, dim: builtins.int | None = None) -> Any:
        """The distinct elements of ``input``, ascending (torch's ``unique``, flattened)."""
    def unique_consecutive(self, return_inverse: builtins.bool = False,
                           return_counts: builtins.bool = False,
                           dim: builtins.int | None = None) -> Any:
        """The first element of each run of equal consecutive elements (flattened)."""

    # mpiflow.ops.shape
    @property
    def T(self) -> Self:
        """``input.T``: the dims in reverse order."""
    def contiguous(self) -> Self:
        """``input`` itself: mpiflow tensors have no strides to make contiguous."""
    def flatten(self, start_dim: builtins.int = 0, end_dim: builtins.int = -1) -> Self:
        """``input`` with dims ``start_dim..end_dim`` merged into one."""
    def flip(self, dims: builtins.int | Sequence[builtins.int]) -> Self:
        """``input`` with the order of elements along ``dims`` reversed (a copy, as PyTorch)."""
    def permute(self, *dims: Any) -> Self:
        """``input`` with its dims reordered: output dim ``i`` is input dim ``dims[i]``."""
    def reshape(self, *shape: Any) -> Self:
        """``input`` with a new shape of the same number of elements; one extent may be -1."""
    def squeeze(self, dim: builtins.int | Sequence[builtins.int] | None = None) -> Self:
        """``input`` without its size-1 dims (all of them, or those of ``dim`` that have size 1)."""
    def swapaxes(self, dim0: builtins.int, dim1: builtins.int) -> Self:
        """``input`` with dims ``dim0`` and ``dim1`` swapped."""
    def t(self) -> Self:
        """The transpose of a tensor of at most 2 dims (0-d and 1-d come back as they are)."""
    def transpose(self, dim0: builtins.int, dim1: builtins.int) -> Self:
        """``input`` with dims ``dim0`` and ``dim1`` swapped."""
    def unsqueeze(self, dim: builtins.int) -> Self:
        """``input`` with a new size-1 dim at position ``dim`` (negative: from the end)."""
    def view(self, *shape: Any) -> Self:
        """``input`` with a new shape of the same number of elements; one extent may be -1."""

    # mpiflow.ops.shifts
    def diff(self, n: builtins.int = 1, dim: builtins.int = -1, prepend: Self | None = None,
             append: Self | None = None) -> Self:
        """The ``n``-th forward differences along ``dim`` (torch's ``diff``)."""
    def roll(self, shifts: builtins.int | Sequence[builtins.int],
             dims: builtins.int | Sequence[builtins.int] | None = None) -> Self:
        """``input`` rotated by ``shifts`` along ``dims`` (torch's ``roll``)."""

    # mpiflow.ops.softmax
    def log_softmax(self, dim: builtins.int, dtype: Any = None) -> Self:
        """``x - logsumexp(x)`` along ``dim``, computed stably."""
    def logsumexp(self, dim: builtins.int | Sequence[builtins.int] | None,
                  keepdim: builtins.bool = False) -> Self:
        """``log(sum(exp(x)))`` over ``dim``, computed stably; integers give float32."""
    def softmax(self, dim: builtins.int, dtype: Any = None) -> Self:
        """``exp(x) / sum(exp(x))`` along ``dim``, computed stably (the max is subtracted first)."""

    # mpiflow.ops.sorting
    def argsort(self, dim: builtins.int = -1, descending: builtins.bool = False,
                stable: builtins.bool = False) -> Self:
        """The indices that sort ``input`` along ``dim`` (torch's ``argsort``; see :func:`sort`)."""
    def msort(self) -> Self:
        """``input`` sorted along its first dim (torch's ``msort``)."""
    def sort(self, dim: builtins.int = -1, descending: builtins.bool = False,
             stable: builtins.bool = False) -> tuple[Self, Self]:
        """The values along ``dim`` in order, and their indices (torch's ``sort``)."""

    # mpiflow.tensors.conversion
    def check_meta_consistency(self) -> None:
        """Check that every rank sees the same placement, sbp, shape and dtype of the global ``t``
        (collective over the world: one small all-gather), raising on every rank if not."""
    def numpy(self) -> _ndarray:
        """The whole value as a numpy array (the method ``Tensor.numpy``)."""
    def to_global(self, placement: Placement | None = None, sbp: Any = None, *,
                  grad_sbp: Any = None, check_meta: builtins.bool = True,
                  shape: Any = None) -> Self:
        """Make a global tensor, or redistribute one (collective: every rank calls it)."""
    def to_local(self) -> Self:
        """This rank's shard of a global tensor (empty on a rank outside the placement), sharing its
        memory."""

    # mpiflow.tensors.creation
    def new_empty(self, *size: Any, dtype: Any = None, device: Any = None, placement: Any = None,
                  sbp: Any = None, requires_grad: builtins.bool = False) -> Self:
        """An unset tensor of shape ``size`` with ``t``'s dtype, device and layout
        (``t.new_empty(size)``); ``placement=``/``sbp=`` give another layout."""
    def new_full(self, size: Any, fill_value: Any, *, dtype: Any = None, device: Any = None,
                 placement: Any = None, sbp: Any = None,
                 requires_grad: builtins.bool = False) -> Self:
        """``fill_value`` everywhere, shape ``size``, ``t``'s dtype, device and layout
        (``t.new_full(size, fill_value)``); ``placement=``/``sbp=`` give another layout."""
    def new_ones(self, *size: Any, dtype: Any = None, device: Any = None, placement: Any = None,
                 sbp: Any = None, requires_grad: builtins.bool = False) -> Self:
        """Ones of shape ``size`` with ``t``'s dtype, device and layout (``t.new_ones(size)``);
        ``placement=``/``sbp=`` give another layout."""
    def new_zeros(self, *size: Any, dtype: Any = None, device: Any = None, placement: Any = None,
                  sbp: Any = None, requires_grad: builtins.bool = False) -> Self:
        """Zeros of shape ``size`` with ``t``'s dtype, device and layout (the method
        ``t.new_zeros(size)``); ``placement=``/``sbp=`` give another layout, as OneFlow's."""

    # mpiflow.tensors.random
    def normal_(self, mean: builtins.float = 0.0, std: builtins.float = 1.0, *,
                generator: Any = None) -> Self:
        """Fill ``t`` in place with normal numbers; returns ``t`` (layouts as :func:`uniform_`)."""
    def uniform_(self, a: builtins.float = 0.0, b: builtins.float = 1.0, *,
                 generator: Any = None) -> Self:
        """Fill ``t`` in place with numbers uniform in ``[a, b)``; returns ``t``."""
