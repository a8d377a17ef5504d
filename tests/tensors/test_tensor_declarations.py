"""The declarations of Tensor's bound methods (tensors/declared.py) match the bind tables."""

from __future__ import annotations

import ast

import pytest

import mpiflow as flow
from mpiflow import _declare
from mpiflow.tensors import tensor as _tensor


def test_the_generated_declarations_are_up_to_date() -> None:
    assert _declare.check(), (
        "mpiflow/tensors/declared.py is stale (a bind table changed): "
        "run python -m mpiflow._declare and commit the result")


def test_every_declared_method_is_bound() -> None:
    tree = ast.parse(_declare.PATH.read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    declared = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    assert declared == set(_tensor.bound_methods)
    for name in declared:
        assert hasattr(flow.Tensor, name), name


def test_at_run_time_tensor_derives_from_object_alone() -> None:
    """The declarations cost nothing: no extra class in the method resolution order."""
    assert flow.Tensor.__mro__ == (flow.Tensor, object)


def test_a_method_of_the_class_cannot_be_rebound() -> None:
    with pytest.raises(ValueError, match=r"Tensor\.detach is defined by the class"):
        _tensor.bind({"detach": lambda self: self})
