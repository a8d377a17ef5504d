"""What a module assigned to a graph becomes: a :class:`Block` proxy and its :class:`GraphModule`.

``graph.layer`` is a :class:`Block`: calling it calls the module, attribute access reaches the
module (a child module comes back as a Block of its own), ``graph.layer.to(nn.Module)`` is the
module itself and ``graph.layer.to(GraphModule)`` its graph settings: ``activation_checkpointing``
(keep no activations of the block in the forward pass; recompute them in backward) and
``set_stage`` (pipeline stages: not implemented, raises ``NotImplementedError``).

Examples:
    >>> import mpiflow.nn as nn
    >>> from mpiflow.nn.graph import Block, GraphModule
    >>> block = Block("fc", nn.Linear(2, 2))
    >>> block.to(GraphModule).activation_checkpointing = True
    >>> isinstance(block.to(nn.Module), nn.Linear)
    True
"""

from __future__ import annotations

from typing import Any

from ..modules.module import Module

__all__ = ["Block", "GraphModule"]


class GraphModule:
    """The graph settings of one module (``block.to(GraphModule)``, or ``block.config``)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.activation_checkpointing = False
        self.stage_id: int | None = None

    def set_stage(self, stage_id: int, placement: Any = None) -> None:
        """Put this block on pipeline stage ``stage_id`` (OneFlow's pipeline parallelism).

        Raises:
            NotImplementedError: always; mpiflow's graphs run every stage's ops on their own
                placements eagerly-planned, without micro-batch pipelining (docs/graph.md).
        """
        raise NotImplementedError(
            f"set_stage({stage_id}) on block {self.name!r}: pipeline stages are not implemented "
            "in mpiflow's nn.Graph; place the layers with to_global(placement) instead (they "
            "run one after the other, without pipelining micro-batches); see docs/graph.md")

    def __repr__(self) -> str:
        return (f"GraphModule(name={self.name!r}, "
                f"activation_checkpointing={self.activation_checkpointing})")


class Block:
    """A module as seen from inside a graph (see the module docstring)."""

    def __init__(self, name: str, module: Module) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_module", module)
        object.__setattr__(self, "_config", GraphModule(name))
        object.__setattr__(self, "_children", {})
        object.__setattr__(module, "_graph_module", self._config)

    @property
    def config(self) -> GraphModule:
        """The block's graph settings (OneFlow's older spelling of ``to(GraphModule)``)."""
        return self._config

    def to(self, kind: type) -> Any:
        """``to(nn.Module)``: the module; ``to(GraphModule)``: its graph settings.

        Raises:
            TypeError: any other ``kind``.
        """
        if kind is GraphModule:
            return self._config
        if isinstance(kind, type) and issubclass(kind, Module):
            return self._module
        raise TypeError(f"Block.to() takes nn.Module or GraphModule, got {kind!r}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._module(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if isinstance(value, Module):
            children = self._children
            if name not in children or children[name]._module is not value:
                children[name] = Block(f"{self._name}.{name}", value)
            return children[name]
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._module, name, value)

    def __iter__(self) -> Any:
        return iter(self._module)

    def __repr__(self) -> str:
        inner = repr(self._module).replace("\n", "\n  ")
        return f"(MODULE:{self._name}:{inner})"


def graph_module_of(module: Module) -> GraphModule | None:
    """The graph settings a graph attached to ``module``, if any."""
    return module.__dict__.get("_graph_module")
