"""``MPIFLOW_CHECK``: how many collectives the ranks compare before running them.

- ``all`` (or ``MPIFLOW_DEBUG=1``): every collective, debug mode's
  :class:`~.mode.DebugMPICommunicator`: the fast paths are off and each call costs one small
  all-gather.
- ``sampled`` (the default): the calls of a fixed schedule, which every rank computes alike
  from the call's number on its group (:func:`next_checked`): the first call on each group,
  then the calls numbered by powers of two (2, 4, 8, ... :data:`PERIOD`), then every
  :data:`PERIOD`-th call. A group's first 300 calls have 9 checked, its first 100,000 have
  36. A checked call costs one MPI_Allreduce of 16 bytes: each rank sends ``[h, -h]``, ``h``
  a 63-bit digest of its arguments (:func:`~.mode.digest_of` of debug mode's fingerprint row
  and the call's number), with MPI_MIN, and the ranks agree when ``min h == max h``. Only when
  the digests differ do the ranks all-gather their rows, for debug mode's error
  (:class:`~.mode.CollectiveMismatchError` on every rank, naming the ranks, their arguments
  and what differs). ``all_to_all_v`` exchanges its counts too (they differ by design). The
  other calls take the fast paths, which count them (one decrement per call).
- ``off``: none; the plain :class:`~.mpi.MPICommunicator`.

A mismatch in a call that the schedule skips is not caught (a mismatch in a group's first call
always is). A call is never checked because its (operation, shape, dtype) is new to a rank: the
ranks whose arguments differ could not agree on that.

Examples:
    >>> checked = [1]
    >>> while checked[-1] < 20_000:
    ...     checked.append(next_checked(checked[-1]))
    >>> checked[:6], checked[-4:]
    ([1, 2, 4, 8, 16, 32], [8192, 12288, 16384, 20480])
    >>> check_mode({"MPIFLOW_CHECK": "all"}), check_mode({}), check_mode({"MPIFLOW_DEBUG": "1"})
    ('all', 'sampled', 'all')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mpi4py import MPI

from ...core import settings
from ..mpi.communicator import MPICommunicator, set_debug_kind
from ..watchdog.skew import skipped
from .mode import FINGERPRINT_SPECS, DebugMPICommunicator, enabled, name_method

__all__ = ["FIRST", "MODES", "PERIOD", "SampledMPICommunicator", "check_mode", "next_checked"]

FIRST = 1  # the first call on a group is checked (then the powers of two)
PERIOD = 4096  # then every PERIOD-th call, after the powers of two up to it
MODES = ("off", "sampled", "all")


def check_mode(environ: Mapping[str, str] | None = None) -> str:
    """The checking mode asked for: ``MPIFLOW_CHECK`` (default ``sampled``); ``MPIFLOW_DEBUG=1``
    means ``all``.

    Raises:
        ValueError: ``MPIFLOW_CHECK`` is none of ``off``, ``sampled``, ``all``.
    """
    if enabled(environ):
        return "all"
    return str(settings.read("MPIFLOW_CHECK", environ))


def next_checked(n: int) -> int:
    """The number of the next checked call on a group after the checked call ``n`` (1-based):
    the next power of two up to :data:`PERIOD`, then the next multiple of it.

    Examples:
        >>> next_checked(1), next_checked(3), next_checked(256), next_checked(5000)
        (2, 4, 512, 8192)
    """
    if n < PERIOD:
        return 1 << n.bit_length()
    return (n // PERIOD + 1) * PERIOD


class SampledMPICommunicator(DebugMPICommunicator):
    """A communicator that compares the arguments of the collectives :func:`next_checked`
    picks, and runs the others as the plain :class:`~.mpi.MPICommunicator` does.

    :func:`~.mpi.new_communicator` gives one under ``MPIFLOW_CHECK=sampled`` (the default).

    Args:
        comm: the MPI communicator (``MPI.COMM_WORLD`` by default).

    Raises:
        CollectiveMismatchError: from a checked collective whose arguments differ between
            ranks, on every rank.
    """

    checks_every_call = False
    checked_by = "the sampled check (MPIFLOW_CHECK=sampled, the default)"
    digests = True  # one 16-byte all-reduce per checked call; the rows only on a mismatch

    def __init__(self, comm: MPI.Comm | None = None) -> None:
        super().__init__(comm)
        self._next_check = 1
        self._checking = False
        if self.size > 1:  # one rank has nothing to compare: its fast paths stay on
            self.check_due[0] = 1
            self.never_due = False

    def __repr__(self) -> str:
        return f"SampledMPICommunicator(rank={self.rank}, size={self.size})"

    def _advance(self) -> None:
        """The due call was made (checked, or raised before it on every rank)."""
        n = self._next_check
        self._next_check = following = next_checked(n)
        self.check_due[0] = following - n

    def failed(self, operation: str, error: BaseException) -> None:
        """This rank's ``operation`` raised before taking part: if the call is one the ranks
        check, every rank raises (as in debug mode); otherwise the group is marked
        (:func:`~.watchdog.skew.skipped`), as without checks."""
        if getattr(error, "mpiflow_agreed", False) or self.size == 1:
            return
        due = self.check_due
        if due[0] <= 1:
            if not self._checking:  # a face's own check, outside the method's call
                self._calls = self._next_check - 1
                self._advance()
            super().failed(operation, error)
            return
        due[0] -= 1  # the other ranks count the call they ran
        skipped(self, operation, error)


def _sampled(name: str) -> Callable[..., Any]:
    checked = getattr(DebugMPICommunicator, name)

    def method(self: SampledMPICommunicator, *args: Any, **kwargs: Any) -> Any:
        due = self.check_due
        left = due[0]
        if left > 1 or self.size == 1:
            # looked up at call time, so that count_collectives' wrappers count it
            try:
                return getattr(MPICommunicator, name)(self, *args, **kwargs)
            finally:
                # Counted even when it raised: a call that completed into scratch and then
                # raised (a read-only output) was one the other ranks ran and counted too.
                if due[0] == left:  # no fast path (nor failed()) counted it
                    due[0] = left - 1
        self._calls = self._next_check - 1  # the error names the call's number on the group
        self._checking = True
        try:
            return checked(self, *args, **kwargs)
        finally:
            self._checking = False
            self._advance()

    return name_method(method, name, "SampledMPICommunicator",
                       f"``{name}``, checked across ranks when the schedule says so.")


for _name in FINGERPRINT_SPECS:
    setattr(SampledMPICommunicator, _name, _sampled(_name))


def _make(comm: MPI.Comm | None = None) -> MPICommunicator:
    mode = check_mode()
    if mode == "all":
        return DebugMPICommunicator(comm)
    if mode == "sampled":
        return SampledMPICommunicator(comm)
    return MPICommunicator(comm)


set_debug_kind(lambda: True, _make)
