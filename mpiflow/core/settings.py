"""Every environment variable mpiflow reads, and the one parser that reads them.

:data:`SETTINGS` holds one :class:`Setting` per variable (its name, kind, default and effect);
:func:`read` is the only way mpiflow reads one, so every variable accepts the same spellings:

- on/off switches (kind ``bool``): ``1``, ``true``, ``yes``, ``on`` and ``0``, ``false``,
  ``no``, ``off``, in any case;
- a number (``int``, ``float``): a decimal number, at least the setting's minimum, or one of
  the words the setting names (``auto``, ``off``);
- a choice: one of the setting's words, in any case;
- text (``str``): the text as it is.

Surrounding whitespace is ignored and an unset or empty variable means the default. Anything
else raises :class:`SettingError` (a ``ValueError``) naming the variable, the value and what it
accepts. ``import mpiflow`` calls :func:`validate` before MPI starts, so a malformed value stops
every rank at import with that error, before any communication (under ``mpiexec`` or ``srun``
every rank sees the same environment; a rank whose environment differs fails alone, at import,
and the launcher ends the job as for any rank that exits early: nothing waits on it). Each
module then reads its variable when it needs it (:attr:`Setting.read` says when).
docs/configuration.md holds :func:`markdown_table` (``python -m mpiflow settings`` prints it)
and a test keeps the two equal.

A new variable is one more :class:`Setting` in :data:`SETTINGS`; a test fails for a name of
the form ``MPIFLOW_*`` written anywhere in ``mpiflow/`` that is not registered here.

Examples:
    >>> read("MPIFLOW_DEBUG", {"MPIFLOW_DEBUG": " Off "}), read("MPIFLOW_DEBUG", {})
    (False, False)
    >>> read("MPIFLOW_TIMEOUT", {"MPIFLOW_TIMEOUT": "30"})
    30.0
    >>> read("MPIFLOW_DEBUG", {"MPIFLOW_DEBUG": "maybe"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    mpiflow.core.settings.SettingError: MPIFLOW_DEBUG must be 1, true, yes, on (on) or 0, ...
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = ["FALSE", "KINDS", "SETTINGS", "TRUE", "Setting", "SettingError", "effective",
           "get", "markdown_table", "read", "scoped", "source", "validate"]

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")
KINDS = ("bool", "int", "float", "choice", "str")


class SettingError(ValueError):
    """A variable of :data:`SETTINGS` holds a value its setting does not accept."""


@dataclass(frozen=True)
class Setting:
    """One environment variable mpiflow reads.

    Attributes:
        name: the variable, e.g. ``MPIFLOW_TIMEOUT``.
        kind: one of :data:`KINDS`.
        default: the value when the variable is unset or empty (None: decided elsewhere,
            as :attr:`effect` says).
        effect: what it does, one or two sentences (the documentation's table).
        words: a choice's values; for a number, the words accepted besides numbers.
        minimum: a number's smallest accepted value.
        accepts: what the error message and the table say it accepts (derived from the
            kind when empty).
        read: when mpiflow reads it (validated at import in any case).
        internal: set by mpiflow itself, not a user's setting (not shown by ``info``).
    """

    name: str
    kind: str
    default: Any
    effect: str
    words: tuple[str, ...] = ()
    minimum: float | None = None
    accepts: str = ""
    read: str = "first use"
    internal: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.kind == "choice" and not self.words:
            raise ValueError(f"{self.name}: a choice needs its words")

    def values(self) -> str:
        """What the variable accepts, in words (the error message and the table)."""
        if self.accepts:
            return self.accepts
        if self.kind == "bool":
            return f"{', '.join(TRUE)} (on) or {', '.join(FALSE)} (off), in any case"
        if self.kind == "choice":
            return f"one of {', '.join(self.words)}"
        if self.kind in ("int", "float"):
            what = "an integer" if self.kind == "int" else "a number"
            if self.minimum is not None:
                what += f" >= {self.minimum:g}"
            return f"{what} or one of {', '.join(self.words)}" if self.words else what
        return "any text"

    def parse(self, raw: str | None) -> Any:
        """The value ``raw`` (the variable's text, None when unset) stands for.

        Raises:
            SettingError: a value this setting does not accept.

        Examples:
            >>> get("MPIFLOW_ALLREDUCE_PIECES").parse(" 4096 ")
            4096
        """
        text = "" if raw is None else raw.strip()
        if not text:
            return self.default
        if self.kind == "str":
            return text
        word = text.lower()
        if self.kind == "bool" and word in TRUE + FALSE:
            return word in TRUE
        if word in self.words:
            return word
        if self.kind in ("int", "float"):
            try:
                number: float = int(word) if self.kind == "int" else float(word)
            except ValueError:
                pass
            else:
                if math.isfinite(number) and (self.minimum is None or number >= self.minimum):
                    return number
        raise SettingError(f"{self.name} must be {self.values()}; got {raw!r}")


SETTINGS: tuple[Setting, ...] = (
    Setting("MPIFLOW_DEBUG", "bool", False,
            "Debug mode: the ranks compare every collective's arguments before running it and "
            "raise `CollectiveMismatchError` on every rank when they differ (as "
            "`MPIFLOW_CHECK=all`); every `to_global` checks that the ranks agree.",
            read="at import and for each new communicator"),
    Setting("MPIFLOW_CHECK", "choice", "sampled",
            "Which collectives the ranks compare before running them (`CollectiveMismatchError` "
            "on every rank when they differ): `sampled` the first call on each group, then "
            "calls 2, 4, 8, ... 4096 and every 4096th; `all` every one (debug mode); `off` none.",
            words=("off", "sampled", "all"), read="for each new communicator"),
    Setting("MPIFLOW_TIMEOUT", "float", 600.0,
            "The collective watchdog: a blocking call that lasts this many seconds is reported "
            "(which rank waits where) and the job aborts; `0` turns the watchdog off.",
            minimum=0, accepts="a non-negative number of seconds (0 turns the watchdog off)",
            read="at import"),
    Setting("MPIFLOW_DETERMINISTIC", "bool", False,
            "Deterministic float reductions and SUM/AVG collectives: the same bits for any "
            "rank count and layout (`flow.use_deterministic_algorithms` changes it in the "
            "process).", read="at import"),
    Setting("MPIFLOW_IGNORE_LAUNCHER", "bool", False,
            "Skip the check at import that a one-rank job was not started by a launcher of "
            "another MPI library (or by torchrun) meant for several ranks.", read="at import"),
    Setting("MPIFLOW_BACKEND", "choice", "auto",
            "How device (CuPy) arrays travel: `nccl` through CuPy's NCCL, `mpi` through MPI "
            "(CUDA-aware or staged through the host), `auto` NCCL where CuPy has it.",
            words=("auto", "mpi", "nccl"), read="at the first collective on device arrays"),
    Setting("MPIFLOW_CUDA_AWARE", "bool", None,
            "Asserts (on) or denies (off) that the MPI library is CUDA-aware; unset, the "
            "library and its own variables are asked.",
            read="at the first collective on device arrays"),
    Setting("MPIFLOW_ALLREDUCE_FORM", "choice", "auto",
            "The form of the blocking `MPI_Allreduce`: `auto` per MPI library "
            "(docs/benchmarks/libraries.md), `in_place` or `out_of_place` at every size.",
            words=("auto", "in_place", "out_of_place"), read="at the first all-reduce"),
    Setting("MPIFLOW_ALLREDUCE_PIECES", "int", "auto",
            "Large blocking all-reduces go in pieces: `auto` per MPI library (one node only), "
            "`off` in one call, N in pieces of N bytes for buffers larger than N.",
            words=("auto", "off"), minimum=1,
            accepts="auto, off or a piece size in bytes (at least 1)",
            read="at the first all-reduce"),
    Setting("MPIFLOW_KERNELS", "choice", "auto",
            "The library of the local factorizations (QR, SVD, eigh, LU, Cholesky) on numpy "
            "arrays: `auto` per family (docs/science.md), `numpy` or `torch` for all (`numpy` "
            "also for products unless `MPIFLOW_GEMM` says otherwise).",
            words=("auto", "numpy", "torch"), read="at the first local kernel"),
    Setting("MPIFLOW_GEMM", "choice", "auto",
            "The library of large local matrix products on numpy arrays: `auto` (numpy), "
            "`numpy` or `torch`.", words=("auto", "numpy", "torch"),
            read="at the first local kernel"),
    Setting("MPIFLOW_KERNEL_THREADS", "int", None,
            "Threads of torch's local kernels; unset: `OMP_NUM_THREADS`, else 1.", minimum=1,
            read="at each torch kernel"),
    Setting("MPIFLOW_JOB_EAGER", "bool", False,
            "OneFlow 0.x job functions run eagerly instead of being traced into a plan (as "
            "`flow.enable_eager_execution(True)`).", read="at each job function call"),
    Setting("MPIFLOW_TORCH_OVERLAP", "bool", False,
            "The torch backend's asynchronous collectives start non-blocking MPI operations "
            "(so DDP's all-reduce overlaps backward) instead of completing at the call.",
            read="when a process group is made"),
    Setting("MPIFLOW_TORCH_MPI", "bool", True,
            "Where torch has no MPI of its own, `backend=\"mpi\"` makes mpiflow groups "
            "(`dist.get_backend()` reports `mpi`); off: torch's own error. A torch built with "
            "MPI is never changed. Parsed with the same words by the auto-load hook, which "
            "cannot import mpiflow.",
            read="at import torch (the auto-load hook) and import mpiflow.torch"),
    Setting("ONEFLOW_ENABLE_GLOBAL_INPUTS_WITH_INCONSISTENT_PLACEMENT", "bool", False,
            "OneFlow's variable: an op whose global inputs lie on different placements moves "
            "them to the placement holding the highest rank instead of raising.",
            read="at each such op"),
    Setting("MPIFLOW_SCIENCE_PARTS", "str", "",
            "`python -m mpiflow.bench --suite science`: the comma-separated parts to run "
            "(unset: all).", accepts="part names separated by commas",
            read="when the benchmark starts"),
    Setting("MPIFLOW_LAUNCHER_ENV", "str", "",
            "Set by mpiflow in each rank: which of torchrun's variables (`RANK`, ...) it set "
            "from the MPI launcher's, so a job started from a rank does not inherit them.",
            accepts="written by mpiflow", read="at import", internal=True),
)
"""Every variable mpiflow reads, in the order of docs/configuration.md."""

_BY_NAME = {s.name: s for s in SETTINGS}
if len(_BY_NAME) != len(SETTINGS):
    raise RuntimeError("a variable is registered twice in mpiflow.core.settings")


def get(name: str) -> Setting:
    """The registered :class:`Setting` of variable ``name``.

    Raises:
        KeyError: ``name`` is not registered (register it in :data:`SETTINGS`).

    Examples:
        >>> get("MPIFLOW_CHECK").default
        'sampled'
    """
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"{name} is not a registered setting (mpiflow.core.settings.SETTINGS)"
                       ) from None


def read(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """The value of setting ``name`` in ``environ`` (``os.environ`` by default).

    Args:
        name: a registered variable.
        environ: the environment to read.

    Returns:
        A bool, int, float or str as the setting's kind says (a number setting may return
        one of its words), or its default when the variable is unset or empty.

    Raises:
        SettingError: a value the setting does not accept.
        KeyError: an unregistered name.

    Examples:
        >>> read("MPIFLOW_ALLREDUCE_PIECES", {"MPIFLOW_ALLREDUCE_PIECES": "OFF"})
        'off'
    """
    return get(name).parse((os.environ if environ is None else environ).get(name))


def source(name: str, environ: Mapping[str, str] | None = None) -> str:
    """``"environment"`` when ``name`` is set to a non-empty value, else ``"default"``.

    Examples:
        >>> source("MPIFLOW_DEBUG", {"MPIFLOW_DEBUG": " "})
        'default'
        >>> source("MPIFLOW_DEBUG", {"MPIFLOW_DEBUG": "on"})
        'environment'
    """
    get(name)
    return "environment" if (os.environ if environ is None else environ).get(name, "").strip() \
        else "default"


def _text(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value) if value != "" else "unset"


def effective(environ: Mapping[str, str] | None = None) -> list[tuple[str, str, str]]:
    """``(name, value, source)`` of every user setting, the value in words, malformed ones as
    ``error: ...`` (for ``python -m mpiflow info``).

    Examples:
        >>> effective({"MPIFLOW_TIMEOUT": "30"})[2]
        ('MPIFLOW_TIMEOUT', '30', 'environment')
    """
    rows = []
    for setting in SETTINGS:
        if setting.internal:
            continue
        try:
            value = _text(read(setting.name, environ))
        except SettingError as exc:
            value = f"error: {exc}"
        rows.append((setting.name, value, source(setting.name, environ)))
    return rows


def validate(environ: Mapping[str, str] | None = None) -> None:
    """Read every setting once: raise the first malformed one's error (``import mpiflow`` calls
    it before MPI starts).

    Raises:
        SettingError: a variable holds a value its setting does not accept.

    Examples:
        >>> validate({"MPIFLOW_CHECK": "ALL"})
    """
    for setting in SETTINGS:
        read(setting.name, environ)


@contextmanager
def scoped(name: str, value: str | None) -> Iterator[None]:
    """Set variable ``name`` in ``os.environ`` (None: unset it) for a block, then restore it
    (benchmarks that compare settings; every rank must do the same).

    Examples:
        >>> with scoped("MPIFLOW_GEMM", "torch"):
        ...     read("MPIFLOW_GEMM")
        'torch'
    """
    get(name)
    old = os.environ.pop(name, None)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        os.environ.pop(name, None)
        if old is not None:
            os.environ[name] = old


def markdown_table() -> str:
    """The table of docs/configuration.md: each variable, its values, default and effect.

    Examples:
        >>> markdown_table().splitlines()[0]
        '| Variable | Values | Default | Read | Effect |'
    """
    lines = ["| Variable | Values | Default | Read | Effect |", "|---|---|---|---|---|"]
    for s in SETTINGS:
        default = "see effect" if s.default is None else _text(s.default)
        effect = ("(internal) " if s.internal else "") + s.effect
        lines.append(f"| `{s.name}` | {s.values()} | {default} | {s.read} | {effect} |")
    return "\n".join(lines)

