"""Matrix products (``matmul``, ``mm``, ``bmm``, ``dot``, ``mv``, ``outer``, ``@``) and vector
norms on local and global tensors.

One op, :data:`MATMUL`, serves them all with numpy's ``matmul`` semantics: a 1-D first operand
is a row vector and a 1-D second operand a column vector (their dimension is dropped from the
result), and batch dimensions broadcast. Its layout rule (per mesh axis), in the operands' own
dimensions:

- a batch dim split on both operands (or on one, the other broadcasting over it) -> that batch
  dim of the output split;
- rows of the first split, second broadcast -> rows split (``S0 x B -> S0`` in 2-D);
- columns of the second split, first broadcast -> columns split (``B x S1 -> S1``);
- the contracted dim split on both -> partial sum (``S1 x S0 -> P``);
- ``P x B -> P`` and ``B x P -> P`` (the product is linear in each operand).

``norm`` is a composite of elementwise ops and reductions, whose layout rules it follows.

Gradients: ``matmul`` gives ``g @ b^T`` and ``a^T @ g`` (1-D operands made 2-D, broadcast batch
dims summed away), ``outer`` gives ``g @ b`` and ``g^T @ a``; on global tensors these products
follow the same layout rules (``x`` split S(0) and ``w`` broadcast: ``dW = x^T @ g`` is ``P``,
made ``B`` when accumulated into ``w.grad``). ``norm`` differentiates through its parts (at a
zero input the 2-norm's gradient is NaN, where PyTorch gives 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy

from ..algorithms import kernels
from ..layouts.sbp import Partial, SbpParallel, Split
from ..tensors.tensor import Tensor, bind
from . import deterministic_sum as det
from . import pointwise as pw
from . import reduction as red
from .engine import B, Context, OpDef, Signature, apply

__all__ = ["matmul", "mm", "bmm", "dot", "mv", "outer", "norm"]

Shape = tuple[int, ...]
P = Partial()


def _split_or_b(shape: Shape, dim: int, extent: int) -> SbpParallel:
    """``S(dim)`` where ``shape`` has the output's extent at ``dim``, else B (broadcast)."""
    return Split(dim) if dim >= 0 and shape[dim] == extent else B


def _batch_shape(a: Shape, b: Shape) -> Shape:
    try:
        return tuple(numpy.broadcast_shapes(a[:-2], b[:-2]))
    except ValueError:
        raise ValueError(f"matmul: batch dimensions of shapes {a} and {b} cannot be broadcast "
                         "together") from None


def _matmul_shape(a: Shape, b: Shape, **_: Any) -> Shape:
    """numpy's ``matmul`` result shape; a ``ValueError`` names the shapes when they do not fit."""
    if not a or not b:
        raise ValueError(f"matmul: both arguments need at least 1 dimension, got shapes {a} and "
                         f"{b}")
    k_a = a[-1]
    k_b = b[0] if len(b) == 1 else b[-2]
    if k_a != k_b:
        raise ValueError(f"matmul: shapes {a} and {b} cannot be multiplied ({k_a} != {k_b})")
    rows = a[-2:-1] if len(a) >= 2 else ()
    cols = b[-1:] if len(b) >= 2 else ()
    return _batch_shape(a, b) + rows + cols


def _matmul_layouts(a: Shape, b: Shape, **_: Any) -> list[Signature]:
    """The signatures of the module docstring, batch splits first."""
    batch = _batch_shape(a, b)
    nbatch = len(batch)
    sigs: list[Signature] = []
    for i, extent in enumerate(batch):
        ins = tuple(_split_or_b(s, i - nbatch + len(s) - 2, extent) if len(s) > 2 else B
                    for s in (a, b))
        if ins != (B, B):
            sigs.append((ins, Split(i)))
    out_ndim = nbatch + (len(a) >= 2) + (len(b) >= 2)
    if len(a) >= 2:
        sigs.append(((Split(len(a) - 2), B), Split(nbatch)))
    if len(b) >= 2:
        sigs.append(((B, Split(len(b) - 1)), Split(out_ndim - 1)))
    sigs.append(((Split(len(a) - 1), Split(0 if len(b) == 1 else len(b) - 2)), P))
    sigs += [((P, B), P), ((B, P), P)]
    return sigs


def _matmul_kernel(ctx: Context, a: Any, b: Any, **_: Any) -> Any:
    # the process's GEMM library (numpy's BLAS or torch's, :mod:`mpiflow.algorithms.kernels`)
    return kernels.matmul(a, b)


