"""docs/hpc.md's per-library tables agree with what python -m mpiflow.launch runs (pure)."""

from __future__ import annotations

import pathlib
import re

import pytest

from mpiflow.core.mpi_settings import placement_env
from mpiflow.launch import Launcher, Placement, build_command, parse_args

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "hpc.md"
SECTIONS = {"### MPICH": ("mpich", "5.0.2"), "### Open MPI": ("openmpi", "5.0.11"),
            "### Intel MPI": ("intel", "2021.18")}


def _sections() -> dict[str, str]:
    text = DOC.read_text()
    found = {}
    for heading in SECTIONS:
        start = text.index("\n" + heading) + 1
        end = text.find("\n#", start + len(heading))
        found[heading] = text[start:end if end > 0 else len(text)]
    return found


def _rows(section: str) -> list[tuple[str, str]]:
    return re.findall(r"^\| `([^`]+)`(?: \([^)]*\))? \| `([^`]+)` \|$", section, re.M)


def _cores(section: str, options: str) -> int:
    line = next(x for x in section.splitlines() if f"`{options}`" in x)
    match = re.search(r"\(on (\d+) cores\)", line)
    return int(match.group(1)) if match else 64


COMMANDS = [(heading, options, command) for heading, body in _sections().items()
            for options, command in _rows(body)]
# a table of its own: | when | `NAME=value NAME=value` |
ENVIRONMENTS = [(heading, when, variables) for heading, body in _sections().items()
                for when, variables in re.findall(r"^\| (.+?) \| `([A-Z_]+=[^`]+)` \|$",
                                                  body, re.M)]


def test_every_library_has_a_table() -> None:
    for heading in SECTIONS:
        assert len([row for row in COMMANDS if row[0] == heading]) >= 4, heading
    assert {row[0] for row in ENVIRONMENTS} == {"### Open MPI", "### Intel MPI"}


@pytest.mark.parametrize(("heading", "options", "command"), COMMANDS)
def test_documented_commands_are_the_launchers(heading: str, options: str,
                                               command: str) -> None:
    family, version = SECTIONS[heading]
    args = parse_args(options.split())
    hosts = tuple(args.hosts.split(",")) if args.hosts else ()
    # the documented host file need not exist here: placement_of() would refuse it
    placement = Placement(args.ppn, hosts, args.hostfile, "login1")
    got = build_command(Launcher("mpiexec", family, version), args.ranks, ["python", *args.args],
                        cores=_cores(_sections()[heading], options), tag_output=args.tag_output,
                        placement=placement)
    assert " ".join(got) == command


@pytest.mark.parametrize(("heading", "when", "variables"),
                         ENVIRONMENTS)
def test_documented_environment_is_the_launchers(heading: str, when: str,
                                                 variables: str) -> None:
    family, _ = SECTIONS[heading]
    ppn = 2 if "--ppn" in when else None
    got = placement_env(family, {}, ppn=ppn, as_root="root" in when)
    assert " ".join(f"{k}={v}" for k, v in got.items()) == variables
