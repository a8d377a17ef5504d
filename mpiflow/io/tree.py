"""Nested containers to named leaves and back: the structure of a checkpoint.

A checkpoint holds a tree of dicts, lists and tuples whose leaves are arrays (tensors and
numpy arrays), JSON values (``None``, bools, ints, finite floats, strings) and other Python
objects (pickled). :func:`flatten` turns it into a JSON-able *node* plus the lists of arrays
and objects, each leaf named by its path (``"model.layer.weight"``, ``"optim.state.0.exp_avg"``);
:func:`unflatten` rebuilds it. Nodes are one-key dicts:

- ``{"array": i}``: the ``i``-th array;
- ``{"object": i}``: the ``i``-th pickled object;
- ``{"value": v}``: a JSON value, stored in place;
- ``{"list": [n, ...]}``, ``{"tuple": [n, ...]}``: a list, a tuple;
- ``{"dict": {"k": n, ...}}``: a dict with string keys (a dict subclass, such as an
  ``OrderedDict``, comes back as a plain dict);
- ``{"items": [[k, n], ...]}``: a dict with other keys, which are nodes too, so int and tuple
  keys keep their type.

Examples:
    >>> is_array = lambda v: isinstance(v, numpy.ndarray)
    >>> flat = flatten({"w": numpy.zeros(2), "step": 3}, is_array)
    >>> flat.node
    {'dict': {'w': {'array': 0}, 'step': {'value': 3}}}
    >>> [name for name, _ in flat.arrays]
    ['w']
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ["Flat", "check_node", "flatten", "skeleton", "unflatten"]

Node = dict[str, Any]
_SCALARS = (type(None), bool, int, str)


class Flat(NamedTuple):
    """A flattened tree.

    Attributes:
        node: the JSON-able structure.
        arrays: ``(name, array)`` for each array leaf, in ``node``'s order.
        objects: ``(name, object)`` for each leaf that has to be pickled.
    """

    node: Node
    arrays: list[tuple[str, Any]]
    objects: list[tuple[str, Any]]


def _is_json(value: Any) -> bool:
    if type(value) is float:
        return math.isfinite(value)
    return type(value) in _SCALARS


def flatten(tree: Any, is_array: Callable[[Any], bool]) -> Flat:
    """Split ``tree`` into its structure and its named leaves.

    Args:
        tree: nested dicts, lists and tuples of anything.
        is_array: which leaves are arrays.

    Returns:
        The :class:`Flat` tree.

    Raises:
        TypeError: an array used as a dict key.
    """
    arrays: list[tuple[str, Any]] = []
    objects: list[tuple[str, Any]] = []

    def leaf(value: Any, name: str, in_key: bool) -> Node:
        if is_array(value):
            if in_key:
                raise TypeError(f"{name}: an array cannot be a dict key")
            arrays.append((name, value))
            return {"array": len(arrays) - 1}
        if _is_json(value):
            return {"value": value}
        objects.append((name, value))
        return {"object": len(objects) - 1}

    def walk(value: Any, path: tuple[str, ...], in_key: bool = False) -> Node:
        name = ".".join(path) or "value"
        if type(value) in (list, tuple):
            kind = "list" if type(value) is list else "tuple"
            return {kind: [walk(v, (*path, str(i)), in_key) for i, v in enumerate(value)]}
        if isinstance(value, dict) and not in_key:
            if all(type(k) is str for k in value):
                return {"dict": {k: walk(v, (*path, k)) for k, v in value.items()}}
            return {"items": [[walk(k, (*path, "<key>"), True), walk(v, (*path, str(k)))]
                              for k, v in value.items()]}
        return leaf(value, name, in_key)

    return Flat(walk(tree, ()), arrays, objects)


def check_node(node: Any, n_arrays: int, n_objects: int) -> None:
    """Raise ``ValueError`` unless ``node`` is a well-formed tree (for a checkpoint's metadata).

    The message names the offending node by its path from the root (``["dict"]["w"]``). Dict
    keys (the first of an ``items`` pair) must be hashable: a JSON value, an object, or a
    tuple of such keys.

    Args:
        node: the structure, as read from JSON.
        n_arrays: the number of arrays it may refer to.
        n_objects: the number of objects it may refer to.

    Examples:
        >>> check_node({"items": [[{"list": []}, {"value": 1}]]}, 0, 0)
        Traceback (most recent call last):
        ...
        ValueError: ["items"][0][0] is a list, which cannot be a dict key
    """
    def bad(path: str, why: str) -> ValueError:
        return ValueError(f"{path or 'the root'} {why}")

    def walk(n: Any, path: str, in_key: bool) -> None:
        if not isinstance(n, dict) or len(n) != 1:
            raise bad(path, f"must be a one-key object, got {str(n)[:80]}")
        (kind, body), = n.items()
        here = f"{path}[{json.dumps(kind)}]"
        if in_key and kind not in ("value", "object", "tuple"):
            raise bad(path, f"is a{'n' if kind[0] in 'aeiou' else ''} {kind}, which cannot be "
                            "a dict key")
        if kind in ("array", "object"):
            limit = n_arrays if kind == "array" else n_objects
            if type(body) is not int or not 0 <= body < limit:
                raise bad(here, f"is an index outside 0..{limit - 1}: {body!r}")
        elif kind == "value":
            if not _is_json(body):
                raise bad(here, f"must be a JSON scalar, got {body!r}")
        elif kind in ("list", "tuple"):
            if not isinstance(body, list):
                raise bad(here, "must be a list")
            for i, item in enumerate(body):
                walk(item, f"{here}[{i}]", in_key)
        elif kind == "dict":
            if not isinstance(body, dict):
                raise bad(here, "must be an object")
            for k, v in body.items():
                walk(v, f"{here}[{json.dumps(k)}]", False)
        elif kind == "items":
            if not isinstance(body, list) or any(
                    not isinstance(p, list) or len(p) != 2 for p in body):
                raise bad(here, "must be a list of [key, value] pairs")
            for i, (k, v) in enumerate(body):
                walk(k, f"{here}[{i}][0]", True)
                walk(v, f"{here}[{i}][1]", False)
        else:
            raise bad(path, f"has an unknown kind {kind!r}")

    walk(node, "", False)


def skeleton(node: Node) -> Node:
    """``node`` with every JSON value replaced by None: the shape of the tree alone.

    Examples:
        >>> skeleton({"list": [{"value": 3}, {"array": 0}]})
        {'list': [{'value': None}, {'array': 0}]}
    """
    (kind, body), = node.items()
    if kind in ("list", "tuple"):
        return {kind: [skeleton(n) for n in body]}
    if kind == "dict":
        return {kind: {k: skeleton(n) for k, n in body.items()}}
    if kind == "items":
        return {kind: [[skeleton(k), skeleton(n)] for k, n in body]}
    return {kind: None} if kind == "value" else node


def unflatten(node: Node, arrays: list[Any], objects: list[Any]) -> Any:
    """Rebuild the tree of ``node`` from its leaves (the inverse of :func:`flatten`).

    Args:
        node: the structure.
        arrays: the array leaves, by index.
        objects: the other non-JSON leaves, by index.

    Returns:
        The tree.

    Examples:
        >>> unflatten({"list": [{"array": 0}, {"value": 1.5}]}, ["a"], [])
        ['a', 1.5]
    """
    (kind, body), = node.items()
    if kind == "array":
        return arrays[body]
    if kind == "object":
        return objects[body]
    if kind == "value":
        return body
    if kind == "list":
        return [unflatten(n, arrays, objects) for n in body]
    if kind == "tuple":
        return tuple(unflatten(n, arrays, objects) for n in body)
    if kind == "dict":
        return {k: unflatten(v, arrays, objects) for k, v in body.items()}
    return {unflatten(k, arrays, objects): unflatten(v, arrays, objects) for k, v in body}
