"""Flat buffers for the ``foreach`` optimizers: many parameters updated as one array.

PyTorch's ``foreach``/``fused`` optimizers cut the per-parameter cost of a step by running each
operation over every parameter at once. On numpy that means one array: a :class:`FlatGroup`
lays the parameters of one dtype and array module out in a flat buffer, keeps their optimizer
state (momenta, moments) as views of flat state buffers, gathers the gradients into a flat
buffer with one copy per step, and runs the update kernel once.

The parameters' memory moves into the flat buffer (each parameter's array becomes a view of
it) only where nothing else refers to the old array: the same reference-count check autograd
uses before it adopts a gradient. Otherwise the parameters are gathered before and scattered
after each step: two more copies, the same numbers.

Examples:
    >>> from mpiflow.optim.foreach import FlatGroup
    >>> w = nn.Parameter(flow.ones(2, 2))
    >>> group = FlatGroup([w])
    >>> group.size
    4
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy

from ..core.array_module import array_module
from ..layouts.sbp import Partial
from ..tensors.tensor import Tensor

__all__ = ["FlatGroup", "check_flat_flags", "flat_key"]


def flat_key(p: Tensor) -> Any:
    """What parameters must share to be updated as one flat array, or None if ``p`` cannot:
    its array module and dtype, placement and sbp (shards are updated elementwise, so any
    layout but a partial sum works)."""
    sbp = p._sbp
    if sbp is not None and any(isinstance(s, Partial) for s in sbp):
        return None
    data = p._data
    return (array_module(data).__name__, data.dtype, p._placement, sbp)


def check_flat_flags(foreach: bool | None, fused: bool | None) -> None:
    """PyTorch's rule: ``foreach`` and ``fused`` are not both True.

    Raises:
        RuntimeError: both are True.
    """
    if foreach and fused:
        raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


def _array_refs(holder: Tensor) -> int:
    return sys.getrefcount(holder._data)


def _base_refs(holder: Tensor) -> int:
    return sys.getrefcount(holder._data.base)


_SOLE = _array_refs(Tensor(numpy.empty(1)))  # the count of an array only its tensor holds
_SOLE_BASE = _base_refs(Tensor(numpy.empty(2)[:1]))  # of a base only that array views


def _movable(p: Tensor) -> bool:
    """Whether nothing but ``p`` refers to its array (or to the array it views), so that
    giving ``p`` a new array changes nothing anyone else can see."""
    if _array_refs(p) > _SOLE:
        return False
    base = getattr(p._data, "base", None)
    return base is None or (getattr(base, "base", None) is None and _base_refs(p) <= _SOLE_BASE)


class FlatGroup:
    """Parameters of one :func:`flat_key` in flat parameter, gradient and state buffers.

    Args:
        params: the parameters (leaves), in the order of their group.
    """

    def __init__(self, params: Sequence[Tensor]) -> None:
        self.params = list(params)
        first = self.params[0]._data
        self.xp = xp = array_module(first)
        self.shapes = [tuple(p._data.shape) for p in self.params]
        sizes = [int(p._data.size) for p in self.params]
        self.offsets = [0]
        for n in sizes:
            self.offsets.append(self.offsets[-1] + n)
        self.size = self.offsets[-1]
        self.flat = xp.empty(self.size, dtype=first.dtype)
        self.grad = xp.empty(self.size, dtype=first.dtype)
        self.gather_params()
        del first  # a local reference to a parameter's array would read as another holder
        self.moved = all(_movable(p) for p in self.params)
        if self.moved:
            for p, view in zip(self.params, self.views(self.flat)):
                p._data = view
        self.state: dict[str, tuple[Any, list[Tensor]]] = {}
        self._scratch: Any = None

    def scratch(self) -> Any:
        """A temporary of the group's size, kept between steps (no allocation per step)."""
        if self._scratch is None:
            self._scratch = self.xp.empty(self.size, dtype=self.flat.dtype)
        return self._scratch

    def views(self, flat: Any) -> list[Any]:
        """Each parameter's piece of ``flat``, in its shape."""
        o = self.offsets
        return [flat[o[i]:o[i + 1]].reshape(shape) for i, shape in enumerate(self.shapes)]

    def still_flat(self) -> bool:
        """Whether the moved parameters still live in the flat buffer (nothing rebound them)."""
        return not self.moved or all(p._data.base is self.flat for p in self.params)

    def gather_params(self) -> None:
        """Copy the parameters into the flat buffer (needed only where they were not moved)."""
        for p, view in zip(self.params, self.views(self.flat)):
            view[...] = p._data

    def scatter_params(self) -> None:
        """Copy the flat buffer back into parameters that were not moved."""
        if not self.moved:
            for p, view in zip(self.params, self.views(self.flat)):
                p._data[...] = view
                p._version += 1
        else:
            for p in self.params:
                p._version += 1

    def gather_grads(self) -> Any:
        """The gradients in one flat array (one copy), or None if one is missing or differs in
        dtype or shape."""
        for p, view, shape in zip(self.params, self.views(self.grad), self.shapes):
            g = p.grad
            if g is None or g._data.dtype != self.flat.dtype or tuple(g._data.shape) != shape:
                return None
            view[...] = g._data
        return self.grad

    def adopt(self, name: str, flat: Any, states: Sequence[dict[str, Any]]) -> None:
        """Make ``flat`` (a new array of this group's size) the buffer of state ``name``."""
        tensors = []
        for p, view, state in zip(self.params, self.views(flat), states):
            tensor = Tensor(view, p._placement, p._sbp, p._shape)
            state[name] = tensor
            tensors.append(tensor)
        self.state[name] = (flat, tensors)

    def state_buffer(self, name: str, states: Sequence[dict[str, Any]]) -> Any:
        """The flat buffer of state ``name``, its pieces the tensors ``states[i][name]``.

        A buffer is made (zeros, or the current values of the per-parameter states) the first
        time, and again when a state tensor was replaced (e.g. by ``load_state_dict``).
        """
        held = self.state.get(name)
        if held is not None and all(s.get(name) is t for s, t in zip(states, held[1])):
            return held[0]
        flat = self.xp.zeros(self.size, dtype=self.flat.dtype)
        for view, state in zip(self.views(flat), states):
            old = state.get(name)
            if isinstance(old, Tensor):
                view[...] = old._data
        self.adopt(name, flat, states)
        return flat
