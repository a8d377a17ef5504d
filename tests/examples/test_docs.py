"""The Python examples in the README and the getting-started pages run as written, at every rank
count (they must be collective-safe, like any mpiflow program), and compute what they say."""

from __future__ import annotations

import pathlib
import re
from collections.abc import Callable
from typing import Any

import numpy
import pytest
from numpy.testing import assert_array_equal

import mpiflow as flow

ROOT = pathlib.Path(__file__).resolve().parents[2]
RANK, SIZE = flow.env.get_rank(), flow.env.get_world_size()


def _readme(names: dict[str, Any], out: str) -> None:
    mean = (SIZE - 1) / 2  # the AVG of the ranks; the broadcast among the evens keeps it
    assert_array_equal(names["x"], numpy.full(4, mean, numpy.float32))
    assert_array_equal(names["out"], numpy.full((SIZE, 4), mean, numpy.float32))
    assert_array_equal(names["mine"], numpy.full(4, SIZE * mean, numpy.float32))
    assert out == ""


def _index(names: dict[str, Any], out: str) -> None:
    assert_array_equal(names["x"], numpy.full(3, float(sum(range(SIZE)))))
    assert names["value"] == 90.0  # 2 * (0 + 1 + ... + 9)
    mine = numpy.array_split(numpy.arange(10.0), SIZE)[RANK]
    assert_array_equal(names["t"].to_local().numpy(), mine)
    if RANK == 0:
        assert out.split("tensor(")[0].strip() == str(names["x"]), out
        assert out.strip().endswith(" 90.0"), out
    else:
        assert out == ""


def _concepts(names: dict[str, Any], out: str) -> None:
    rows = len(numpy.array_split(numpy.arange(7), SIZE)[RANK])
    assert out == f"mpiflow.Size([7, 4]) mpiflow.Size([{rows}, 4])\n", out
    assert_array_equal(names["y"].to_local().numpy(), names["x"].numpy())


PAGES: dict[str, Callable[[dict[str, Any], str], None]] = {
    "README.md": _readme, "docs/index.md": _index, "docs/concepts.md": _concepts}


@pytest.mark.mpi
@pytest.mark.parametrize("page", PAGES)
def test_python_examples_run(page: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / page).read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1, f"{page}: one Python example expected (and checked here)"
    names: dict[str, Any] = {"__name__": "docs"}
    exec(compile(blocks[0], page, "exec"), names)
    PAGES[page](names, capsys.readouterr().out)


def test_the_docs_site_lists_every_page() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    for page in sorted((ROOT / "docs").rglob("*.md")):
        assert str(page.relative_to(ROOT / "docs")) in config, f"{page.name} is not in the nav"
