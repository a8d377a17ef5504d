"""Reverse-mode autograd: the backward sweep over the graph that ops record.

Ops record :class:`~mpiflow.tensors.tape.Node` objects (grad mode and recording live in
:mod:`mpiflow.tensors.tape`, below the ops).
``backward`` orders the nodes topologically from the root and
sweeps them in reverse, summing the gradients of tensors used several times. Gradient rules are
written with mpiflow ops, so on global tensors they are global ops too: layouts and the
collectives they imply follow from the same rules as in the forward pass. A leaf's gradient is
converted to the leaf's own placement, sbp and dtype before it is accumulated into ``.grad``.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable
from typing import Any

import numpy

from ..ops import pointwise as pw
from ..tensors import trace
from ..tensors.creation import ones_like
from ..tensors.tape import (
    Node,
    enable_grad,
    is_grad_enabled,
    no_grad,
    rebind_inplace,
    record,
    set_grad_enabled,
)
from ..tensors.tensor import Tensor, bind

__all__ = [
    "Node",
    "backward",
    "enable_grad",
    "is_grad_enabled",
    "no_grad",
    "queue_callback",
    "rebind_inplace",
    "record",
    "redirect_grad",
    "set_grad_enabled",
]

# leaf id -> (a weak reference to the leaf, the tensor that takes its gradients)
_GRAD_TARGETS: dict[int, tuple[weakref.ref[Tensor], Tensor]] = {}


def redirect_grad(leaf: Tensor, target: Tensor | None) -> None:
    """Accumulate ``leaf``'s gradients into ``target.grad``, in ``target``'s layout, instead
    of into ``leaf.grad`` (None: undo). ZeRO stage 2 gives a data-parallel parameter its shard
    this way: the gradient's ``P`` -> ``B`` all-reduce becomes a ``P`` -> ``S(0)``
    reduce-scatter, and each rank keeps its rows only.

    Raises:
        ValueError: ``target``'s shape is not ``leaf``'s.

    Examples:
        >>> w = flow.ones(2, requires_grad=True)
        >>> into = flow.zeros(2, requires_grad=True)
        >>> redirect_grad(w, into)
        >>> (w * 3).sum().backward()
        >>> w.grad is None, into.grad
        (True, tensor([3., 3.]))
        >>> redirect_grad(w, None)
    """
    if target is None:
        _GRAD_TARGETS.pop(id(leaf), None)
        return
    if tuple(target.shape) != tuple(leaf.shape):
        raise ValueError(f"redirect_grad: the target's shape {tuple(target.shape)} is not the "
                         f"leaf's {tuple(leaf.shape)}")
    key = id(leaf)
    # Forget the entry when the leaf goes (before its id can be reused).
    _GRAD_TARGETS[key] = (weakref.ref(leaf, lambda _: _GRAD_TARGETS.pop(key, None)), target)


def _plain(t: Tensor) -> Tensor:
    return t.detach() if isinstance(t, Tensor) else t


def _topological(root: Node) -> list[Node]:
    order: list[Node] = []
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for t in node.inputs():
            if t.grad_fn is not None and id(t.grad_fn) not in seen:
                stack.append((t.grad_fn, False))
    return order  # children before parents: reversed, it is the backward order


def _run_hooks(t: Tensor | None, grad: Tensor) -> Tensor:
    if t is None:
        return grad
    for hook in getattr(t, "_hooks", None) or ():
        changed = hook(grad)
        if changed is not None:
            grad = changed
    return grad


def _refcounts(grad: Tensor) -> tuple[int, int]:
    return sys.getrefcount(grad), sys.getrefcount(grad._data)


def _probe(grad: Tensor) -> tuple[int, int]:
    return _probe_owned(grad)  # plays _accumulate: one local holds grad


def _probe_owned(grad: Tensor) -> tuple[int, int]:
    return _refcounts(grad)  # plays _owned


_OWNED_REFS = _probe(Tensor(numpy.empty(1)))


def _owned(grad: Tensor, held: int = 0) -> bool:
    """Whether ``grad`` may become a leaf's ``.grad`` without a copy.

    It must be a whole array of its own (not a view), and nothing but the caller's one local
    may refer to the tensor or its array: no other tensor, operand, hook or user variable.
    The reference counts are compared with those of a probe called the same way at import.
    """
    if grad._base is not None or grad.grad_fn is not None:
        return False
    if getattr(grad._data, "base", 0) is not None:
        return False
    counts = _refcounts(grad)
    return counts[0] <= _OWNED_REFS[0] and counts[1] - held <= _OWNED_REFS[1]


def _accumulate(leaf: Tensor, grad: Tensor) -> None:
    if tuple(grad.shape) != tuple(leaf.shape):
        raise RuntimeError(f"gradient of shape {tuple(grad.shape)} for a tensor of shape "
                           f"{tuple(leaf.shape)}: a gradient rule is wrong")
    if _GRAD_TARGETS:
        held = _GRAD_TARGETS.get(id(leaf))
        if held is not None and held[0]() is leaf:
            leaf = held[1]
    if leaf.is_global:
        grad = grad.to_global(leaf.placement, leaf.sbp)
    elif grad.is_global:
        raise RuntimeError("a local tensor received a global gradient: a gradient rule is wrong")
    grad = pw.cast(grad, leaf.dtype)
    grad = _run_hooks(leaf, grad)
    # A gradient nothing else refers to becomes .grad as it is (PyTorch's AccumulateGrad
    # steals it too); one that may be shared, e.g. handed to two operands, is copied.
    recorder = trace.state.recorder  # (its references to the array do not count)
    steal = leaf.grad is None and _owned(grad, 0 if recorder is None else
                                         recorder.holds(grad._data))
    trace.call(_store, leaf, grad, steal)  # one step of a traced graph


def _store(leaf: Tensor, grad: Tensor, steal: bool) -> None:
    """Make ``grad`` the leaf's ``.grad`` (a copy unless ``steal``), or add it in place."""
    if leaf.grad is None:
        leaf.grad = grad if steal else grad.clone()
    else:
        leaf.grad._data += grad._data
    for hook in getattr(leaf, "_post_hooks", None) or ():
        hook(leaf)


