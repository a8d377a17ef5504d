"""Which form of ``MPI_Allreduce`` is faster on each MPI library and size: a pure table.

MPI has two forms of the same all-reduce: in place (``MPI_IN_PLACE``: the result replaces the
input) and out of place (one buffer read, another written). mpiflow's ``all_reduce`` is in
place (torch.distributed's contract), and libraries differ in which form they run faster:
MPICH's and Open MPI's in-place calls beat their out-of-place ones at every size measured,
while Intel MPI's out-of-place call takes about half the time of its in-place one from a few
tens of MiB up (docs/benchmarks/libraries.md has the measurements). Where the out-of-place
form wins by more than a copy of the buffer costs, mpiflow copies the input into a scratch
buffer and calls that form, writing the result into the caller's buffer.

:data:`FORM_TABLE` says, per library family and version range, from which size (bytes of the
buffer) the out-of-place form is used; a library with no row is in place at every size.
``MPIFLOW_ALLREDUCE_FORM`` overrides it for the whole process: ``auto`` (the table, the
default), ``in_place`` or ``out_of_place`` (at every size). Every rank of a job must see the
same value: MPI requires ``MPI_IN_PLACE`` on all ranks of a call or on none. Nothing here
imports MPI: the communication layer passes ``MPI.Get_library_version()`` in.

Examples:
    >>> out_of_place_from("Intel(R) MPI Library 2021.18.1 for Linux* OS", {}) == 32 << 20
    True
    >>> out_of_place_from("MPICH Version:      5.0.2", {}) is None
    True
    >>> out_of_place_from("MPICH Version:      5.0.2", {"MPIFLOW_ALLREDUCE_FORM": "out_of_place"})
    0
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from .mpi_settings import library_family

__all__ = ["ENV_VAR", "FORMS", "FORM_TABLE", "FormRule", "describe_form", "form_setting",
           "library_version_numbers", "out_of_place_from"]

ENV_VAR = "MPIFLOW_ALLREDUCE_FORM"
FORMS = ("auto", "in_place", "out_of_place")


@dataclass(frozen=True)
class FormRule:
    """One row of :data:`FORM_TABLE`: a library whose out-of-place all-reduce is faster.

    Attributes:
        family: the library family (:func:`~.mpi_settings.library_family`).
        versions: ``(low, high)``: the versions it applies to, ``low <= version < high``, each
            a tuple of integers compared as version numbers.
        out_of_place_from: the buffer size in bytes from which the out-of-place form is used.
        measured: where the threshold comes from.
    """

    family: str
    versions: tuple[tuple[int, ...], tuple[int, ...]]
    out_of_place_from: int
    measured: str

    def applies(self, family: str, version: tuple[int, ...]) -> bool:
        """Whether the row covers this family and version."""
        low, high = self.versions
        return family == self.family and low <= version < high


FORM_TABLE: tuple[FormRule, ...] = (
    FormRule("intel", ((2021,), (2022,)), 32 << 20,
             "impi-rt 2021.18.1, 2 and 4 ranks on one node (float32 sums); "
             "docs/benchmarks/libraries.md"),
)
"""The libraries whose out-of-place all-reduce beats a copy plus their in-place one, from
which size. Not listed (MPICH 5, Open MPI 5): in place at every size, as measured."""

_NAMES = {"intel": "Intel MPI", "mpich": "MPICH", "openmpi": "Open MPI"}
_VERSION = re.compile(r"(\d+(?:\.\d+)+)")


def library_version_numbers(library_version: str) -> tuple[int, ...]:
    """The first dotted version number in an MPI library's version string, as integers.

    Args:
        library_version: ``MPI.Get_library_version()``.

    Returns:
        E.g. ``(2021, 18, 1)``; ``()`` when the string holds none.

    Examples:
        >>> library_version_numbers("Open MPI v5.0.11, package: Open MPI ...")
        (5, 0, 11)
        >>> library_version_numbers("MPICH Version:      5.0.2\\nMPICH Release date: ...")
        (5, 0, 2)
    """
    match = _VERSION.search(library_version)
    return tuple(int(part) for part in match.group(1).split(".")) if match else ()


def form_setting(environ: Mapping[str, str]) -> str:
    """``MPIFLOW_ALLREDUCE_FORM`` from ``environ``: ``auto`` when unset or empty.

    Raises:
        ValueError: another value (the message lists the choices).

    Examples:
        >>> form_setting({}), form_setting({"MPIFLOW_ALLREDUCE_FORM": "in_place"})
        ('auto', 'in_place')
    """
    value = environ.get(ENV_VAR, "").strip().lower() or "auto"
    if value not in FORMS:
        raise ValueError(f"{ENV_VAR} must be one of {', '.join(FORMS)}, got "
                         f"{environ[ENV_VAR]!r}")
    return value


def _rule(library_version: str) -> FormRule | None:
    family = library_family(library_version)
    version = library_version_numbers(library_version)
    return next((r for r in FORM_TABLE if r.applies(family, version)), None)


def out_of_place_from(library_version: str, environ: Mapping[str, str],
                      form: str | None = None) -> int | None:
    """From which buffer size (bytes) mpiflow's all-reduce uses MPI's out-of-place form.

    Args:
        library_version: ``MPI.Get_library_version()``.
        environ: the environment (``MPIFLOW_ALLREDUCE_FORM``).
        form: one of :data:`FORMS` to use instead of the environment's, or None.

    Returns:
        The size, 0 for every size, or None for none (in place at every size).

    Raises:
        ValueError: a form that is not one of :data:`FORMS`.

    Examples:
        >>> out_of_place_from("Open MPI v5.0.11", {}, form="out_of_place")
        0
    """
    if form is None:
        form = form_setting(environ)
    elif form not in FORMS:
        raise ValueError(f"the all-reduce form must be one of {', '.join(FORMS)}, got {form!r}")
    if form == "in_place":
        return None
    if form == "out_of_place":
        return 0
    rule = _rule(library_version)
    return None if rule is None else rule.out_of_place_from


def _size(nbytes: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes} B"


def describe_form(library_version: str, environ: Mapping[str, str],
                  threshold: int | None = None, form: str | None = None) -> str:
    """One line for ``python -m mpiflow info``: the all-reduce form used, and why.

    Args:
        library_version: ``MPI.Get_library_version()``.
        environ: the environment.
        threshold: the size in force (:func:`out_of_place_from`), computed when not given.
        form: the form set in the process (overriding the environment; ``"size"`` for a
            size set there), or None.

    Examples:
        >>> describe_form("Intel(R) MPI Library 2021.18.1 for Linux* OS", {})
        'in place below 32 MiB, out of place from 32 MiB up (auto: the row of Intel MPI 2021)'
        >>> describe_form("MPICH Version: 5.0.2", {"MPIFLOW_ALLREDUCE_FORM": "in_place"})
        'in place at every size (MPIFLOW_ALLREDUCE_FORM=in_place)'
    """
    setting = form_setting(environ) if form is None else form
    if threshold is None and setting != "in_place":
        threshold = out_of_place_from(library_version, environ, setting)
    if setting != "auto":
        why = (f"{ENV_VAR}={setting}" if form is None
               else f"set to {form} in this process" if form in FORMS
               else "set in this process")
    else:
        rule = _rule(library_version)
        name = _NAMES.get(library_family(library_version), "this library")
        why = (f"auto: no row for {name}" if rule is None
               else f"auto: the row of {name} {'.'.join(map(str, rule.versions[0]))}")
    if threshold is None:
        return f"in place at every size ({why})"
    if threshold == 0:
        return f"out of place at every size ({why})"
    return f"in place below {_size(threshold)}, out of place from {_size(threshold)} up ({why})"

