"""The handle of a hook registered on a module: ``handle.remove()`` unregisters it.

Examples:
    >>> net = nn.Linear(2, 2)
    >>> with net.register_forward_hook(lambda module, args, out: None):
    ...     _ = net(flow.ones(1, 2))     # the hook runs here, and is removed at the end
"""

from __future__ import annotations

import itertools
from typing import Any

__all__ = ["RemovableHandle"]


class RemovableHandle:
    """Removes a hook registered on a module (also a context manager that removes it)."""

    _ids = itertools.count()

    def __init__(self, hooks: dict[int, Any]) -> None:
        self._hooks = hooks
        self.id = next(RemovableHandle._ids)

    def remove(self) -> None:
        """Unregister the hook (a no-op the second time)."""
        self._hooks.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()
