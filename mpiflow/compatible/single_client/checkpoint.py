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
from .session import SESSION, note_once

__all__ = ["CheckPoint", "get", "get_all_variables", "load_variables", "save", "take_pending"]

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
    """Set variables from ``{name: array}``; names not made yet take the values when they are
    (on the first call of the job that makes them).

    Args:
        value_dict: the values by variable name (arrays or tensors).
        ignore_mismatch: a value whose shape differs from its variable's is skipped, with a
            warning naming it (the variable keeps its value, or its initializer's); False:
            such a value raises.

    Raises:
        ValueError: with ``ignore_mismatch=False``, a value of another shape than its
            variable's (now, or when a job makes the variable).

    Examples:
        >>> load_variables({"w": numpy.ones(2)})  # taken when a job makes variable "w"
        >>> SESSION.pending.pop("w")[0].tolist()
        [1.0, 1.0]
    """
    with no_grad():
        for name, value in value_dict.items():
            array = value.numpy() if isinstance(value, Tensor) else numpy.asarray(value)
            var = SESSION.variables.get(name)
            if var is None:
                SESSION.pending[name] = (array, bool(ignore_mismatch))
                continue
            if not _fits(name, tuple(var.shape), array, ignore_mismatch):
                continue
            new = tensor(array.astype(var.dtype.numpy))
            if var.is_global:
                new = new.to_global(var.placement, var.sbp)
            assign_(var, new)


def _fits(name: str, shape: tuple[int, ...], array: numpy.ndarray, ignore: bool) -> bool:
    """Whether ``array`` has the variable's ``shape``; if not, warn (``ignore``) or raise."""
    if array.shape == shape:
        return True
    message = (f"flow.load_variables: variable {name!r} has shape {shape}, the value "
               f"{array.shape}")
    if not ignore:
        raise ValueError(f"{message} (ignore_mismatch=False)")
    note_once(f"load {name}", f"{message}: skipped (ignore_mismatch=True); the variable keeps "
              "its value")
    return False


def take_pending(name: str, shape: tuple[int, ...]) -> numpy.ndarray | None:
    """The value :func:`load_variables` left for variable ``name``, made now with ``shape``
    (None: none, or one of another shape skipped under ``ignore_mismatch``).

    Raises:
        ValueError: a value of another shape, loaded with ``ignore_mismatch=False``.
    """
    if name not in SESSION.pending:
        return None
    array, ignore = SESSION.pending.pop(name)
    return array if _fits(name, shape, array, ignore) else None


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
