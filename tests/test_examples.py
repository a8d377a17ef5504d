"""The examples run at every rank count (in this process, collectively)."""

from __future__ import annotations

import pathlib
import runpy

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize("name", ["hello.py", "global_tensors.py"])
def test_example_runs(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(EXAMPLES / name), run_name="__main__")
