"""Tracing: run a function once while recording its array work, and make a plan of it.

:func:`trace_function` is the tracer ``nn.Graph`` uses for each input signature, and the entry
point for code that wants a replayable plan of a plain function (tests; the legacy
``flow.global_function`` style of API). The function runs eagerly, once, with the recorder of
:mod:`mpiflow.tensors.trace` active: its result is the eager result; the plan replays the same
kernels on new inputs of the same shapes, dtypes and layouts.

Examples:
    >>> w = flow.ones(3, requires_grad=True)
    >>> plan, loss = trace_function(lambda x: (x * w).sum(), (flow.ones(3),), state=(w,))
    >>> loss
    tensor(3.)
    >>> plan.run((flow.full((3,), 2.0),))
    tensor(6.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ...tensors.tensor import Tensor
from ...tensors.trace import Recorder, recording
from .plan import Plan, flatten, unflatten

__all__ = ["Traced", "trace", "trace_function"]


class Traced:
    """What one trace gave: the plan (None where the trace cannot be replayed), and why not."""

    __slots__ = ("plan", "reason")

    def __init__(self, plan: Plan | None, reason: str | None) -> None:
        self.plan, self.reason = plan, reason


def _detached(value: Any) -> Any:
    return value.detach() if isinstance(value, Tensor) else value


def trace(fn: Callable[..., Any], tensors: Sequence[Any], state: Iterable[Tensor] = (),
          building: bool = True) -> tuple[Traced, Any]:
    """Run ``fn(*tensors)`` once, recording; returns the trace and ``fn``'s result (detached).

    Args:
        fn: the function; it is called with ``tensors`` as its positional arguments.
        tensors: its arguments; the tensors among them become the plan's inputs, in order.
        state: tensors the plan reads afresh at each replay (parameters, buffers): their
            values may change between calls, their arrays may be replaced.
        building: reading a value into Python (``item()``) inside ``fn`` raises
            :class:`~mpiflow.tensors.trace.DataDependentError`.
    """
    recorder = Recorder()
    for t in tensors:
        if isinstance(t, Tensor):
            recorder.add_input(t)
    for t in state:
        recorder.add_state(t)
    with recording(recorder, building):
        result = fn(*tensors)
    leaves: list[Any] = []
    structure = flatten(result, leaves)
    if recorder.unreplayable is not None:
        traced = Traced(None, recorder.unreplayable)
    else:
        traced = Traced(Plan(recorder, structure, leaves), None)
    return traced, unflatten(structure, [_detached(v) for v in leaves])


def trace_function(fn: Callable[..., Any], tensors: Sequence[Any], state: Iterable[Tensor] = ()
                   ) -> tuple[Plan | None, Any]:
    """Trace ``fn(*tensors)`` into a :class:`Plan`; returns ``(plan, result)``.

    The plan is None when the call cannot be replayed (it indexes with a tensor): run ``fn``
    eagerly instead. ``plan.run(new_tensors)`` replays it on tensors of
    the same shapes, dtypes and layouts as ``tensors``' tensors, reading ``state`` afresh.

    Args:
        fn: the function to trace.
        tensors: its positional arguments (the tensors among them are the plan's inputs).
        state: tensors read afresh at each replay (parameters and buffers).

    Returns:
        ``(plan or None, fn's result with its tensors detached)``.

    Raises:
        DataDependentError: ``fn`` reads a tensor's value into Python.
    """
    traced, result = trace(fn, tensors, state)
    return traced.plan, result
