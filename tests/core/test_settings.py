"""mpiflow.core.settings: one parser for every MPIFLOW_* variable, the docs' table, info."""

from __future__ import annotations

import pathlib
import re

import pytest
from helpers import run_job

from mpiflow.core import settings
from mpiflow.core.settings import SETTINGS, Setting, SettingError, get, read

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "mpiflow"
BOOLS = [s.name for s in SETTINGS if s.kind == "bool"]


@pytest.mark.parametrize("name", BOOLS)
def test_every_switch_reads_the_same_spellings(name: str) -> None:
    for text in ("1", "true", "yes", "on", "TRUE", " On ", "Yes\n"):
        assert read(name, {name: text}) is True, text
    for text in ("0", "false", "no", "off", "False", " OFF ", "No"):
        assert read(name, {name: text}) is False, text  # MPIFLOW_DEBUG=false was debug mode
    default = settings.get(name).default
    assert read(name, {}) is default and read(name, {name: "  "}) is default
    for text in ("2", "y", "enable", "maybe", "-1"):
        with pytest.raises(SettingError) as caught:
            read(name, {name: text})
        message = str(caught.value)
        assert message.startswith(f"{name} must be 1, true, yes, on (on) or 0, false, no, off")
        assert message.endswith(f"; got {text!r}")


@pytest.mark.parametrize(("name", "good", "bad"), [
    ("MPIFLOW_TIMEOUT", {"0": 0.0, " 2.5 ": 2.5, "1e3": 1000.0}, ["-1", "nan", "inf", "10m"]),
    ("MPIFLOW_ALLREDUCE_PIECES", {"AUTO": "auto", "off": "off", "4096": 4096},
     ["0", "-8", "1.5", "on", "8MiB"]),
    ("MPIFLOW_KERNEL_THREADS", {"3": 3}, ["0", "two", "1.5"]),
    ("MPIFLOW_CHECK", {"ALL": "all", " off": "off", "sampled": "sampled"}, ["1", "every"]),
    ("MPIFLOW_BACKEND", {"NCCL": "nccl", "auto": "auto"}, ["gloo", "1"]),
])
def test_numbers_and_choices(name: str, good: dict, bad: list) -> None:
    for text, value in good.items():
        assert read(name, {name: text}) == value
        assert type(read(name, {name: text})) is type(value)
    for text in bad:
        expected = rf"^{name} must be .*; got {re.escape(repr(text))}$"
        with pytest.raises(SettingError, match=expected):
            read(name, {name: text})


def test_the_error_says_what_is_accepted() -> None:
    with pytest.raises(SettingError, match=r"^MPIFLOW_ALLREDUCE_FORM must be one of auto, "
                                           r"in_place, out_of_place; got 'inplace'$"):
        read("MPIFLOW_ALLREDUCE_FORM", {"MPIFLOW_ALLREDUCE_FORM": "inplace"})
    assert issubclass(SettingError, ValueError)
    with pytest.raises(SettingError, match="MPIFLOW_CHECK"):
        settings.validate({"MPIFLOW_DEBUG": "on", "MPIFLOW_CHECK": "most"})
    settings.validate({"MPIFLOW_DEBUG": "on", "MPIFLOW_CHECK": "ALL", "MPIFLOW_TIMEOUT": "9"})


def test_registry_entries_are_checked() -> None:
    with pytest.raises(ValueError, match="kind"):
        Setting("MPIFLOW_X", "list", "", "x")
    with pytest.raises(ValueError, match="words"):
        Setting("MPIFLOW_X", "choice", "a", "x")
    with pytest.raises(KeyError, match="not a registered setting"):
        read("MPIFLOW_NOT_A_SETTING", {})


def test_effective_values_and_their_source() -> None:
    rows = {name: (value, where) for name, value, where in settings.effective(
        {"MPIFLOW_DEBUG": "false", "MPIFLOW_TIMEOUT": "30", "MPIFLOW_CHECK": "bad"})}
    assert rows["MPIFLOW_DEBUG"] == ("off", "environment")
    assert rows["MPIFLOW_TIMEOUT"] == ("30", "environment")
    assert rows["MPIFLOW_KERNELS"] == ("auto", "default")
    assert rows["MPIFLOW_CUDA_AWARE"] == ("unset", "default")
    assert rows["MPIFLOW_CHECK"][0].startswith("error: MPIFLOW_CHECK must be one of")
    assert "MPIFLOW_LAUNCHER_ENV" not in rows  # internal
    assert set(rows) == {s.name for s in SETTINGS if not s.internal}


def test_scoped_sets_and_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPIFLOW_GEMM", "numpy")
    with settings.scoped("MPIFLOW_GEMM", "torch"):
        assert read("MPIFLOW_GEMM") == "torch"
    assert read("MPIFLOW_GEMM") == "numpy"
    with settings.scoped("MPIFLOW_GEMM", None):
        assert read("MPIFLOW_GEMM") == "auto"
    assert read("MPIFLOW_GEMM") == "numpy"


