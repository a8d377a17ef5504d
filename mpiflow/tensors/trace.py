"""Recording a program's array work as a replayable list of steps (``nn.Graph``'s tracer).

While a :class:`Recorder` is active (``with recording(recorder):``), the ops engine reports every
kernel it runs (:meth:`Recorder.kernel`: a closure over arrays with the op's layouts and
redistributions fixed), and the few library functions that change a tensor's memory in place or
make a tensor without a kernel (``assign_``, ``fill_``, ``__setitem__``, ``to_global``,
autograd's gradient accumulation) run through :func:`call`, which records them as opaque steps.
A later replay (:mod:`mpiflow.nn.graph.plan`) runs the same steps on new arrays without any
per-op dispatch.

An operand's array is resolved by identity: an array an earlier step produced is that step's
slot, an input's array its input slot, the array of a registered state tensor (a parameter, a
buffer; or a parameter's ``.grad`` once an opaque step has touched it) is read from that tensor
when the step runs, and anything else is a constant captured as it is. Outside a recording the
cost is one attribute check per op.

Reading a tensor's value into Python (``numpy()``, ``item()``, ``bool()``) while a graph is built
raises :class:`DataDependentError`: control flow that depends on data cannot be traced.

Examples:
    >>> from mpiflow.tensors.trace import Recorder, recording
    >>> x = flow.ones(2)
    >>> rec = Recorder()
    >>> rec.add_input(x)
    0
    >>> with recording(rec):
    ...     y = x * 2 + 1
    >>> len(rec.steps)
    2
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .tensor import Tensor

__all__ = ["DataDependentError", "Recorder", "State", "call", "check_data_access", "recording",
           "state", "suspended"]

SLOT, STATE, GRAD, CONST, TEMPLATE = 0, 1, 2, 3, 4


class DataDependentError(RuntimeError, ValueError):
    """A graph's ``build()`` read a tensor's value into Python (control flow on data)."""


class State:
    """What is active now: the recorder (or None) and whether a graph is being built."""

    __slots__ = ("building", "loss_scale", "recorder")

    def __init__(self) -> None:
        self.recorder: Recorder | None = None
        self.building = False
        self.loss_scale = 1.0  # what an implicit backward() seeds with (1/micro-batches)


state = State()


class Recorder:
    """The steps of one traced call, with the slots their arrays live in.

    A step is ``(run, args, out)``: ``run`` a callable, ``args`` one ``(kind, value)`` per
    argument (a slot index, a state tensor whose array or ``.grad`` is read at replay, a
    constant, or for opaque steps a slot with the tensor it is wrapped as), ``out`` the slot of
    its result (or -1), and ``opaque`` whether ``run`` takes tensors (True) or arrays.
    """

    def __init__(self) -> None:
        self.steps: list[tuple[Callable[..., Any], tuple[tuple[int, Any], ...], int, bool]] = []
        self.meta: list[tuple[Any, Any, Any]] = []  # per slot: (placement, sbp, shape)
        self.n_inputs = 0
        self.unreplayable: str | None = None
        self.backward_at: int | None = None  # the first backward's first step (pipelines)
        self._slots: dict[int, int] = {}
        self._state: dict[int, tuple[int, Tensor]] = {}
        # Keeps arrays alive so that their ids stay unique: id -> [array, references held].
        self._alive: dict[int, list[Any]] = {}

    # -- what the arrays are ---------------------------------------------------------------
    def _keep(self, array: Any) -> None:
        held = self._alive.get(id(array))
        if held is None:
            self._alive[id(array)] = [array, 1]
        else:
            held[1] += 1

    def holds(self, array: Any) -> int:
        """How many references to ``array`` the recorder holds (autograd's check that a
        gradient is referenced by nothing else discounts them)."""
        held = self._alive.get(id(array))
        return 0 if held is None else held[1]

    def add_input(self, t: Tensor) -> int:
        """Make ``t``'s array an input slot; returns the slot."""
        slot = self._new_slot(t)
        self.n_inputs = slot + 1
        return slot

    def add_state(self, t: Tensor) -> None:
        """Read ``t``'s array from ``t`` itself at replay (a parameter, a buffer)."""
        self._keep(t._data)
        self._state[id(t._data)] = (STATE, t)

    def _new_slot(self, t: Tensor) -> int:
        self._keep(t._data)
        slot = len(self.meta)
        self.meta.append((t._placement, t._sbp, t._shape))
        self._slots[id(t._data)] = slot
        return slot

    def resolve(self, value: Any, wrap: bool = False) -> tuple[int, Any]:
        """How a step finds ``value`` at replay: ``(kind, slot, state tensor or constant)``."""
        if not isinstance(value, Tensor):
            return (CONST, value)
        key = id(value._data)
        slot = self._slots.get(key)
        if slot is not None:
            return (TEMPLATE if wrap else SLOT, slot)
        held = self._state.get(key)
        if held is not None:
            kind, t = held
            return (kind, t) if not wrap or kind == GRAD else (CONST, t)
        self._check_constant(value)
        self._keep(value._data)
        return (CONST, value if wrap else value._data)

    def _check_constant(self, value: Tensor) -> None:
        """A constant that autograd made, or a view of a recorded step's array, was computed
        by code the recorder did not see: such a trace is not replayed (safe, not fast)."""
        if value.grad_fn is not None:
            self.mark_unreplayable("a tensor computed outside the ops engine takes part "
                                   "(it has a grad_fn but no recorded step made it)")
            return
        base = getattr(value._data, "base", None)
        while base is not None:
            if id(base) in self._slots:
                self.mark_unreplayable("a view of a traced array was made outside the ops "
                                       "engine")
                return
            base = getattr(base, "base", None)

    def _note_grads(self, args: tuple[Any, ...]) -> None:
        for a in args:
            if isinstance(a, Tensor) and a.grad is not None and id(a._data) in self._state:
                self._keep(a.grad._data)
                self._state[id(a.grad._data)] = (GRAD, a)

    # -- recording ----------------------------------------------------------------------------
    def kernel(self, run: Callable[..., Any], operands: Sequence[Any], out: Tensor,
               attrs: dict[str, Any] | None = None) -> None:
        """Record ``out._data = run(*arrays of operands)``; ``attrs`` that hold arrays (an
        index tensor) may depend on data, so such a trace is not replayed."""
        if attrs and any(_holds_array(v) for v in attrs.values()):
            self.mark_unreplayable("an op takes an array as an attribute (tensor indexing)")
        args = tuple(self.resolve(v) for v in operands)
        self.steps.append((run, args, self._new_slot(out), False))

    def opaque(self, fn: Callable[..., Any], args: tuple[Any, ...], result: Any) -> None:
        """Record a call of ``fn`` on tensors (already made, with ``result``: a tensor, a
        tuple of tensors and Nones, or anything else, which replays ignore)."""
        specs = tuple(self.resolve(a, wrap=True) for a in args)
        out: Any = -1
        if isinstance(result, Tensor):
            out = self._new_slot(result)
        elif isinstance(result, tuple):
            out = tuple(self._new_slot(r) if isinstance(r, Tensor) else -1 for r in result)
        self.steps.append((fn, specs, out, True))
        self._note_grads(args)

    def known(self, value: Any) -> bool:
        """Whether ``value`` (a tensor, or a tuple of tensors and Nones) was made by recorded
        steps or is an input or state: whether a replay can produce it."""
        if isinstance(value, (tuple, list)):
            return all(self.known(v) for v in value)
        if not isinstance(value, Tensor):
            return value is None
        key = id(value._data)
        return key in self._slots or key in self._state

    def mark_backward(self) -> None:
        """Note where the first ``backward()`` begins: the steps before it are the forward
        pass, which a pipelined replay runs for every micro-batch before any backward."""
        if self.backward_at is None:
            self.backward_at = len(self.steps)

    def rollback(self, mark: int) -> None:
        """Forget the steps recorded since ``len(steps)`` was ``mark``."""
        del self.steps[mark:]

    def mark_unreplayable(self, reason: str) -> None:
        """This trace cannot be replayed (e.g. it indexes with a tensor): run eagerly instead."""
        if self.unreplayable is None:
            self.unreplayable = reason


