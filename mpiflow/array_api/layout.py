"""Where the array API namespace puts the arrays it creates: the default placement and layout.

A creation function (``asarray``, ``zeros``, ``arange``, ...) without ``device=`` makes a
*global* array on the **default placement**, every rank of the world (one process: that
process alone), laid out by the **default rule**: split along dim 0 (``S(0)`` on every mesh
axis) when the array has a dimension, broadcast (``B``) when it is 0-d. Each rank builds only
its own part; nothing is communicated.

Choose another placement or layout:

- per call, with ``device=``: a :class:`~mpiflow.placement` (the default rule on it), an
  array's ``x.device`` (the placement and kind of ``x``; a local ``x`` gives local arrays),
  or ``"cpu"`` / ``"cuda"`` (the default placement, on that kind of memory);
- for a block of code, with :func:`default_layout` (a context manager), or for the rest of
  the program with :func:`set_default_layout`: a placement and an ``sbp`` (one layout, or one
  per mesh axis; a split of a dim the array lacks becomes ``B``), or ``placement=None`` for
  local arrays (each process its own, as numpy).

Functions that take arrays follow their inputs: ``zeros_like(x)`` has ``x``'s placement and
layout, an elementwise result the layout the op chooses.

Examples:
    >>> from mpiflow import array_api as xp
    >>> x = xp.arange(6)
    >>> x.sbp, xp.asarray(1.0).sbp
    ((mpiflow.sbp.split(dim=0),), (mpiflow.sbp.broadcast,))
    >>> with xp.default_layout(None):
    ...     xp.zeros(3).is_local
    True
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..core.device import device as _device
from ..layouts.placement import Placement
from ..layouts.sbp import Broadcast, SbpParallel, Split, normalize_sbp
from ..tensors.tensor import Tensor, TensorDevice

__all__ = ["DefaultLayout", "default_layout", "get_default_layout", "set_default_layout",
           "resolve", "sbp_for", "follow"]

_B = Broadcast()


@dataclass(frozen=True)
class DefaultLayout:
    """The default placement (None: local arrays) and layout (None: the default rule)."""

    placement: Placement | None
    sbp: tuple[SbpParallel, ...] | None = None


_STACK: list[Any] = [None]  # None: every rank, the default rule


def get_default_layout() -> DefaultLayout:
    """The placement and layout new arrays get now.

    Examples:
        >>> from mpiflow import array_api as xp
        >>> xp.get_default_layout().placement.ranks.size == flow.env.get_world_size()
        True
    """
    current = _STACK[-1]
    if current is None:
        return DefaultLayout(Placement.all("cpu"))
    return current


def _checked(placement: Any, sbp: Any) -> DefaultLayout:
    if placement is not None and not isinstance(placement, Placement):
        raise TypeError(f"placement must be a mpiflow.placement or None (local arrays), got "
                        f"{placement!r}")
    if placement is None:
        if sbp is not None:
            raise ValueError("an sbp needs a placement: local arrays have no layout")
        return DefaultLayout(None)
    return DefaultLayout(placement, None if sbp is None else normalize_sbp(sbp, placement.ndim))


def set_default_layout(placement: Placement | None, sbp: Any = None) -> None:
    """Make new arrays global on ``placement`` laid out as ``sbp`` (None: the default rule),
    or local (``placement=None``), until changed again.

    Examples:
        >>> from mpiflow import array_api as xp
        >>> xp.set_default_layout(flow.placement("cpu", [0]), flow.sbp.broadcast)
        >>> xp.zeros(2).placement.ranks.tolist()
        [0]
        >>> xp.set_default_layout(flow.placement("cpu", list(range(flow.env.get_world_size()))))
    """
    _STACK[0] = _checked(placement, sbp)


@contextlib.contextmanager
def default_layout(placement: Placement | None, sbp: Any = None) -> Iterator[DefaultLayout]:
    """Within the block, new arrays go on ``placement`` as ``sbp`` (or are local for None).

    Examples:
        >>> from mpiflow import array_api as xp
        >>> with xp.default_layout(flow.placement("cpu", [0]), flow.sbp.broadcast) as where:
        ...     xp.ones(2).sbp
        (mpiflow.sbp.broadcast,)
    """
    chosen = _checked(placement, sbp)
    _STACK.append(chosen)
    try:
        yield chosen
    finally:
        _STACK.pop()


def sbp_for(placement: Placement, ndim: int, sbp: tuple[SbpParallel, ...] | None = None
            ) -> tuple[SbpParallel, ...]:
    """The layout of a new ``ndim``-dim array on ``placement``: ``sbp`` with splits of dims the
    array lacks made ``B``, or the default rule (``S(0)`` on every mesh axis; ``B`` for 0-d).

    Examples:
        >>> sbp_for(flow.placement("cpu", [0]), 0)
        (mpiflow.sbp.broadcast,)
    """
    if sbp is None:
        return ((Split(0),) if ndim else (_B,)) * placement.ndim
    return tuple(_B if isinstance(s, Split) and s.dim >= ndim else s for s in sbp)


def resolve(device: Any) -> tuple[Placement | None, tuple[SbpParallel, ...] | None, str]:
    """``device=`` of a creation function as (placement or None for local, layout or None
    for the default rule, memory kind "cpu"/"cuda").

    Raises:
        ValueError: not a device this namespace knows (the same on every rank).
    """
    if isinstance(device, TensorDevice):
        return device.placement, None, str(device)
    if isinstance(device, Placement):
        return device, None, device.type
    default = get_default_layout()
    if device is None:
        kind = default.placement.type if default.placement is not None else "cpu"
    elif isinstance(device, (str, _device)):
        try:
            kind = _device(device).type
        except Exception as e:
            raise ValueError(f"unsupported device {device!r}: give 'cpu', 'cuda', a "
                             "mpiflow.placement or an array's .device") from e
    else:
        raise ValueError(f"unsupported device {device!r}: give 'cpu', 'cuda', a "
                         "mpiflow.placement or an array's .device")
    placement = default.placement
    if placement is not None and placement.type != kind:
        placement = Placement(kind, placement.ranks.tolist())
    return placement, default.sbp if placement is not None else None, kind


def follow(x: Tensor, device: Any) -> tuple[Placement | None, tuple[SbpParallel, ...] | None,
                                             str]:
    """Where an array made from ``x`` (``zeros_like``, ``astype``) goes: ``x``'s placement and
    layout, unless ``device`` says otherwise."""
    if device is None:
        if x.is_global:
            return x.placement, x.sbp, x.placement.type
        return None, None, str(x.device)
    return resolve(device)