def _sources() -> dict[pathlib.Path, str]:
    return {p: p.read_text() for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_variable_mpiflow_names_is_registered() -> None:
    # A name written anywhere in the package (code, docstring, message) is one mpiflow reads,
    # sets or tells users about: each must be in the registry, hence in docs/configuration.md.
    found: dict[str, str] = {}
    for path, text in _sources().items():
        for name in re.findall(r"\b(?:MPIFLOW|ONEFLOW)_[A-Z0-9_]*[A-Z0-9]\b", text):
            found.setdefault(name, str(path.relative_to(ROOT)))
    missing = {n: p for n, p in found.items() if n not in {s.name for s in SETTINGS}}
    assert not missing, f"register these in mpiflow/core/settings.py (SETTINGS): {missing}"
    assert "MPIFLOW_DEBUG" in found and "MPIFLOW_TIMEOUT" in found  # the search finds names


_LITERAL_READ = re.compile(r"""(?:environ|env|getenv)\s*(?:\.get\s*\(|\[|\()\s*f?["']"""
                           r"""((?:MPIFLOW|ONEFLOW)_\w+)["']\s*(?:[,)]|\](?!\s*=[^=]))""")


def test_no_module_reads_a_setting_from_the_environment_itself() -> None:
    # Direct reads (by literal name, or by a module constant holding one) bypass the parser:
    # the spellings would drift apart again. Writes (benchmarks, the launcher) are fine.
    internal = {s.name for s in SETTINGS if s.internal}
    offenders = []
    for path, text in _sources().items():
        if path == PACKAGE / "core" / "settings.py":
            continue
        constants = dict(re.findall(r"^(\w+)\s*=\s*[\"']((?:MPIFLOW|ONEFLOW)_\w+)[\"']", text,
                                    re.M))
        names = [m.group(1) for m in _LITERAL_READ.finditer(text)]
        for constant, name in constants.items():
            pattern = rf"(?:environ|env|getenv)\s*(?:\.get\s*\(|\[|\()\s*{constant}\b" \
                      r"\s*(?:[,)]|\](?!\s*=[^=]))"
            names += [name] * len(re.findall(pattern, text))
        offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n not in internal]
    assert not offenders, offenders


def test_the_read_pattern_catches_reads_and_spares_writes() -> None:
    text = ('a = os.environ.get("MPIFLOW_X", "")\nb = env["MPIFLOW_Y"]\n'
            'os.environ["MPIFLOW_Z"] = "1"\nc = os.getenv("ONEFLOW_W")\n')
    assert [m.group(1) for m in _LITERAL_READ.finditer(text)] == [
        "MPIFLOW_X", "MPIFLOW_Y", "ONEFLOW_W"]


def test_the_configuration_page_is_the_registry() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    start = page.index("-->\n", page.index("<!-- generated from mpiflow/core/settings.py")) + 4
    end = page.index("\n<!-- end of the generated table -->")
    assert page[start:end] == settings.markdown_table(), (
        "docs/configuration.md's table differs from mpiflow/core/settings.py: paste the "
        "output of `python -m mpiflow settings` between the markers")
    nav = (ROOT / "mkdocs.yml").read_text()
    assert "configuration.md" in nav


def test_a_malformed_value_ends_the_job_at_import_on_every_rank() -> None:
    # Rank 1 alone holds the bad value (set before the import, after MPI started): it must
    # end the job, not leave rank 0 waiting for it.
    code = ("import os\nfrom mpi4py import MPI\n"
            "if MPI.COMM_WORLD.rank == 1: os.environ['MPIFLOW_DEBUG'] = 'maybe'\n"
            "import mpiflow  # rank 0 waits in the import's collectives\nprint('unreachable')")
    job = run_job(2, code, timeout=60, env={"MPIFLOW_TIMEOUT": "600"})
    assert job.returncode != 0
    assert "unreachable" not in job.stdout
    assert ("MPIFLOW_DEBUG must be 1, true, yes, on (on) or 0, false, no, off (off), in any "
            "case; got 'maybe'") in job.stderr
    assert job.seconds < 30, job.seconds


def test_the_torch_hook_parses_its_switch_as_the_settings_do() -> None:
    # The auto-load hook cannot import mpiflow (that starts MPI), so it has its own parser.
    from _mpiflow_torch_autoload import mpi_alias_enabled

    setting = get("MPIFLOW_TORCH_MPI")
    for raw in ("", " ", "1", "ON", " yes ", "0", "Off", "false", "NO", "maybe", "2"):
        try:
            expected: object = setting.parse(raw)
        except SettingError as error:
            with pytest.raises(ValueError) as raised:
                mpi_alias_enabled({"MPIFLOW_TORCH_MPI": raw})
            assert str(raised.value) == str(error)
        else:
            assert mpi_alias_enabled({"MPIFLOW_TORCH_MPI": raw}) is expected
