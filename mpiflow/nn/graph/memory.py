"""Memory of a replayed plan: each slot's array is let go after the last step that reads it.

Eager mode frees an activation when the last autograd node holding it has run; a plan holds
its slots in one list, so without this every intermediate array of a step would stay alive
until the step ends. :func:`last_uses` computes, once per plan, which slots each step is the
last reader of; the replay drops them right after it, so the arrays go back to the allocator
(and are reused by the next kernels) as in eager mode.

Examples:
    >>> from mpiflow.tensors.trace import SLOT
    >>> steps = [(None, ((SLOT, 0),), 1, False), (None, ((SLOT, 1),), 2, False)]
    >>> last_uses(steps, 3, keep={2})
    [[0], [1]]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ...tensors.trace import SLOT, TEMPLATE

__all__ = ["last_uses"]


def last_uses(steps: Sequence[tuple[Any, Sequence[tuple[int, Any]], int, bool]], n_slots: int,
              keep: Iterable[int] = ()) -> list[list[int]]:
    """Per step, the slots to release after it (never those in ``keep``: the outputs).

    A slot no step reads is released right after the step that made it.
    """
    last = [-1] * n_slots
    for index, (_, args, out, _opaque) in enumerate(steps):
        for slot in out if isinstance(out, tuple) else (out,):
            if slot >= 0:
                last[slot] = max(last[slot], index)
        for kind, where in args:
            if kind in (SLOT, TEMPLATE):
                last[where] = index
    release: list[list[int]] = [[] for _ in steps]
    kept = set(keep)
    for slot, index in enumerate(last):
        if index >= 0 and slot not in kept:
            release[index].append(slot)
    return release
