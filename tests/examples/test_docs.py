"""The Python examples in the README and the getting-started pages run as written, at every rank
count (they must be collective-safe, like any mpiflow program)."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = ["README.md", "docs/index.md", "docs/concepts.md"]


@pytest.mark.mpi
@pytest.mark.parametrize("page", PAGES)
def test_python_examples_run(page: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / page).read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, f"{page} has no Python example"
    for block in blocks:
        exec(compile(block, page, "exec"), {"__name__": "docs"})


def test_the_docs_site_lists_every_page() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    for page in sorted((ROOT / "docs").rglob("*.md")):
        assert str(page.relative_to(ROOT / "docs")) in config, f"{page.name} is not in the nav"
