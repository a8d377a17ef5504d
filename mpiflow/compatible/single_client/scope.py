"""``flow.scope``: the logical views, namespaces and placement scopes.

Examples:
    >>> import mpiflow.compatible.single_client as flow
    >>> flow.scope.consistent_view().name, flow.scope.mirrored_view().name
    ('consistent', 'mirrored')
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from .session import CONSISTENT, MIRRORED, SESSION, View, note_once

__all__ = ["consistent_view", "mirrored_view", "namespace", "placement"]


def consistent_view() -> View:
    """One logical batch split over the ranks: the same numbers as one process."""
    return CONSISTENT


def mirrored_view() -> View:
    """Each rank its own batch; gradients averaged over the ranks before each update."""
    return MIRRORED


@contextlib.contextmanager
def namespace(name: str) -> Iterator[None]:
    """Prefix the names of the variables made inside with ``name-``."""
    call = SESSION.current_call("flow.scope.namespace")
    call.namespaces.append(name)
    try:
        yield
    finally:
        call.namespaces.pop()


@contextlib.contextmanager
def placement(device_tag: str, machine_device_ids: Any, hierarchy: Any = None
              ) -> Iterator[None]:
    """Accepted: every op runs on all the job's ranks (said once).

    Raises:
        ValueError: a device tag other than ``"gpu"`` or ``"cpu"``.
    """
    if device_tag not in ("gpu", "cpu"):
        raise ValueError(f"device_tag must be 'gpu' or 'cpu', got {device_tag!r}")
    note_once("placement", f"flow.scope.placement({device_tag!r}, {machine_device_ids!r}): "
              "mpiflow places a job's ops on every rank of the MPI job")
    yield