def _holds_array(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return any(_holds_array(v) for v in value)
    return isinstance(value, Tensor) or hasattr(value, "__array_interface__") or hasattr(
        value, "__cuda_array_interface__")


@contextmanager
def recording(recorder: Recorder | None, building: bool = True) -> Iterator[None]:
    """Record into ``recorder`` (None: only guard against data access) inside the block."""
    previous = state.recorder, state.building
    state.recorder, state.building = recorder, building
    try:
        yield
    finally:
        state.recorder, state.building = previous


@contextmanager
def suspended() -> Iterator[None]:
    """Neither record nor guard inside the block (a library call recorded as one step)."""
    previous = state.recorder, state.building
    state.recorder, state.building = None, False
    try:
        yield
    finally:
        state.recorder, state.building = previous


def call(fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``fn(*args)``; while recording, as one opaque step that replays the same call.

    For library functions that write into a tensor's memory or make a tensor without a
    kernel. Outside a recording this is ``fn(*args)``.
    """
    recorder = state.recorder
    if recorder is None:
        return fn(*args)
    with suspended():
        result = fn(*args)
    recorder.opaque(fn, args, result)
    return result


def check_data_access(what: str) -> None:
    """Raise :class:`DataDependentError` when a graph is being built.

    Raises:
        DataDependentError: ``what`` reads a tensor's value into Python inside ``build()``.
    """
    if state.building:
        raise DataDependentError(
            f"{what} reads a tensor's value into Python while an nn.Graph is built: control "
            "flow in build() cannot depend on data; compute it with tensor ops (flow.where), "
            "or read the value from the graph's outputs")
