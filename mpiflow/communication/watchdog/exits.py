"""How a rank leaves: waiting for the others' exit notices, and the checks run when all left.

At exit every rank tells the others (the watchdog's exit notice, :mod:`.monitor`) and then
waits, at most :data:`EXIT_GATHER` seconds, for the notices of the ranks it has not heard from:

- a rank that leaves with ``os._exit`` skips MPI_Finalize, and the launcher then stops every
  rank still running (MPICH's Hydra ends the job with that rank's status, even 0). When some
  ranks have not reached their own exit by then, the leaving rank aborts the job instead
  (status 1, or its own non-zero status) with a report naming it, where it called ``os._exit``
  and the ranks it cut short: :func:`os_exit_report`;
- when every rank has reached its exit, the *exit checks* run (:func:`register_exit_check`):
  a higher layer registers, for instance, the search for messages sent to this rank that it
  never received (an ``isend`` nobody matched), whose lines are printed as a warning.

This module owns only the bookkeeping; the watchdog's exit hook drives it.

Examples:
    >>> register_exit_check(lambda: [])           # nothing to report
    >>> report = os_exit_report(1, "os._exit(0) at train.py:40 in main", [0, 2], 2.0)
    >>> print(report[:80])
    [rank 1] mpiflow: rank 1 called os._exit(0) at train.py:40 in main while ranks 0
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterable

__all__ = ["EXIT_GATHER", "gather_exits", "os_exit_report", "register_exit_check",
           "run_exit_checks"]

EXIT_GATHER = 2.0  # seconds a leaving rank waits for the others' exit notices

_checks: list[Callable[[], list[str]]] = []


def register_exit_check(check: Callable[[], list[str]]) -> None:
    """Run ``check`` at exit once every rank has reached its exit; print the lines it returns.

    Args:
        check: returns the lines of a warning (no rank prefix), or an empty list.
    """
    if check not in _checks:
        _checks.append(check)


def run_exit_checks(rank: int) -> None:
    """Run the registered checks and print their lines on stderr, rank-tagged."""
    for check in list(_checks):
        try:
            lines = check()
        except Exception as exc:  # a check must never turn a clean exit into a failure
            lines = [f"mpiflow: an exit check failed: {type(exc).__name__}: {exc}"]
        with contextlib.suppress(Exception):
            sys.stderr.write("".join(f"[rank {rank}] {line}\n" for line in lines))
            sys.stderr.flush()


def gather_exits(poll: Callable[[], bool], others: Iterable[int], exited: Callable[[], set[int]],
                 wait: float = EXIT_GATHER) -> list[int]:
    """Wait until every rank of ``others`` has announced its exit, at most ``wait`` seconds.

    Args:
        poll: reads the notices that arrived (records them; True if it read any).
        others: the ranks to hear from.
        exited: the ranks heard from so far.
        wait: seconds.

    Returns:
        The ranks of ``others`` not heard from (still running), sorted.

    Examples:
        >>> gather_exits(lambda: False, [0, 2], lambda: {2}, wait=0.0)
        [0]
    """
    others = set(others)
    deadline = time.monotonic() + wait
    while True:
        missing = others - exited()
        if not missing or time.monotonic() >= deadline:
            return sorted(missing)
        if not poll():
            time.sleep(0.002)


def os_exit_report(rank: int, how: str, running: list[int], waited: float) -> str:
    """The report of a rank that leaves with ``os._exit`` while ``running`` ranks go on."""
    ranks = (f"rank {running[0]}" if len(running) == 1
             else "ranks " + ", ".join(map(str, running)))
    return (f"[rank {rank}] mpiflow: rank {rank} called {how} while {ranks} had not finished "
            f"(not exited within {waited} s): the launcher would stop them and end the "
            "job as if it succeeded; aborting the job instead\n")
