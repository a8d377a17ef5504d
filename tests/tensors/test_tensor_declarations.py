"""The declarations of Tensor's bound methods in ``class Tensor`` match the bind tables."""

from __future__ import annotations

import inspect

import pytest

import mpiflow as flow
from mpiflow import _declare
from mpiflow.tensors import tensor as _tensor


def test_the_generated_declarations_are_up_to_date() -> None:
    assert _declare.check(), (
        "the Tensor method declarations in mpiflow/tensors/tensor.py are stale (a bind table "
        "changed): "
        "run python -m mpiflow._declare and commit the result")


def test_every_declared_method_is_bound() -> None:
    source = inspect.getsource(_tensor)
    block = source[source.index(_declare.BEGIN):source.index(_declare.END)]
    declared = {line.split("def ", 1)[1].split("(", 1)[0]
                for line in block.splitlines() if line.strip().startswith("def ")}
    assert declared == set(_tensor.bound_methods)
    for name in declared:
        assert hasattr(flow.Tensor, name), name


def test_a_method_of_the_class_cannot_be_rebound() -> None:
    with pytest.raises(ValueError, match=r"Tensor\.detach is defined by the class"):
        _tensor.bind({"detach": lambda self: self})
