"""The autograd tape: grad mode, the recorded graph node, and recording by ops.

Every op records a :class:`Node` holding its gradient rule and its operands when grad mode is
on and an operand requires grad. This is the part of autograd that ops need, so it lives in the
tensor layer below them; the backward sweep, which runs ops, is :mod:`mpiflow.autograd.graph`.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from .tensor import Tensor

__all__ = [
    "Node",
    "Rule",
    "enable_grad",
    "is_grad_enabled",
    "no_grad",
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
        >>> x = flow.ones(2, requires_grad=True)
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
    for o in operands:
        if isinstance(o, Tensor) and o.requires_grad:
            break
    else:
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
