"""Reverse-mode autograd: the recorded graph, grad mode, and the backward sweep.

Every op records a :class:`Node` holding its gradient rule and its operands when grad mode is
on and an operand requires grad. ``backward`` orders the nodes topologically from the root and
sweeps them in reverse, summing the gradients of tensors used several times. Gradient rules are
written with mpiflow ops, so on global tensors they are global ops too: layouts and the
collectives they imply follow from the same rules as in the forward pass. A leaf's gradient is
converted to the leaf's own placement, sbp and dtype before it is accumulated into ``.grad``.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from .._tensor import Tensor

__all__ = [
    "Node",
    "backward",
    "enable_grad",
    "is_grad_enabled",
    "no_grad",
    "queue_callback",
    "rebind_inplace",
    "record",
    "set_grad_enabled",
]

F = TypeVar("F", bound=Callable[..., Any])
Rule = Callable[..., Sequence[Any]]


class _Mode(threading.local):
    enabled = True


_mode = _Mode()


def is_grad_enabled() -> bool:
    """Whether ops record the graph for autograd (on by default)."""
    return _mode.enabled


class _GradMode:
    """Base of the grad-mode switches: a context manager and a function decorator."""

    _target = True

    def __enter__(self) -> None:
        self._previous = _mode.enabled
        _mode.enabled = self._target

    def __exit__(self, *exc: object) -> None:
        _mode.enabled = self._previous

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with type(self)():
                return fn(*args, **kwargs)

        return wrapped  # type: ignore[return-value]


class no_grad(_GradMode):
    """Turn graph recording off (``with mpiflow.no_grad(): ...`` or as a decorator).

    Examples:
        >>> with flow.no_grad():
        ...     y = x * 2          # y.requires_grad is False
    """

    _target = False


class enable_grad(_GradMode):
    """Turn graph recording on inside a ``no_grad`` block."""

    _target = True


class set_grad_enabled(_GradMode):
    """Set grad mode to ``mode``: as a call, a context manager or a decorator."""

    def __init__(self, mode: bool) -> None:
        self._target = bool(mode)
        self._previous = _mode.enabled
        _mode.enabled = self._target

    def __enter__(self) -> None:
        pass

    def __call__(self, fn: F) -> F:
        target = self._target
        _mode.enabled = self._previous

        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            previous = _mode.enabled
            _mode.enabled = target
            try:
                return fn(*args, **kwargs)
            finally:
                _mode.enabled = previous

        return wrapped  # type: ignore[return-value]


class Node:
    """One recorded op: its gradient rule, operands and (detached) output.

    ``rule(grad, operands, output, **attrs)`` returns one gradient (or None) per operand.
    """

    __slots__ = ("__weakref__", "attrs", "name", "operands", "output", "output_ref", "rule",
                 "versions")

    def __init__(self, name: str, rule: Rule, operands: Sequence[Any], attrs: dict[str, Any],
                 output: Tensor) -> None:
        self.name = name
        self.rule: Rule | None = rule
        self.operands: tuple[Any, ...] | None = tuple(operands)
        self.attrs = attrs
        self.output: Tensor | None = output.detach()
        self.output_ref = weakref.ref(output)
        self.versions = tuple(o._version if isinstance(o, Tensor) else 0 for o in operands)

    def inputs(self) -> Iterator[Tensor]:
        """The operands that need a gradient."""
        for operand in self.operands or ():
            if isinstance(operand, Tensor) and operand.requires_grad:
                yield operand

    def __repr__(self) -> str:
        return f"<{self.name}>"


def _backward_name(op_name: str) -> str:
    return "".join(part.capitalize() for part in op_name.split("_")) + "Backward"


def record(name: str, rule: Rule | None, operands: Sequence[Any], attrs: dict[str, Any],
           output: Tensor) -> Tensor:
    """Attach a graph node to ``output`` if grad mode is on and an operand requires grad.

    Raises:
        RuntimeError: an operand requires grad but the op has no gradient rule.
    """
    if not _mode.enabled:
        return output
    if not any(isinstance(o, Tensor) and o.requires_grad for o in operands):
        return output
    if output._data.dtype.kind not in "fc":
        return output  # integer and bool results carry no gradient
    if rule is None:
        raise RuntimeError(f"{name} has no gradient rule: it cannot take part in backward")
    output.requires_grad = True
    output.grad_fn = Node(_backward_name(name), rule, operands, attrs, output)
    return output


def rebind_inplace(target: Tensor, value: Tensor) -> None:
    """Make ``target``, about to be overwritten by ``value`` in place, carry value's history.

    The nodes that consumed ``target``'s old value get a snapshot of it instead, so their
    gradients stay right; nodes recorded earlier detect the change through versions.

    Raises:
        RuntimeError: ``target`` is a leaf that requires grad (as in PyTorch).
    """
    produced_by = target.grad_fn
    if produced_by is not None and produced_by.output is not None:
        # Rules such as exp's use their output: keep the value they saw.
        produced_by.output = Tensor(target._data.copy(), target._placement, target._sbp,
                                    target.shape)
    if not (_mode.enabled and (target.requires_grad or value.requires_grad)):
        return
    if target._base is not None and (target._base.requires_grad or value.requires_grad):
        raise RuntimeError("an in-place change through a view of a tensor that takes part in "
                           "autograd is not supported; change the base tensor, or clone() the "
                           "view first")
    if target.requires_grad and target.grad_fn is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation; wrap it in mpiflow.no_grad() or use an out-of-place op")
    node = value.grad_fn
    if node is not None and node.operands is not None and any(o is target
                                                               for o in node.operands):
        snapshot = Tensor(target._data.copy(), target._placement, target._sbp, target.shape,
                          requires_grad=target.requires_grad)
        snapshot.grad_fn = target.grad_fn
        snapshot._version = target._version
        node.operands = tuple(snapshot if o is target else o for o in node.operands)
    target.requires_grad = value.requires_grad
    target.grad_fn = node


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


def _accumulate(leaf: Tensor, grad: Tensor) -> None:
    from ..ops import pointwise as pw

    if tuple(grad.shape) != tuple(leaf.shape):
        raise RuntimeError(f"gradient of shape {tuple(grad.shape)} for a tensor of shape "
                           f"{tuple(leaf.shape)}: a gradient rule is wrong")
    if leaf.is_global:
        grad = grad.to_global(leaf.placement, leaf.sbp)
    elif grad.is_global:
        raise RuntimeError("a local tensor received a global gradient: a gradient rule is wrong")
    grad = pw.cast(grad, leaf.dtype)
    grad = _run_hooks(leaf, grad)
    if leaf.grad is None:
        leaf.grad = pw.clone(grad)  # gradients may be shared between operands: own the memory
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
    from ..creation import ones_like

    if not tensor.requires_grad:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a "
                           "grad_fn")
    if gradient is None:
        if tensor.numel() != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs; pass "
                               "gradient= for a tensor of shape " + str(tuple(tensor.shape)))
        gradient = ones_like(tensor)
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
        in_grads: Sequence[Any] = [None] * len(node.operands)
        if grad is not None:
            _check_versions(node)
            grad = _run_hooks(node.output_ref(), grad)
            operands = [_plain(o) for o in node.operands]
            in_grads = node.rule(grad, operands, node.output, **node.attrs)
        for operand, g in zip(node.operands, in_grads):
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
            uses[key] -= 1
            if uses[key] == 0 and key in leaf_grads:
                _accumulate(operand, leaf_grads.pop(key))
        if not retain_graph:
            node.rule, node.operands, node.output = None, None, None


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
