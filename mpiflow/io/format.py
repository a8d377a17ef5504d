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

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy
from numpy.lib import format as npy_format

from .npy import check_dtype, check_size
from .tree import check_node, skeleton

__all__ = ["FORMAT", "KINDS", "VERSION", "ArraySpec", "file_names", "parse_metadata",
           "structure_of"]

FORMAT = "mpiflow-checkpoint"
VERSION = 1
KINDS = ("global", "local", "ndarray")


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
    def from_json(entry: Any) -> ArraySpec:
        """Read a spec back, checking every field.

        Raises:
            ValueError: a missing or malformed field, naming it.
        """
        if not isinstance(entry, dict):
            raise ValueError(f"an array entry must be an object, got {str(entry)[:80]}")
        name = entry.get("name")
        try:
            kind, file, shape = entry["kind"], entry["file"], entry["shape"]
            dtype = numpy.dtype(npy_format.descr_to_dtype(entry["dtype"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"array {name!r}: missing or malformed field {exc}") from None
        if (not isinstance(name, str) or kind not in KINDS or not isinstance(file, str)
                or not re.fullmatch(r"[A-Za-z0-9_.~-]+\.npy", file) or file.startswith(".")
                or not isinstance(shape, list)
                or any(type(n) is not int or n < 0 for n in shape)):
            raise ValueError(f"array {name!r}: malformed entry {str(entry)[:200]}")
        check_dtype(dtype, name)
        check_size(tuple(shape), dtype, f"array {name!r}")
        layout = None
        if kind == "global":
            layout = {"placement": entry.get("placement"), "sbp": entry.get("sbp")}
        return ArraySpec(name, file, kind, dtype, tuple(shape),
                         bool(entry.get("requires_grad", False)), layout)


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
        ValueError: not an mpiflow checkpoint, an unknown version, or a malformed field.
    """
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"not an mpiflow checkpoint (its metadata has no \"format\": "
                         f"\"{FORMAT}\")")
    version = meta.get("version")
    if version != VERSION:
        raise ValueError(f"unknown checkpoint format version {version!r}: this mpiflow reads "
                         f"version {VERSION}")
    arrays, n_objects = meta.get("arrays"), meta.get("objects")
    if not isinstance(arrays, list) or type(n_objects) is not int or n_objects < 0:
        raise ValueError("malformed metadata: \"arrays\" must be a list and \"objects\" a count")
    specs = [ArraySpec.from_json(a) for a in arrays]
    if len({s.file.lower() for s in specs}) != len(specs):
        raise ValueError("malformed metadata: two arrays share a file")
    check_node(meta.get("tree"), len(specs), n_objects)
    return specs, n_objects


def structure_of(meta: dict[str, Any]) -> str:
    """What every rank must agree on before saving: the tree's shape and the global arrays.

    JSON values, and the dtypes and shapes of local arrays, are taken from rank 0 (they are
    assumed replicated), so they are left out.
    """
    arrays = [a if a["kind"] == "global" else {"name": a["name"], "kind": a["kind"]}
              for a in meta["arrays"]]
    return repr((skeleton(meta["tree"]), arrays, meta["objects"]))
