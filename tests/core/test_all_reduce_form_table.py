"""The table of all-reduce forms (mpiflow.core.all_reduce_form): pure, no MPI."""

from __future__ import annotations

import pytest

from mpiflow.core.all_reduce_form import (
    ENV_VAR,
    FORM_TABLE,
    PIECES_VAR,
    describe_form,
    describe_pieces,
    form_setting,
    library_version_numbers,
    out_of_place_from,
    pieces,
    pieces_setting,
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
    rows = {r.family: r for r in FORM_TABLE}
    assert pieces(INTEL, {}) == rows["intel"].pieces == (2 << 20, 1 << 20)
    assert pieces(MPICH, {}) == rows["mpich"].pieces == (16 << 20, 8 << 20)
    assert pieces(OPEN_MPI, {}) == rows["openmpi"].pieces == (8 << 20, 8 << 20)
    assert pieces(INTEL_NEXT, {}) is None  # outside the measured version range
    assert pieces("MPICH Version: 4.2.0", {}) is None
    assert pieces("some other MPI 1.0", {}) is None
    for library in (INTEL, INTEL_NEXT, MPICH, OPEN_MPI, "some other MPI 1.0"):
        assert out_of_place_from(library, {}) is None  # no library measured needs the copy


@pytest.mark.parametrize("value, intel, mpich", [
    ("", None, None), ("auto", None, None), (" In_Place ", None, None),
    ("out_of_place", 0, 0)])
def test_the_environment_overrides_the_table(value, intel, mpich):
    environ = {ENV_VAR: value}
    assert out_of_place_from(INTEL, environ) == intel
    assert out_of_place_from(MPICH, environ) == mpich


@pytest.mark.parametrize("value, intel, other", [
    ("", (2 << 20, 1 << 20), None), (" Auto ", (2 << 20, 1 << 20), None), ("off", None, None),
    ("4096", (4096, 4096), (4096, 4096))])
def test_the_environment_sets_the_pieces(value, intel, other):
    environ = {PIECES_VAR: value}
    assert pieces(INTEL, environ) == intel
    assert pieces("some other MPI 1.0", environ) == other
    assert pieces(INTEL, environ, "off") is None  # an argument overrides the environment
    assert pieces(MPICH, environ, 64) == (64, 64)
    assert pieces(INTEL, environ, nodes=2) == (other if value.strip() == "4096" else None)


@pytest.mark.parametrize("bad", ["on", "0", "-8", "1.5", "8MiB"])
def test_a_bad_pieces_setting_says_what_it_takes(bad):
    with pytest.raises(ValueError, match=f"{PIECES_VAR} must be auto, off or a piece size in "
                                         f"bytes \\(at least 1\\); got '{bad}'"):
        pieces_setting({PIECES_VAR: bad})


def test_a_form_argument_overrides_the_environment():
    environ = {ENV_VAR: "in_place"}
    assert out_of_place_from(MPICH, environ, form="out_of_place") == 0
    assert out_of_place_from(INTEL, environ, form="auto") is None


@pytest.mark.parametrize("bad", ["inplace", "1", "out-of-place"])
def test_a_bad_setting_names_the_choices(bad):
    with pytest.raises(ValueError, match=f"{ENV_VAR} must be one of auto, in_place, "
                                         f"out_of_place; got '{bad}'"):
        form_setting({ENV_VAR: bad})
    with pytest.raises(ValueError, match="must be one of"):
        out_of_place_from(MPICH, {}, form=bad)


def test_describe_says_the_form_and_why():
    assert describe_form(MPICH, {}) == "in place at every size (auto: the row of MPICH 5)"
    assert describe_form("some other MPI 1.0", {}) == (
        "in place at every size (auto: no row for this library)")
    assert describe_form(OPEN_MPI, {ENV_VAR: "out_of_place"}) == (
        f"out of place at every size ({ENV_VAR}=out_of_place)")
    assert describe_form(INTEL, {}, None, "in_place") == (
        "in place at every size (set to in_place in this process)")
    assert describe_form(MPICH, {}, 1000, "size") == (
        "in place below 1000 B, out of place from 1000 B up (set in this process)")


def test_describe_says_the_pieces_and_why():
    assert describe_pieces(INTEL, {}) == (
        "in pieces of 1 MiB above 2 MiB (auto: the row of Intel MPI 2021)")
    assert describe_pieces(INTEL_NEXT, {}) == (
        "in one call at every size (auto: no row for Intel MPI)")
    assert describe_pieces(OPEN_MPI, {PIECES_VAR: "off"}) == (
        f"in one call at every size ({PIECES_VAR}=off)")
    assert describe_pieces(MPICH, {}, 4096) == (
        "in pieces of 4 KiB above 4 KiB (set in this process)")
    assert describe_pieces(MPICH, {}, nodes=2) == (
        "in one call at every size (auto: the job spans 2 nodes, and the table is for one)")
    assert describe_pieces(MPICH, {}, 4096, nodes=2) == (
        "in pieces of 4 KiB above 4 KiB (set in this process)")
