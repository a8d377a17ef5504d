"""The install hints name packages that exist: the extras as setup.cfg declares them."""

from __future__ import annotations

import configparser
import pathlib

from mpiflow.core.extras import EXTRAS, install_hint

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_extras_are_setup_cfgs() -> None:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    declared = {name: tuple(line.strip() for line in value.splitlines() if line.strip())
                for name, value in config["options.extras_require"].items()}
    for extra, packages in EXTRAS.items():
        assert declared[extra] == packages, extra


def test_a_hint_names_packages_and_the_clone_install_not_a_pypi_mpiflow() -> None:
    hint = install_hint("examples", "matplotlib")
    assert hint.startswith("pip install matplotlib ") and '-e ".[examples]"' in hint
    assert "mpiflow[" not in hint
    assert install_hint("torch").startswith("pip install 'torch>=2.1'")