def _matmul_grad(g: Tensor, operands: Any, out: Tensor, *,
                 needs: tuple[bool, bool] = (True, True), **_: Any
                 ) -> tuple[Tensor | None, Tensor | None]:
    """``g @ b^T`` and ``a^T @ g`` on the operands made 2-D (a 1-D ``a`` as a row, a 1-D ``b``
    as a column), summed over the batch dims that broadcasting added or stretched; only those
    ``needs`` asks for (autograd passes which operands require grad). The transposes are
    views: numpy hands BLAS the transpose flag, nothing is copied."""
    from .grad_util import sum_to
    from .shape import SQUEEZE, UNSQUEEZE, transpose

    a, b = operands
    a2 = a if a.ndim >= 2 else apply(UNSQUEEZE, a, dim=0)
    b2 = b if b.ndim >= 2 else apply(UNSQUEEZE, b, dim=1)
    if b.ndim == 1:
        g = apply(UNSQUEEZE, g, dim=g.ndim)
    if a.ndim == 1:
        g = apply(UNSQUEEZE, g, dim=g.ndim - 1)
    ga = gb = None
    if needs[0]:
        ga = sum_to(matmul(g, transpose(b2, -1, -2)), tuple(a2.shape))
        if a.ndim < 2:
            ga = apply(SQUEEZE, ga, dims=(0,))
    if needs[1]:
        gb = sum_to(matmul(transpose(a2, -1, -2), g), tuple(b2.shape))
        if b.ndim < 2:
            gb = apply(SQUEEZE, gb, dims=(1,))
    return ga, gb


_matmul_grad.needs_mask = True  # type: ignore[attr-defined]


MATMUL = OpDef("matmul", _matmul_kernel, _matmul_shape, _matmul_layouts, grad=_matmul_grad)


def _outer_shape(a: Shape, b: Shape, **_: Any) -> Shape:
    if len(a) != 1 or len(b) != 1:
        raise ValueError(f"outer: both arguments must be 1-D, got shapes {a} and {b}")
    return (a[0], b[0])


def _outer_layouts(a: Shape, b: Shape, **_: Any) -> list[Signature]:
    return [((Split(0), B), Split(0)), ((B, Split(0)), Split(1)), ((P, B), P), ((B, P), P)]


def _outer_grad(g: Tensor, operands: Any, out: Tensor, **_: Any) -> tuple[Tensor, Tensor]:
    """``g @ b`` and ``g^T @ a``."""
    from .shape import transpose

    a, b = operands
    return matmul(g, b), matmul(transpose(g, 0, 1), a)


OUTER = OpDef("outer", lambda ctx, a, b, **_: a[:, None] * b[None, :], _outer_shape,
              _outer_layouts, grad=_outer_grad)


def _tensor(value: Any, like: Tensor) -> Tensor:
    """``value`` as a tensor: arrays and lists become local tensors beside a local ``like``."""
    if isinstance(value, Tensor):
        return value
    if like.is_global:
        raise TypeError(f"matmul: a global tensor multiplies only tensors, got "
                        f"{type(value).__name__}")
    from ..tensors.creation import tensor

    return tensor(value)


def matmul(input: Tensor, other: Tensor) -> Tensor:
    """The matrix product with numpy/PyTorch semantics (1-D operands, broadcast batches).

    Args:
        input: ``(..., n, k)`` or a 1-D ``(k,)`` (a row vector; its dim is dropped).
        other: ``(..., k, m)`` or a 1-D ``(k,)`` (a column vector; its dim is dropped).

    Returns:
        The product, of shape ``broadcast(batch) + (n,) + (m,)`` less dropped vector dims.
        On global tensors the layout follows the signatures of this module's docstring, e.g.
        ``S(0) @ B -> S(0)`` and ``S(1) @ S(0) -> P``.

    Raises:
        ValueError: a 0-d operand, or shapes that do not fit.

    Examples:
        >>> flow.matmul(flow.tensor([[1, 2], [3, 4]]), flow.tensor([1, 1])).tolist()
        [3, 7]
    """
    if not isinstance(input, Tensor):
        input = _tensor(input, other)
    return apply(MATMUL, input, _tensor(other, input))


