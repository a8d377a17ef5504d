"""ZeRO stage 3 for ``nn.Graph``: parameters whose whole value is held only while it is used.

A stage-3 parameter keeps its storage in its ``S(0)`` shard (the tensor the optimizer updates,
:mod:`mpiflow.nn.graph.zero`); its own array, the whole (``B``) value, is *materialized*: made
by an all-gather of the shard's rows when something reads it, and let go (:func:`release`)
after the graph's update and, in a replayed plan, after the last step that reads it. Between
graph calls each rank then holds its rows only, about ``1/N`` of the parameter.

The parameter stays the same object, of a subclass of its class whose ``_data`` gathers on read:
eager code, ``state_dict()`` and other graphs read the whole, current value as before. Reading
it is a collective over the parameter's placement (an all-gather, once: the value is kept until
the next graph call lets it go; even ``to_local()``, local for other global tensors), so all its
ranks must read it, as all run a global op. Its dtype, element size and ``repr`` read no value
and do not communicate (the ``repr`` of a let-go parameter shows its shard). A whole value that
is present when a graph call begins is the parameter's value (eager code may have written into
it: ``load_state_dict``, an init function): :func:`sync` copies its rows into the shard, then
the call goes on from there. Tensors that alias the parameter's array (``p.detach()``, a view, a
``state_dict()`` entry) keep the value they had when the graph next updates the parameter: read
the parameter again for the new value.

Examples:
    >>> p = nn.Parameter(flow.ones(4))
    >>> shard = flow.zeros(4)           # on one rank the "shard" is the whole
    >>> shard_parameter(p, shard)
    >>> release(p); is_materialized(p)
    False
    >>> p.dtype, p.element_size()       # no gather
    (mpiflow.float32, 4)
    >>> p                               # no gather: the shard
    Parameter (ZeRO stage 3: held as its S(0) shard, gathered when read):
    tensor([0., 0., 0., 0.])
    >>> is_materialized(p)
    False
    >>> p.detach()                      # read: gathered from the shard again
    tensor([0., 0., 0., 0.])
    >>> is_materialized(p)
    True
    >>> unshard_parameter(p); type(p).__name__
    'Parameter'
"""

from __future__ import annotations

import weakref
from typing import Any

from ...autograd import no_grad
from ...tensors import trace
from ...tensors.tensor import Tensor

__all__ = ["held_bytes", "is_materialized", "is_sharded", "release", "shard_parameter",
           "shard_of", "sync", "unshard_parameter"]

_SLOT: Any = Tensor.__dict__["_data"]  # the array slot under the subclasses' property
# parameter id -> (a weak reference to it, its shard)
_SHARDS: dict[int, tuple[weakref.ref[Tensor], Tensor]] = {}
_CLASSES: dict[type, type] = {}  # parameter class -> its stage-3 subclass


def _get(self: Tensor) -> Any:
    data = _SLOT.__get__(self, type(self))
    if data is None:
        data = _gather(self)
        _SLOT.__set__(self, data)
    return data


def _set(self: Tensor, value: Any) -> None:
    _SLOT.__set__(self, value)


# What reads no value and so must not communicate: the dtype, the element size, the repr
# (which shows a global tensor's local data only: here, while let go, the shard's rows).
def _array_or_shard(self: Tensor) -> Any:
    data = _SLOT.__get__(self, type(self))
    return shard_of(self)._data if data is None else data


def _dtype(self: Tensor) -> Any:
    return Tensor(_array_or_shard(self)).dtype


def _element_size(self: Tensor) -> int:
    return int(_array_or_shard(self).dtype.itemsize)


