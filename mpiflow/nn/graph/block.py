"""What a module assigned to a graph becomes: a :class:`Block` proxy and its :class:`GraphModule`.

``graph.layer`` is a :class:`Block`: calling it calls the module, attribute access reaches the
module (a child module comes back as a Block of its own), ``graph.layer.to(nn.Module)`` is the
module itself and ``graph.layer.to(GraphModule)`` its graph settings: ``activation_checkpointing``
(keep no activations of the block in the forward pass; recompute them in backward) and
``set_stage`` (its pipeline stage and placement: :mod:`mpiflow.nn.graph.pipeline`). A parameter or
buffer comes back as a Block too (``type`` ``"PARAMETER"``/``"BUFFER"``, the tensor as
``origin``), except inside ``build()``, where it is the tensor itself.

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

from ...layouts.placement import Placement
from ...tensors import trace
from ..modules.module import Module

__all__ = ["Block", "GraphModule"]


class GraphModule:
    """The graph settings of one module (``block.to(GraphModule)``, or ``block.config``)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.activation_checkpointing = False
        self.stage_id: int | None = None  # also set directly, OneFlow's older spelling
        self.stage_placement: Any = None

    def set_stage(self, stage_id: int | None = None, placement: Any = None) -> None:
        """Put this block on pipeline stage ``stage_id``, its tensors on ``placement``.

        A graph with stages and gradient accumulation runs its micro-batches as a pipeline
        (:mod:`mpiflow.nn.graph.pipeline`: GPipe); with ``placement``, the block's global
        inputs on another placement are moved to it (``to_global(placement)``, their sbp
        kept) before its forward, as OneFlow does.

        Args:
            stage_id: the stage, numbered from 0.
            placement: the placement of the block's tensors (default: as they are).

        Raises:
            ValueError: ``stage_id`` is not a non-negative int.
            TypeError: ``placement`` is not a placement.
        """
        if stage_id is not None and (isinstance(stage_id, bool) or not isinstance(stage_id, int)
                                     or stage_id < 0):
            raise ValueError(f"set_stage: stage_id must be an int >= 0, got {stage_id!r}")
        if placement is not None and not isinstance(placement, Placement):
            raise TypeError(f"set_stage: placement must be a flow.placement, got {placement!r}")
        self.stage_id = stage_id
        self.stage_placement = placement

    def __repr__(self) -> str:
        stage = "" if self.stage_id is None else f", stage_id={self.stage_id}"
        return (f"GraphModule(name={self.name!r}, "
                f"activation_checkpointing={self.activation_checkpointing}{stage})")


class Block:
    """A module, parameter or buffer as seen from a graph (see the module docstring).

    Attributes:
        name: its attribute name; ``name_prefix`` the dotted path to it (``"m.layer."``).
        type: ``"MODULE"``, ``"PARAMETER"`` or ``"BUFFER"``.
        origin: the module or tensor itself.
    """

    def __init__(self, name: str, module: Any, prefix: str = "", kind: str = "MODULE") -> None:
        set_ = object.__setattr__
        set_(self, "name", name)
        set_(self, "name_prefix", prefix)
        set_(self, "type", kind)
        set_(self, "origin", module)
        set_(self, "_module", module)
        set_(self, "_children", {})
        set_(self, "_config", GraphModule(prefix + name))
        if isinstance(module, Module):
            set_(module, "_graph_module", self._config)

    @property
    def config(self) -> GraphModule:
        """The block's graph settings (OneFlow's older spelling of ``to(GraphModule)``)."""
        return self._config

    def to(self, kind: type) -> Any:
        """``to(nn.Module)`` (or ``to(Tensor)``): the module (tensor); ``to(GraphModule)``: its
        graph settings.

        Raises:
            TypeError: any other ``kind``.
        """
        if kind is GraphModule:
            return self._config
        if isinstance(kind, type) and isinstance(self._module, kind):
            return self._module
        raise TypeError(f"Block.to() of a {self.type} takes nn.Module, Tensor or GraphModule, "
                        f"got {kind!r}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._module(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        module = self._module
        value = getattr(module, name)
        if isinstance(module, Module):
            kind = ("MODULE" if isinstance(value, Module) else
                    "PARAMETER" if name in dict(module.named_parameters(recurse=False)) else
                    "BUFFER" if name in dict(module.named_buffers(recurse=False)) else None)
            if kind is not None and not (kind != "MODULE" and trace.state.building):
                children = self._children
                if name not in children or children[name]._module is not value:
                    children[name] = Block(name, value, f"{self.name_prefix}{self.name}.",
                                           kind)
                return children[name]
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._module, name, value)

    def __iter__(self) -> Any:
        return iter(self._module)

    def __getitem__(self, index: Any) -> Any:
        value = self._module[index]
        if isinstance(value, Module):
            key = f"[{index}]"
            if key not in self._children or self._children[key]._module is not value:
                self._children[key] = Block(str(index), value, f"{self.name_prefix}{self.name}.")
            return self._children[key]
        return value

    def __repr__(self) -> str:
        inner = repr(self._module).replace("\n", "\n  ")
        return f"({self.type}:{self.name_prefix}{self.name}:{inner})"


def graph_module_of(module: Module) -> GraphModule | None:
    """The graph settings a graph attached to ``module``, if any."""
    return module.__dict__.get("_graph_module")
