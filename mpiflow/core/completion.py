"""Steps that finish an operation once it has completed (write-backs, copies), and their chain.

Examples:
    >>> out = []
    >>> chain(None, lambda: out.append(1), lambda: out.append(2))()
    >>> out
    [1, 2]
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Post", "chain"]

Post = Callable[[], None]


def chain(*steps: Post | None) -> Post | None:
    """One step that runs ``steps`` in order, skipping None (None when none is left)."""
    todo = [s for s in steps if s is not None]
    if not todo:
        return None
    if len(todo) == 1:
        return todo[0]

    def run() -> None:
        for step in todo:
            step()

    return run
