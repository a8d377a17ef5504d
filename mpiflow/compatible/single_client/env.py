"""``flow.env``: the machines and the control port, which an MPI launcher already knows.

Examples:
    >>> import mpiflow.compatible.single_client as flow
    >>> flow.env.machine([{"addr": "192.168.1.12"}])
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from ...runtime import topology
from .session import SESSION, note_once

__all__ = ["ctrl_port", "get_rank", "get_world_size", "init", "machine"]


def ctrl_port(val: int) -> None:
    """Accepted and not needed: MPI connects the ranks without a port (said once)."""
    port = operator.index(val)
    note_once("ctrl_port", f"flow.env.ctrl_port({port}): mpiflow runs on MPI, which needs no "
              "control port; the setting is ignored")


def machine(val: Sequence[dict[str, Any]] | dict[str, Any]) -> None:
    """The nodes of the job (``[{"addr": ...}, ...]``): compared with the MPI job's nodes at the
    first job call (a difference is reported once); the launcher decides where ranks run.

    Raises:
        ValueError: an entry without ``"addr"``.
    """
    nodes = [val] if isinstance(val, dict) else list(val)
    for node in nodes:
        if not isinstance(node, dict) or "addr" not in node:
            raise ValueError(f"flow.env.machine takes dicts with an 'addr' key, got {node!r}")
    SESSION.nodes = nodes
    SESSION.checked = False


def init() -> None:
    """Accepted: the MPI runtime started with ``import mpiflow``."""


def get_rank() -> int:
    """This process's rank."""
    return topology.rank


def get_world_size() -> int:
    """The number of ranks."""
    return topology.size
