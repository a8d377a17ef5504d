"""Checkpoints of the job's variables on mpiflow's MPI-IO checkpoints: ``flow.train.CheckPoint``,
``flow.checkpoint.save/get`` and ``flow.load_variables``.

A checkpoint is a directory of mpiflow's format (:func:`mpiflow.save`): one array per variable
name, written in parallel, readable at any rank count. Loaded before the first job call, the
values replace the initializers' as the variables are made.

Examples:
    >>> import mpiflow.compatible.single_client as flow
    >>> flow.train.CheckPoint().init()
"""

from __future__ import annotations

import os
from typing import Any

import numpy

from ...autograd import no_grad
from ...io import load as _load
from ...io import save as _save
from ...ops.pointwise import assign_
from ...tensors.creation import tensor
from ...tensors.tensor import Tensor
from .session import SESSION

__all__ = ["CheckPoint", "get", "get_all_variables", "load_variables", "save"]

Path = str | os.PathLike[str]


def get_all_variables() -> dict[str, Tensor]:
    """Every variable made so far, by name."""
    return dict(SESSION.variables)


def save(path: Path) -> None:
    """Write every variable to the checkpoint directory ``path`` (collective)."""
    _save(dict(SESSION.variables), path)


def get(path: Path) -> dict[str, numpy.ndarray]:
    """The variables of the checkpoint at ``path``, as numpy arrays by name (collective)."""
    return {name: (value.numpy() if isinstance(value, Tensor) else numpy.asarray(value))
            for name, value in _load(path).items()}


def load_variables(value_dict: dict[str, Any], ignore_mismatch: bool = True) -> None:
    """Set variables from ``{name: array}``; names not made yet take the values when they are.

    Raises:
        ValueError: an existing variable of another shape.
    """
    with no_grad():
        for name, value in value_dict.items():
            array = value.numpy() if isinstance(value, Tensor) else numpy.asarray(value)
            var = SESSION.variables.get(name)
            if var is None:
                SESSION.pending[name] = array
                continue
            if tuple(var.shape) != array.shape:
                raise ValueError(f"variable {name!r} has shape {tuple(var.shape)}, the values "
                                 f"{array.shape}")
            new = tensor(array.astype(var.dtype.numpy))
            if var.is_global:
                new = new.to_global(var.placement, var.sbp)
            assign_(var, new)


class CheckPoint:
    """OneFlow's ``flow.train.CheckPoint``: ``init()``, ``save(path)``, ``load(path)``."""

    def init(self) -> None:
        """Nothing to do: variables are initialized as they are made, on the first job call."""

    def save(self, path: Path) -> None:
        """Write every variable to ``path`` (collective)."""
        save(path)

    def load(self, path: Path) -> None:
        """Read the variables of ``path`` (collective), before or after the first job call."""
        load_variables(get(path))
