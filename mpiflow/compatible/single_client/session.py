"""The state a OneFlow 0.x program builds up: its view, its variables, the job being run.

One :class:`Session` per process (:data:`SESSION`); ``flow.clear_default_session()`` starts a
new one. A job call opens a :class:`Call` that the layers and the optimizers write into
(automatic layer names, losses, ``minimize`` requests, the variables it used). While a job call
is traced, :func:`persistent` registers the tensors that outlive it (variables, optimizer
states, learning rates) with the trace, so that its replays read them afresh.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

from ...layouts.placement import Placement
from ...runtime import topology
from ...tensors import trace as tensor_trace
from ...tensors.tensor import Tensor

__all__ = ["CONSISTENT", "MIRRORED", "SESSION", "Call", "Session", "View", "note_once",
           "persistent"]


@dataclass(frozen=True)
class View:
    """A logical view: ``consistent`` (one logical batch over all ranks, global tensors) or
    ``mirrored`` (each rank its own batch, local tensors, gradients averaged).

    Also a context manager (``with flow.scope.mirrored_view(): ...``) that sets the view of
    the jobs defined and run inside it.
    """

    name: str

    def __enter__(self) -> View:
        SESSION.view_stack.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        SESSION.view_stack.pop()


CONSISTENT = View("consistent")
MIRRORED = View("mirrored")


@dataclass
class Call:
    """One running job call: what its body registers."""

    view: View
    train: bool
    counters: dict[str, int] = field(default_factory=dict)
    losses: list[Tensor] = field(default_factory=list)
    minimizers: list[Any] = field(default_factory=list)
    used: dict[str, Tensor] = field(default_factory=dict)
    namespaces: list[str] = field(default_factory=list)
    kept: set[int] = field(default_factory=set)

    def auto_name(self, kind: str) -> str:
        """``kind_k`` for the k-th unnamed layer of this kind in the call (the same names on
        every call, so that the variables are found again)."""
        k = self.counters.get(kind, 0)
        self.counters[kind] = k + 1
        return f"{kind}_{k}"


@dataclass
class Session:
    """The variables and configuration of the program."""

    variables: dict[str, Tensor] = field(default_factory=dict)
    pending: dict[str, Any] = field(default_factory=dict)
    view_stack: list[View] = field(default_factory=list)
    call: Call | None = None
    device_num: tuple[str, int] | None = None
    nodes: list[dict[str, Any]] | None = None
    checked: bool = False
    notes: set[str] = field(default_factory=set)
    eager: bool = False
    epoch: int = 0
    generators: dict[Any, Any] = field(default_factory=dict)  # seeded dropouts' generators

    @property
    def placement(self) -> Placement:
        """Every rank of the job: the consistent view's placement."""
        return Placement("cpu", list(range(topology.size)))

    def current_call(self, what: str) -> Call:
        """The running job call.

        Raises:
            RuntimeError: ``what`` was used outside a job function.
        """
        if self.call is None:
            raise RuntimeError(f"{what} builds part of a job: call it inside a function "
                               "decorated with @flow.global_function")
        return self.call

    def check_configuration(self) -> None:
        """Compare ``config.*_device_num`` and ``env.machine`` with the MPI job, once, and say
        what differs (rank 0): the job's ranks are what runs."""
        if self.checked:
            return
        self.checked = True
        nodes, per_node = topology.node_size, topology.local_size
        if self.device_num is None and self.nodes is None:
            return
        want_nodes = len(self.nodes) if self.nodes is not None else 1
        kind, want_devices = self.device_num or ("device", per_node)
        differs = []
        if want_nodes != nodes:
            differs.append(f"{want_nodes} node(s) in flow.env.machine, the job has {nodes}")
        if want_devices != per_node:
            differs.append(f"{want_devices} {kind}(s) per node in flow.config.{kind}_device_num"
                           f", the job has {per_node} rank(s) per node")
        if differs:
            note_once("configuration",
                      "mpiflow runs a OneFlow job on the ranks of the MPI job, one device each "
                      f"({topology.size} in all): " + "; ".join(differs) + ". The launcher "
                      "decides (mpiexec -n N, or N nodes with M ranks each); the configuration "
                      "is checked, not used.")


SESSION = Session()


def note_once(key: str, message: str) -> None:
    """Warn with ``message`` once per session, on rank 0 only."""
    if key in SESSION.notes:
        return
    SESSION.notes.add(key)
    if topology.rank == 0:
        warnings.warn(message, UserWarning, stacklevel=3)


def persistent(t: Tensor) -> Tensor:
    """Register ``t``, a tensor that outlives the job call (a variable, an optimizer's state),
    with the trace being recorded, if any: its replays read ``t`` afresh instead of fixing its
    value. Returns ``t``."""
    recorder = tensor_trace.state.recorder
    call = SESSION.call
    if recorder is not None and call is not None and id(t) not in call.kept:
        call.kept.add(id(t))
        recorder.add_state(t)
    return t


def reset() -> None:
    """A new, empty session (``flow.clear_default_session()``): the jobs' traced plans, which
    read the old variables, are traced again."""
    fresh = Session(epoch=SESSION.epoch + 1, eager=SESSION.eager)
    SESSION.__dict__.update(fresh.__dict__)
