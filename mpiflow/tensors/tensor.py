"""The Tensor: an array of an array module, optionally global (a placement and an sbp layout).

A *local* tensor is one array on this process. A *global* tensor is one logical value laid out
over the ranks of a placement: this process holds its shard (``to_local()``), and the logical
``shape`` is the whole value's. Ops on global tensors are SPMD: every rank of the world runs
them, and ranks outside the placement hold empty shards.
"""

from __future__ import annotations

import builtins
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy
from numpy import ndarray as _ndarray

from .. import dtypes as _dtypes
from ..core.array_module import array_module, to_host
from ..layouts.placement import Placement
from ..layouts.sbp import SbpParallel
from .legacy import legacy_data
from .size import Size

__all__ = ["Size", "Tensor", "bind", "bound_methods", "to_host"]


class Tensor:
    """A local or global tensor.

    Build one with :func:`mpiflow.tensor`, :func:`mpiflow.from_numpy` or a creation function;
    ``Tensor(array)`` wraps an array without copying. OneFlow's legacy constructor works too:
    ``Tensor(list)`` (float32 values), ``Tensor(*sizes)`` or ``Tensor(Size)`` (float32 zeros)
    and ``Tensor(tensor)`` (a float32 copy), each with optional ``placement=``/``sbp=``
    (global), ``device=`` and ``dtype=``.

    Examples:
        >>> import mpiflow as flow
        >>> x = flow.tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> (x * 2).sum().item()
        20.0
        >>> flow.Tensor(2, 3).shape, flow.Tensor([1, 2]).dtype
        (mpiflow.Size([2, 3]), mpiflow.float32)
    """

    __slots__ = ("__weakref__", "_base", "_data", "_hooks", "_placement", "_post_hooks", "_sbp",
                 "_shape", "_vc", "grad", "grad_fn", "requires_grad")
    __array_priority__ = 1000  # numpy scalars and arrays defer to Tensor's operators

    def __init__(self, data: Any, placement: Placement | None = None,
                 sbp: tuple[SbpParallel, ...] | None = None,
                 shape: Sequence[int] | None = None, /, *sizes: builtins.int,
                 requires_grad: bool = False, **legacy: Any) -> None:
        # mpiflow's own form takes its arguments by position; OneFlow's legacy constructor
        # (flow.Tensor([1, 2]), flow.Tensor(2, 3, placement=p, sbp=B)) by its shape.
        if legacy or data.__class__ in _LEGACY:
            data, placement, sbp, shape = legacy_data(Tensor, data, (placement, sbp, shape, *sizes),
                                                      legacy)
        self._data = data
        self._placement = placement
        self._sbp = sbp
        # Array shapes are tuples of ints already: skip Size's per-dim conversion for them.
        if shape is None:
            self._shape = tuple.__new__(Size, data.shape)
        elif type(shape) is Size:
            self._shape = shape
        else:
            self._shape = Size(shape)
        # The version counter, shared with views and detached aliases of the same memory, so
        # that autograd notices an in-place change made through any of them.
        self._vc = [0]
        self._base: Tensor | None = None
        self._hooks: list[Any] | None = None
        self._post_hooks: list[Any] | None = None
        self.requires_grad = requires_grad
        self.grad: Tensor | None = None
        self.grad_fn: Any = None

    @property
    def _version(self) -> builtins.int:
        return self._vc[0]

    @_version.setter
    def _version(self, value: builtins.int) -> None:
        self._vc[0] = value

    def _alias_of(self, base: Tensor) -> Tensor:
        """Mark this tensor as a view of ``base``'s memory: one version counter for both."""
        self._vc = base._vc
        self._base = base if base._base is None else base._base
        return self

    # -- what it is ------------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        """The logical shape (of the whole value, for a global tensor)."""
        return self._shape

    def size(self, dim: int | None = None) -> Any:
        """The shape, or its extent along ``dim``."""
        return self._shape if dim is None else self._shape[dim]

    @property
    def dtype(self) -> _dtypes.DType:
        return _dtypes.as_dtype(self._data.dtype)

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def dim(self) -> int:
        return len(self._shape)

    def numel(self) -> int:
        """The number of elements of the logical value."""
        return self._shape.numel()

    def element_size(self) -> int:
        return int(self._data.dtype.itemsize)

    @property
    def is_global(self) -> bool:
        return self._placement is not None

    @property
    def is_local(self) -> bool:
        return self._placement is None

    @property
    def placement(self) -> Placement:
        """The placement of a global tensor (an error on a local one)."""
        if self._placement is None:
            raise RuntimeError("a local tensor has no placement; use to_global() first")
        return self._placement

    @property
    def sbp(self) -> tuple[SbpParallel, ...]:
        """The layout of a global tensor, one entry per mesh axis (an error on a local one)."""
        if self._sbp is None:
            raise RuntimeError("a local tensor has no sbp; use to_global() first")
        return self._sbp

    @property
    def device(self) -> str:
        if self._placement is not None:
            return self._placement.type
        return "cpu" if array_module(self._data) is numpy else "cuda"

    @property
    def is_cuda(self) -> bool:
        return self.device == "cuda"

    @property
    def data(self) -> Tensor:
        """This tensor's value without its autograd history (shares memory).

        Assigning another tensor (``x.data = y``) makes this same object hold ``y``'s data,
        shape and layout (local or global), outside autograd.
        """
        return self.detach()

    @data.setter
    def data(self, value: Tensor) -> None:
        if not isinstance(value, Tensor):
            raise TypeError(f"data must be a Tensor, got {type(value).__name__}")
        self._data, self._placement, self._sbp = value._data, value._placement, value._sbp
        self._shape = value._shape
        self._version += 1

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    # -- autograd --------------------------------------------------------------------------
    def requires_grad_(self, requires_grad: builtins.bool = True) -> Tensor:
        """Set ``requires_grad`` in place (leaves only) and return self."""
        if not requires_grad and self.grad_fn is not None:
            raise RuntimeError("requires_grad can only be turned off on leaf tensors; use "
                               "detach()")
        self.requires_grad = requires_grad
        return self

    def register_hook(self, hook: Any) -> Any:
        """Call ``hook(grad)`` when this tensor's gradient is computed; it may return a
        replacement. Returns a handle with ``remove()``."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require grad")
        if self._hooks is None:
            self._hooks = []
        return _Handle(self._hooks, hook)

    def retain_grad(self) -> None:
        """Keep this non-leaf tensor's gradient in ``.grad`` after backward (leaves always
        keep theirs). Gradients of several backward passes add up, as for leaves. A global
        tensor's retained gradient has the tensor's own placement and sbp, as in OneFlow.

        Examples:
            >>> x = flow.tensor([1.0, 2.0], requires_grad=True)
            >>> y = x * 3
            >>> y.retain_grad()
            >>> y.sum().backward()
            >>> y.grad
            tensor([1., 1.])
        """
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is None or self.retains_grad:
            return
        ref = weakref.ref(self)  # the hook lives in self._hooks: no cycle through it

        def keep(grad: Tensor) -> None:
            t = ref()
            if t is not None:
                grad = grad.detach()
                if t._placement is not None and (grad._placement != t._placement
                                                 or grad._sbp != t._sbp):
                    grad = grad.to_global(t._placement, t._sbp)  # the tensor's own layout
                t.grad = grad.clone() if t.grad is None else t.grad + grad

        keep.retains_grad = True  # type: ignore[attr-defined]
        self.register_hook(keep)

    @property
    def retains_grad(self) -> builtins.bool:
        """Whether :meth:`retain_grad` was called on this non-leaf tensor."""
        return any(getattr(h, "retains_grad", False) for h in self._hooks or ())

    def register_post_accumulate_grad_hook(self, hook: Any) -> Any:
        """Call ``hook(tensor)`` after a gradient has been accumulated into this leaf's
        ``.grad``. Returns a handle with ``remove()``."""
        if self.grad_fn is not None:
            raise RuntimeError("post-accumulate-grad hooks can only be registered on leaves")
        if self._post_hooks is None:
            self._post_hooks = []
        return _Handle(self._post_hooks, hook)

    # -- conversions (numpy, to_global, to_local, to, clone: bound by _layout and ops) ------
    def __array__(self, dtype: Any = None, copy: Any = None) -> _ndarray:
        value = self.numpy()
        return value if dtype is None else value.astype(dtype, copy=False)

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self._local_for("__dlpack__").__dlpack__(**kwargs)

    def __dlpack_device__(self) -> Any:
        return self._local_for("__dlpack_device__").__dlpack_device__()

    def item(self) -> Any:
        """The value of a one-element tensor as a Python number."""
        if self.numel() != 1:
            raise ValueError(f"item() needs a tensor of one element, this one has {self.numel()}")
        return self.numpy().reshape(()).item()

    def tolist(self) -> Any:
        """The value as (nested) Python lists."""
        return self.numpy().tolist()

    def _local_for(self, what: str) -> Any:
        if self._placement is not None:
            raise RuntimeError(f"{what} needs a local tensor; call to_local() or numpy() first")
        return self._data

    def detach(self) -> Tensor:
        """A tensor sharing this one's data (and version counter), outside autograd."""
        out = Tensor(self._data, self._placement, self._sbp, self._shape)
        out._vc = self._vc
        return out

    def type(self, dtype: Any = None) -> Any:
        if dtype is None:
            return f"mpiflow.{self.dtype.name}"
        return self.to(dtype)

    def float(self) -> Tensor:
        return self.to(_dtypes.float32)

    def double(self) -> Tensor:
        return self.to(_dtypes.float64)

    def half(self) -> Tensor:
        return self.to(_dtypes.float16)

    def long(self) -> Tensor:
        return self.to(_dtypes.int64)

    def int(self) -> Tensor:
        return self.to(_dtypes.int32)

    def bool(self) -> Tensor:
        return self.to(_dtypes.bool)

    def cpu(self) -> Tensor:
        return self.to("cpu")

    def cuda(self) -> Tensor:
        return self.to("cuda")

    if TYPE_CHECKING:
        # -- methods bound by other modules: generated by python -m mpiflow._declare, do not edit --
        # mpiflow.autograd.graph
        def backward(self, gradient: Tensor | None = None,
                     retain_graph: builtins.bool = False) -> None:
            """Compute the gradients of ``tensor`` with respect to every leaf that requires grad."""
        # mpiflow.ops.deterministic_sum
        def nansum(self, dim: Any = None, keepdim: builtins.bool = False, *,
                   dtype: Any = None) -> Tensor:
            """The sum over ``dim`` (all by default) with NaNs counted as zeros."""
        def vdot(self, other: Tensor) -> Tensor:
            """The dot product of two 1-D tensors, conjugating the first (as ``torch.vdot``)."""
        # mpiflow.ops.indexing
        def __getitem__(self, index: Any) -> Tensor:
            """``input[index]``, numpy's indexing (``Tensor.__getitem__``)."""
        def __setitem__(self, index: Any, value: Any) -> None:
            """``target[index] = value`` in place (``Tensor.__setitem__``), numpy's semantics."""
        # mpiflow.ops.join
        def chunk(self, chunks: builtins.int, dim: builtins.int = 0) -> tuple[Tensor, ...]:
            """``input`` cut along ``dim`` into at most ``chunks`` pieces of ``ceil(n / chunks)``
            (the last may be smaller, and fewer pieces may come back), as ``torch.chunk``."""
        def split(self, split_size_or_sections: builtins.int | Sequence[builtins.int],
                  dim: builtins.int = 0) -> tuple[Tensor, ...]:
            """``tensor`` cut along ``dim`` into pieces of one size (the last may be smaller) or of
            the given sizes, as ``torch.split``."""
        # mpiflow.ops.linalg
        def __matmul__(self, other: Tensor) -> Tensor:
            """The matrix product with numpy/PyTorch semantics (1-D operands, broadcast batches)."""
        def __rmatmul__(self, other: Any) -> Tensor:
            """``other @ self`` for an ``other`` that is not a Tensor (a nested list, an array)."""
        def bmm(self, mat2: Tensor) -> Tensor:
            """Batched products ``(b, n, k) @ (b, k, m)``; batch sizes must be equal."""
        def dot(self, other: Tensor) -> Tensor:
            """The dot product of two 1-D tensors of the same length (a 0-d tensor)."""
        def matmul(self, other: Tensor) -> Tensor:
            """The matrix product with numpy/PyTorch semantics (1-D operands, broadcast batches)."""
        def mm(self, mat2: Tensor) -> Tensor:
            """The product of two matrices ``(n, k) @ (k, m)`` (no broadcasting)."""
        def mv(self, vec: Tensor) -> Tensor:
            """The product of a matrix ``(n, k)`` and a vector ``(k,)``: a vector ``(n,)``."""
        def norm(self, p: Any = "fro", dim: builtins.int | Sequence[builtins.int] | None = None,
                 keepdim: builtins.bool = False, *, dtype: Any = None) -> Tensor:
            """The vector ``p``-norm over ``dim`` (all by default); ``"fro"``/2 is the Frobenius
            norm."""
        def outer(self, vec2: Tensor) -> Tensor:
            """The outer product of two vectors ``(n,)`` and ``(m,)``: ``(n, m)``."""
        # mpiflow.ops.methods
        def __iadd__(self, other: Any) -> Tensor:
            """``self = add(self, other)`` in place; returns self."""
        def __imul__(self, other: Any) -> Tensor:
            """``self = mul(self, other)`` in place; returns self."""
        def __invert__(self) -> Tensor:
            """``~self``: logical not of a bool tensor, bitwise not of an integer one."""
        def __ipow__(self, other: Any) -> Tensor:
            """``self = pow(self, other)`` in place; returns self."""
        def __isub__(self, other: Any) -> Tensor:
            """``self = sub(self, other)`` in place; returns self."""
        def __itruediv__(self, other: Any) -> Tensor:
            """``self = div(self, other)`` in place; returns self."""
        def __pos__(self) -> Tensor:
            """``+self``: self."""
        def __radd__(self, other: Any) -> Tensor:
            """``add(other, self)``: the reflected operator."""
        def __rand__(self, other: Any) -> Tensor:
            """``bitwise_and(other, self)``: the reflected operator."""
        def __rfloordiv__(self, other: Any) -> Tensor:
            """``floor_divide(other, self)``: the reflected operator."""
        def __rmod__(self, other: Any) -> Tensor:
            """``remainder(other, self)``: the reflected operator."""
        def __rmul__(self, other: Any) -> Tensor:
            """``mul(other, self)``: the reflected operator."""
        def __ror__(self, other: Any) -> Tensor:
            """``bitwise_or(other, self)``: the reflected operator."""
        def __rpow__(self, other: Any) -> Tensor:
            """``pow(other, self)``: the reflected operator."""
        def __rsub__(self, other: Any) -> Tensor:
            """``sub(other, self)``: the reflected operator."""
        def __rtruediv__(self, other: Any) -> Tensor:
            """``div(other, self)``: the reflected operator."""
        def __rxor__(self, other: Any) -> Tensor:
            """``bitwise_xor(other, self)``: the reflected operator."""
        def add_(self, other: Any, **kwargs: Any) -> Tensor:
            """``self = add(self, other, alpha=...)`` in place; returns self."""
        def clamp_(self, min: Any = None, max: Any = None) -> Tensor:
            """Clamp in place to ``[min, max]``; returns self."""
        def div_(self, other: Any) -> Tensor:
            """``self = div(self, other)`` in place; returns self."""
        def mul_(self, other: Any) -> Tensor:
            """``self = mul(self, other)`` in place; returns self."""
        def sub_(self, other: Any, **kwargs: Any) -> Tensor:
            """``self = sub(self, other, alpha=...)`` in place; returns self."""
        # mpiflow.ops.pointwise
        def __abs__(self) -> Tensor:
            """Elementwise ``abs``."""
        def __add__(self, other: Any) -> Tensor:
            """Elementwise ``add`` of two tensors (or a tensor and a number), broadcasting."""
        def __and__(self, other: Any) -> Tensor:
            """Elementwise ``bitwise_and`` of two tensors (or a tensor and a number),
            broadcasting."""
        def __eq__(self, other: Any) -> Tensor:  # type: ignore[override]
            """Elementwise ``eq`` of two tensors (or a tensor and a number), broadcasting."""
        def __floordiv__(self, other: Any) -> Tensor:
            """Elementwise ``floor_divide`` of two tensors (or a tensor and a number),
            broadcasting."""
        def __ge__(self, other: Any) -> Tensor:
            """Elementwise ``ge`` of two tensors (or a tensor and a number), broadcasting."""
        def __gt__(self, other: Any) -> Tensor:
            """Elementwise ``gt`` of two tensors (or a tensor and a number), broadcasting."""
        def __le__(self, other: Any) -> Tensor:
            """Elementwise ``le`` of two tensors (or a tensor and a number), broadcasting."""
        def __lt__(self, other: Any) -> Tensor:
            """Elementwise ``lt`` of two tensors (or a tensor and a number), broadcasting."""
        def __mod__(self, other: Any) -> Tensor:
            """Elementwise ``remainder`` of two tensors (or a tensor and a number), broadcasting."""
        def __mul__(self, other: Any) -> Tensor:
            """Elementwise ``mul`` of two tensors (or a tensor and a number), broadcasting."""
        def __ne__(self, other: Any) -> Tensor:  # type: ignore[override]
            """Elementwise ``ne`` of two tensors (or a tensor and a number), broadcasting."""
        def __neg__(self) -> Tensor:
            """Elementwise ``neg``."""
        def __or__(self, other: Any) -> Tensor:
            """Elementwise ``bitwise_or`` of two tensors (or a tensor and a number),
            broadcasting."""
        def __pow__(self, other: Any) -> Tensor:
            """Elementwise ``pow`` of two tensors (or a tensor and a number), broadcasting."""
        def __sub__(self, other: Any) -> Tensor:
            """Elementwise ``sub`` of two tensors (or a tensor and a number), broadcasting."""
        def __truediv__(self, other: Any) -> Tensor:
            """Elementwise ``div`` of two tensors (or a tensor and a number), broadcasting."""
        def __xor__(self, other: Any) -> Tensor:
            """Elementwise ``bitwise_xor`` of two tensors (or a tensor and a number),
            broadcasting."""
        def abs(self) -> Tensor:
            """Elementwise ``abs``."""
        def add(self, other: Any, *, alpha: Any = 1) -> Tensor:
            """``input + alpha * other``, elementwise, broadcasting (tensors or numbers)."""
        def atan2(self, other: Any) -> Tensor:
            """Elementwise ``atan2`` of two tensors (or a tensor and a number), broadcasting."""
        def bitwise_and(self, other: Any) -> Tensor:
            """Elementwise ``bitwise_and`` of two tensors (or a tensor and a number),
            broadcasting."""
        def bitwise_not(self) -> Tensor:
            """Elementwise ``bitwise_not``."""
        def bitwise_or(self, other: Any) -> Tensor:
            """Elementwise ``bitwise_or`` of two tensors (or a tensor and a number),
            broadcasting."""
        def bitwise_xor(self, other: Any) -> Tensor:
            """Elementwise ``bitwise_xor`` of two tensors (or a tensor and a number),
            broadcasting."""
        def ceil(self) -> Tensor:
            """Elementwise ``ceil``."""
        def clamp(self, min: Any = None, max: Any = None) -> Tensor:
            """Limit ``input`` to ``[min, max]`` (either bound may be None, a number or a
            tensor)."""
        def clip(self, min: Any = None, max: Any = None) -> Tensor:
            """Limit ``input`` to ``[min, max]`` (either bound may be None, a number or a
            tensor)."""
        def clone(self) -> Tensor:
            """A copy of ``input`` with its own memory and the same layout."""
        def copy_(self, value: Any) -> Tensor:
            """Write ``value`` (tensor or number, broadcast to ``target``'s shape) into
            ``target``."""
        def cos(self) -> Tensor:
            """Elementwise ``cos``."""
        def div(self, other: Any) -> Tensor:
            """Elementwise ``div`` of two tensors (or a tensor and a number), broadcasting."""
        def divide(self, other: Any) -> Tensor:
            """Elementwise ``div`` of two tensors (or a tensor and a number), broadcasting."""
        def eq(self, other: Any) -> Tensor:
            """Elementwise ``eq`` of two tensors (or a tensor and a number), broadcasting."""
        def erf(self) -> Tensor:
            """Elementwise ``erf``."""
        def exp(self) -> Tensor:
            """Elementwise ``exp``."""
        def expand(self, *size: Any) -> Tensor:
            """``input`` broadcast to ``size`` (-1 keeps a dimension), as a new tensor."""
        def expm1(self) -> Tensor:
            """Elementwise ``expm1``."""
        def fill_(self, value: Any) -> Tensor:
            """Set every element of ``target`` to the number ``value``."""
        def floor(self) -> Tensor:
            """Elementwise ``floor``."""
        def floor_divide(self, other: Any) -> Tensor:
            """Elementwise ``floor_divide`` of two tensors (or a tensor and a number),
            broadcasting."""
        def ge(self, other: Any) -> Tensor:
            """Elementwise ``ge`` of two tensors (or a tensor and a number), broadcasting."""
        def gelu(self) -> Tensor:
            """Elementwise ``gelu``."""
        def gt(self, other: Any) -> Tensor:
            """Elementwise ``gt`` of two tensors (or a tensor and a number), broadcasting."""
        def isfinite(self) -> Tensor:
            """Elementwise ``isfinite``."""
        def isinf(self) -> Tensor:
            """Elementwise ``isinf``."""
        def isnan(self) -> Tensor:
            """Elementwise ``isnan``."""
        def le(self, other: Any) -> Tensor:
            """Elementwise ``le`` of two tensors (or a tensor and a number), broadcasting."""
        def log(self) -> Tensor:
            """Elementwise ``log``."""
        def log1p(self) -> Tensor:
            """Elementwise ``log1p``."""
        def log2(self) -> Tensor:
            """Elementwise ``log2``."""
        def logical_and(self, other: Any) -> Tensor:
            """Elementwise ``logical_and`` of two tensors (or a tensor and a number),
            broadcasting."""
        def logical_not(self) -> Tensor:
            """Elementwise ``logical_not``."""
        def logical_or(self, other: Any) -> Tensor:
            """Elementwise ``logical_or`` of two tensors (or a tensor and a number),
            broadcasting."""
        def logical_xor(self, other: Any) -> Tensor:
            """Elementwise ``logical_xor`` of two tensors (or a tensor and a number),
            broadcasting."""
        def lt(self, other: Any) -> Tensor:
            """Elementwise ``lt`` of two tensors (or a tensor and a number), broadcasting."""
        def maximum(self, other: Any) -> Tensor:
            """Elementwise ``maximum`` of two tensors (or a tensor and a number), broadcasting."""
        def minimum(self, other: Any) -> Tensor:
            """Elementwise ``minimum`` of two tensors (or a tensor and a number), broadcasting."""
        def mul(self, other: Any) -> Tensor:
            """Elementwise ``mul`` of two tensors (or a tensor and a number), broadcasting."""
        def multiply(self, other: Any) -> Tensor:
            """Elementwise ``mul`` of two tensors (or a tensor and a number), broadcasting."""
        def ne(self, other: Any) -> Tensor:
            """Elementwise ``ne`` of two tensors (or a tensor and a number), broadcasting."""
        def neg(self) -> Tensor:
            """Elementwise ``neg``."""
        def negative(self) -> Tensor:
            """Elementwise ``neg``."""
        def pow(self, other: Any) -> Tensor:
            """Elementwise ``pow`` of two tensors (or a tensor and a number), broadcasting."""
        def reciprocal(self) -> Tensor:
            """Elementwise ``reciprocal``."""
        def relu(self) -> Tensor:
            """Elementwise ``relu``."""
        def remainder(self, other: Any) -> Tensor:
            """Elementwise ``remainder`` of two tensors (or a tensor and a number), broadcasting."""
        def round(self) -> Tensor:
            """Elementwise ``round``."""
        def rsqrt(self) -> Tensor:
            """Elementwise ``rsqrt``."""
        def sigmoid(self) -> Tensor:
            """Elementwise ``sigmoid``."""
        def sign(self) -> Tensor:
            """Elementwise ``sign``."""
        def sin(self) -> Tensor:
            """Elementwise ``sin``."""
        def sqrt(self) -> Tensor:
            """Elementwise ``sqrt``."""
        def square(self) -> Tensor:
            """Elementwise ``square``."""
        def sub(self, other: Any, *, alpha: Any = 1) -> Tensor:
            """``input - alpha * other``, elementwise, broadcasting (tensors or numbers)."""
        def subtract(self, other: Any, *, alpha: Any = 1) -> Tensor:
            """``input - alpha * other``, elementwise, broadcasting (tensors or numbers)."""
        def tanh(self) -> Tensor:
            """Elementwise ``tanh``."""
        def to(self, *args: Any, **kwargs: Any) -> Tensor:
            """``to(dtype)``, ``to(device)``, ``to(device, dtype)`` or ``to(other_tensor)``."""
        def true_divide(self, other: Any) -> Tensor:
            """Elementwise ``div`` of two tensors (or a tensor and a number), broadcasting."""
        def where(self, input: Any, other: Any) -> Tensor:
            """``input`` where ``condition`` holds, else ``other`` (broadcasting)."""
        def zero_(self) -> Tensor:
            """Set every element of ``target`` to zero."""
        # mpiflow.ops.reduction
        def all(self, dim: builtins.int | Sequence[builtins.int] | None = None,
                keepdim: builtins.bool = False) -> Tensor:
            """Whether every element over ``dim`` (all by default) is true (non-zero)."""
        def amax(self, dim: builtins.int | Sequence[builtins.int] | None = None,
                 keepdim: builtins.bool = False) -> Tensor:
            """The largest element over ``dim`` (all by default, as ``dim=()``); NaN propagates."""
        def amin(self, dim: builtins.int | Sequence[builtins.int] | None = None,
                 keepdim: builtins.bool = False) -> Tensor:
            """The smallest element over ``dim`` (all by default); see :func:`amax`."""
        def any(self, dim: builtins.int | Sequence[builtins.int] | None = None,
                keepdim: builtins.bool = False) -> Tensor:
            """Whether some element over ``dim`` (all by default) is true (non-zero)."""
        def argmax(self, dim: builtins.int | None = None, keepdim: builtins.bool = False) -> Tensor:
            """The index (int64) of the first largest element along ``dim``, or of the flattened
            input."""
        def argmin(self, dim: builtins.int | None = None, keepdim: builtins.bool = False) -> Tensor:
            """The index (int64) of the first smallest element along ``dim``."""
        def max(self, dim: Any = None, keepdim: builtins.bool = False) -> Any:
            """``max(x)``: the largest element (0-d); ``max(x, dim, keepdim)``: ``(values,
            indices)``."""
        def mean(self, dim: builtins.int | Sequence[builtins.int] | None = None,
                 keepdim: builtins.bool = False, *, dtype: Any = None) -> Tensor:
            """The mean over ``dim`` (all by default), divided by the logical element count."""
        def min(self, dim: Any = None, keepdim: builtins.bool = False) -> Any:
            """``min(x)``: the smallest element; ``min(x, dim, keepdim)``: ``(values, indices)``."""
        def prod(self, dim: builtins.int | Sequence[builtins.int] | None = None,
                 keepdim: builtins.bool = False, *, dtype: Any = None) -> Tensor:
            """The product of the elements over ``dim`` (all by default); integers give int64."""
        def std(self, dim: builtins.int | Sequence[builtins.int] | None = None,
                unbiased: builtins.bool | None = None, keepdim: builtins.bool = False, *,
                correction: builtins.int | None = None) -> Tensor:
            """The standard deviation over ``dim``: ``sqrt(var(...))``."""
        def sum(self, dim: builtins.int | Sequence[builtins.int] | None = None,
                keepdim: builtins.bool = False, *, dtype: Any = None) -> Tensor:
            """The sum of the elements over ``dim`` (all by default); bool and integers give
            int64."""
        def var(self, dim: builtins.int | Sequence[builtins.int] | None = None,
                unbiased: builtins.bool | None = None, keepdim: builtins.bool = False, *,
                correction: builtins.int | None = None) -> Tensor:
            """The variance over ``dim``: ``sum((x - mean)**2) / (n - correction)``."""
        # mpiflow.ops.shape
        @property
        def T(self) -> Tensor:
            """``input.T``: the dims in reverse order."""
        def contiguous(self) -> Tensor:
            """``input`` itself: mpiflow tensors have no strides to make contiguous."""
        def flatten(self, start_dim: builtins.int = 0, end_dim: builtins.int = -1) -> Tensor:
            """``input`` with dims ``start_dim..end_dim`` merged into one."""
        def flip(self, dims: builtins.int | Sequence[builtins.int]) -> Tensor:
            """``input`` with the order of elements along ``dims`` reversed (a copy, as PyTorch)."""
        def permute(self, *dims: Any) -> Tensor:
            """``input`` with its dims reordered: output dim ``i`` is input dim ``dims[i]``."""
        def reshape(self, *shape: Any) -> Tensor:
            """``input`` with a new shape of the same number of elements; one extent may be -1."""
        def squeeze(self, dim: builtins.int | Sequence[builtins.int] | None = None) -> Tensor:
            """``input`` without its size-1 dims (all of them, or those of ``dim`` that have size
            1)."""
        def swapaxes(self, dim0: builtins.int, dim1: builtins.int) -> Tensor:
            """``input`` with dims ``dim0`` and ``dim1`` swapped."""
        def t(self) -> Tensor:
            """The transpose of a tensor of at most 2 dims (0-d and 1-d come back as they are)."""
        def transpose(self, dim0: builtins.int, dim1: builtins.int) -> Tensor:
            """``input`` with dims ``dim0`` and ``dim1`` swapped."""
        def unsqueeze(self, dim: builtins.int) -> Tensor:
            """``input`` with a new size-1 dim at position ``dim`` (negative: from the end)."""
        def view(self, *shape: Any) -> Tensor:
            """``input`` with a new shape of the same number of elements; one extent may be -1."""
        # mpiflow.ops.softmax
        def cumsum(self, dim: builtins.int, *, dtype: Any = None) -> Tensor:
            """Running sums along ``dim``; bool and integers give int64 unless ``dtype`` is
            given."""
        def log_softmax(self, dim: builtins.int, dtype: Any = None) -> Tensor:
            """``x - logsumexp(x)`` along ``dim``, computed stably."""
        def logsumexp(self, dim: builtins.int | Sequence[builtins.int] | None,
                      keepdim: builtins.bool = False) -> Tensor:
            """``log(sum(exp(x)))`` over ``dim``, computed stably; integers give float32."""
        def softmax(self, dim: builtins.int, dtype: Any = None) -> Tensor:
            """``exp(x) / sum(exp(x))`` along ``dim``, computed stably (the max is subtracted
            first)."""
        # mpiflow.tensors.conversion
        def check_meta_consistency(self) -> None:
            """Check that every rank sees the same placement, sbp, shape and dtype of the global
            ``t`` (collective over the world: one small all-gather), raising on every rank if
            not."""
        def numpy(self) -> _ndarray:
            """The whole value as a numpy array (the method ``Tensor.numpy``)."""
        def to_global(self, placement: Placement | None = None, sbp: Any = None, *,
                      grad_sbp: Any = None, check_meta: builtins.bool = True,
                      shape: Any = None) -> Tensor:
            """Make a global tensor, or redistribute one (collective: every rank calls it)."""
        def to_local(self) -> Tensor:
            """This rank's shard of a global tensor (empty on a rank outside the placement), sharing
            its memory."""
        # mpiflow.tensors.creation
        def new_empty(self, *size: Any, dtype: Any = None, device: Any = None,
                      placement: Any = None, sbp: Any = None,
                      requires_grad: builtins.bool = False) -> Tensor:
            """An unset tensor of shape ``size`` with ``t``'s dtype, device and layout
            (``t.new_empty(size)``); ``placement=``/``sbp=`` give another layout."""
        def new_full(self, size: Any, fill_value: Any, *, dtype: Any = None, device: Any = None,
                     placement: Any = None, sbp: Any = None,
                     requires_grad: builtins.bool = False) -> Tensor:
            """``fill_value`` everywhere, shape ``size``, ``t``'s dtype, device and layout
            (``t.new_full(size, fill_value)``); ``placement=``/``sbp=`` give another layout."""
        def new_ones(self, *size: Any, dtype: Any = None, device: Any = None, placement: Any = None,
                     sbp: Any = None, requires_grad: builtins.bool = False) -> Tensor:
            """Ones of shape ``size`` with ``t``'s dtype, device and layout (``t.new_ones(size)``);
            ``placement=``/``sbp=`` give another layout."""
        def new_zeros(self, *size: Any, dtype: Any = None, device: Any = None,
                      placement: Any = None, sbp: Any = None,
                      requires_grad: builtins.bool = False) -> Tensor:
            """Zeros of shape ``size`` with ``t``'s dtype, device and layout (the method
            ``t.new_zeros(size)``); ``placement=``/``sbp=`` give another layout, as OneFlow's."""
        # mpiflow.tensors.random
        def normal_(self, mean: builtins.float = 0.0, std: builtins.float = 1.0, *,
                    generator: Any = None) -> Tensor:
            """Fill ``t`` in place with normal numbers; returns ``t`` (layouts as
            :func:`uniform_`)."""
        def uniform_(self, a: builtins.float = 0.0, b: builtins.float = 1.0, *,
                     generator: Any = None) -> Tensor:
            """Fill ``t`` in place with numbers uniform in ``[a, b)``; returns ``t``."""
        # -- end --

    # -- Python protocol -------------------------------------------------------------------
    def __len__(self) -> builtins.int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __iter__(self) -> Iterator[Tensor]:
        if not self._shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._shape[0]))

    def __bool__(self) -> builtins.bool:
        if self.numel() != 1:
            raise RuntimeError(f"the truth value of a tensor of {self.numel()} elements is "
                               "ambiguous; use .any() or .all()")
        return builtins.bool(self.item())

    def __float__(self) -> builtins.float:
        return builtins.float(self.item())

    def __int__(self) -> builtins.int:
        return builtins.int(self.item())

    def __index__(self) -> builtins.int:
        if self.dtype.numpy.kind not in "iu":
            raise TypeError("only integer tensors can be used as an index")
        return builtins.int(self.item())

    def __hash__(self) -> builtins.int:
        return id(self)

    def __repr__(self) -> str:
        return _format(self)