def _sharded_class(cls: type) -> type:
    sub = _CLASSES.get(cls)
    if sub is None:
        def show(self: Tensor) -> str:
            if is_materialized(self):
                return str(cls.__repr__(self))  # type: ignore[call-arg]
            return (f"{cls.__name__} (ZeRO stage 3: held as its S(0) shard, gathered when "
                    f"read):\n{shard_of(self).detach()!r}")

        def reduce(self: Tensor, protocol: Any) -> Any:
            # Pickled (a copy: flow.save, deepcopy) as the parameter's own class, whole.
            _get(self)
            reduced: Any = object.__reduce_ex__(self, protocol)
            return (_new, (cls,), *reduced[2:])

        sub = type(cls.__name__, (cls,), {"__slots__": (), "_data": property(_get, _set),
                                          "__reduce_ex__": reduce,
                                          "dtype": property(_dtype),
                                          "element_size": _element_size,
                                          "__repr__": show,
                                          "__module__": cls.__module__,
                                          "__qualname__": cls.__qualname__})
        _CLASSES[cls] = sub
    return sub


def _new(cls: type[Tensor]) -> Tensor:
    return Tensor.__new__(cls)


def shard_parameter(p: Tensor, shard: Tensor) -> None:
    """Make ``shard`` (a tensor of ``p``'s shape and value, split along dim 0) the storage of
    ``p``: ``p``'s whole value is gathered from it when read after :func:`release`.

    Raises:
        ValueError: ``shard``'s shape is not ``p``'s, or ``p`` has a shard already.
    """
    if tuple(shard.shape) != tuple(p.shape):
        raise ValueError(f"ZeRO stage 3: the shard's shape {tuple(shard.shape)} is not the "
                         f"parameter's {tuple(p.shape)}")
    if is_sharded(p):
        raise ValueError("ZeRO stage 3: the parameter has a shard already")
    key = id(p)
    _SHARDS[key] = (weakref.ref(p, lambda _: _SHARDS.pop(key, None)), shard)
    p.__class__ = _sharded_class(type(p))


def unshard_parameter(p: Tensor) -> None:
    """Make ``p`` an ordinary tensor again, its whole value materialized (a no-op for a
    parameter without a shard)."""
    if not is_sharded(p):
        return
    _get(p)
    _SHARDS.pop(id(p), None)
    p.__class__ = type(p).__mro__[1]


def is_sharded(p: Tensor) -> bool:
    """Whether ``p`` is a stage-3 parameter (its storage a shard)."""
    held = _SHARDS.get(id(p))
    return held is not None and held[0]() is p


def shard_of(p: Tensor) -> Tensor:
    """The shard that stores stage-3 parameter ``p``."""
    return _SHARDS[id(p)][1]


def is_materialized(p: Tensor) -> bool:
    """Whether ``p``'s whole value is present on this rank now (always, unless sharded)."""
    return _SLOT.__get__(p, type(p)) is not None


def release(p: Tensor) -> None:
    """Let go of stage-3 parameter ``p``'s whole value (the shard keeps it); a no-op for
    others."""
    if is_sharded(p):
        _SLOT.__set__(p, None)


def sync(p: Tensor) -> None:
    """Copy the rows of ``p``'s whole value, if present, into its shard (no communication):
    what eager code wrote into the parameter since the graph last updated it."""
    data = _SLOT.__get__(p, type(p))
    if data is None or not is_sharded(p):
        return
    shard = shard_of(p)
    if p._placement is None:
        shard._data[...] = data
    else:
        with trace.suspended(), no_grad():
            rows = Tensor(data, p._placement, p._sbp, p._shape).to_global(shard.placement,
                                                                         shard.sbp)
        shard._data[...] = rows._data
    shard._version += 1


def held_bytes(p: Tensor) -> int:
    """The bytes of ``p``'s value this rank holds now: its array, and a stage-3 parameter's
    shard rows."""
    data = _SLOT.__get__(p, type(p))
    total = 0 if data is None else int(data.nbytes)
    if is_sharded(p):
        total += int(shard_of(p)._data.nbytes)
    return total


def _gather(p: Tensor) -> Any:
    """The whole value of stage-3 parameter ``p``: its shard's rows all-gathered (a
    collective over the placement; never recorded into a traced plan)."""
    shard = shard_of(p)
    if p._placement is None:  # a local parameter (one process): the shard is the whole
        return shard._data.copy()
    with trace.suspended(), no_grad():
        whole = shard.to_global(p._placement, p._sbp)
    data = whole._data
    if data is shard._data or getattr(data, "base", None) is shard._data:
        data = data.copy()  # its own memory, as the parameter's array always is
    return data