def backward(tensor: Tensor, gradient: Tensor | None = None, retain_graph: bool = False) -> None:
    """Compute the gradients of ``tensor`` with respect to every leaf that requires grad.

    Args:
        tensor: the root; a one-element tensor unless ``gradient`` is given.
        gradient: d(something)/d(tensor), of ``tensor``'s shape (and layout, if global).
        retain_graph: keep the graph so that backward can run through it again.

    Raises:
        RuntimeError: ``tensor`` does not require grad, a non-scalar root has no ``gradient``,
            or the graph was already freed by an earlier backward.
    """
    if not tensor.requires_grad:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a "
                           "grad_fn")
    if trace.state.recorder is not None:
        trace.state.recorder.mark_backward()
    if gradient is None:
        if tensor.numel() != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs; pass "
                               "gradient= for a tensor of shape " + str(tuple(tensor.shape)))
        gradient = ones_like(tensor)
        if trace.state.loss_scale != 1.0:  # nn.Graph's gradient accumulation: the mean
            gradient = gradient * trace.state.loss_scale
    elif tuple(gradient.shape) != tuple(tensor.shape):
        raise RuntimeError(f"gradient has shape {tuple(gradient.shape)}, the tensor "
                           f"{tuple(tensor.shape)}")
    with no_grad():
        try:
            if tensor.grad_fn is None:
                _accumulate(tensor, gradient)
            else:
                _sweep(tensor.grad_fn, gradient, retain_graph)
            callbacks = list(_callbacks)
        finally:
            _callbacks.clear()
        for callback in callbacks:
            callback()


