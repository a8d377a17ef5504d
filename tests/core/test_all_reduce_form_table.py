"""The table of all-reduce forms (mpiflow.core.all_reduce_form): pure, no MPI."""

from __future__ import annotations

import pytest

from mpiflow.core.all_reduce_form import (
    ENV_VAR,
    FORM_TABLE,
    describe_form,
    form_setting,
    library_version_numbers,
    out_of_place_from,
)

INTEL = "Intel(R) MPI Library 2021.18.1 for Linux* OS"
INTEL_NEXT = "Intel(R) MPI Library 2022.1 for Linux* OS"
MPICH = "MPICH Version:      5.0.2\nMPICH Release date: Tue Jun 10 2026"
OPEN_MPI = "Open MPI v5.0.11, package: Open MPI user@localhost Distribution, ident: 5.0.11"


@pytest.mark.parametrize("version, numbers", [
    (INTEL, (2021, 18, 1)), (MPICH, (5, 0, 2)), (OPEN_MPI, (5, 0, 11)),
    ("MVAPICH2 Version: 2.3.7", (2, 3, 7)), ("a library", ())])
def test_version_numbers(version, numbers):
    assert library_version_numbers(version) == numbers


def test_the_table_picks_by_library_version_and_size():
    (intel,) = [r for r in FORM_TABLE if r.family == "intel"]
    assert out_of_place_from(INTEL, {}) == intel.out_of_place_from > 0
    assert out_of_place_from(INTEL_NEXT, {}) is None  # outside the measured version range
    assert out_of_place_from(MPICH, {}) is None
    assert out_of_place_from(OPEN_MPI, {}) is None
    assert out_of_place_from("some other MPI 1.0", {}) is None


@pytest.mark.parametrize("value, intel, mpich", [
    ("", 32 << 20, None), ("auto", 32 << 20, None), (" In_Place ", None, None),
    ("out_of_place", 0, 0)])
def test_the_environment_overrides_the_table(value, intel, mpich):
    environ = {ENV_VAR: value}
    assert out_of_place_from(INTEL, environ) == intel
    assert out_of_place_from(MPICH, environ) == mpich


def test_a_form_argument_overrides_the_environment():
    environ = {ENV_VAR: "in_place"}
    assert out_of_place_from(MPICH, environ, form="out_of_place") == 0
    assert out_of_place_from(INTEL, environ, form="auto") == 32 << 20


@pytest.mark.parametrize("bad", ["inplace", "1", "out-of-place"])
def test_a_bad_setting_names_the_choices(bad):
    with pytest.raises(ValueError, match=f"{ENV_VAR} must be one of auto, in_place, "
                                         f"out_of_place, got '{bad}'"):
        form_setting({ENV_VAR: bad})
    with pytest.raises(ValueError, match="must be one of"):
        out_of_place_from(MPICH, {}, form=bad)


def test_describe_says_the_form_and_why():
    assert describe_form(MPICH, {}) == "in place at every size (auto: no row for MPICH)"
    assert describe_form(INTEL, {}) == ("in place below 32 MiB, out of place from 32 MiB up "
                                        "(auto: the row of Intel MPI 2021)")
    assert describe_form(OPEN_MPI, {ENV_VAR: "out_of_place"}) == (
        f"out of place at every size ({ENV_VAR}=out_of_place)")
    assert describe_form(INTEL, {}, None, "in_place") == (
        "in place at every size (set to in_place in this process)")
    assert describe_form(MPICH, {}, 1000, "size") == (
        "in place below 1000 B, out of place from 1000 B up (set in this process)")