_LEGACY = frozenset({list, tuple, builtins.int, Size})
class _Handle:
    """Removes a registered hook."""

    def __init__(self, hooks: list[Any], hook: Any) -> None:
        self._hooks, self._hook = hooks, hook
        hooks.append(hook)

    def remove(self) -> None:
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)


#: The methods bound by other modules (their bind tables, merged): name -> function or property.
bound_methods: dict[str, Callable[..., Any] | property] = {}


def bind(table: Mapping[str, Callable[..., Any] | property]) -> None:
    """Attach each ``fn(tensor, ...)`` of ``table`` to Tensor as the method ``tensor.name(...)``.

    The modules that implement methods (ops, conversions, random fills, backward) bind them at
    import, so the Tensor class imports none of them. Their declarations in :class:`Tensor`
    are generated from the tables: ``python -m mpiflow._declare``.

    Raises:
        ValueError: a name is already a method of the class itself.
    """
    for name, fn in table.items():
        if name in Tensor.__dict__ and name not in bound_methods:
            raise ValueError(f"Tensor.{name} is defined by the class; it cannot be bound")
        setattr(Tensor, name, fn)
        bound_methods[name] = fn


PRINT_PRECISION = 4  # digits after the point, as OneFlow and PyTorch print


def _float_format(data: Any) -> Callable[[Any], str] | None:
    """OneFlow's (PyTorch's) way of printing floats: whole numbers as ``2.``, others with
    :data:`PRINT_PRECISION` decimals (``1.1235``), in scientific notation when the finite
    magnitudes span more than 1000x or leave ``[1e-4, 1e8)``; every entry as wide as the
    widest. None for arrays that are not floating point."""
    if data.dtype.kind != "f" or data.size == 0:
        return None
    values = numpy.asarray(data, dtype=numpy.float64)
    finite = numpy.abs(values[numpy.isfinite(values)])
    nonzero = finite[finite != 0]
    digits = PRINT_PRECISION
    if finite.size and numpy.all(numpy.floor(finite) == finite):
        sci = bool(nonzero.size) and float(nonzero.max()) > 1e8
        form = f"{{:.{digits}e}}" if sci else "{:.0f}."
    else:
        sci = bool(nonzero.size) and (float(nonzero.max()) / float(nonzero.min()) > 1000.0
                                      or float(nonzero.max()) > 1e8
                                      or float(nonzero.min()) < 1e-4)
        form = f"{{:.{digits}e}}" if sci else f"{{:.{digits}f}}"

    def text(v: Any) -> str:
        v = float(v)
        if numpy.isnan(v):
            return "nan"
        if numpy.isinf(v):
            return "inf" if v > 0 else "-inf"
        return form.format(v)

    signed = values[numpy.isfinite(values)]
    widest: list[Any] = []
    if signed.size:  # the extremes, and the smallest magnitude (its exponent), are widest
        widest += [signed.min(), signed.max(), signed[numpy.argmin(numpy.abs(signed))]]
    if numpy.isnan(values).any():
        widest.append(numpy.nan)
    widest += [v for v in (numpy.inf, -numpy.inf) if (values == v).any()]
    width = max(len(text(v)) for v in widest)
    return lambda v: text(v).rjust(width)


def _format(t: Tensor) -> str:
    """The repr; for a global tensor it shows the local shard and never communicates."""
    data = to_host(t._data)
    fmt = _float_format(data)
    body = numpy.array2string(data, separator=", ", prefix="tensor(", threshold=200,
                              edgeitems=3,
                              formatter=None if fmt is None else {"float_kind": fmt})
    extras = []
    if t._placement is not None:
        extras.append(f"placement={t._placement!r}")
        extras.append(f"sbp=({', '.join(repr(s) for s in t.sbp)},)" if len(t.sbp) == 1
                      else f"sbp=({', '.join(repr(s) for s in t.sbp)})")
        extras.append(f"shape={t.shape!r}")
    if t.dtype not in (_dtypes.float32, _dtypes.int64, _dtypes.bool) or data.size == 0:
        extras.append(f"dtype={t.dtype!r}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn={t.grad_fn!r}")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    head = "local shard " if t._placement is not None else ""
    return f"tensor({head}{body}" + "".join(f", {e}" for e in extras) + ")"
