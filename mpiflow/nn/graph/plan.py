"""A traced call as a static plan, and its replay.

:class:`Plan` is what one traced call of ``build()`` did, as a list of steps over numbered slots
(:class:`mpiflow.tensors.trace.Recorder`): each op's kernel with the layouts it chose and the
redistributions it planned, the backward's gradient kernels, the gradients' accumulation into
``.grad``. :meth:`Plan.run` replays it on new input arrays: no shape, dtype or layout rule, no
autograd node, no per-op dispatch, only the kernels (and the collectives the plan fixed), in the
same order on the same operands, so the results are the eager program's bits. A slot's array is
released after its last use (:mod:`mpiflow.nn.graph.memory`), as eager's backward frees
activations.

Examples:
    >>> from mpiflow.nn.graph import trace_function
    >>> plan, out = trace_function(lambda x: x * 2 + 1, (flow.ones(2),))
    >>> plan.run((flow.full((2,), 3.0),))
    tensor([7., 7.])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from ...autograd import no_grad
from ...tensors.tensor import Tensor
from ...tensors.trace import CONST, GRAD, SLOT, STATE, TEMPLATE, Recorder
from .memory import last_uses

__all__ = ["Plan", "flatten", "unflatten"]


def flatten(value: Any, leaves: list[Any]) -> Any:
    """``value``'s structure (tuples, lists, dicts) with each leaf replaced by its index in
    ``leaves`` (appended to)."""
    if isinstance(value, (tuple, list)):
        return (type(value), [flatten(v, leaves) for v in value])
    if isinstance(value, dict):
        return (dict, [(k, flatten(v, leaves)) for k, v in value.items()])
    leaves.append(value)
    return len(leaves) - 1


def unflatten(structure: Any, leaves: Sequence[Any]) -> Any:
    """The inverse of :func:`flatten`."""
    if isinstance(structure, int):
        return leaves[structure]
    kind, parts = structure
    if kind is dict:
        return {k: unflatten(v, leaves) for k, v in parts}
    items = [unflatten(v, leaves) for v in parts]
    return kind(items) if kind in (tuple, list) else kind(*items)


class Plan:
    """The steps of one traced call and how to rebuild its outputs.

    Args:
        recorder: the trace.
        outputs: the structure of the outputs (see :func:`flatten`).
        leaves: the output leaves seen at trace time (tensors, or other values kept as they
            are).
    """

    def __init__(self, recorder: Recorder, outputs: Any, leaves: Sequence[Any]) -> None:
        self.steps = list(recorder.steps)
        self.meta = list(recorder.meta)
        self.n_inputs = recorder.n_inputs
        self.backward_at = recorder.backward_at
        self.structure = outputs
        self.outputs: list[tuple[int, Any, Any]] = []  # (kind, where, meta) per leaf
        for leaf in leaves:
            if isinstance(leaf, Tensor):
                kind, where = recorder.resolve(leaf)
                self.outputs.append((kind, where, (leaf._placement, leaf._sbp, leaf._shape)))
            else:
                self.outputs.append((CONST, leaf, None))
        keep = {where for kind, where, _ in self.outputs if kind == SLOT}
        self.release = last_uses(self.steps, len(self.meta), keep)
        self.frees: list[list[Callable[[], None]]] | None = None

    def free_after_last_use(self, tensors: Sequence[Tensor],
                            free: Callable[[Tensor], None]) -> None:
        """During replays, call ``free(t)`` for each of the state ``tensors`` right after the
        last step that reads it (a kernel reading its array, a call taking it): ZeRO stage 3
        lets a parameter's gathered value go there. A tensor no step reads is left alone."""
        ids = {id(t): t for t in tensors}
        last: dict[int, int] = {}
        for index, (_, args, _out, _opaque) in enumerate(self.steps):
            for kind, where in args:
                if kind in (STATE, CONST) and id(where) in ids:
                    last[id(where)] = index
        frees: list[list[Callable[[], None]]] = [[] for _ in self.steps]
        for key, index in last.items():
            frees[index].append(partial(free, ids[key]))
        self.frees = frees if last else None

    def __len__(self) -> int:
        return len(self.steps)

    def describe(self) -> str:
        """One line per step: its slot, the function it runs and where its operands come from
        (what ``Graph.debug()`` prints)."""
        names = {SLOT: "slot", STATE: "state", GRAD: "grad", CONST: "const", TEMPLATE: "slot"}
        lines = []
        for i, (run, args, out, opaque) in enumerate(self.steps):
            what = getattr(run, "__qualname__", repr(run)).split(".<locals>")[0]
            operands = ", ".join(f"{names[k]}{v}" if k in (SLOT, TEMPLATE) else names[k]
                                 for k, v in args)
            kind = "call" if opaque else "kernel"
            outs = ", ".join(f"slot{o}" if o >= 0 else "-"
                             for o in (out if isinstance(out, tuple) else (out,)))
            lines.append(f"  {i:4d} {kind:6s} {what}({operands}) -> {outs}")
        return "\n".join(lines)

    def run(self, inputs: Sequence[Tensor]) -> Any:
        """Replay on ``inputs`` (tensors of the traced call's shapes, dtypes and layouts).

        Returns:
            The outputs, as the traced call returned them (tensors detached from autograd).
        """
        vals = self._start(inputs)
        with no_grad():
            self._steps(vals, 0, len(self.steps))
        return self._finish(vals)

    def run_pipelined(self, batches: Sequence[Sequence[Tensor]]) -> list[Any]:
        """Replay once per micro-batch, as a GPipe schedule: the forward steps (those before
        the traced call's first ``backward()``) of every micro-batch, then the remaining steps
        of every micro-batch, in micro-batch order.

        Every rank runs the same sequence, so the collectives match; a rank whose stage is
        done with micro-batch ``i`` goes on to ``i + 1`` while the next stage works on ``i``,
        which is the pipelining. Each micro-batch runs the same steps on the same operands
        as :meth:`run` and the gradients accumulate in micro-batch order, so the results are
        the bits of running them one after the other (the forward never reads a gradient).

        Args:
            batches: one list of input tensors per micro-batch.

        Returns:
            One output structure per micro-batch.
        """
        split = len(self.steps) if self.backward_at is None else self.backward_at
        states = [self._start(inputs) for inputs in batches]
        with no_grad():
            for vals in states:
                self._steps(vals, 0, split)
            for vals in states:
                self._steps(vals, split, len(self.steps))
        return [self._finish(vals) for vals in states]

    def _start(self, inputs: Sequence[Tensor]) -> list[Any]:
        vals: list[Any] = [None] * len(self.meta)
        for i, t in enumerate(inputs):
            vals[i] = t._data
        return vals

    def _steps(self, vals: list[Any], begin: int, end: int) -> None:
        meta = self.meta
        release = self.release
        frees = self.frees
        steps = self.steps
        for index in range(begin, end):
            run, args, out, opaque = steps[index]
            if opaque:
                result = run(*[_wrapped(kind, where, vals, meta) for kind, where in args])
                if out.__class__ is tuple:
                    for slot, r in zip(out, result):
                        if slot >= 0:
                            vals[slot] = r._data
                elif out >= 0:
                    vals[out] = result._data
            else:
                vals[out] = run(*[vals[where] if kind == SLOT else _value(kind, where)
                                  for kind, where in args])
            for slot in release[index]:
                vals[slot] = None
            if frees is not None:
                for free in frees[index]:
                    free()

    def _finish(self, vals: list[Any]) -> Any:
        leaves = []
        for kind, where, m in self.outputs:
            if m is None:
                leaves.append(where)
            elif kind == SLOT:
                leaves.append(Tensor(vals[where], *m))
            else:
                leaves.append(Tensor(_value(kind, where), *m))
        return unflatten(self.structure, leaves)


def _value(kind: int, where: Any) -> Any:
    if kind == STATE:
        return where._data
    if kind == GRAD:
        return where.grad._data
    return where


def _wrapped(kind: int, where: Any, vals: list[Any], meta: list[Any]) -> Any:
    if kind == TEMPLATE:
        return Tensor(vals[where], *meta[where])
    if kind == GRAD:
        return where.grad
    return where