def _sweep(root: Node, gradient: Tensor, retain_graph: bool) -> None:
    order = list(reversed(_topological(root)))
    # A leaf's gradient is accumulated once, after the last node that uses it has run, so its
    # hooks (e.g. DDP's) see the whole gradient of this backward.
    uses: dict[int, int] = {}
    for node in order:
        for t in node.inputs():
            if t.grad_fn is None:
                uses[id(t)] = uses.get(id(t), 0) + 1
    leaf_grads: dict[int, Tensor] = {}
    grads: dict[int, Tensor] = {id(root): gradient}
    for node in order:
        grad = grads.pop(id(node), None)
        if node.rule is None or node.operands is None:
            raise RuntimeError("Trying to backward through the graph a second time; pass "
                               "retain_graph=True to the first backward")
        in_grads: list[Any] = [None] * len(node.operands)
        if grad is not None:
            _check_versions(node)
            grad = _run_hooks(node.output_ref(), grad)
            operands = [_plain(o) for o in node.operands]
            attrs = node.attrs
            if getattr(node.rule, "needs_mask", False):
                attrs = {**attrs, "needs": tuple(isinstance(o, Tensor) and o.requires_grad
                                                 for o in node.operands)}
            in_grads = list(_run_rule(node.rule, grad, operands, node.output, attrs))
            in_grads += [None] * (len(node.operands) - len(in_grads))  # as zip() allowed
            # Drop this frame's references as the gradients are handed on, so that _owned
            # sees a gradient only its new holder refers to.
            grad = operands = None  # type: ignore[assignment]
        for i, operand in enumerate(node.operands):
            g = in_grads[i]
            in_grads[i] = None
            if not isinstance(operand, Tensor) or not operand.requires_grad:
                continue
            if operand.grad_fn is not None:
                if g is not None:
                    key = id(operand.grad_fn)
                    grads[key] = g if key not in grads else grads[key] + g
                continue
            key = id(operand)
            if g is not None:
                leaf_grads[key] = g if key not in leaf_grads else leaf_grads[key] + g
            g = None
            uses[key] -= 1
            if uses[key] == 0 and key in leaf_grads:
                _accumulate(operand, leaf_grads.pop(key))
        if not retain_graph:
            node.rule, node.operands, node.output = None, None, None


def _run_rule(rule: Any, grad: Tensor, operands: list[Any], output: Any,
              attrs: dict[str, Any]) -> Any:
    """Call a gradient rule; while a graph is traced, make sure the replay can redo it: a rule
    that computes on arrays outside the ops engine (``linear``'s), or one marked
    ``side_effects`` (it accumulates gradients itself), is recorded as one step."""
    recorder = trace.state.recorder
    if recorder is None:
        return rule(grad, operands, output, **attrs)
    if getattr(rule, "side_effects", False):  # e.g. a checkpoint's inner backward: run once
        return trace.call(_RuleStep(rule, attrs), grad, output, *operands)
    mark = len(recorder.steps)
    result = tuple(rule(grad, operands, output, **attrs))
    if recorder.known(result):
        return result
    recorder.rollback(mark)
    return trace.call(_RuleStep(rule, attrs), grad, output, *operands)


class _RuleStep:
    """A gradient rule as one replayable step: ``(grad, output, *operands) -> grads``."""

    __slots__ = ("attrs", "rule")

    def __init__(self, rule: Any, attrs: dict[str, Any]) -> None:
        self.rule, self.attrs = rule, attrs

    def __call__(self, grad: Tensor, output: Any, *operands: Any) -> tuple[Any, ...]:
        return tuple(self.rule(grad, list(operands), output, **self.attrs))

    def __repr__(self) -> str:
        return getattr(self.rule, "__qualname__", "rule")


def _check_versions(node: Node) -> None:
    assert node.operands is not None
    for operand, version in zip(node.operands, node.versions):
        if isinstance(operand, Tensor) and operand._version != version:
            raise RuntimeError(
                f"one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: an input of {node.name} of shape {tuple(operand.shape)} is "
                f"at version {operand._version}; expected version {version}")


_callbacks: list[Callable[[], None]] = []


def queue_callback(callback: Callable[[], None]) -> None:
    """Run ``callback`` once the current backward pass has finished (e.g. to wait for DDP's
    gradient all-reduces). Outside a backward pass it runs after the next one."""
    _callbacks.append(callback)


bind({"backward": backward})
