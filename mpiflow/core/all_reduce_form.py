"""How mpiflow's blocking ``MPI_Allreduce`` runs on each MPI library and size: a pure table.

Two choices, each measured per library (docs/benchmarks/libraries.md):

- **Pieces.** On one node, every library measured here all-reduces a large buffer fastest in
  pieces of a few MiB, one call after the other, rather than in one call (64 MiB of float32 at
  2 ranks: MPICH 40 ms whole, 10.5 ms in 8 MiB pieces; Open MPI 32 ms, 9.8 ms; Intel MPI 21 ms
  out of place, 61 ms in place, 8.4 ms in 1 MiB pieces), the pieces' working set staying in
  the caches. Each piece is reduced element by element as the whole buffer would be, so the
  sums are the same but for the order MPI adds the ranks' values in, which MPI leaves to the
  library (the order is the same on every rank of a call). :func:`pieces` says, per library,
  above which size and in pieces of how many bytes; ``MPIFLOW_ALLREDUCE_PIECES`` overrides
  it: ``auto`` (the table, the default), ``off`` (one call), or a number of bytes N (pieces of
  N bytes for buffers larger than N).
- **Form.** MPI has two forms of the same all-reduce: in place (``MPI_IN_PLACE``: the result
  replaces the input) and out of place (one buffer read, another written). mpiflow's
  ``all_reduce`` is in place (torch.distributed's contract); where a library's out-of-place
  form wins by more than a copy of the buffer costs, mpiflow copies the input into a scratch
  buffer and calls that form. No library measured here needs it once large buffers go in
  pieces (Intel MPI's out-of-place call beats its in-place one only above 2 MiB).
  ``MPIFLOW_ALLREDUCE_FORM`` sets it for the whole process: ``auto`` (the table, the
  default), ``in_place`` or ``out_of_place`` (at every size, each piece from a copy).

Every rank of a job must see the same settings: MPI requires ``MPI_IN_PLACE`` on all ranks of a
call or on none, and the pieces are calls that must match. Nothing here imports MPI: the
communication layer passes ``MPI.Get_library_version()`` in.

Examples:
    >>> pieces("Intel(R) MPI Library 2021.18.1 for Linux* OS", {}) == (2 << 20, 1 << 20)
    True
    >>> pieces("MPICH Version:      5.0.2", {"MPIFLOW_ALLREDUCE_PIECES": "off"}) is None
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

from . import settings
from .mpi_settings import library_family

__all__ = ["ENV_VAR", "FORMS", "FORM_TABLE", "PIECES_VAR", "FormRule", "describe_form",
           "describe_pieces", "form_setting", "library_version_numbers", "out_of_place_from",
           "pieces", "pieces_setting"]

ENV_VAR = "MPIFLOW_ALLREDUCE_FORM"
PIECES_VAR = "MPIFLOW_ALLREDUCE_PIECES"
FORMS = ("auto", "in_place", "out_of_place")


@dataclass(frozen=True)
class FormRule:
    """One row of :data:`FORM_TABLE`: how a library's all-reduce runs fastest.

    Attributes:
        family: the library family (:func:`~.mpi_settings.library_family`).
        versions: ``(low, high)``: the versions it applies to, ``low <= version < high``, each
            a tuple of integers compared as version numbers.
        out_of_place_from: the buffer (or piece) size in bytes from which the out-of-place
            form is used; None: in place at every size.
        measured: where the numbers come from.
        pieces: ``(above, piece)``: buffers larger than ``above`` bytes are all-reduced in
            pieces of ``piece`` bytes; None: in one call.
    """

    family: str
    versions: tuple[tuple[int, ...], tuple[int, ...]]
    out_of_place_from: int | None
    measured: str
    pieces: tuple[int, int] | None = None

    def applies(self, family: str, version: tuple[int, ...]) -> bool:
        """Whether the row covers this family and version."""
        low, high = self.versions
        return family == self.family and low <= version < high


_MEASURED = ("float32 sums at 2 and 4 ranks on one node (2 cores), raw mpi4py calls in place, "
             "out of place and in pieces of 1-16 MiB; docs/benchmarks/libraries.md")
FORM_TABLE: tuple[FormRule, ...] = (
    # 1 MiB pieces beat both whole forms from 4 MiB: 0.35-0.44x the faster at 2 ranks,
    # 0.43-0.81x at 4 (2 MiB: 0.96x at 2 ranks, 0.43x at 4).
    FormRule("intel", ((2021,), (2022,)), None, "impi-rt 2021.18.1, " + _MEASURED,
             pieces=(2 << 20, 1 << 20)),
    # 8 MiB pieces from 32 MiB: 0.26-0.44x the in-place call at 2 ranks, 0.55-0.60x at 4; at
    # 16 MiB they gain 6% at 2 ranks and lose 23% at 4, so 16 MiB goes in one call.
    FormRule("mpich", ((5,), (6,)), None, "mpich 5.0.2, " + _MEASURED,
             pieces=(16 << 20, 8 << 20)),
    # 8 MiB pieces above 8 MiB: 16 MiB 0.94x the in-place call at 2 ranks, 0.83x at 4;
    # 32-64 MiB 0.28-0.57x at 2 ranks, 0.41-0.50x at 4.
    FormRule("openmpi", ((5,), (6,)), None, "openmpi 5.0.11, " + _MEASURED,
             pieces=(8 << 20, 8 << 20)),
)
"""How each measured library's all-reduce runs fastest. A library with no row: in one call,
in place, at every size."""

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
    return str(settings.read(ENV_VAR, environ))


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


def pieces_setting(environ: Mapping[str, str]) -> str | int:
    """``MPIFLOW_ALLREDUCE_PIECES`` from ``environ``: ``auto`` (unset or empty), ``off``, or
    a piece size in bytes.

    Raises:
        ValueError: anything else, or a size below 1 byte.

    Examples:
        >>> pieces_setting({}), pieces_setting({"MPIFLOW_ALLREDUCE_PIECES": "1048576"})
        ('auto', 1048576)
    """
    value: str | int = settings.read(PIECES_VAR, environ)
    return value


def pieces(library_version: str, environ: Mapping[str, str],
           setting: str | int | None = None, nodes: int = 1) -> tuple[int, int] | None:
    """Above which size (bytes) mpiflow's blocking all-reduce goes in pieces, and of how many
    bytes each.

    Args:
        library_version: ``MPI.Get_library_version()``.
        environ: the environment (``MPIFLOW_ALLREDUCE_PIECES``).
        setting: ``auto``, ``off`` or a piece size in bytes, to use instead of the
            environment's; None: the environment's.
        nodes: the job's node count. The table's pieces were measured on one node: across
            nodes ``auto`` gives one call (the libraries' large-message algorithms are tuned
            for networks); a size set explicitly applies on any number.

    Returns:
        ``(above, piece)``, or None: one call at every size.

    Examples:
        >>> pieces("Open MPI v5.0.11", {}, setting=4096)
        (4096, 4096)
        >>> pieces("some other MPI 1.0", {}) is None
        True
        >>> pieces("MPICH Version: 5.0.2", {}, nodes=2) is None
        True
    """
    if setting is None:
        setting = pieces_setting(environ)
    if setting == "off":
        return None
    if type(setting) is int:
        return setting, setting
    rule = _rule(library_version)
    return None if rule is None or nodes > 1 else rule.pieces


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
        'in place at every size (auto: the row of Intel MPI 2021)'
        >>> describe_form("Intel(R) MPI Library 2021.18.1", {}, form="size", threshold=1 << 25)
        'in place below 32 MiB, out of place from 32 MiB up (set in this process)'
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


def describe_pieces(library_version: str, environ: Mapping[str, str],
                    setting: str | int | None = None, nodes: int = 1) -> str:
    """One line for ``python -m mpiflow info``: whether large all-reduces go in pieces, and why.

    Args:
        library_version: ``MPI.Get_library_version()``.
        environ: the environment.
        setting: the setting made in the process (overriding the environment's), or None.
        nodes: the job's node count (:func:`pieces`).

    Examples:
        >>> describe_pieces("MPICH Version: 5.0.2", {})
        'in pieces of 8 MiB above 16 MiB (auto: the row of MPICH 5)'
        >>> describe_pieces("MPICH Version: 5.0.2", {"MPIFLOW_ALLREDUCE_PIECES": "off"})
        'in one call at every size (MPIFLOW_ALLREDUCE_PIECES=off)'
        >>> describe_pieces("MPICH Version: 5.0.2", {}, nodes=2)
        'in one call at every size (auto: the job spans 2 nodes, and the table is for one)'
    """
    chosen = pieces_setting(environ) if setting is None else setting
    in_force = pieces(library_version, environ, chosen, nodes)
    if chosen != "auto":
        why = f"{PIECES_VAR}={chosen}" if setting is None else "set in this process"
    else:
        rule = _rule(library_version)
        name = _NAMES.get(library_family(library_version), "this library")
        why = (f"auto: no row for {name}" if rule is None or rule.pieces is None
               else f"auto: the job spans {nodes} nodes, and the table is for one"
               if nodes > 1
               else f"auto: the row of {name} {'.'.join(map(str, rule.versions[0]))}")
    if in_force is None:
        return f"in one call at every size ({why})"
    above, piece = in_force
    return f"in pieces of {_size(piece)} above {_size(above)} ({why})"