def _check_ndim(name: str, want: tuple[int, int], input: Tensor, other: Tensor) -> None:
    if (input.ndim, other.ndim) != want:
        raise ValueError(f"{name}: expected {want[0]}-D and {want[1]}-D operands, got shapes "
                         f"{tuple(input.shape)} and {tuple(other.shape)}")


def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """The product of two matrices ``(n, k) @ (k, m)`` (no broadcasting).

    Examples:
        >>> flow.mm(flow.tensor([[1, 2]]), flow.tensor([[3], [4]])).tolist()
        [[11]]
    """
    _check_ndim("mm", (2, 2), input, mat2)
    return matmul(input, mat2)


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """Batched products ``(b, n, k) @ (b, k, m)``; batch sizes must be equal.

    Examples:
        >>> flow.bmm(flow.ones(2, 1, 3), flow.ones(2, 3, 1)).shape
        mpiflow.Size([2, 1, 1])
    """
    _check_ndim("bmm", (3, 3), input, mat2)
    if input.shape[0] != mat2.shape[0]:
        raise ValueError(f"bmm: batch sizes differ: shapes {tuple(input.shape)} and "
                         f"{tuple(mat2.shape)}")
    return matmul(input, mat2)


def dot(input: Tensor, other: Tensor) -> Tensor:
    """The dot product of two 1-D tensors of the same length (a 0-d tensor).

    Examples:
        >>> flow.dot(flow.tensor([1, 2, 3]), flow.tensor([4, 5, 6])).item()
        32
    """
    _check_ndim("dot", (1, 1), input, other)
    if det.enabled(input) and det.enabled(other):
        return det.exact_dot(input, other)
    return matmul(input, other)


def mv(input: Tensor, vec: Tensor) -> Tensor:
    """The product of a matrix ``(n, k)`` and a vector ``(k,)``: a vector ``(n,)``.

    Examples:
        >>> flow.mv(flow.tensor([[1, 2], [3, 4]]), flow.tensor([1, 0])).tolist()
        [1, 3]
    """
    _check_ndim("mv", (2, 1), input, vec)
    return matmul(input, vec)


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """The outer product of two vectors ``(n,)`` and ``(m,)``: ``(n, m)``.

    Examples:
        >>> flow.outer(flow.tensor([1, 2]), flow.tensor([3, 4])).tolist()
        [[3, 4], [6, 8]]
    """
    return apply(OUTER, input, vec2)


def norm(input: Tensor, p: Any = "fro", dim: int | Sequence[int] | None = None,
         keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """The vector ``p``-norm over ``dim`` (all by default); ``"fro"``/2 is the Frobenius norm.

    Args:
        input: a floating-point tensor.
        p: ``"fro"``, 2, 1, ``inf``, ``-inf``, 0 (count of non-zeros) or any other number.
        dim: an int, a sequence of ints, or None for all.
        keepdim: keep the reduced dimensions with size 1.
        dtype: cast the input to this dtype first.

    Returns:
        The norm (a composite of elementwise ops and sums, so global layouts follow theirs).

    Examples:
        >>> flow.norm(flow.tensor([[3.0, 0.0], [0.0, 4.0]])).item()
        5.0
    """
    if dtype is not None:
        input = pw.cast(input, dtype)
    if input.dtype.numpy.kind != "f":
        raise TypeError(f"norm(): input dtype should be floating point, got {input.dtype}")
    if p in ("fro", 2):
        if det.enabled(input):
            return det.exact_norm2(input, dim, keepdim)
        return pw.sqrt(red.sum(pw.mul(input, input), dim, keepdim))
    if isinstance(p, str):
        raise ValueError(f"norm(): unsupported p={p!r}: use 'fro' or a number")
    magnitude = pw.abs(input)
    if p == math.inf:
        return red.amax(magnitude, dim, keepdim)
    if p == -math.inf:
        return red.amin(magnitude, dim, keepdim)
    if p == 0:
        return red.sum(pw.ne(input, 0), dim, keepdim, dtype=input.dtype)
    if p == 1:
        return red.sum(magnitude, dim, keepdim)
    return pw.pow(red.sum(pw.pow(magnitude, p), dim, keepdim), 1.0 / p)


def _rmatmul(self: Tensor, other: Any) -> Tensor:
    """``other @ self`` for an ``other`` that is not a Tensor (a nested list, an array)."""
    return matmul(_tensor(other, self), self)


bind({_name: globals()[_name] for _name in __all__}
     | {"__matmul__": matmul, "__rmatmul__": _rmatmul})
