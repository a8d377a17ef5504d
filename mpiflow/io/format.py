"""A checkpoint's metadata: what ``metadata.json`` holds, written and checked.

Layout of a checkpoint directory::

    path/
      metadata.json       format, version, world size, the tree, one entry per array
      <name>.npy          one per array: its whole logical value, a plain .npy file
      objects.pkl         only if the tree holds values JSON cannot (a pickled list of
                          pickled objects, written by rank 0)

``metadata.json``::

    {"format": "mpiflow-checkpoint", "version": 1, "mpiflow_version": "...",
     "world_size": 4, "tree": {...},                  (see mpiflow.io.tree)
     "arrays": [{"name": "model.w", "file": "model.w.npy", "kind": "global",
                 "dtype": "<f4", "shape": [13, 5], "requires_grad": false,
                 "placement": {"type": "cpu", "ranks": [0, 1, 2, 3]}, "sbp": ["S(0)"]}, ...],
     "objects": 0}

``kind`` is ``"global"`` (a global tensor; ``placement`` and ``sbp`` record its layout at save
time), ``"local"`` (a local tensor) or ``"ndarray"`` (a numpy array).

Examples:
    >>> spec = ArraySpec("w", "w.npy", "ndarray", numpy.dtype("<f4"), (2, 3))
    >>> ArraySpec.from_json(spec.to_json()) == spec
    True
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy
from numpy.lib import format as npy_format

from .errors import CheckpointError
from .npy import check_dtype, check_size
from .tree import check_node, skeleton

__all__ = ["FORMAT", "KINDS", "VERSION", "ArraySpec", "file_names", "parse_metadata",
           "structure_of"]

FORMAT = "mpiflow-checkpoint"
VERSION = 1
KINDS = ("global", "local", "ndarray")
_SBP = re.compile(r"S\(\d+\)|B|P(\(\w+\))?")


@dataclass(frozen=True)
class ArraySpec:
    """One array of a checkpoint: its name, file, kind, dtype, shape and saved layout.

    Attributes:
        name: the leaf's path in the tree (``"model.layer.weight"``).
        file: its ``.npy`` file, relative to the checkpoint directory.
        kind: ``"global"``, ``"local"`` or ``"ndarray"``.
        dtype: the element type.
        shape: the logical shape.
        requires_grad: whether the tensor required gradients.
        layout: for a global tensor, ``{"placement": ..., "sbp": [...]}`` at save time.
    """

    name: str
    file: str
    kind: str
    dtype: numpy.dtype
    shape: tuple[int, ...]
    requires_grad: bool = False
    layout: dict[str, Any] | None = field(default=None, compare=True)

    def to_json(self) -> dict[str, Any]:
        """The spec as a JSON object."""
        out: dict[str, Any] = {"name": self.name, "file": self.file, "kind": self.kind,
                               "dtype": npy_format.dtype_to_descr(self.dtype),
                               "shape": list(self.shape), "requires_grad": self.requires_grad}
        if self.layout is not None:
            out.update(self.layout)
        return out

    @staticmethod
    def from_json(entry: Any, where: str = "array") -> ArraySpec:
        """Read a spec back, checking every field.

        Args:
            entry: the array's JSON object.
            where: how the error names the entry (``'"arrays"[2]'``).

        Raises:
            CheckpointError: a missing or malformed field, naming it.
        """
        if not isinstance(entry, dict):
            raise _bad(where, "must be an object", entry)
        name = _field(entry, "name", where, str, "a string")
        where = f"{where} ({name!r})"
        kind = _field(entry, "kind", where, str, "a string")
        if kind not in KINDS:
            raise _bad(f'{where}["kind"]', f"must be one of {', '.join(KINDS)}", kind)
        file = _field(entry, "file", where, str, "a string")
        if not re.fullmatch(r"[A-Za-z0-9_.~-]+\.npy", file) or file.startswith("."):
            raise _bad(f'{where}["file"]', "must be a plain .npy file name in the checkpoint",
                       file)
        descr = _field(entry, "dtype", where, (str, list), "a numpy dtype descriptor")
        try:
            dtype = numpy.dtype(npy_format.descr_to_dtype(descr))
            check_dtype(dtype, name)
        except (TypeError, ValueError) as exc:
            raise _bad(f'{where}["dtype"]', f"is not a supported dtype ({exc})", descr) from None
        shape = _field(entry, "shape", where, list, "a list of sizes")
        if any(type(n) is not int or n < 0 for n in shape):
            raise _bad(f'{where}["shape"]', "must be a list of non-negative integers", shape)
        try:
            check_size(tuple(shape), dtype, f"array {name!r}")
        except ValueError as exc:
            raise _bad(f'{where}["shape"]', str(exc), shape) from None
        requires_grad = entry.get("requires_grad", False)
        if type(requires_grad) is not bool:
            raise _bad(f'{where}["requires_grad"]', "must be true or false", requires_grad)
        layout = None
        if kind == "global":
            layout = {"placement": _placement(entry, where), "sbp": _sbp(entry, where)}
        return ArraySpec(name, file, kind, dtype, tuple(shape), requires_grad, layout)


def _bad(field: str, why: str, value: Any) -> CheckpointError:
    """The error for a malformed field of ``metadata.json``, naming it and its value."""
    try:
        shown = json.dumps(value)
    except (TypeError, ValueError):
        shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return CheckpointError(f"malformed metadata.json: {field} {why}, got {shown}")


def _field(entry: dict[str, Any], key: str, where: str, kind: type | tuple[type, ...],
           what: str) -> Any:
    """``entry[key]``, which must be there and of type ``kind`` (bools are not ints)."""
    if key not in entry:
        raise CheckpointError(f"malformed metadata.json: {where} has no {json.dumps(key)}")
    value = entry[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise _bad(f"{where}[{json.dumps(key)}]", f"must be {what}", value)
    return value


def _placement(entry: dict[str, Any], where: str) -> dict[str, Any]:
    placement = _field(entry, "placement", where, dict, "an object")
    field = f'{where}["placement"]'
    _field(placement, "type", field, str, "a string")
    ranks = _field(placement, "ranks", field, list, "a list of ranks")
    flat: list[Any] = numpy.asarray(ranks, dtype=object).ravel().tolist() if ranks else []
    if (not ranks or any(type(r) is not int or r < 0 for r in flat)
            or len(set(flat)) != len(flat)):
        raise _bad(f'{field}["ranks"]', "must be a non-empty (nested) list of distinct ranks",
                   ranks)
    return placement


def _sbp(entry: dict[str, Any], where: str) -> list[str]:
    sbp = _field(entry, "sbp", where, list, "a list such as [\"S(0)\"]")
    if not sbp or any(not isinstance(s, str) or not _SBP.fullmatch(s) for s in sbp):
        raise _bad(f'{where}["sbp"]', 'must be a non-empty list of "S(dim)", "B" or "P"', sbp)
    return sbp


def file_names(names: Iterable[str]) -> list[str]:
    """A distinct, file-system-safe ``.npy`` file name for each leaf name.

    Examples:
        >>> file_names(["model.w", "model/w", "Model.W"])
        ['model.w.npy', 'model_w.npy', 'Model.W~1.npy']
    """
    used: set[str] = set()
    out = []
    for name in names:
        base = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip(".")[:120] or "array"
        candidate, n = base, 0
        while candidate.lower() in used:  # case-insensitive file systems
            n += 1
            candidate = f"{base}~{n}"
        used.add(candidate.lower())
        out.append(candidate + ".npy")
    return out


def parse_metadata(meta: Any) -> tuple[list[ArraySpec], int]:
    """Check a checkpoint's metadata and return its array specs and number of objects.

    Args:
        meta: the parsed ``metadata.json``.

    Raises:
        CheckpointError: not an mpiflow checkpoint, an unknown version, or a malformed field
            (the message names the field).
    """
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"not an mpiflow checkpoint (its metadata has no \"format\": "
                              f"\"{FORMAT}\")")
    version = meta.get("version")
    if type(version) is not int or version != VERSION:
        raise CheckpointError(f"unknown checkpoint format version {version!r}: this mpiflow "
                              f"reads version {VERSION}")
    top = "the top level"
    if "mpiflow_version" in meta:
        _field(meta, "mpiflow_version", top, str, "a string")
    if "world_size" in meta:
        size = _field(meta, "world_size", top, int, "a positive integer")
        if size < 1:
            raise _bad('"world_size"', "must be a positive integer", size)
    arrays = _field(meta, "arrays", top, list, "a list")
    n_objects = _field(meta, "objects", top, int, "a count")
    if n_objects < 0:
        raise _bad('"objects"', "must be a count", n_objects)
    specs = [ArraySpec.from_json(a, f'"arrays"[{i}]') for i, a in enumerate(arrays)]
    if len({s.file.lower() for s in specs}) != len(specs):
        raise CheckpointError("malformed metadata.json: two arrays share a file")
    if "tree" not in meta:
        raise CheckpointError('malformed metadata.json: the top level has no "tree"')
    try:
        check_node(meta["tree"], len(specs), n_objects)
    except ValueError as exc:
        raise CheckpointError(f'malformed metadata.json: "tree": {exc}') from None
    return specs, n_objects


def structure_of(meta: dict[str, Any]) -> str:
    """What every rank must agree on before saving: the tree's shape and the global arrays.

    JSON values, and the dtypes and shapes of local arrays, are taken from rank 0 (they are
    assumed replicated), so they are left out.
    """
    arrays = [a if a["kind"] == "global" else {"name": a["name"], "kind": a["kind"]}
              for a in meta["arrays"]]
    return repr((skeleton(meta["tree"]), arrays, meta["objects"]))
